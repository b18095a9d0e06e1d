#!/usr/bin/env bash
# Submits the real slurm/leap.sbatch to a private single-node Slurm started on this machine
# (slurm/local-slurm.sh) with a small CPU config, through both launchers (srun --mpi=pmix and
# mpirun inside the allocation); waits for each job and checks its state and run directory.
# Then checks that a step launched without PMI fails with leap's message, that a rank killed
# mid-run is survived (the job resumes from its checkpoint) and that a run failing every time
# stops after LEAP_MAX_RESTARTS. Exit 77 = skipped.
# Usage: slurm_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
for b in slurmctld slurmd sbatch munged; do
  command -v "$b" >/dev/null || { echo "SKIP: $b not installed (deploy/install-deps.sh installs Slurm)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: slurmd needs root"; exit 77; }

work=$(mktemp -d /tmp/leap-slurm.XXXXXX)
cleanup() { "$src/slurm/local-slurm.sh" stop "$work/slurm" || true; rm -rf "$work"; }
trap cleanup EXIT
SLURM_CONF=$("$src/slurm/local-slurm.sh" start "$work/slurm")
export SLURM_CONF LEAP_DATA_DIR=$src LEAP_CACHE_DIR=$work/cache
{ cat <<'TOML'
[run]
name = "slurm"
tasks = ["relu", "softmax"]
steps = 3
tasks_per_step = 2
checkpoint_every = 2
TOML
  cat "$src/tests/fixtures/configs/fast-loop.toml"; } > "$work/cpu.toml"

# Waits for a job to end; prints its final state.
wait_job() {
  local state=""
  for _ in $(seq 600); do
    state=$(scontrol show job -o "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) echo "$state"; return 0 ;; esac
    sleep 0.5
  done
  echo "TIMEOUT_WAITING($state)"
}

fail=0
for launcher in srun mpirun; do
  job=$(sbatch --parsable --chdir "$work" --output "$work/$launcher-%j.out" \
    --export="ALL,LEAP_BIN=$build/leap,LEAP_CONFIG=$work/cpu.toml,LEAP_RUN_DIR=$work/run-$launcher,LEAP_LAUNCHER=$launcher" \
    "$src/slurm/leap.sbatch")
  state=$(wait_job "$job")
  steps=$(python3 -c "import json,sys; print(' '.join(str(json.loads(l)['step']) for l in open(sys.argv[1])))" \
    "$work/run-$launcher/metrics.jsonl" 2>/dev/null || echo none)
  echo "$launcher: job $job $state, metrics for steps: $steps"
  if [ "$state" != COMPLETED ] || [ "$steps" != "0 1 2" ] || [ ! -f "$work/run-$launcher/checkpoints/step-000003/state.json" ]; then
    fail=1
    cat "$work/$launcher-$job.out" || true
  fi
done

# Without PMI every task would be a world of one: the job must fail with leap's message.
job=$(sbatch --parsable --chdir "$work" --output "$work/nopmi-%j.out" \
  --export="ALL,LEAP_BIN=$build/leap,LEAP_CONFIG=$work/cpu.toml,LEAP_RUN_DIR=$work/run-nopmi,LEAP_SRUN_MPI=none" \
  "$src/slurm/leap.sbatch")
state=$(wait_job "$job")
echo "srun --mpi=none: job $job $state"
if [ "$state" != FAILED ] || ! grep -q "srun started 4 tasks without PMI" "$work/nopmi-$job.out" \
   || [ -e "$work/run-nopmi/metrics.jsonl" ]; then
  fail=1
  cat "$work/nopmi-$job.out" || true
fi
# A rank killed mid-run: the job goes on from the latest checkpoint (srun's step ends with the
# rank) and completes, every step's metrics exactly once.
{ sed -e 's/^steps = 3/steps = 8/' "$work/cpu.toml"; } > "$work/restart.toml"
job=$(sbatch --parsable --chdir "$work" --output "$work/restart-%j.out" \
  --export="ALL,LEAP_BIN=$build/leap,LEAP_CONFIG=$work/restart.toml,LEAP_RUN_DIR=$work/run-restart" \
  "$src/slurm/leap.sbatch")
killed=none
for _ in $(seq 1200); do
  if [ -f "$work/run-restart/checkpoints/step-000002/state.json" ]; then
    pid=$(pgrep -n -f "^$build/leap run --run-dir $work/run-restart" || true)
    [ -n "$pid" ] && kill -9 "$pid" && killed=$pid
    break
  fi
  sleep 0.1
done
state=$(wait_job "$job")
steps=$(python3 -c "import json,sys; print(' '.join(str(json.loads(l)['step']) for l in open(sys.argv[1])))" \
  "$work/run-restart/metrics.jsonl" 2>/dev/null || echo none)
echo "rank $killed killed: job $job $state, metrics for steps: $steps"
if [ "$killed" = none ] || [ "$state" != COMPLETED ] || [ "$steps" != "0 1 2 3 4 5 6 7" ] \
   || ! grep -q "restart 1 of 3 from its latest checkpoint" "$work/restart-$job.out"; then
  fail=1
  cat "$work/restart-$job.out" || true
fi

# A run that keeps failing: restarted LEAP_MAX_RESTARTS times, then the job fails saying so.
printf '#!/bin/sh\necho "a rank died" >&2\nexit 1\n' > "$work/dies"
chmod +x "$work/dies"
job=$(sbatch --parsable --chdir "$work" --output "$work/dies-%j.out" \
  --export="ALL,LEAP_BIN=$work/dies,LEAP_RUN_DIR=$work/run-dies,LEAP_MAX_RESTARTS=2" "$src/slurm/leap.sbatch")
state=$(wait_job "$job")
echo "a run failing every time: job $job $state"
if [ "$state" != FAILED ] || [ "$(grep -c 'a rank died' "$work/dies-$job.out")" != 12 ] \
   || ! grep -q "after 2 restart(s) (LEAP_MAX_RESTARTS=2); giving up" "$work/dies-$job.out"; then
  fail=1
  cat "$work/dies-$job.out" || true
fi
[ "$fail" = 0 ] && echo "slurm: all jobs as expected"
exit "$fail"
