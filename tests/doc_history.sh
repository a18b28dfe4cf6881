#!/usr/bin/env bash
# The user documentation (README.md, docs/*.md) speaks of what shmsched does, not of how it was
# built: it names none of the project's own tracker items ("issue 15", "#15"), no stage of the
# work ("stop 3", "this round", "the last session", "before this change"), no branch of it
# (i15-membar) and no commit as a point in its history. Another project's item is cited with its
# name: "sidekiq#5741", "moby/moby#40731" (a word or path right before the '#'), "moby pull
# request 40731". The design notes (design/) keep the measurements, not a diary, and are not
# checked here.
# Usage: doc_history.sh SOURCE_DIR
set -euo pipefail
src=$1
cd "$src"
status=0
for f in README.md docs/*.md; do
  perl -ne '
    BEGIN { $f = shift @ARGV; $bad = 0 }
    my @why;
    push @why, "a tracker item of ours" if /\b[Ii]ssues? #?[0-9]+/;
    push @why, "a bare #N (cite another project as name#N)" if /(?:^|[^[:alnum:]_\/.#-])#[0-9]+\b/;
    push @why, "a stage of the work" if /\b[Ss]tops? [0-9]+\b/
      || /\b(?:this|that|the last|last|the previous|previous|an earlier|the next|a later) (?:session|round)\b/i
      || /\bsessions? [0-9]+/i || /\bround [0-9]+ of\b/i;
    push @why, "the issue it was done for" if /\b(?:[Tt]he|[Tt]his|[Tt]hat) issue\b/;
    push @why, "a work branch" if /\bi[0-9]+-[a-z]+\b/;
    push @why, "the order of the work" if /\b(?:was|were) added later\b/i
      || /\bbefore this change\b/i || /\bsince this change\b/i
      || /\b(?:earlier|previous) versions? (?:of this|let|did)\b/i || /\btwo earlier versions\b/i
      || /\b(?:this|the last|the previous|three|two) (?:runs?|commits?) before (?:this|it)\b/i;
    push @why, "a commit as history" if /\bcommits? [0-9a-f]{7,40}\b/
      || /(?<![[:alnum:]_.\/-])(?=[0-9a-f]{7,12}\b)(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,12}\b/;
    if (@why) { print "$f:$.: " . join(", ", @why) . ": $_"; $bad = 1 }
    END { exit $bad }
  ' "$f" "$f" || status=1
done
if [ "$status" -ne 0 ]; then
  echo "doc_history: the lines above speak of how shmsched was built, not of what it does" >&2
  exit 1
fi
echo "doc_history: README.md and docs/*.md name no work item, stage of the work or commit"
