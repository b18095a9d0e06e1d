#!/usr/bin/env bash
# Runs the built-in demo (configs/demo.toml) under mpirun on this machine: coordinator,
# learner and two workers, each run in a fresh runs/demo-<time>/ directory.
#   ./deploy/demo.sh [leap run options]     e.g. --steps 8, --config FILE, --run-dir DIR
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${LEAP_RANKS:-4}
args=(-np "$ranks" --oversubscribe)
# Open MPI refuses root unless told; containers and CI machines often run as root.
if [ "$(id -u)" = 0 ]; then args+=(--allow-run-as-root); fi
run_dir=()
case " $* " in *" --run-dir "*|*" --resume "*) ;; *) run_dir=(--run-dir "runs/demo-$(date +%Y%m%d-%H%M%S)") ;; esac
rc=0
mpirun "${args[@]}" ./build/leap run "${run_dir[@]}" "$@" || rc=$?
if [ "$rc" != 0 ] && [ ${#run_dir[@]} -gt 0 ] && [ -d "${run_dir[1]}/checkpoints" ]; then
  last=$(ls -d "${run_dir[1]}"/checkpoints/step-?????? 2>/dev/null | tail -n 1 || true)
  echo "leap: the run stopped (exit $rc). Last complete checkpoint: ${last:-none}." >&2
  [ -n "$last" ] && echo "Continue with: $0 --run-dir ${run_dir[1]} --resume" >&2
fi
[ "$rc" = 0 ] && [ ${#run_dir[@]} -gt 0 ] && echo "leap: the run's page: ${run_dir[1]}/report.html"
exit "$rc"
