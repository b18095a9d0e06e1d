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

# Every job is submitted at once (the node has CPUs for two 4-task jobs; the rest queue), the
# one with a rank to kill first; each is then waited for and checked.
submit() {  # NAME EXTRA_EXPORTS: the job's id
  sbatch --parsable --chdir "$work" --output "$work/$1-%j.out" --export="ALL,$2" "$src/slurm/leap.sbatch"
}
# A rank killed mid-run: the job goes on from the latest checkpoint (srun's step ends with the
# rank) and completes, every step's metrics exactly once.
sed -e 's/^steps = 3/steps = 5/' "$work/cpu.toml" > "$work/restart.toml"
restart_job=$(submit restart "LEAP_BIN=$build/leap,LEAP_CONFIG=$work/restart.toml,LEAP_RUN_DIR=$work/run-restart")
declare -A launcher_job
for launcher in srun mpirun; do
  launcher_job[$launcher]=$(submit "$launcher" \
    "LEAP_BIN=$build/leap,LEAP_CONFIG=$work/cpu.toml,LEAP_RUN_DIR=$work/run-$launcher,LEAP_LAUNCHER=$launcher")
done
# Without PMI every task would be a world of one: the job must fail with leap's message.
nopmi_job=$(submit nopmi "LEAP_BIN=$build/leap,LEAP_CONFIG=$work/cpu.toml,LEAP_RUN_DIR=$work/run-nopmi,LEAP_SRUN_MPI=none")
# A run that keeps failing: restarted LEAP_MAX_RESTARTS times, then the job fails saying so.
printf '#!/bin/sh\necho "a rank died" >&2\nexit 1\n' > "$work/dies"
chmod +x "$work/dies"
dies_job=$(submit dies "LEAP_BIN=$work/dies,LEAP_RUN_DIR=$work/run-dies,LEAP_MAX_RESTARTS=2")

fail=0
killed=none
for _ in $(seq 1200); do
  if [ -f "$work/run-restart/checkpoints/step-000002/state.json" ]; then
    pid=$(pgrep -n -f "^$build/leap run --run-dir $work/run-restart" || true)
    [ -n "$pid" ] && kill -9 "$pid" && killed=$pid
    break
  fi
  sleep 0.1
done
steps_of() { python3 -c "import json,sys; print(' '.join(str(json.loads(l)['step']) for l in open(sys.argv[1])))" "$1" 2>/dev/null || echo none; }

for launcher in srun mpirun; do
  job=${launcher_job[$launcher]}
  state=$(wait_job "$job")
  steps=$(steps_of "$work/run-$launcher/metrics.jsonl")
  echo "$launcher: job $job $state, metrics for steps: $steps"
  if [ "$state" != COMPLETED ] || [ "$steps" != "0 1 2" ] || [ ! -f "$work/run-$launcher/checkpoints/step-000003/state.json" ]; then
    fail=1
    cat "$work/$launcher-$job.out" || true
  fi
done

state=$(wait_job "$nopmi_job")
echo "srun --mpi=none: job $nopmi_job $state"
if [ "$state" != FAILED ] || ! grep -q "srun started 4 tasks without PMI" "$work/nopmi-$nopmi_job.out" \
   || [ -e "$work/run-nopmi/metrics.jsonl" ]; then
  fail=1
  cat "$work/nopmi-$nopmi_job.out" || true
fi

state=$(wait_job "$restart_job")
steps=$(steps_of "$work/run-restart/metrics.jsonl")
echo "rank $killed killed: job $restart_job $state, metrics for steps: $steps"
if [ "$killed" = none ] || [ "$state" != COMPLETED ] || [ "$steps" != "0 1 2 3 4" ] \
   || ! grep -q "restart 1 of 3 from its latest checkpoint" "$work/restart-$restart_job.out"; then
  fail=1
  cat "$work/restart-$restart_job.out" || true
fi

state=$(wait_job "$dies_job")
echo "a run failing every time: job $dies_job $state"
if [ "$state" != FAILED ] || [ "$(grep -c 'a rank died' "$work/dies-$dies_job.out")" != 12 ] \
   || ! grep -q "after 2 restart(s) (LEAP_MAX_RESTARTS=2); giving up" "$work/dies-$dies_job.out"; then
  fail=1
  cat "$work/dies-$dies_job.out" || true
fi
[ "$fail" = 0 ] && echo "slurm: all jobs as expected"
exit "$fail"
