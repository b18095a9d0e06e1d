#!/usr/bin/env bash
# The runners' Python (.venv): Debian's PyTorch (python3-torch, through the system site packages)
# plus what Debian does not package: Triton, whose interpreter runs KernelBench-format answers'
# Triton kernels on the CPU backend. Idempotent. leap finds it (common/python.cpp); a GPU
# machine's own Python with CUDA PyTorch and Triton is used where this folder is absent.
# Usage: deploy/python-env.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
TRITON="triton==3.6.0"
if [ ! -x "$VENV/bin/python3" ]; then /usr/bin/python3 -m venv --system-site-packages "$VENV"; fi
if ! "$VENV/bin/python3" -c "import torch, triton" 2>/dev/null; then
  "$VENV/bin/pip" install -q --disable-pip-version-check "$TRITON"
fi
echo "python-env: $("$VENV/bin/python3" -c 'import torch, triton; print("torch", torch.__version__, "| triton", triton.__version__)')"
