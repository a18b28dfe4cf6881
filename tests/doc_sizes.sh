#!/usr/bin/env bash
# The byte counts docs/cli.md shows are what this build creates: every
# "# created segment 'NAME': B bytes" comment and every "size_bytes: B" line of a
# "$ shmsched status NAME" example is checked against the create command for NAME that comes
# last before it in the page's examples, run under a unique name. (Outputs that cannot vary; docs/cli.md says which vary.)
# Usage: doc_sizes.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
# One line per size the page claims: NAME, bytes, and the create command for NAME.
claims=$(awk '
  /^```sh$/ {sh = 1; next}
  /^```$/ && sh {sh = 0; next}
  /^```/ {plain = 1; next}
  /^```$/ && plain {plain = 0; next}
  sh {
    line = cont $0; cont = ""
    if (line ~ /\\$/) { sub(/\\$/, "", line); cont = line; next }
    sub(/[ \t]+#.*$/, "", line)
    if (line ~ /^shmsched create [^ ]+ / && line !~ /\$\(|--config/) {
      split(line, w, " "); cmd[w[3]] = line
    }
    if (match($0, /^# created segment .[^\047]+.: [0-9]+ bytes/)) {
      split($0, q, "\047"); n = $0; sub(/^.*: /, "", n); sub(/ bytes.*$/, "", n)
      claim[++k] = q[2] "\t" n "\t" cmd[q[2]]
    }
  }
  /^\$ shmsched status [^ ]+$/ { status = $4 }
  /^size_bytes: [0-9]+$/ && status != "" { claim[++k] = status "\t" $2 "\t" cmd[status]; status = "" }
  END { for (i = 1; i <= k; i++) print claim[i] }
' "$src/docs/cli.md")
[ -n "$claims" ] || { echo "doc_sizes: no sizes found in docs/cli.md" >&2; exit 1; }
fail=0 n=0
while IFS=$'\t' read -r name bytes cmd; do
  [ -n "$cmd" ] || { echo "doc_sizes: no create command for '$name' in docs/cli.md" >&2; fail=1; continue; }
  unique="docsize-$$-$name"
  read -r -a args <<<"${cmd#shmsched create "$name" }"
  out=$("$build/bin/shmsched" create "$unique" "${args[@]}")
  "$build/bin/shmsched" destroy "$unique" >/dev/null
  got=$(sed -n "s/^created segment '$unique': \([0-9]*\) bytes.*/\1/p" <<<"$out")
  if [ "$got" != "$bytes" ]; then
    echo "doc_sizes: docs/cli.md says segment '$name' takes $bytes bytes; '$cmd' creates $got" >&2
    fail=1
  fi
  n=$((n + 1))
done <<<"$claims"
[ "$fail" = 0 ] && echo "doc_sizes: the $n sizes docs/cli.md shows are what this build creates"
exit "$fail"
