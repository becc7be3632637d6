#!/usr/bin/env bash
# A single-node Slurm on localhost for icl sweep's tests (docs/sweeps.md): munged, slurmctld and slurmd from
# Debian's packages (scripts/setup.sh installs them), started directly (no systemd), state under $ICL_SLURM_DIR
# (default /tmp/icl-slurm), ports $ICL_SLURM_PORT and the next one (default 6817, 6818: Slurm's own). Clients find it
# through SLURM_CONF, which `start` and `env` print.
#   scripts/slurm-local.sh start      start the daemons (idempotent), wait until the node is idle
#   scripts/slurm-local.sh stop       stop them (the ones this script started, by their pid files)
#   scripts/slurm-local.sh env        print the export line for SLURM_CONF
#   scripts/slurm-local.sh slurmd-kill|slurmd-start   the fault test's hooks
# Exit 0 on success; 1 with the daemon's log tail when one does not come up; 77 when the packages are missing.
set -euo pipefail
D=${ICL_SLURM_DIR:-/tmp/icl-slurm}
CONF=$D/slurm.conf
PORT=${ICL_SLURM_PORT:-6817}
export SLURM_CONF=$CONF

need() { command -v "$1" >/dev/null 2>&1 || { echo "slurm-local: $1 not found (run scripts/setup.sh)" >&2; exit 77; }; }

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_conf() {
  mkdir -p "$D/state" "$D/spool" "$D/munge"
  cat >"$CONF" <<CONF
ClusterName=icl
SlurmctldHost=localhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=$(id -un)
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.socket.2
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SlurmdTimeout=300
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
NodeName=localhost CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
}

start_munge() {
  pid_alive "$D/munged.pid" && return 0
  if [ ! -s "$D/munge/munge.key" ]; then
    dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$D/munge/munge.key"
  fi
  chmod 700 "$D/munge"
  munged --force --key-file="$D/munge/munge.key" --socket="$D/munge/munge.socket.2" \
    --pid-file="$D/munged.pid" --log-file="$D/munged.log" --seed-file="$D/munge/munge.seed"
}

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
  local t=$1 what=$2
  shift 2
  for _ in $(seq $((t * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "slurm-local: $what did not come up in $t s" >&2
  return 1
}

node_idle() { sinfo -h -n localhost -o %t | grep -qx 'idle\|mix\|alloc'; }

start_slurmd() {
  pid_alive "$D/slurmd.pid" && return 0
  slurmd -f "$CONF" || { tail -20 "$D/slurmd.log" >&2; exit 1; }
}

start() {
  need munged; need slurmctld; need slurmd; need sbatch
  write_conf
  start_munge || { tail -20 "$D/munged.log" >&2; exit 1; }
  pid_alive "$D/slurmctld.pid" || slurmctld -f "$CONF" || { tail -20 "$D/slurmctld.log" >&2; exit 1; }
  wait_for 30 slurmctld scontrol ping || { tail -20 "$D/slurmctld.log" >&2; exit 1; }
  start_slurmd
  wait_for 60 "the node (sinfo idle)" node_idle || { sinfo >&2; tail -20 "$D/slurmd.log" >&2; exit 1; }
  echo "export SLURM_CONF=$CONF"
}

stop_one() { # pid file
  if pid_alive "$1"; then
    local p
    p=$(cat "$1")
    kill "$p"
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$1"
}

stop() {
  stop_one "$D/slurmd.pid"
  stop_one "$D/slurmctld.pid"
  stop_one "$D/munged.pid"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  slurmd-kill) [ -s "$D/slurmd.pid" ] && kill -9 "$(cat "$D/slurmd.pid")"; rm -f "$D/slurmd.pid" ;;
  slurmd-start) start_slurmd; wait_for 60 "the node (sinfo idle)" node_idle ;;
  *) echo "usage: scripts/slurm-local.sh start|stop|env|slurmd-kill|slurmd-start" >&2; exit 2 ;;
esac
