#!/usr/bin/python3
"""Parse a Prometheus exposition on stdin with python3-prometheus-client's own parser and print
each sample as `name{label=value,...} value` (labels sorted, values unescaped), one per line,
after a `families N` line: what tests/test_cli_view.c checks the exposition against."""
import sys

from prometheus_client.parser import text_string_to_metric_families

families = list(text_string_to_metric_families(sys.stdin.read()))
print(f"families {len(families)}")
for family in families:
    print(f"family {family.name} {family.type}")
    for s in family.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
        print(f"{s.name}{{{labels}}} {s.value:g}")
