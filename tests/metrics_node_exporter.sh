#!/usr/bin/env bash
# `shmsched metrics --textfile` read by a real consumer: node_exporter's textfile collector
# (Debian's prometheus-node-exporter) publishes the file's series with its own, and reports
# node_textfile_scrape_error 1 for a file its parser refuses. The file is written once; the
# exporter is scraped with curl once it answers (the wait ends on its answer, within 30 s).
# Usage: metrics_node_exporter.sh BUILD_DIR
set -euo pipefail
B=$1/bin/shmsched
exporter=$(command -v prometheus-node-exporter || command -v node_exporter || true)
[ -n "$exporter" ] || { echo "node_exporter is missing: run scripts/setup.sh" >&2; exit 1; }
name=shmst-nodeexp-$$
dir=$(mktemp -d)
pid=
cleanup() {
  local rc=$?
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  "$B" destroy "$name" --force >/dev/null 2>&1 || true
  rm -rf "$dir"
  exit "$rc"
}
trap cleanup EXIT
fail() {
  echo "metrics_node_exporter: FAILED: $*" >&2
  [ -f "$dir/exporter.log" ] && tail -5 "$dir/exporter.log" >&2
  exit 1
}

"$B" create "$name" --class standard:cells=2,queue=8 >/dev/null
"$B" run "$name" -c standard -t a -- true
"$B" metrics "$name" --tenants --textfile "$dir/shmsched.prom"
# A free port: the kernel's choice for a socket bound and closed again.
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$exporter" --collector.disable-defaults --collector.textfile \
  --collector.textfile.directory="$dir" --web.listen-address="127.0.0.1:$port" \
  >"$dir/exporter.log" 2>&1 &
pid=$!
deadline=$((SECONDS + 30))
until curl -sf "http://127.0.0.1:$port/metrics" >"$dir/scrape"; do
  kill -0 "$pid" 2>/dev/null || fail "node_exporter exited"
  ((SECONDS < deadline)) || fail "node_exporter did not answer within 30 s"
  sleep 0.1 # between two tries; what ends the wait is its answer
done
grep -q "^shmsched_up{segment=\"$name\"} 1$" "$dir/scrape" || fail "no shmsched_up in the scrape"
grep -q "^shmsched_grants_total{class=\"standard\",segment=\"$name\"} 1$" "$dir/scrape" ||
  fail "no shmsched_grants_total in the scrape: $(grep shmsched_grants "$dir/scrape")"
grep -q '^node_textfile_scrape_error 0$' "$dir/scrape" ||
  fail "node_exporter could not parse the file: $(grep textfile "$dir/scrape")"
echo "metrics_node_exporter: node_exporter's textfile collector publishes what metrics wrote"
