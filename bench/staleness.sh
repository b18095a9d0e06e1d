#!/usr/bin/env bash
# Step time with the learner's update beside the next step's generation ([run] max_staleness)
# against the sequential loop, in one call: the same config run at max_staleness 0 and K.
# Usage: bench/staleness.sh CONFIG OUT_DIR   (env: STEPS=4 K=1 NP=3 LEAP=build/leap MPS=)
# Prints a table per run (interval_s per step, generate/learn, staleness counts) and the ratio of
# mean step intervals (steps after the first: the first has nothing to overlap with), and of the
# steady steps alone (not the first, not the last, whose generation at K was done beside the step
# before, nor a checkpoint's): a long run's step. Five steps give two steady ones. No ratio for a
# run with an infra_error outcome or a loss that is not finite.
# MPS=1: both runs under an NVIDIA MPS control daemon of this script's own (its pipe and log
# folders under OUT_DIR, quit at the end), so that learner and worker sharing one GPU run their
# kernels side by side instead of in turns (time slices). LEARNER_SM="N [M ...]" (with MPS): the
# run at K once per share, the learner (rank 1) using at most that % of the GPU's SMs
# (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), so that its large GEMMs leave room for the worker's decode
# kernels; the run at 0 is never capped (learner and worker take turns there, a cap only slows it).
# Some shares make cuBLAS compute wrong products (40, 60, 75, 80 % on an H200; 50 and 90 right):
# the learner checks its device's products at load and stops there, and that run is reported failed.
# A share named `low` runs the learner uncapped at below-normal MPS client priority
# (CUDA_MPS_CLIENT_PRIORITY=1): the worker's kernels are scheduled first when both wait.
# REUSE_BASE=1: keep a max_staleness 0 run already in OUT_DIR (same config and STEPS, made earlier
# on this machine) and run only the others.
set -euo pipefail
config="${1:?usage: bench/staleness.sh CONFIG OUT_DIR}"
out="${2:?usage: bench/staleness.sh CONFIG OUT_DIR}"
leap=${LEAP:-build/leap}
steps=${STEPS:-4}
k=${K:-1}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_env=()
if [ -n "${MPS:-}" ]; then
  export CUDA_MPS_PIPE_DIRECTORY="$out/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps/log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d
  trap 'echo quit | nvidia-cuda-mps-control || true' EXIT
  mpi_env=(-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY)
  echo "under MPS (control daemon: $CUDA_MPS_PIPE_DIRECTORY)${LEARNER_SM:+; at $k the learner capped at each of $LEARNER_SM % of the SMs}"
fi
[ -z "${LEARNER_SM:-}" ] || [ -n "${MPS:-}" ] || { echo "staleness.sh: LEARNER_SM caps a share of the SMs under MPS: set MPS=1" >&2; exit 2; }
np=${NP:-3}
# Runs by name: 0, then K, or K-smN per learner share N (K-smlow: priority).
runs=(0)
if [ -n "${LEARNER_SM:-}" ]; then
  for sm in $LEARNER_SM; do runs+=("$k-sm$sm"); done
else
  runs+=("$k")
