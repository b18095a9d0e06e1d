#!/usr/bin/env bash
# Call 2: the fixed starved-waiter fixture on the GPU (CUDA hostile test and folder), then the LM
# loop at max_staleness 0 vs 1 with the learner at 50 % of the SMs under MPS.
set -u
O=$OUT/c2; mkdir -p $O
echo "local tree: 009fe53 (+ untracked tmpdiag)" > $O/tree.txt; git status --short >> $O/tree.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
start=$(date +%s)
t() { echo "$1 $(( $(date +%s) - start )) s" | tee -a $O/times.txt; }
left() { echo $(( 575 - ($(date +%s) - start) )); }
export BUILD_TARGETS="leap leap-evald leap-runner leap-nvrtc leap-pyrunner leap_gpu_tests leap_hostile_tests"
BUILD_ONLY=1 timeout 240 bench/gpu-report.sh $O/build > $O/build.out 2>&1; t "build rc=$?"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PATH=/tmp/leap-deps/usr/bin:$PATH
export LD_LIBRARY_PATH=/tmp/leap-deps/usr/lib/x86_64-linux-gnu:$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__)+"/lib")'):${LD_LIBRARY_PATH:-}
(cd build-gpu && timeout 90 ctest --output-on-failure -R "CudaBackend.HostileKernels|HostileSuite.EveryFixtureMeets" > $O/ctest-hostile.log 2>&1); t "tests rc=$?"
grep -E "tests passed|\(Failed\)|Failure|expected" $O/ctest-hostile.log | head
timeout 60 ./build-gpu/leap eval --backend cuda --candidates tests/fixtures/hostile/cuda --out $O/cuda-hostile.jsonl > $O/cuda-hostile.txt 2>&1; t "hostile eval rc=$?"
grep starved $O/cuda-hostile.jsonl | cut -c1-200
STALENESS_ONLY=1 MPS=1 LEARNER_SM=50 STEPS=5 CONFIG=configs/lm-shaped-cuda-learn.toml timeout $(left) bench/gpu-report.sh $O/st > $O/st.out 2>&1; t "staleness rc=$?"
tail -8 $O/st.out
rm -rf $O/st/staleness/run-*/checkpoints $O/st/staleness/run-*/caches
cd $OUT && find c2 -type f -size -20M | tar czf c2.tgz -T - && rm -rf c2; ls -la $OUT
