#!/usr/bin/env bash
# Installs dependencies (deploy/install-deps.sh), configures and builds leap into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
cmake --preset default
cmake --build --preset default -j"$(nproc)"
