#!/usr/bin/env bash
# A private single-node Slurm on this machine, for tests: munge, slurmctld and slurmd from
# Debian's packages, every file (key, sockets, slurm.conf, state, logs) under one directory,
# daemons stopped by PID. Needs root (slurmd) and the slurmctld, slurmd, slurm-client and
# munge packages (deploy/install-deps.sh installs them).
#   slurm/local-slurm.sh start DIR   # prints the SLURM_CONF to export for sbatch/srun/squeue
#   slurm/local-slurm.sh stop DIR
set -euo pipefail
cmd=${1:?usage: local-slurm.sh start|stop DIR}
dir=${2:?usage: local-slurm.sh start|stop DIR}

stop() {
  for p in slurmd slurmctld munged; do
    if [ -f "$dir/$p.pid" ]; then
      pid=$(cat "$dir/$p.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$dir/$p.pid"
    fi
  done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "usage: local-slurm.sh start|stop DIR" >&2; exit 2; }
for b in munged slurmctld slurmd sbatch; do
  command -v "$b" >/dev/null || { echo "local-slurm: $b not found (install slurmctld slurmd slurm-client munge)" >&2; exit 3; }
done
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chmod 700 "$dir" "$dir/munge"
host=$(hostname -s)
cpus=${LOCAL_SLURM_CPUS:-8}  # more than the cores: leap's ranks mostly wait on each other

# munge with a private key and socket.
dd if=/dev/urandom of="$dir/munge/key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/key"
munged --force --key-file="$dir/munge/key" --socket="$dir/munge/socket" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"

cat > "$dir/slurm.conf" <<CONF
ClusterName=leaplocal
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
MinJobAge=3600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -i -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N "$host"
for _ in $(seq 100); do
  if sinfo -h -o %T 2>/dev/null | grep -qx idle; then echo "$SLURM_CONF"; exit 0; fi
  sleep 0.2
done
echo "local-slurm: the node did not become idle; logs in $dir" >&2
tail -5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
stop
exit 1
