#!/usr/bin/env bash
# Offer very different loads from several tenants at once to a worker class, through
# `shmsched submit --wait`, while two `shmsched worker`s serve it.
#
# Usage: scripts/demo-worker.sh BIN NAME DIR SECONDS TENANT:CLIENTS [TENANT:CLIENTS]...
#
# Two workers run `sh -c 'sleep 0.02; sha256sum'` per job (20 ms of pretend work, then a
# real hash of the payload) on class small of segment NAME, which must be a worker class
# of 2 cells. Each tenant runs CLIENTS client loops at once for SECONDS: a loop submits a
# job (its payload names it) and waits for its result, again and again, so a tenant keeps
# up to CLIENTS jobs queued or running. Each job appends "TENANT START_US END_US STATUS"
# to DIR/wlog (submit to result, CLOCK_REALTIME microseconds); a result that is not a
# sha256sum line counts as status 99. Half-way through, `status --tenants` goes to
# DIR/wtenants. Exits 1 if a job failed; everything it started is stopped however it ends.
set -euo pipefail

if (($# < 5)); then
  echo "usage: $0 BIN NAME DIR SECONDS TENANT:CLIENTS..." >&2
  exit 2
fi
bin=$1 name=$2 dir=$3 secs=$4
shift 4
job=${DEMO_WORKER_JOB:-'sleep 0.02; sha256sum'}

now_us() { echo "${EPOCHREALTIME/./}"; }

# One client loop of tenant $1 (loop number $2) until $3 (microseconds). A SIGTERM cancels
# the job in flight (submit cancels its own job on SIGTERM) and ends the loop.
client() {
  local tenant=$1 i=$2 end=$3 n=0 t0 st sub='' out=$dir/out.$1.$2 hash
  trap '[ -z "$sub" ] || kill "$sub" 2>/dev/null; exit 0' TERM
  while (($(now_us) < end)); do
    n=$((n + 1))
    t0=$(now_us)
    "$bin" submit "$name" --class small --tenant "$tenant" --payload "$tenant $i $n" \
      --wait >"$out" &
    sub=$!
    st=0
    wait "$sub" || st=$?
    sub=''
    read -r hash _ <"$out" || true
    [[ $st != 0 || $hash =~ ^[0-9a-f]{64}$ ]] || st=99
    echo "$tenant $t0 $(now_us) $st" >>"$dir/wlog"
  done
}

stop_all() {
  local left
  mapfile -t left < <(jobs -p)
  ((${#left[@]} == 0)) || kill "${left[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop_all EXIT
trap 'exit 130' INT # so that the EXIT trap runs on ^C or kill
trap 'exit 143' TERM

workers=()
for w in 1 2; do
  "$bin" worker "$name" --class small -- sh -c "$job" &
  workers+=($!)
done

end=$(($(now_us) + secs * 1000000))
clients=()
for spec in "$@"; do
  tenant=${spec%%:*} n=${spec#*:}
  for ((i = 1; i <= n; i++)); do
    client "$tenant" "$i" "$end" &
    clients+=($!)
  done
done

sleep "$((secs / 2))"
"$bin" status "$name" --tenants |
  awk '/^# Class small/ { on = 1 } on && /^queue_depth:/ { print "  " $0 }
    on && /^tenant\./ { print "  " $1, $2 }' >"$dir/wtenants"

for pid in "${clients[@]}"; do
  wait "$pid"
done
kill -TERM "${workers[@]}" # idle now: they unbind and exit 0
for pid in "${workers[@]}"; do
  wait "$pid"
done
if awk '$4 != 0 { bad++ } END { exit bad > 0 ? 0 : 1 }' "$dir/wlog"; then
  echo "demo-worker: $(awk '$4 != 0' "$dir/wlog" | wc -l) job(s) failed" >&2
  exit 1
fi
