#!/usr/bin/env bash
# One device call: build leap against the bundled dependencies and the machine's CUDA LibTorch,
# then run the named parts in order; with none, the whole test suite (GPU tests included), the CUDA
# examples and hostile folder through leap eval, and the GPU report.
# Usage (GPU machine, repository root): bench/device/gpu-report.sh OUT_DIR [PART ...]; --help lists the parts.
# Parts take their knobs from the environment (COUNT=64 bench/device/gpu-report.sh OUT hiding).
# Needs .deps/debs from deploy/bundle-deps.sh (carried to the machine).
set -euo pipefail
usage() {
  sed -n 's/^part_\([a-z_]*\)() {  # \(.*\)$/  \2/p' "$0" | sed 's/^  \([a-z_-]*\): /  \1  /'
}
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ] || [ -z "${1:-}" ]; then
  echo "usage: bench/device/gpu-report.sh OUT_DIR [PART ...]"
  echo "  (no part)  the whole test suite, the CUDA examples and hostile folder, and the GPU report"
  echo "  build  configure and build only (BUILD_TARGETS=\"leap leap-evald ...\": only those)"
  echo "  tests  the whole test suite only"
  echo "  examples  the CUDA examples and the CUDA hostile folder through leap eval"
  echo "  report  the GPU report only"
  usage
  [ -n "${1:-}" ] || exit 2
  exit 0