fi
for name in "${runs[@]}"; do
  s=${name%%-sm*}
  sm=${name#"$s"} && sm=${sm#-sm}
  cfg="$out/config-staleness-$s.toml"
  # The config with [run] steps and max_staleness set (any earlier values of them dropped).
  awk -v steps="$steps" -v s="$s" '
    /^\[/ { in_run = ($0 == "[run]") }
    in_run && /^(steps|max_staleness)[ \t]*=/ { next }
    { print }
    $0 == "[run]" { print "steps = " steps; print "max_staleness = " s }' "$config" > "$cfg"
  if [ "$name" = 0 ] && [ -n "${REUSE_BASE:-}" ] && [ -f "$out/run-0/metrics.jsonl" ]; then
    echo "max_staleness 0: the run already in $out/run-0 (REUSE_BASE)"
    continue
  fi
  rm -rf "$out/run-$name" "$out/run-$name.failed"
  date +%s.%N > "$out/run-$name.start"
  cmd=("$leap" run --config "$cfg" --run-dir "$out/run-$name")
  if [ -n "$sm" ]; then
    # One application context per role, in rank order: coordinator, learner (capped), workers.
    learner_env=(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="$sm")
    [ "$sm" = low ] && learner_env=(CUDA_MPS_CLIENT_PRIORITY=1)
    apps=(-np 1 "${cmd[@]}" : -np 1 env "${learner_env[@]}" "${cmd[@]}" : -np $((np - 2)) "${cmd[@]}")
  else
    apps=(-np "$np" "${cmd[@]}")
  fi
  # A run that fails (a learner that refuses its device's products, say) is reported with its
  # reason and the others still run: their tables are the call's, whatever one share did.
  if ! mpirun --oversubscribe --bind-to none "${mpi_env[@]}" "${apps[@]}" > "$out/run-$name.log" 2>&1; then
    tail -20 "$out/run-$name.log"
    { grep -m1 "error" "$out/run-$name.log" || grep -v -e '^-*$' "$out/run-$name.log" | tail -1; } > "$out/run-$name.failed"
    failed=1
    [ "$name" = 0 ] && break  # nothing to compare with
    continue
  fi
  date +%s.%N > "$out/run-$name.end"
done
python3 - "$out" "${runs[@]}" <<'PY'
import json, math, os, sys
out, names = sys.argv[1], sys.argv[2:]
def learner(sm, before, after=""):
    if not sm:
        return ""
    what = "learner at below-normal MPS priority, uncapped" if sm == "low" else f"learner capped at {sm} % of the SMs"
    return before + what + after
means, steadies, work, broken = {}, {}, {}, {}
for name in names:
    s, _, sm = name.partition("-sm")
    failed = f"{out}/run-{name}.failed"
    if os.path.exists(failed) or not os.path.exists(f"{out}/run-{name}/metrics.jsonl"):
        broken[name] = f"the run failed: {open(failed).read().strip()}" if os.path.exists(failed) else "not run"
        print(f"\n### max_staleness = {s}" + learner(sm, ", ") + f"\n\n{broken[name]}")
        continue
    ms = [json.loads(l) for l in open(f"{out}/run-{name}/metrics.jsonl")]
    # What each step did (rollout-turns, trained samples): a policy that learns decides differently
    # at K, which the comparison says. A run with outcomes lost to leap's own errors or an update
    # that was not finite (metrics.jsonl writes a NaN as null) is not compared at all.
    work[name] = [(sum(m.get("staleness") or []), m.get("samples")) for m in ms]
    bad = [m["step"] + 1 for m in ms if not all(m.get(k) is not None and math.isfinite(m[k]) for k in ("loss", "entropy"))]
    infra = sum(1 for l in open(f"{out}/run-{name}/outcomes.jsonl") if json.loads(l).get("status") == "infra_error")
    if bad or infra:
        broken[name] = "; ".join(([f"loss or entropy not finite at step(s) {bad}"] if bad else []) +
                                 ([f"{infra} outcome(s) infra_error"] if infra else []))
    print(f"\n### max_staleness = {s}" + learner(sm, ", ") + "\n")
    print("| step | interval s | wall s | generate s | learn s | broadcast s | checkpoint s | rollout-turns by staleness |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for m in ms:
        t = m["time_s"]
        print(f"| {m['step'] + 1} | {m['interval_s']:.1f} | {m['wall_s']:.1f} | {t['generate']:.1f} | {t['learn']:.1f} "
              f"| {t['broadcast']:.2f} | {t.get('checkpoint', 0):.2f} | {m.get('staleness')} |")
    channel = [l.split("broadcast over ")[1].strip() for l in open(f"{out}/run-{name}/logs/rank-1.log") if "broadcast over " in l]
    print(f"\nweights broadcast over {channel[0] if channel else '?'}")
    later = [m["interval_s"] for m in ms[1:]] or [ms[0]["interval_s"]]
    means[name] = sum(later) / len(later)
    total = sum(m["interval_s"] for m in ms)
    print(f"\nrun total {total:.1f} s; mean step interval after the first {means[name]:.1f} s")
    # A long run's step: neither the first, nor the last (at K its generation was done beside the
    # step before, with nothing left to overlap), nor one that copied a checkpoint.
    steady = [m["interval_s"] for m in ms[1:-1] if not m["time_s"].get("checkpoint", 0)]
    if steady:
        steadies[name] = sum(steady) / len(steady)
        print(f"steady steps (not the first, the last, or a checkpoint's): {len(steady)}, mean interval {steadies[name]:.1f} s")
    # Checkpoints are written beside the steps; the last one's write ends the run after its record.
    writes = [l.split(": written in ")[1].split()[0] for l in open(f"{out}/run-{name}/logs/rank-1.log") if ": written in " in l]
    wall = float(open(f"{out}/run-{name}.end").read()) - float(open(f"{out}/run-{name}.start").read())
    print(f"checkpoint writes after their step: {', '.join(w + ' s' for w in writes) or 'none'}; "
          f"mpirun wall (start-up, every step, the last write) {wall:.1f} s")
print()
for name in names[1:]:
    s, _, sm = name.partition("-sm")
    why = broken.get(name) or (broken.get("0") and "the run at 0: " + broken["0"])
    if why:
        print(f"max_staleness {s}" + learner(sm, " (", ")") + f": not compared: {why}")
        continue
    print(f"step time, max_staleness {s}" + learner(sm, " (", ")") +
          f" vs 0 (mean interval after the first step): {means['0'] / means[name]:.2f}x faster" +
          (f"; steady steps: {steadies['0'] / steadies[name]:.2f}x" if '0' in steadies and name in steadies else "") +
          ("" if work[name] == work["0"] else
           f" (other work: (rollout-turns, samples) per step {work[name]} against {work['0']})"))
PY
exit "${failed:-0}"
