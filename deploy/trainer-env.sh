#!/usr/bin/env bash
# The trainers' Python (.venv-trainers): verl and OpenRLHF as the package registry serves them,
# with leap's client, so tests/trainers load leap's adapters through the trainers' own code
# (verl's reward and agent-loop loaders, its advantage-estimator registry; OpenRLHF's reward
# executor). CPU only: their GPU parts are not needed to load reward functions, agent loops and
# estimators. Idempotent. ~6 GiB (PyTorch with its CUDA libraries, Ray).
# Usage: deploy/trainer-env.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-trainers
VERL="verl==0.9.1"
OPENRLHF="openrlhf==0.11.2"
# verl 0.9.1 imports these without declaring them.
VERL_UNDECLARED="cachetools uvicorn fastapi torchtitan"
# OpenRLHF's reward executor needs only these of its requirements (the rest, e.g. flash-attn and
# deepspeed, build CUDA code and train).
OPENRLHF_USED="aiohttp pylatexenc"
# --no-compile: bytecode is written as modules are first imported (most of these never are).
PIP=("$VENV/bin/pip" install -q --disable-pip-version-check --no-compile)
if [ ! -x "$VENV/bin/python3" ]; then /usr/bin/python3 -m venv "$VENV"; fi
check='import verl, openrlhf.utils.agent, leap_client'
if ! "$VENV/bin/python3" -W ignore -c "$check" >/dev/null 2>&1; then
  "${PIP[@]}" "$VERL" $VERL_UNDECLARED $OPENRLHF_USED pytest requests
  "${PIP[@]}" --no-deps "$OPENRLHF"
  "${PIP[@]}" --no-deps -e ./python
fi
"$VENV/bin/python3" -W ignore -c "$check; import torch; print('trainer-env: verl', verl.__version__, '| torch', torch.__version__)" 2>/dev/null
