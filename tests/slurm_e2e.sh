#!/usr/bin/env bash
# The Slurm plugin in a real one-node cluster: munged, slurmctld and slurmd started on a private
# configuration (ports, spool, state and munge socket in a scratch directory), shmsched_spank.so
# in its plugstack.conf, and srun tasks of two accounts against a one-cell class. Checks that the
# tasks never overlap, take turns by account, are cancelled by scancel while they wait, get the
# environment `run` gives, take their tenant from the job's account and not from a variable the
# user sets, fail with a clear line for a bad option; that every cell ends free and `check`
# clean; and that a bad plugstack.conf argument fails each step saying so, without draining
# the node. Skips (77) without root or Slurm's daemons. SHMS_KEEP_SCRATCH=1 keeps the scratch
# directory (logs, the jobs' output) for a look afterwards.
#
# Usage: tests/slurm_e2e.sh BUILD_DIR
set -euo pipefail
umask 022 # the scratch tree is ours alone to write, whatever umask the caller runs with

build=$(cd "${1:?usage: slurm_e2e.sh BUILD_DIR}" && pwd)
shmsched=$build/bin/shmsched
plugin=$build/lib/shmsched_spank.so

skip() {
  echo "slurm_e2e: skipped: $*" >&2
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (slurmd runs tasks as their users)"
for t in munged slurmctld slurmd; do
  [ -x "/usr/sbin/$t" ] || skip "/usr/sbin/$t is not installed (apt-get install slurmd slurmctld munge)"
done
command -v srun >/dev/null || skip "srun is not installed (apt-get install slurm-client)"
[ -f "$plugin" ] || skip "$plugin was not built (no slurm/spank.h: apt-get install libslurm-dev)"

dir=$(mktemp -d /tmp/shmst-slurm-XXXXXX)
chmod 755 "$dir" # the configuration, read by a job of another user too
seg=$dir/run/jobs # a segment at a path, as docs/scaling.md lays nodes out
node=$(hostname -s)
pids=()
# Stop a daemon by its pid file and wait (bounded) until it is gone.
stop() {
  local pid
  pid=$(cat "$dir/$1.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -f "$dir/slurmctld.pid" ]; then
    scancel --full -u "$(id -un)" 2>/dev/null || true
    for _ in $(seq 1 100); do
      [ -z "$(squeue -h 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  stop slurmd
  stop slurmctld
  stop munged
  "$shmsched" destroy "$seg" --force >/dev/null 2>&1 || true
  if [ -n "${SHMS_KEEP_SCRATCH:-}" ]; then echo "slurm_e2e: kept $dir" >&2; else rm -rf "$dir"; fi
}
trap cleanup EXIT

fail() {
  echo "slurm_e2e: FAILED: $*" >&2
  for f in "$dir"/log/*.log; do
    echo "--- $f" >&2
    tail -n 20 "$f" >&2
  done
  exit 1
}

# Bounded waits for the daemons and the queue: conditions polled, never a fixed sleep.
wait_for() {
  local what=$1
  shift
  for _ in $(seq 1 300); do
    if "$@"; then return 0; fi
    sleep 0.1
  done
  fail "timed out waiting for $what"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

mkdir -p "$dir/munge" "$dir/spool" "$dir/state" "$dir/log" "$dir/shmsched-state" "$dir/run"
chmod 711 "$dir/munge" # the socket is for every user; the key is not
chmod 700 "$dir/shmsched-state"
head -c 1024 /dev/urandom >"$dir/munge/key"
chmod 600 "$dir/munge/key"
/usr/sbin/munged --socket="$dir/munge/sock" --key-file="$dir/munge/key" \
  --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" \
  --force

ctld_port=$(free_port)
slurmd_port=$(free_port)
cat >"$dir/slurm.conf" <<EOF
ClusterName=shmstest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SchedulerType=sched/builtin
ReturnToService=2
SlurmdParameters=config_overrides
PlugStackConfig=$dir/plugstack.conf
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$node NodeAddr=127.0.0.1 CPUs=16 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:16
EOF
echo "required $plugin segment=$seg class=small state=$dir/shmsched-state" >"$dir/plugstack.conf"
export SLURM_CONF=$dir/slurm.conf

# One cell, granted in turns by tenant (fairness by grants: the order is exact); and a class
# that only user nobody may use. Any user may open the segment.
"$shmsched" create "$seg" --mode 0666 --class small:cells=1,queue=64,fairness=grants \
  --class 'large:cells=1,queue=8,allow=~nobody' >/dev/null

/usr/sbin/slurmctld -i -f "$SLURM_CONF"
/usr/sbin/slurmd -f "$SLURM_CONF"
node_idle() { [ "$(sinfo -h -n "$node" -o %T 2>/dev/null)" = idle ]; }
wait_for "the node to be idle" node_idle

field() { "$shmsched" status "$seg" | awk -v k="$1:" '$1 == k { print $2; exit }'; }
queue_is() { [ "$(field queue_depth)" = "$1" ]; }
leased_is() { [ "$(field cells_leased)" = "$1" ]; }

# A holder outside Slurm keeps the cell until told, so that the tasks all queue first.
mkfifo "$dir/hold"
hold_cell() {
  "$shmsched" run "$seg" -c small -t blocker -- sh -c "read x < $dir/hold" &
  pids+=($!)
  wait_for "the blocker's lease" leased_is 1
}
let_go() { echo go >"$dir/hold"; }

# --- the environment, and the tenant from the job's account ---
out=$(SLURM_JOB_ACCOUNT=forged srun --account=acme -n1 sh -c 'env | grep ^SHMSCHED_ | sort')
echo "$out" | grep -qx "SHMSCHED_TENANT=acme" || fail "tenant is not the job's account: $out"
echo "$out" | grep -qx "SHMSCHED_CLASS=small" || fail "no SHMSCHED_CLASS: $out"
echo "$out" | grep -qx "SHMSCHED_CELL=0" || fail "no SHMSCHED_CELL: $out"
echo "$out" | grep -qx "SHMSCHED_SEGMENT=$seg" || fail "no SHMSCHED_SEGMENT: $out"

# --- two accounts, one cell: never two at once, turns by account ---
log=$dir/tasks.log
: >"$log"
task='flock '"$log"' sh -c "echo start \$SHMSCHED_TENANT >> '"$log"'"; sleep 0.05;
      flock '"$log"' sh -c "echo end \$SHMSCHED_TENANT >> '"$log"'"'
hold_cell
srun_pids=()
for i in 1 2 3 4; do
  srun --account=acme -n1 -J "acme$i" sh -c "$task" &
  srun_pids+=($!)
  srun --account=beta -n1 -J "beta$i" sh -c "$task" &
  srun_pids+=($!)
done
wait_for "eight queued tasks" queue_is 8
let_go
for p in "${srun_pids[@]}"; do wait "$p" || fail "a task failed (srun $p)"; done
[ "$(grep -c '^start' "$log")" = 8 ] || fail "not eight tasks ran: $(cat "$log")"
awk 'NR % 2 == 1 && $1 != "start" { exit 1 } NR % 2 == 0 && $1 != "end" { exit 1 }
     NR % 2 == 0 && $2 != last { exit 1 } { last = $2 }' "$log" ||
  fail "tasks overlapped on the one cell: $(cat "$log")"
awk '$1 == "start" { if ($2 == prev) exit 1; prev = $2 }' "$log" ||
  fail "accounts did not take turns: $(grep start "$log" | tr '\n' ' ')"

# --- the tasks of one step wait each for its own lease: three tasks, one cell, one at a time ---
: >"$log"
srun --account=acme -n3 sh -c "$task" || fail "a three-task step failed"
[ "$(grep -c '^start acme' "$log")" = 3 ] || fail "not three tasks ran: $(cat "$log")"
awk 'NR % 2 == 1 && $1 != "start" { exit 1 } NR % 2 == 0 && $1 != "end" { exit 1 }' "$log" ||
  fail "a step's tasks overlapped on the one cell: $(cat "$log")"

# --- scancel while a task waits ---
cancelled_before=$(field cancelled)
hold_cell
srun --account=gamma -n1 -J waiter true 2>"$dir/waiter.err" &
waiter=$!
wait_for "the waiting task" queue_is 1
scancel --name=waiter
if wait "$waiter"; then fail "the cancelled task's srun succeeded: $(cat "$dir/waiter.err")"; fi
wait_for "the cancelled request to go" queue_is 0
[ "$(field cancelled)" = $((cancelled_before + 1)) ] || fail "the request was not cancelled"
let_go
wait_for "the blocker's end" leased_is 0

# --- the class's rules see the job's user ---
out=$(cd / && runuser -u nobody -- srun --account=acme --shmsched-class=large -n1 \
  sh -c 'echo "$(id -un) $SHMSCHED_CLASS $SHMSCHED_TENANT"') || fail "nobody's job failed"
[ "$out" = "nobody large acme" ] || fail "nobody's job: '$out'"
if srun --account=acme --shmsched-class=large -n1 true 2>"$dir/denied.err"; then
  fail "root's job took a lease of a class only nobody may use"
fi
grep -q "class large allows only the users and groups its allow list names" "$dir/denied.err" ||
  fail "no clear refusal: $(cat "$dir/denied.err")"

# --- a bad option fails the job with a clear line ---
if srun --shmsched-class=huge --account=acme -n1 true 2>"$dir/bad.err"; then
  fail "--shmsched-class=huge was accepted"
fi
grep -q "'huge': not a class" "$dir/bad.err" || fail "no clear error: $(cat "$dir/bad.err")"
# A job without an account, under tenant=account: the task says so and fails.
if srun -n1 true 2>"$dir/noacct.err"; then fail "a job without an account took a lease"; fi
grep -q "has no Slurm account" "$dir/noacct.err" || fail "no clear error: $(cat "$dir/noacct.err")"

# --- every lease recorded, every cell free, check clean ---
started=$("$shmsched" events "$seg" --kind lease-started | grep -c "tenant=acme" || true)
[ "$started" = 9 ] || fail "expected 9 lease-started records for acme, got $started"
[ "$(field cells_available)" = 1 ] || fail "the cell is not free"
[ "$(field cells_quarantined)" = 0 ] || fail "a cell was quarantined"
"$shmsched" check "$seg" >/dev/null || fail "check found violations: $("$shmsched" check "$seg")"
# --- a bad plugstack.conf argument: every step fails saying so, the node stays up ---
echo "required $plugin segment=$seg class=small cells=0 state=$dir/shmsched-state" \
  >"$dir/plugstack.conf"
stop slurmd
/usr/sbin/slurmd -f "$SLURM_CONF"
wait_for "the node to be idle again" node_idle
if srun --account=acme -n1 true 2>"$dir/badconf.err"; then fail "a bad plugstack.conf was ignored"; fi
grep -q "shmsched: .*plugstack.conf: cells: '0': must be at least 1" "$dir/badconf.err" ||
  fail "the job was not told: $(cat "$dir/badconf.err")"
grep -q "shmsched: plugstack.conf: cells: '0': must be at least 1" "$dir/log/slurmd.log" ||
  fail "slurmd's log does not say it"
# The failed job's node passes through "completing"; what matters is where it settles:
# idle, not drained or down by the plugin's refusal.
node_settled() { case "$(sinfo -h -n "$node" -o %T 2>/dev/null)" in allocated* | completing* | mixed*) return 1 ;; esac; }
wait_for "the node to settle after the failed job" node_settled
node_idle || fail "the node is not idle after a bad plugstack.conf: $(sinfo -h -o %T)"
echo "slurm_e2e: passed"
