#!/usr/bin/env bash
# Supervised fine-tuning of leap's tiny Qwen2-shaped model (tests/fixtures/lm/tiny-qwen2) on the
# compact sources of every template choice of configs/demo-lm.toml's tasks (docs/lm.md): the
# warm start of the LM demo (bench/demo-lm.sh) and of the LM grid (bench/dcp-lm.sh).
# Usage: bench/lm-sft.sh OUT [SFT_STEPS=80] [TURNS=1]      (from the repository root; writes OUT/sft)
# TURNS > 1: the sources are judged by `leap eval` first and SFT also learns turn 2 from the
# verdicts (`leap sft --refine`: a failed source, its verdict, a passing source of its task).
set -euo pipefail
out=$1
steps=${2:-80}
turns=${3:-1}
leap=${LEAP:-./build/leap}
rm -rf "$out/sft-data" "$out/sft-verdicts.jsonl" "$out/sft"
for t in $(python3 -c 'import sys, tomllib; print(" ".join(tomllib.load(open(sys.argv[1], "rb"))["run"]["tasks"]))' configs/demo-lm.toml); do
  "$leap" tasks render "$t" --compact --all-to "$out/sft-data" > /dev/null
done
refine=()
if [ "$turns" -gt 1 ]; then
  "$leap" eval --quiet --config configs/demo-lm.toml --candidates "$out/sft-data" --out "$out/sft-verdicts.jsonl"
  refine=(--refine "$out/sft-verdicts.jsonl" --feedback-chars 400)
fi
time "$leap" sft --model tests/fixtures/lm/tiny-qwen2 --data "$out/sft-data" --prompt configs/prompts/schedule-compact.md \
  --out "$out/sft" --steps "$steps" --batch 16 --lr 0.01 --max-len 1024 "${refine[@]}"
