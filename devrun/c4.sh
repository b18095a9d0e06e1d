#!/usr/bin/env bash
BUILD_ONLY=1 bench/gpu-report.sh "$OUT" >/dev/null 2>&1 || { echo build failed; exit 1; }
prefix=/tmp/leap-deps
export PATH="$prefix/usr/bin:$PATH" LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
torch_lib=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$torch_lib:$LD_LIBRARY_PATH"
cfg2=/tmp/demo-cuda-2.toml
sed 's/^\[sandbox\]$/[sandbox]\nevaluators = 2\ngpus = 1/' configs/demo-cuda.toml > $cfg2
timeout 280 ./build-gpu/leap bench compile-hiding --backend cuda --count 64 --baseline 1 > "$OUT/hiding-1.md" 2> "$OUT/hiding-1.err"; tail -3 "$OUT/hiding-1.err"
cat "$OUT/hiding-1.md"
timeout 190 ./build-gpu/leap bench compile-hiding --backend cuda --count 64 --baseline 0 --config $cfg2 > "$OUT/hiding-2.md" 2> "$OUT/hiding-2.err"; tail -3 "$OUT/hiding-2.err"
cat "$OUT/hiding-2.md"
