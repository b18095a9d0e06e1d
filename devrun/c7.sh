#!/usr/bin/env bash
set -o pipefail
BUILD_ONLY=1 bench/gpu-report.sh "$OUT" >/dev/null 2>&1 || { echo build failed; tail -20 "$OUT/run.log"; exit 1; }
prefix=/tmp/leap-deps
export PATH="$prefix/usr/bin:$PATH" LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
torch_lib=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$torch_lib:$LD_LIBRARY_PATH"
( cd build-gpu && ctest --output-on-failure -R "CudaBackend" ) > "$OUT/ctest.log" 2>&1; rc=$?
grep -E "Test +#|tests passed|Failure" -A4 "$OUT/ctest.log" | grep -v "^--" | head -40
./build-gpu/leap eval --backend cuda --quiet --out "$OUT/ex.jsonl" > /dev/null 2>&1
python3 - "$OUT/ex.jsonl" <<'PY'
import json,sys,collections
rs=[json.loads(l) for l in open(sys.argv[1])]
print('examples',len(rs),dict(collections.Counter(r['status'] for r in rs)))
PY
exit $rc
