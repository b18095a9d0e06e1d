#!/usr/bin/env bash
BUILD_ONLY=1 bench/gpu-report.sh "$OUT" || exit 1
./build-gpu/leap-bench-gpu --runner-starts 2>&1 | tee "$OUT/runner-starts.md"
cfg2=/tmp/demo-cuda-2.toml
sed 's/^\[sandbox\]$/[sandbox]\nevaluators = 2\ngpus = 1/' configs/demo-cuda.toml > $cfg2
grep -A3 sandbox $cfg2
timeout 270 ./build-gpu/leap bench compile-hiding --backend cuda --count 64 --baseline 1 > "$OUT/hiding-1.md" 2> "$OUT/hiding-1.err"; tail -3 "$OUT/hiding-1.err"
cat "$OUT/hiding-1.md"
timeout 170 ./build-gpu/leap bench compile-hiding --backend cuda --count 64 --baseline 0 --config $cfg2 > "$OUT/hiding-2.md" 2> "$OUT/hiding-2.err"; tail -3 "$OUT/hiding-2.err"
cat "$OUT/hiding-2.md"
