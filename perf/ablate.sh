#!/bin/bash
# What each instruction class of the uncontended acquire+release costs: bench_acquire built from
# the committed tree as is ("asis") and with one class taken out at a time, run in interleaved
# rounds on one pinned CPU; medians and ranges per variant (design/fast-path.md, "Where the
# time goes"). The variants are measurements only: each breaks what the class is there
# for (crash safety, a second process, observers), which one process alone in a segment never
# exercises. They are made in copies under a temporary directory; the tree is not touched.
#
# Usage: perf/ablate.sh [--rounds N] [--iters N] [--cpu N] [--system S] [VARIANT...]
#   --rounds 7, --iters 3000000 (pairs per run), --cpu 1, --system shmsched-prepared
#   VARIANT: asis (always run), noclock, nomark, nocellcas, nofastcas, nodetail, nostep, noseal;
#   default: all of them. Output: one line per variant, and the raw figures in $TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=7 iters=3000000 cpu=1 system=shmsched-prepared
while [ $# -gt 0 ]; do
  case "$1" in
  --rounds) rounds=$2; shift 2 ;;
  --iters) iters=$2; shift 2 ;;
  --cpu) cpu=$2; shift 2 ;;
  --system) system=$2; shift 2 ;;
  --*) echo "ablate: unknown option $1" >&2; exit 2 ;;
  *) break ;;
  esac
done
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(noclock nomark nocellcas nofastcas nodetail nostep noseal)

# Each variant: file, then a sed script applied to it (checked: the edit must change the file).
edit_for() {
  case "$1" in
  noclock) # a plain acquire's lease start time: no clock read (what a prepared acquire does)
    echo 'client/request.c' 's/stamp ? shms__coarse_now_ns() : 0/0/' ;;
  nomark) # the release's operation mark: a plain store instead of the locked exchange
    echo 'core/quiesce.c' 's/ck_pr_fas_32(t->word, v);/shms__store_32(t->word, v);/' ;;
  nocellcas) # the release's CAS on the cell word: a plain store
    echo 'core/cell.c' 's/if (!ck_pr_cas_64(&cell->word, expect, free_word))/if ((shms__store_64(\&cell->word, free_word), 0))/' ;;
  nofastcas) # every CAS on the class's fast word: a plain compare and store
    echo 'core/cell.c' 's/ck_pr_cas_64_value(&k->ctl->fast,/plain_cas_64_value(\&k->ctl->fast,/; s/ck_pr_cas_64_value(&(k)->ctl->fast,/plain_cas_64_value(\&(k)->ctl->fast,/; s/^#include "tenant.h"$/#include "tenant.h"\nstatic inline bool plain_cas_64_value(uint64_t *t, uint64_t o, uint64_t n, uint64_t *v) { if (*t == o) { *t = n; return true; } *v = *t; return false; }/' ;;
  nodetail) # forgetting the last failure's detail (a thread-local store) on every call
    echo 'shm/error.c' 's/^void shms__clear_detail(void) { detail\[0\] = .\\0.; }$/void shms__clear_detail(void) {}/' ;;
  nostep) # the crash points (a load and a branch each)
    echo 'shm/crashpoint.h' 's/if (__builtin_expect(shms__crash_at != 0, 0))/if (0)/' ;;
  noseal) # the prepared request's check word (and its incarnation and handle compares)
    echo 'client/prepared.c' 's/  if (w\[P_INCARNATION\] != h->incarnation || w\[P_HANDLE\] != h->prepared_id ||/  if (/; s/w\[P_CHECK\] != seal(h->prepared_key, w) || //' ;;
  *) echo "ablate: unknown variant $1" >&2; return 1 ;;
  esac
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/shms-ablate.XXXXXX")
build() { # variant
  local v=$1 src="$tmp/src-$1"
  mkdir -p "$src"
  git archive HEAD | tar -x -C "$src"
  if [ "$v" != asis ]; then
    local spec file script
    spec=$(edit_for "$v")
    file=${spec%% *} script=${spec#* }
    cp "$src/$file" "$tmp/orig"
    sed -i "$script" "$src/$file"
    if cmp -s "$src/$file" "$tmp/orig"; then
      echo "ablate: variant $v: its edit no longer applies to $file" >&2
      exit 1
    fi
  fi
  cmake -S "$src" -B "$src/b" -DCMAKE_BUILD_TYPE=Release -DSHMS_BUILD_TESTS=OFF \
    -DCMAKE_C_FLAGS=-g >/dev/null
  cmake --build "$src/b" -j2 --target bench_acquire >/dev/null
  cp "$src/b/bin/bench_acquire" "$tmp/bench-$v"
}
all=(asis "${variants[@]}")
for v in "${all[@]}"; do
  echo "ablate: building $v ..." >&2
  build "$v"
done
for ((r = 1; r <= rounds; r++)); do
  for v in "${all[@]}"; do
    printf '%s %s\n' "$v" \
      "$(taskset -c "$cpu" "$tmp/bench-$v" --system "$system" --iters "$iters" | cut -d, -f4)"
  done
done >"$tmp/raw.txt"
echo "ablate: $system, $rounds interleaved rounds of $iters pairs on CPU $cpu; raw: $tmp/raw.txt"
awk '{ v[$1] = v[$1] " " $2 } END {
  for (k in v) {
    n = split(substr(v[k], 2), a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    med[k] = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    lo[k] = a[1]; hi[k] = a[n]
  }
  for (k in med)
    printf "%-10s median %6.1f ns  range %5.1f-%5.1f  saves %5.1f ns\n", k, med[k], lo[k], hi[k], med["asis"] - med[k]
}' "$tmp/raw.txt" | sort
