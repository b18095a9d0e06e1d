#!/usr/bin/env bash
# Call 1 (session 44): the judge of 5688b50/0a8e8d9 on a GPU: CUDA hostile tests and folder, escape
# idle vs cpu load, then compile hiding with per-candidate records.
set -u
O=$OUT/c1; mkdir -p $O
echo "local tree: 8d99986 (+ untracked tmpdiag)" > $O/tree.txt; git status --short >> $O/tree.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
start=$(date +%s)
t() { echo "$1 $(( $(date +%s) - start )) s" | tee -a $O/times.txt; }
left() { echo $(( 570 - ($(date +%s) - start) )); }
BUILD_TARGETS="leap leap-evald leap-runner leap-nvrtc leap_gpu_tests" BUILD_ONLY=1 timeout 260 bench/gpu-report.sh $O/build > $O/build.out 2>&1; t "build rc=$?"
tail -3 $O/build.out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PATH=/tmp/leap-deps/usr/bin:$PATH
export LD_LIBRARY_PATH=/tmp/leap-deps/usr/lib/x86_64-linux-gnu:$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__)+"/lib")'):${LD_LIBRARY_PATH:-}
(cd build-gpu && timeout 150 ctest --output-on-failure -R "CudaBackend.ARunnerHeldOff|CudaBackend.HostileKernels" > $O/ctest-judge.log 2>&1); t "tests rc=$?"
grep -E "tests passed|\(Failed\)|Failed  " $O/ctest-judge.log | head
timeout 60 ./build-gpu/leap eval --backend cuda --candidates tests/fixtures/hostile/cuda --out $O/cuda-hostile.jsonl > $O/cuda-hostile.txt 2>&1; t "hostile eval rc=$?"
tail -3 $O/cuda-hostile.txt
l=$(left); [ $l -gt 60 ] && { LEAP=./build-gpu/leap timeout $(( l > 200 ? 200 : l - 20 )) bench/escape-under-load.sh $O/escape examples/cuda "idle cpu" > $O/escape.md 2>&1; t "escape rc=$?"; }
tail -20 $O/escape.md
l=$(left); [ $l -gt 50 ] && { timeout $(( l - 15 )) ./build-gpu/leap bench compile-hiding --backend cuda --count 64 --baseline 0 \
  --records $O/compile-hiding.jsonl > $O/compile-hiding.md 2> $O/compile-hiding.err; t "hiding rc=$?"; }
head -12 $O/compile-hiding.md
python3 tools/stage_sums.py $O/compile-hiding.jsonl > $O/stage-sums.txt 2>&1; cat $O/stage-sums.txt
cd $OUT && find c1 -type f -size -20M | tar czf c1.tgz -T - && rm -rf c1; ls -la $OUT
