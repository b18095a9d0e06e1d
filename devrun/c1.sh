#!/usr/bin/env bash
JUDGE_ONLY=1 bench/gpu-report.sh "$OUT/judge"; rc=$?
{ echo "== cgroup probe"; cat /proc/self/cgroup; mount | grep -i cgroup; ls /sys/fs/cgroup | head -40
  cat /sys/fs/cgroup/cgroup.controllers /sys/fs/cgroup/cgroup.subtree_control
  mkdir /sys/fs/cgroup/leap-probe && echo mkdir-ok && ls /sys/fs/cgroup/leap-probe | head -50 && rmdir /sys/fs/cgroup/leap-probe; id; } > "$OUT/cgroup.txt" 2>&1
cat "$OUT/cgroup.txt" | head -60
python3 - "$OUT/judge/records.jsonl" <<'PY'
import json,sys
rs=[json.loads(l) for l in open(sys.argv[1])]
w=[r.get('stages',{}).get('runner_wait_us',0) for r in rs]
print('records',len(rs),'waited',sum(1 for x in w if x>0),'max wait ms',max(w)/1e3 if w else 0)
PY
exit $rc
