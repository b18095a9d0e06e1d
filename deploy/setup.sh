#!/usr/bin/env bash
# Installs dependencies (deploy/install-deps.sh, deploy/python-env.sh, deploy/trainer-env.sh),
# configures and builds leap into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
./deploy/python-env.sh
# The trainers' Python for the verl/OpenRLHF adapter tests (~6 GiB of wheels) downloads while leap
# builds; LEAP_TRAINER_ENV=0 skips it and those tests.
trainer=""
if [ "${LEAP_TRAINER_ENV:-1}" != 0 ]; then
  mkdir -p build
  ./deploy/trainer-env.sh > build/trainer-env.log 2>&1 &
  trainer=$!
fi
# LEAP_BUILD_BENCH=OFF: without the benchmark executables (CI; `leap bench` is in leap either way).
cmake --preset default -DLEAP_BUILD_BENCH="${LEAP_BUILD_BENCH:-ON}" \
  -DLEAP_TRAINER_TESTS="$([ "${LEAP_TRAINER_ENV:-1}" != 0 ] && echo ON || echo OFF)"
cmake --build --preset default -j"$(nproc)"
if [ -n "$trainer" ] && ! wait "$trainer"; then
  tail -20 build/trainer-env.log
  echo "setup: deploy/trainer-env.sh failed (log: build/trainer-env.log)" >&2
  exit 1
fi
tail -1 build/trainer-env.log 2>/dev/null || true
