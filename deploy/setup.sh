#!/usr/bin/env bash
# Installs dependencies (deploy/install-deps.sh, deploy/python-env.sh), configures and builds leap into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
./deploy/python-env.sh
# LEAP_BUILD_BENCH=OFF: without the benchmark executables (CI; `leap bench` is in leap either way).
cmake --preset default -DLEAP_BUILD_BENCH="${LEAP_BUILD_BENCH:-ON}"
cmake --build --preset default -j"$(nproc)"
