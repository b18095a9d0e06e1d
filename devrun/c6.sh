#!/usr/bin/env bash
BUILD_ONLY=1 bench/gpu-report.sh "$OUT" >/dev/null 2>&1 || { echo build failed; exit 1; }
prefix=/tmp/leap-deps
export PATH="$prefix/usr/bin:$PATH" LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
./build-gpu/leap-bench-gpu --runner-starts
CUDA_DEVICE_MAX_CONNECTIONS=1 ./build-gpu/leap-bench-gpu --runner-starts
CUDA_MODULE_LOADING=EAGER ./build-gpu/leap-bench-gpu --runner-starts | tail -7
nvidia-smi -q | grep -i -A2 "persistence\|compute mode" | head -8
