#!/usr/bin/env bash
JUDGE_ONLY=1 bench/gpu-report.sh "$OUT/judge"; rc=$?
python3 - "$OUT/judge/records.jsonl" <<'PY'
import json,sys,collections
rs=[json.loads(l) for l in open(sys.argv[1])]
by=collections.defaultdict(list)
for r in rs: by[r['phase'].split(' ')[0]+(' '+r['phase'].split(' ')[1] if r['phase'].startswith('two') else '')].append(r)
for k,v in by.items():
  w=[r['stages'].get('runner_wait_us',0) for r in v]; s=[r['stages'].get('runner_start_us',0)/1e3 for r in v]
  print(k,len(v),'waited',sum(1 for x in w if x>0),'max wait ms',round(max(w)/1e3),'start ms p50/max',sorted(s)[len(s)//2],max(s))
PY
exit $rc
