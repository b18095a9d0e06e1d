#!/usr/bin/env bash
BUILD_ONLY=1 bench/gpu-report.sh "$OUT" >/dev/null 2>&1 || { echo build failed; exit 1; }
prefix=/tmp/leap-deps
export PATH="$prefix/usr/bin:$PATH" LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
torch_lib=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$torch_lib:$LD_LIBRARY_PATH" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf /tmp/run1
timeout 280 mpirun -np 3 --oversubscribe --bind-to none ./build-gpu/leap run --config configs/demo-cuda.toml --run-dir /tmp/run1 > "$OUT/loop.txt" 2>&1
grep -v "^\[" "$OUT/loop.txt" | tail -14
cp /tmp/run1/metrics.jsonl /tmp/run1/outcomes.jsonl "$OUT/" 2>/dev/null
python3 - <<'PY'
import json,collections
rs=[json.loads(l) for l in open('/tmp/run1/outcomes.jsonl')]
print('outcomes',len(rs),dict(collections.Counter(r['status'] for r in rs)))
st=[r['stages'] for r in rs]
print('eval ms p50',sorted(s['eval_us'] for s in st)[len(st)//2]/1e3,'runner waits',sum(1 for s in st if s.get('runner_wait_us',0)>0))
ms=[json.loads(l) for l in open('/tmp/run1/metrics.jsonl')]
print(ms[-1].keys())
for m in ms: print({k:m[k] for k in m if k in ('step','evaluations_per_s','evals_per_s','wall_s','solve_rate_turn1','step_wall_s')})
PY
