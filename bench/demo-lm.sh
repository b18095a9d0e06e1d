#!/usr/bin/env bash
# The LM policy demo on the CPU (docs/lm.md): the compact sources of every template choice, SFT of
# leap's tiny Qwen2-shaped model on them, then `leap run` with configs/demo-lm.toml (RL).
# Usage: bench/demo-lm.sh [OUT=runs/demo-lm] [SFT_STEPS=80]     (from the repository root)
# TURNS=2: refinement too: the sources are judged by `leap eval` first, SFT also learns turn 2 from
# the verdicts (`leap sft --refine`: a failed source, its verdict, a passing source), and RL runs
# with max_turns = 2 and lr 3e-4 (at 1e-3 two-turn RL destabilised the tiny model: docs/lm.md).
set -euo pipefail
out=${1:-runs/demo-lm}
steps=${2:-80}
leap=${LEAP:-./build/leap}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
rm -rf "$out/run"
turns=${TURNS:-1}
lr=0.001
if [ "$turns" -gt 1 ]; then lr=0.0003; fi
# BASELINE=turn: [learner] advantage_baseline (docs/lm.md); SEED: [run] seed; SFT=DIR: a fine-tuned model already made;
# STALENESS=k: [run] max_staleness (generation of step n+1 beside the update of step n: docs/loop.md);
# STEPS=n: [run] steps (default the config's 20).
baseline=${BASELINE:-group}
seed=${SEED:-1}
staleness=${STALENESS:-0}
if [ -n "${SFT:-}" ]; then
  mkdir -p "$out" && rm -rf "$out/sft" && cp -r "$SFT" "$out/sft"
else
  bench/lm-sft.sh "$out" "$steps" "$turns"
fi
sed -e "s#runs/demo-lm/sft#$out/sft#" -e "s#^max_turns = 1 .*#max_turns = $turns#" -e "s#^lr = 0.001#lr = $lr#" \
  -e "s#^\[policy\]#[policy]\nfeedback_chars = 400#" -e "s#^seed = 1#seed = $seed\nmax_staleness = $staleness#" \
  -e "s#^\[learner\]#[learner]\nadvantage_baseline = \"$baseline\"#" ${STEPS:+-e "s#^steps = 20#steps = $STEPS#"} \
  configs/demo-lm.toml > "$out/demo-lm.toml"
time mpirun --oversubscribe -np 4 "$leap" run --config "$out/demo-lm.toml" --run-dir "$out/run"
python3 - "$out/run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("step  solve@1  solve@T")
for r in rows:
    print(f"{r['step']:>4}  {r['solve_at'][0]:.2f}     {r['solve_at'][-1]:.2f}")
PY
