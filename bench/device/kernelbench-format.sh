#!/usr/bin/env bash
# KernelBench-format answers on a GPU machine, in two device calls (each fits a 10-minute call):
#   PHASE=1: build leap (bench/device/gpu-report.sh OUT build), the GPU tests of the format, import the
#            KernelBench problems of examples/kernelbench/cuda, and leap eval on their ModelNew files
#            (CTEST_R: the GPU tests run instead, a ctest -R pattern).
#   PHASE=2: KernelBench's own load_inline builds (16 at a time) and eval_kernel_against_ref on the
#            same files (Triton answers first; KB_TIME_LIMIT=S stops its evals after S seconds), then
#            the agreement table (bench/baselines/kernelbench_agreement.py). PHASE=1's out/agreement must be
#            in the work tree (carried to a fresh machine).
# LEAP_CONFIG=FILE: leap eval's --config (say, [sandbox] evaluators = 2 with gpus = 1).
# Usage (repository root): PHASE=1|2 bench/device/kernelbench-format.sh KB OUT
#   KB: a KernelBench checkout (KernelBench/level1..2 and src/kernelbench), e.g. the problems of
#   examples/kernelbench/cuda copied from it; OUT: where logs and tables go.
set -euo pipefail
out_abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
kb="${1:?usage: PHASE=1|2 bench/device/kernelbench-format.sh KB OUT}"
out=$(out_abs "${2:?usage: PHASE=1|2 bench/device/kernelbench-format.sh KB OUT}")
mkdir -p "$out"
bench/device/gpu-report.sh "$out/build" build | tail -2  # incremental where build-gpu is already there
prefix=/tmp/leap-deps
torch_lib=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export PATH="$prefix/usr/bin:$PATH" LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$torch_lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The agreement's state stays in the work tree (out/agreement) between the two calls; a copy goes to OUT.
agree=(python3 bench/baselines/kernelbench_agreement.py --kernelbench "$kb" --suite build-gpu/kbsuite --leap build-gpu/leap
       --out out/agreement ${LEAP_CONFIG:+--leap-config "$LEAP_CONFIG"})
if [ ! -f build-gpu/kbsuite/import-report.json ]; then  # both phases read the imported problems
  ./build-gpu/leap tasks import kernelbench "$kb" --out build-gpu/kbsuite --levels 1,2 --device cuda \
    > "$out/import.txt" 2>&1 || tail -5 "$out/import.txt"
fi
if [ "${PHASE:-1}" = 1 ]; then
  (cd build-gpu && timeout "${TEST_S:-300}" ctest --output-on-failure \
     -R "${CTEST_R:-CudaBackend.KernelBenchFormat|CudaSplit}" > "$out/ctest.log" 2>&1) || true
  grep -E "tests passed|Passed|Failed|\*\*\*" "$out/ctest.log" | tail -12
  if [ -n "${ANSWERS:-}" ]; then  # ANSWERS=1: the fixtures' records too (compile times, paths)
    ./build-gpu/leap eval --backend cuda --candidates tests/fixtures/kernelbench/answers_cuda --tasks builtin \
      --out "$out/answers-cuda.jsonl" > "$out/answers-cuda.txt" 2>&1 || tail -5 "$out/answers-cuda.txt"
  fi
  "${agree[@]}" --phase leap 2>&1 | tail -5
else
  "${agree[@]}" --phase build --build-jobs "$(nproc)" 2>&1 | tail -3
  "${agree[@]}" --phase compare --inputs-on-gpu ${KB_TIME_LIMIT:+--time-limit "$KB_TIME_LIMIT"} > "$out/agreement.md" 2> "$out/agreement.err" || tail -5 "$out/agreement.err"
  cat "$out/agreement.md"
fi
mkdir -p "$out/agreement"
cp out/agreement/*.json* "$out/agreement/" 2>/dev/null || true
