#!/usr/bin/env bash
# The Prometheus configurations and alert rules the docs show are valid: each YAML block after a
# "<!-- prometheus-config -->" or "<!-- prometheus-rules -->" marker in docs/operations.md (one
# segment's), or "<!-- prometheus-config-nodes -->" or "<!-- prometheus-rules-nodes -->" in
# docs/scaling.md (across nodes), is checked with promtool (Debian's prometheus package;
# scripts/setup.sh installs it), and the rules are run on the series of tests/alert_rules.yml
# and tests/alert_rules_nodes.yml.
# Usage: doc_prometheus.sh SOURCE_DIR
set -euo pipefail
src=$1
command -v promtool >/dev/null || { echo "promtool is missing: run scripts/setup.sh" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# The fenced block that follows a marker line of DOC, into FILE.
block() {
  awk -v m="<!-- $2 -->" '
    $0 == m {want = 1; next}
    want && /^```yaml$/ {inside = 1; next}
    inside && /^```$/ {exit}
    inside {print}
  ' "$src/docs/$1" >"$3"
  [ -s "$3" ] || { echo "docs/$1: no YAML block after <!-- $2 -->" >&2; exit 1; }
}
block operations.md prometheus-config "$dir/prometheus.yml"
block operations.md prometheus-rules "$dir/rules.yml"
block scaling.md prometheus-config-nodes "$dir/prometheus_nodes.yml"
block scaling.md prometheus-rules-nodes "$dir/rules_nodes.yml"
promtool check config "$dir/prometheus.yml"
promtool check config "$dir/prometheus_nodes.yml"
promtool check rules "$dir/rules.yml" "$dir/rules_nodes.yml"
# Each rule fires on the series that should fire it, and on no other.
cp "$src/tests/alert_rules.yml" "$src/tests/alert_rules_nodes.yml" "$dir/"
promtool test rules "$dir/alert_rules.yml" "$dir/alert_rules_nodes.yml"
echo "doc_prometheus: the scrape configurations and the alert rules pass promtool, and fire as tested"
