#!/usr/bin/env bash
# leap eval over one set of KernelBench-format answers with 1, 2, ... judges sharing the machine's
# GPUs (judge i on GPU i % GPUs; only one judge times at a time on a GPU), each run into an empty
# compile cache (the precompiled PyTorch preludes kept: made once per machine): the wall of each
# leap eval, the stage sums of its records (tools/stage_sums.py) and each run's ratio against the
# first count's, measured in the same call.
# Usage: JUDGES="1 2 4" bench/kernelbench-judges.sh SUITE CANDIDATES OUT
#   SUITE: leap tasks import kernelbench --out; CANDIDATES: the answers (bench/device/kernelbench-format.sh
#   PHASE=1 leaves them in out/agreement/candidates); LEAP: the binary (default build-gpu/leap).
set -euo pipefail
suite=${1:?usage: JUDGES="1 2" bench/kernelbench-judges.sh SUITE CANDIDATES OUT}
cands=${2:?candidates folder}
out=${3:?output folder}
leap=${LEAP:-build-gpu/leap}
mkdir -p "$out"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/leap/compile
files=() walls=()
for n in ${JUDGES:-1 2}; do
  rm -rf "$cache"
  t0=$(date +%s.%N)
  "$leap" eval --backend cuda --tasks "$suite" --candidates "$cands" --evaluators "$n" \
    --out "$out/judges-$n.jsonl" --quiet > "$out/judges-$n.txt" 2>&1 || { tail -5 "$out/judges-$n.txt"; exit 1; }
  t1=$(date +%s.%N)
  files+=("$out/judges-$n.jsonl")
  walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')")
done
python3 "$(dirname "$0")/../tools/stage_sums.py" "${files[@]}"
echo
echo "| judges | leap eval wall s | vs ${JUDGES%% *} judge(s) |"
echo "|---:|---:|---:|"
i=0
for n in ${JUDGES:-1 2}; do
  echo "| $n | ${walls[$i]} | $(awk -v a="${walls[0]}" -v b="${walls[$i]}" 'BEGIN {printf "%.2fx", a / b}') |"
  i=$((i + 1))
done
