#!/usr/bin/env bash
# The escape check with the runner's CPU wait taken off: the new GPU test, then the same test
# with the fix reverted (it must fail), the escape bench idle and beside a busy loop per core,
# and the CUDA hostile folder's test.
set -u
O=$OUT/c4; mkdir -p $O
git log --oneline -1 > $O/tree.txt; git status --short >> $O/tree.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
start=$(date +%s)
t() { echo "$1 $(( $(date +%s) - start )) s" | tee -a $O/times.txt; }
BUILD_TARGETS="leap leap-evald leap-runner leap-nvrtc leap-pyrunner leap_gpu_tests" BUILD_ONLY=1 timeout 240 bench/gpu-report.sh $O/build > $O/build.out 2>&1; t "build rc=$?"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PATH=/tmp/leap-deps/usr/bin:$PATH
export LD_LIBRARY_PATH=/tmp/leap-deps/usr/lib/x86_64-linux-gnu:$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__)+"/lib")'):${LD_LIBRARY_PATH:-}
(cd build-gpu && timeout 120 ctest --output-on-failure -R "CudaBackend.ARunnerHeldOff" > $O/test-fixed.log 2>&1); t "test fixed rc=$?"
git apply -R tmpdiag/fix.patch && git diff --stat -- judge > $O/reverted.txt
(timeout 120 cmake --build build-gpu -j16 --target leap-evald > $O/rebuild.log 2>&1); t "rebuild rc=$?"
(cd build-gpu && timeout 120 ctest --output-on-failure -R "CudaBackend.ARunnerHeldOff" > $O/test-reverted.log 2>&1); t "test reverted rc=$?"
git apply tmpdiag/fix.patch
(timeout 120 cmake --build build-gpu -j16 --target leap-evald > $O/rebuild2.log 2>&1); t "rebuild2 rc=$?"
LEAP=./build-gpu/leap timeout 150 bench/escape-under-load.sh $O/escape examples/cuda "cpu" > $O/escape.md 2>&1; t "escape rc=$?"
(cd build-gpu && timeout 150 ctest --output-on-failure -R "CudaBackend.HostileKernels" > $O/test-hostile.log 2>&1); t "hostile rc=$?"
grep -E "tests passed|Failed|Passed|Expected|Which is|feedback|observed" $O/test-fixed.log $O/test-reverted.log | head -30
cat $O/escape.md | head -20; grep -E "tests passed|Failed" $O/test-hostile.log | head
cd $OUT && find c4 -type f -size -20M | tar czf c4.tgz -T - && rm -rf c4; ls -la $OUT
