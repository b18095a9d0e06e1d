#!/usr/bin/env bash
# LEAP's grid with the language-model policy (docs/benchmarks.md): SFT of leap's tiny model on
# every template choice and on second turns made from leap's verdicts (bench/lm-sft.sh), then
# `leap bench dcp --config configs/dcp-lm.toml` with that model.
# Usage: bench/dcp-lm.sh OUT [leap bench dcp options...]      (from the repository root)
# SFT=DIR: use a fine-tuned model already made (OUT/sft is a copy of it).
set -euo pipefail
out=$1
shift
leap=${LEAP:-./build/leap}
mkdir -p "$out"
if [ -n "${SFT:-}" ]; then
  rm -rf "$out/sft" && cp -r "$SFT" "$out/sft"
else
  bench/lm-sft.sh "$out" "${SFT_STEPS:-160}" 2
fi
sed -e "s#runs/dcp-lm/sft#$out/sft#" configs/dcp-lm.toml > "$out/dcp-lm.toml"
rm -rf "$out/grid"
time "$leap" bench dcp --config "$out/dcp-lm.toml" --out "$out/grid" "$@"
