#!/usr/bin/env bash
# The Prometheus configuration and alert rules docs/operations.md shows are valid: each YAML
# block after a "<!-- prometheus-config -->" or "<!-- prometheus-rules -->" marker is checked
# with promtool (Debian's prometheus package; scripts/setup.sh installs it), and the rules are
# run on the series of tests/alert_rules.yml.
# Usage: doc_prometheus.sh SOURCE_DIR
set -euo pipefail
src=$1
command -v promtool >/dev/null || { echo "promtool is missing: run scripts/setup.sh" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The fenced block that follows a marker line, into FILE.
block() {
  awk -v m="<!-- $1 -->" '
    $0 == m {want = 1; next}
    want && /^```yaml$/ {inside = 1; next}
    inside && /^```$/ {exit}
    inside {print}
  ' "$src/docs/operations.md" >"$2"
  [ -s "$2" ] || { echo "docs/operations.md: no YAML block after <!-- $1 -->" >&2; exit 1; }
}
block prometheus-config "$dir/prometheus.yml"
block prometheus-rules "$dir/rules.yml"
promtool check config "$dir/prometheus.yml"
promtool check rules "$dir/rules.yml"
# Each rule fires on the series that should fire it, and on no other (tests/alert_rules.yml).
cp "$src/tests/alert_rules.yml" "$dir/alert_rules.yml"
promtool test rules "$dir/alert_rules.yml"
echo "doc_prometheus: the scrape configuration and the alert rules pass promtool, and fire as tested"