fi
out="$1"
shift
parts=("$@")
for p in "${parts[@]}"; do
  case "$p" in build|tests|report) ;; *) declare -F "part_${p//-/_}" >/dev/null 2>&1 || [ "$(grep -c "^part_${p//-/_}() {" "$0")" = 1 ] ||
    { echo "gpu-report: no part '$p' (--help lists them)" >&2; exit 2; } ;; esac
done
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
prefix=/tmp/leap-deps
deps_args=$(deploy/unpack-deps.sh .deps/debs "$prefix")
export PATH="$prefix/usr/bin:$PATH" LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
part_interference() {  # interference: a timed SGEMM beside other processes' context churn
  nvcc -O3 -arch=sm_90 -Iinclude -I"$prefix/usr/include" bench/context_interference.cu \
    -o "$out/context_interference" && "$out/context_interference" | tee "$out/context-interference.md"
  return
}
part_hiding() {  # hiding: NVRTC vs nvcc compiles, leap bench compile-hiding (CUDA)
  if [ -z "${NO_PATHS:-}" ]; then  # NO_PATHS=1: compile-hiding alone
    ./build-gpu/leap-bench-gpu --compile-only > "$out/compile-paths.md" 2>> "$log" || tail -5 "$log"
    tail -4 "$out/compile-paths.md"
  fi
  hiding_config=()
  if [ "${HIDING_JUDGES:-1}" -gt 1 ]; then  # HIDING_JUDGES=N: N judges sharing the GPU (demo-cuda.toml's settings else)
    sed "/^\[sandbox\]/a evaluators = $HIDING_JUDGES\ngpus = 1" configs/demo-cuda.toml > "$out/hiding-config.toml"
    hiding_config=(--config "$out/hiding-config.toml")
  fi
  ./build-gpu/leap bench compile-hiding --backend cuda --count "${COUNT:-64}" --baseline "${BASELINE:-2}" "${hiding_config[@]}" \
    --records "$out/compile-hiding.jsonl" \
    > "$out/compile-hiding.md" 2> "$out/compile-hiding.err" || tail -5 "$out/compile-hiding.err"
  cat "$out/compile-hiding.md"
  return 0
}
part_dcp() {  # dcp: leap bench dcp on the CUDA backend, and its leap report
  rm -rf /tmp/bench-dcp
  # shellcheck disable=SC2086
  ./build-gpu/leap bench dcp --config configs/demo-cuda.toml --workers 1 ${DCP_ARGS:-} --out /tmp/bench-dcp > "$out/dcp.md" \
    2> "$out/dcp.err" || tail -5 "$out/dcp.err"
  cat "$out/dcp.md"
  cp /tmp/bench-dcp/report.html "$out/dcp-report.html" || true
  return 0
}
part_dcp_lm() {  # dcp-lm: LEAP's grid with the LM policy (bench/dcp-lm.sh; SFT=DIR: a model already fine-tuned)
  # shellcheck disable=SC2086
  # One intra-op thread per run (--jobs runs share the cores); set here, not for the build (nproc honours it).
  OMP_NUM_THREADS=1 LEAP=./build-gpu/leap bench/dcp-lm.sh /tmp/dcp-lm ${DCP_ARGS:-} > "$out/dcp-lm.md" 2> "$out/dcp-lm.err" ||
    tail -5 "$out/dcp-lm.err"
  cat "$out/dcp-lm.md"
  cp /tmp/dcp-lm/grid/report.html "$out/dcp-lm-report.html" || true
  tar czf "$out/dcp-lm-runs.tgz" -C /tmp/dcp-lm/grid --exclude caches --exclude checkpoints . || true
  return 0
}
part_broadcast() {  # broadcast: the weight broadcast over NCCL, one rank per GPU (2+ GPUs);
  # on one GPU, NP ranks (default 2: learner and a worker) sharing it, CUDA IPC against MPI through the host
  gpus=$(nvidia-smi -L | wc -l)
  if [ "$gpus" -ge 2 ]; then mode=(-np "$gpus" ./build-gpu/leap-bench-broadcast --device)
  else mode=(-np "${NP:-2}" ./build-gpu/leap-bench-broadcast --shared-gpu); fi
  mpirun --allow-run-as-root "${mode[@]}" --models "${MODELS:-0.5b,1.5b,7b}" \
    --bucket-mb "${BUCKETS:-16,64,256}" > "$out/broadcast.md" 2> "$out/broadcast.err" || tail -5 "$out/broadcast.err"
  cat "$out/broadcast.md"
  return 0
}
part_stability() {  # stability: the timing stability set (REPEATS evaluations each), and under COMPARE_CONFIG
  ./build-gpu/leap-bench-gpu --stability-only --repeats "${REPEATS:-10}" > "$out/stability.md" 2>> "$log" || tail -5 "$log"
  cat "$out/stability.md"
  if [ -n "${COMPARE_CONFIG:-}" ]; then
    ./build-gpu/leap-bench-gpu --stability-only --repeats "${REPEATS:-10}" --config "$COMPARE_CONFIG" \
      > "$out/stability-compare.md" 2>> "$log" || tail -5 "$log"
    cat "$out/stability-compare.md"
  fi
  return 0
}
part_profile() {  # profile: [eval] profile over examples/cuda (bench/profile.sh)
  LEAP=./build-gpu/leap bench/profile.sh "$out/profile" "${CANDIDATES:-examples/cuda}" | tee "$out/profile.md"
  return 0
}
part_escape() {  # escape: the escape check's excess idle and beside each load (bench/escape-under-load.sh)
  LEAP=./build-gpu/leap bench/escape-under-load.sh "$out/escape" "${CANDIDATES:-examples/cuda}" ${PHASES:+"$PHASES"} |
    tee "$out/escape.md"
  return 0
}
part_slow() {  # slow: [eval] slow_stop_ratio off vs 2 on examples/cuda (bench/slow-candidates.sh)
  LEAP=./build-gpu/leap bench/slow-candidates.sh "$out/slow" "${CANDIDATES:-examples/cuda}" cuda | tee "$out/slow.md"
  return 0
}
part_serve() {  # serve: leap bench serve on the CUDA backend beside the load_inline service (BATCH=N: the /v1/batch row too; SERVE_JUDGES=N: leap serve's judges)
  grep -q leap_serve build-gpu/build.ninja || { echo "leap serve not built (cpp-httplib missing)"; return 1; }
  python3 bench/serve_bench.py --backend cuda --build build-gpu --python "$(command -v python3)" \
    --include "$prefix/usr/include" \
    --requests "${REQUESTS:-256}" ${BASELINE:+--baseline "$BASELINE"} --clients "${CLIENTS:-16}" ${BATCH:+--batch "$BATCH"} \
    ${SERVE_JUDGES:+--evaluators "$SERVE_JUDGES"} \
    > "$out/serve.md" \
    2> "$out/serve.err" || tail -5 "$out/serve.err"
  cat "$out/serve.md"
  return 0
}
part_gpu_tests() {  # gpu-tests: every test that needs the GPU (they skip on the CPU machines)
  # About 530 s of tests on an H100 (session 37), so a call with a fresh build runs them in two
  # parts: GPU_TESTS_R=PATTERN narrows them. The service's pytest suites (Serve.*) run on the CPU
  # machines; the GPU machine has no pytest.
  ( cd build-gpu && ctest --output-on-failure -E "^Serve\." -R \
      "${GPU_TESTS_R:-CudaBackend|CudaSplit|TensorsOnGpu|PythonZygote.OnTheGpu|LmParity.CudaGraph|MpiWeights|WeightDigest|LmSnapshot|RunnerWall|HostileSuite|KernelBenchFormat}" ) \
    > "$out/ctest-gpu.log" 2>&1 || test_rc=$?
  grep -E "tests passed|Failed|Skipped|\(Failed\)" "$out/ctest-gpu.log" | head -30
  return "$test_rc"
}
part_judge() {  # judge: the judge's tests (CUDA and CPU hostile suites) and the GPU report
  ( cd build-gpu && ctest --output-on-failure -j2 -R "CudaBackend|HostileSuite|BuiltinSuite|Tensors|Timing" ) \
    > "$out/ctest.log" 2>&1 || test_rc=$?
  grep -E "tests passed|Failed|Skipped|\(Failed\)" "$out/ctest.log" | head -20
  # QUICK=1: the report's warm suite, hostile candidates and stability only
  ./build-gpu/leap-bench-gpu ${QUICK:+--quick} --repeats 5 --records "$out/records.jsonl" > "$out/gpu-report.md" \
    2>> "$log" || test_rc=$?
  cat "$out/gpu-report.md"
  if [ -n "${COMPARE_CONFIG:-}" ]; then  # the warm suite, hostile candidates and stability under another config
    ./build-gpu/leap-bench-gpu --quick --repeats 5 --config "$COMPARE_CONFIG" --records "$out/records-compare.jsonl" \
      > "$out/gpu-report-compare.md" 2>> "$log" || test_rc=$?
    cat "$out/gpu-report-compare.md"
  fi
  if [ -n "${WITH_CPU_BENCH:-}" ]; then  # the CPU evaluator overhead benchmark on this host too
    ./build-gpu/leap-bench-eval > "$out/bench-eval-cpu.md" 2>> "$log" || test_rc=$?
    cat "$out/bench-eval-cpu.md"
  fi
  return "$test_rc"
}
part_staleness() {  # staleness: the LM loop at a 0.5B shape, max_staleness 0 vs K (bench/staleness.sh)
  [ -d runs/shaped-0.5b ] || python3 tools/make_shaped_model.py --shape 0.5b --device cuda --out runs/shaped-0.5b \
    >> "$log" 2>&1 || { tail -5 "$log"; return 1; }
  gpus=$(nvidia-smi -L | wc -l)
  # Learner and worker on a GPU each where there are two (NCCL), else sharing one (MPI broadcast).
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $(( (gpus < 2 ? 1 : 2) - 1 ))) LEAP=build-gpu/leap STEPS="${STEPS:-4}" K="${K:-1}" \
    bench/staleness.sh "${CONFIG:-configs/lm-shaped-cuda.toml}" "$out/staleness" | tee "$out/staleness.md"
  return 0
}
part_lm() {  # lm: leap's LM engine beside transformers (bench/lm_bench.py), shapes LM_SHAPES
  # The bandwidth bound's figure is the card's: an H100 SXM reads 3.35 TB/s, an H200 4.8.
  gbs=4800; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100 && gbs=3350
  python3 bench/lm_bench.py --build build-gpu --python python3 --shapes "${LM_SHAPES:-0.5b,1.5b,7b}" --bandwidth-gbs "$gbs" \
    2> "$out/lm.err" | tee "$out/lm.md"
  return "${PIPESTATUS[0]}"
}
part_checkpoint() {  # checkpoint: the learner's checkpoint, save() vs snapshot() + write(), 0.5B shape on the GPU
  [ -d runs/shaped-0.5b ] || python3 tools/make_shaped_model.py --shape 0.5b --device cuda --out runs/shaped-0.5b \
    >> "$log" 2>&1 || { tail -5 "$log"; return 1; }
  ck_rc=0
  ./build-gpu/leap-bench-checkpoint --model runs/shaped-0.5b --device cuda --dtype bfloat16 --repeat "${REPEAT:-4}" \
    --out /tmp/bench-checkpoint 2> "$out/checkpoint.err" > "$out/checkpoint.md" || ck_rc=$?
  cat "$out/checkpoint.md"
  [ "$ck_rc" = 0 ] || { echo "leap-bench-checkpoint exited with $ck_rc:"; tail -20 "$out/checkpoint.err"; }
  return "$ck_rc"
}
part_loop() {  # loop: the RL loop on the CUDA backend (1 GPU; and 2 with NCCL)
  ( cd build-gpu && ctest --output-on-failure -j4 -R "Loop|Mpi|Cuda" ) > "$out/ctest.log" 2>&1 || test_rc=$?
  grep -E "tests passed|Failed|Skipped|\(Failed\)" "$out/ctest.log" | head -20
  gpus=$(nvidia-smi -L | wc -l)
  for n in 1 2; do  # -np 3: learner and one worker, sharing 1 GPU (MPI broadcast) or one each (NCCL)
    [ "$n" -gt "$gpus" ] && continue
    rm -rf "/tmp/run-${n}gpu"
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((n - 1))) mpirun -np 3 --oversubscribe --bind-to none ./build-gpu/leap run \
      --config configs/demo-cuda.toml --run-dir "/tmp/run-${n}gpu" > "$out/loop-${n}gpu.txt" 2>&1 || true
    cp "/tmp/run-${n}gpu/metrics.jsonl" "$out/metrics-${n}gpu.jsonl" 2>/dev/null || true
    echo "== $n GPU(s), mpirun -np 3:"; grep -v "^\[" "$out/loop-${n}gpu.txt" | tail -12
    grep -h "broadcast over\|weights version 8 " "/tmp/run-${n}gpu/logs/"*.log >> "$out/loop-${n}gpu.txt" || true
    grep -h "broadcast over\|weights version 8 " "/tmp/run-${n}gpu/logs/"*.log || true
    python3 -c "
import json,collections
c=collections.Counter(json.loads(l)['status'] for l in open('/tmp/run-${n}gpu/outcomes.jsonl'))
print('outcome statuses:', dict(c))" || true
  done
  return "$test_rc"
}
build() {
  torch_prefix=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
  torch_lib=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  export LD_LIBRARY_PATH="$torch_lib:$LD_LIBRARY_PATH"
  log="$out/run.log"
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvcc --version | tail -1; } > "$log"
  # shellcheck disable=SC2086
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DCMAKE_CUDA_ARCHITECTURES=90 $deps_args \
    -DCMAKE_PREFIX_PATH="$prefix/usr;$torch_prefix" >> "$log" 2>&1 || { tail -30 "$log"; return 1; }
  # BUILD_TARGETS="leap leap-evald ...": only those (a shorter build for a call that needs no benches)
  # shellcheck disable=SC2086
  ( time cmake --build build-gpu -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS} ) >> "$log" 2>&1 || { grep -E "error|Error" "$log" | head -30; return 1; }
  tail -4 "$log"
}
part_tests() {
  ( cd build-gpu && ctest --output-on-failure -j4 ) > "$out/ctest.log" 2>&1 || test_rc=$?
  grep -E "tests passed|Failed|Skipped|\(Failed\)" "$out/ctest.log" | head -20
  return "$test_rc"
}
part_examples() {
  ./build-gpu/leap eval --backend cuda --out "$out/cuda-examples.jsonl" > "$out/cuda-examples.txt" 2>&1 || true
  ./build-gpu/leap eval --backend cuda --candidates tests/fixtures/hostile/cuda --out "$out/cuda-hostile.jsonl" \
    > "$out/cuda-hostile.txt" 2>&1 || true
  tail -4 "$out/cuda-examples.txt"
  tail -4 "$out/cuda-hostile.txt"
}
part_report() {
  ./build-gpu/leap-bench-gpu > "$out/gpu-report.md" 2>> "$log" || tail -20 "$log"
  cat "$out/gpu-report.md"
  # Diagnostic: the stream-ordered allocator inside the sandbox, with the seccomp filter on and off.
  local diag
  diag=$(mktemp -d)
  sed -e 's/cudaMalloc((void\*\*)&h, \(.*\)) != cudaSuccess/cudaMallocAsync((void**)\&h, \1, s) != cudaSuccess/' \
      -e 's/cudaFree(h);.*/cudaFreeAsync(h, s);/' examples/cuda/mlp_block.cu > "$diag/mlp_block.async.cu"
  printf '[sandbox]\nseccomp = false\n' > "$diag/noseccomp.toml"
  for cfg in "" "--config $diag/noseccomp.toml"; do
    # shellcheck disable=SC2086
    ./build-gpu/leap eval --backend cuda --quiet $cfg --candidates "$diag/mlp_block.async.cu" --out "$diag/r.jsonl" >/dev/null 2>&1 || true
    echo "cudaMallocAsync candidate, ${cfg:-seccomp on}: $(python3 -c "import json,sys; r=json.loads(open('$diag/r.jsonl').readline()); print(r['status'], r['feedback'][:120])")"
  done
}

test_rc=0  # a failing part fails this script, after the others have run
# interference needs no build (nvcc alone); every other part runs on this build.
if [ "${parts[*]}" != "interference" ]; then build || exit 1; fi
[ ${#parts[@]} -eq 0 ] && parts=(tests examples report)
for p in "${parts[@]}"; do
  [ "$p" = build ] && continue
  rc=0
  "part_${p//-/_}" || rc=$?
  [ "$rc" = 0 ] || { echo "gpu-report: part $p exited with $rc"; test_rc=$rc; }
done
exit "$test_rc"
