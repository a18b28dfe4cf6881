#!/usr/bin/env bash
# The setgid front end end to end (docs/security.md, "A real boundary"): a copy of the CLI
# chowned to a group made for the test and chmod g+s; a 0660 segment of that group; the user
# `nobody`, not in it, can use the segment only through that copy, only as its own tenant, not
# as an admin; its commands do not get the group and cannot read the CLI's memory; the
# environment does not steer the setgid CLI. Needs root; skips (77) with a message otherwise.
# Usage: setgid_e2e.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 bin=$2/bin/shmsched
skip() {
  echo "setgid_e2e: skipped: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "it needs root (to make a group, install a setgid copy, run as nobody)"
id nobody >/dev/null 2>&1 || skip "there is no user 'nobody'"
command -v groupadd >/dev/null || skip "there is no groupadd"
command -v runuser >/dev/null || skip "there is no runuser"

grp=shmst$$
seg=shmst-$$-setgid
work=$(mktemp -d /tmp/shmst-setgid.XXXXXX)
holder=
cleanup() {
  [ -z "$holder" ] || kill "$holder" 2>/dev/null || true
  "$bin" destroy "$seg" --force >/dev/null 2>&1 || true
  groupdel "$grp" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "setgid_e2e: FAIL: $*" >&2
  exit 1
}
chmod 0755 "$work"
nobody_gid=$(id -g nobody)
# The front end installed as docs/security.md says (the script makes the group); and a plain
# copy for contrast.
"$src/scripts/install-setgid.sh" --group "$grp" --binary "$bin" "$work/shmsched" >/dev/null
gid=$(getent group "$grp" | cut -d: -f3)
install -m 0755 "$bin" "$work/plain"
sg=$work/shmsched
as_nobody() { runuser -u nobody -- "$@"; }

"$bin" create "$seg" --class standard:cells=1,queue=8,tenant=user \
  --class small:cells=1,queue=4,mode=worker,payload=256 --mode 0660 --group "$grp" >/dev/null

# 1. Without the group, nobody cannot open the segment at all.
if out=$(as_nobody "$work/plain" status "$seg" 2>&1); then fail "the plain CLI opened it: $out"; fi
grep -q '^shmsched: permission-denied' <<<"$out" || fail "plain CLI: $out"

# 2. Through the setgid CLI it runs a command as its own tenant; the command has neither the
#    group (real, effective, saved, filesystem gid, supplementary) nor access to run's memory.
#    The commands are not shells: sh and bash drop a differing effective gid themselves.
out=$(as_nobody "$sg" run "$seg" -c standard -t nobody -- grep -E '^(Gid|Groups):' \
  /proc/self/status) || fail "run through the setgid CLI: $out"
s="[[:space:]]+"
want="^Gid:$s${nobody_gid}$s${nobody_gid}$s${nobody_gid}$s${nobody_gid}\$"
grep -Eq "$want" <<<"$out" || fail "the command's gids are not nobody's alone: $out"
grep -Eq "^Groups:.*\b$gid\b" <<<"$out" && fail "the command kept the group: $out"
# shellcheck disable=SC2016 # perl's own variables
out=$(as_nobody "$sg" run "$seg" -c standard -t nobody -- perl -e \
  'print open(my $f, "<", "/proc/" . getppid() . "/maps") ? "maps: readable\n" : "maps: denied\n"') ||
  fail "run perl through the setgid CLI: $out"
[ "$out" = "maps: denied" ] || fail "the command could read the setgid CLI's memory map: $out"

# 3. The environment does not steer it: SHMSCHED_CGROUP would make a cgroup directory here.
mkdir -m 0777 "$work/cg"
SHMSCHED_CGROUP=$work/cg as_nobody "$sg" run "$seg" -c standard -t nobody -- true ||
  fail "run with SHMSCHED_CGROUP set"
[ -z "$(ls -A "$work/cg")" ] || fail "the setgid CLI followed SHMSCHED_CGROUP: $(ls "$work/cg")"
# Nor does the group open files for the user: the segment itself as a job's payload.
if out=$(as_nobody "$sg" submit "$seg" -c small -t nobody --payload-file "/dev/shm/$seg" 2>&1); then
  fail "the setgid CLI read the segment as a payload for nobody"
fi
grep -q "payload-file '/dev/shm/$seg': cannot open: Permission denied" <<<"$out" ||
  fail "payload-file of the segment: $out"

# 4. Impersonation is refused, and changes nothing.
if out=$(as_nobody "$sg" run "$seg" -c standard -t root -- true 2>&1); then
  fail "nobody ran as tenant root"
fi
grep -q "permission-denied: .*tenant 'root' is not the caller's login name 'nobody'" <<<"$out" ||
  fail "impersonation: $out"

# 5. Admin operations are refused to nobody, and allowed to the owner (root).
for op in "drain $seg" "drain $seg --undo" "resume $seg" "repair $seg --class standard" \
  "check $seg --repair" "supervise $seg" "destroy $seg"; do
  # shellcheck disable=SC2086
  if out=$(as_nobody "$sg" $op 2>&1); then fail "nobody may '$op': $out"; fi
  grep -q "^shmsched: permission-denied: .*only the segment's owner (uid 0) and root may" \
    <<<"$out" || fail "'$op' as nobody: $out"
done
"$bin" status "$seg" | grep -qx 'state: active' || fail "a refused operation changed the state"
"$bin" drain "$seg" >/dev/null
rc=0
as_nobody "$sg" run "$seg" -c standard -t nobody -- true 2>/dev/null || rc=$?
[ "$rc" = 75 ] || fail "run on a drained segment exited $rc, not 75"
"$bin" drain "$seg" --undo | grep -q "is active" || fail "drain --undo"
as_nobody "$sg" run "$seg" -c standard -t nobody -- true || fail "run after the drain was lifted"

# 6. Cancel: root holds the one cell; requests queue behind it.
mkfifo "$work/held" "$work/release" "$work/t_nobody" "$work/t_root" "$work/t_own"
"$bin" run "$seg" -c standard -t root -- sh -c "echo held >'$work/held'; read _ <'$work/release'" &
holder=$!
read -r _ <"$work/held"

# Root cancels nobody's request: the owner of the segment may.
as_nobody "$sg" run "$seg" -c standard -t nobody --print-ticket -- true 2>"$work/t_nobody" &
queued=$!
exec 4<"$work/t_nobody"
read -r ticket <&4
out=$(as_nobody "$sg" explain "$seg" "$ticket") || fail "explain as nobody: $out"
grep -qx 'user: nobody' <<<"$out" || fail "explain does not name the user: $out"
"$bin" cancel "$seg" "$ticket" >/dev/null || fail "root could not cancel nobody's request"
rc=0
wait "$queued" || rc=$?
[ "$rc" = 75 ] || fail "nobody's cancelled run exited $rc, not 75"
exec 4<&-

# Nobody may not cancel root's request, but may cancel its own.
"$bin" run "$seg" -c standard -t root --print-ticket -- true 2>"$work/t_root" &
rootq=$!
exec 5<"$work/t_root"
read -r ticket <&5
if out=$(as_nobody "$sg" cancel "$seg" "$ticket" 2>&1); then fail "nobody cancelled root's"; fi
grep -q "permission-denied: .*cancel another user's request (uid 0)" <<<"$out" ||
  fail "cancel of root's as nobody: $out"
"$bin" explain "$seg" "$ticket" | grep -qx 'state: queued' || fail "root's request was touched"
as_nobody "$sg" run "$seg" -c standard -t nobody --print-ticket -- true 2>"$work/t_own" &
ownq=$!
exec 6<"$work/t_own"
read -r ticket <&6
as_nobody "$sg" cancel "$seg" "$ticket" >/dev/null || fail "nobody could not cancel its own"
rc=0
wait "$ownq" || rc=$?
[ "$rc" = 75 ] || fail "nobody's own cancelled run exited $rc, not 75"
echo >"$work/release"
wait "$holder" || fail "root's holder failed"
holder=
wait "$rootq" || fail "root's queued run failed"
exec 5<&- 6<&-

# 7. A worker's job command does not get the group either.
as_nobody "$sg" worker "$seg" -c small --jobs 1 -- grep '^Gid:' /proc/self/status &
worker=$!
out=$("$bin" submit "$seg" -c small -t root --wait) || fail "submit to nobody's worker: $out"
wait "$worker" || fail "nobody's worker failed"
grep -Eq "$want" <<<"$out" || fail "the worker's command kept the group: $out"

echo "setgid_e2e: nobody used the segment only through the setgid CLI, as itself, without the group"
