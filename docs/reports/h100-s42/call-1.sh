#!/usr/bin/env bash
# card-agnostic: escape under load, GPU tests (chunked prefill, hostile suite), the CUDA hostile folder
set -u
O=$OUT/c3; mkdir -p $O
git log --oneline -1 > $O/tree.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
start=$(date +%s)
BUILD_ONLY=1 timeout 200 bench/gpu-report.sh $O/build > $O/build.out 2>&1; echo "build rc=$? $(( $(date +%s) - start )) s" | tee -a $O/times.txt
ESCAPE_ONLY=1 timeout 200 bench/gpu-report.sh $O/escape > $O/escape.out 2>&1; echo "escape rc=$? $(( $(date +%s) - start )) s" | tee -a $O/times.txt
left=$(( 560 - ($(date +%s) - start) ))
GPU_TESTS_ONLY=1 GPU_TESTS_R="LmParity|HostileSuite" timeout $left bench/gpu-report.sh $O/tests > $O/tests.out 2>&1; echo "tests rc=$? $(( $(date +%s) - start )) s" | tee -a $O/times.txt
tail -22 $O/escape/escape.md; grep -E "tests passed|Failed|\(Failed\)" $O/tests/ctest-gpu.log | head; tail -3 $O/tests.out
cd $OUT && find c3 -type f -size -20M | tar czf c3.tgz -T - && rm -rf c3; ls -la $OUT
