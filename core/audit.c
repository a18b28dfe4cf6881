/*
 * shms_check: audit every invariant of every class, holding each class still
 * (frozen and quiescent) while it is read, so that what is reported is a
 * violation, never a transition caught half way.
 */
#include <ck_pr.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../shm/atomic.h"
#include "../shm/error.h"
#include "../shm/hbm.h"
#include "../shm/proc.h"
#include "fair.h"
#include "quota.h"
#include "sched.h"
#include "tenant.h"

struct audit {
  struct shms *h;
  const struct shms__cls *k;
  char *out;
  size_t cap, len;
  uint32_t violations;
};

/* Append to the report, never past its end. */
static void append(struct audit *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(struct audit *a, const char *fmt, ...) {
  if (a->len + 1 >= a->cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(a->out + a->len, a->cap - a->len, fmt, ap);
  va_end(ap);
  if (n > 0)
    a->len += (size_t)n < a->cap - a->len ? (size_t)n : a->cap - a->len - 1;
}

/* One line: "class C: " what, then suffix. */
static void vreport(struct audit *a, const char *suffix, const char *fmt, va_list ap) {
  a->violations++;
  char what[512];
  vsnprintf(what, sizeof what, fmt, ap); // NOLINT(clang-analyzer-valist.Uninitialized)
  append(a, "class %s: %s%s\n", shms_class_name(a->k->id), what, suffix);
}

static void violation(struct audit *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(struct audit *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(a, "", fmt, ap);
  va_end(ap);
}

/*
 * A violation recovery cannot repair: a state word holding no valid state.
 * Recovery settles what the dead left and recomputes every count and index
 * from the state words; it cannot know what a corrupt word should have said.
 */
static void corrupt(struct audit *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void corrupt(struct audit *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(a, " " SHMS_CHECK_UNREPAIRABLE ": a corrupt state word)", fmt, ap);
  va_end(ap);
}

static int alive(struct audit *a, uint32_t owner) { return !shms__owner_dead(a->h, owner); }

static void audit_cells(struct audit *a, uint32_t *quarantined) {
  const struct shms__cls *k = a->k;
  *quarantined = 0;
  for (uint32_t c = 0; c < k->ncells; c++) {
    const struct shms__cell *cell = &k->cells[c];
    uint64_t w = shms__load_64((uint64_t *)&cell->word);
    uint32_t st = SHMS__CELL_STATE(w), ref = cell->slot;
    int worker = k->cfg->mode == SHMS_MODE_WORKER;
    *quarantined += st == SHMS__CELL_QUARANTINED;
    if (st < SHMS__CELL_AVAILABLE || st > SHMS__CELL_BOUND)
      corrupt(a, "cell %u: state %u is not a cell state", c, st);
    else if (st == SHMS__CELL_OFFLINE && !worker)
      corrupt(a, "cell %u: offline in a lease class", c);
    else if ((st == SHMS__CELL_RESERVED || st == SHMS__CELL_BOUND) && worker)
      corrupt(a, "cell %u: %s in a worker class", c,
              st == SHMS__CELL_RESERVED ? "reserved" : "bound to a lead");
    if (st == SHMS__CELL_RESERVED && !worker && k->ctl->gather_slot == 0)
      violation(a, "cell %u: reserved, and no request gathers cells (needs recovery)", c);
    if (st == SHMS__CELL_BOUND && !worker && shms__companion_orphaned(k, c))
      violation(a, "cell %u: bound to lead cell %u, whose lease has ended (needs recovery)", c,
                cell->lead - 1);
    if (st == SHMS__CELL_GRANTED) {
      const struct shms__slot *s = ref >= 1 && ref <= k->nslots ? shms__slot_at(k, ref - 1) : NULL;
      if (s == NULL || SHMS__SLOT_STATE(s->word) != SHMS__SLOT_GRANTED || s->cell != c)
        violation(a, "cell %u: granted to slot %u, which is not granted this cell", c, ref);
    }
    if (st == SHMS__CELL_LEASED && !alive(a, worker ? cell->worker : SHMS__CELL_OWNER(w)))
      violation(a, "cell %u: leased to a dead process (needs recovery)", c);
    if (worker && (st == SHMS__CELL_AVAILABLE || st == SHMS__CELL_GRANTED) &&
        !alive(a, cell->worker))
      violation(a, "cell %u: %s, bound to a dead worker %u (needs recovery)", c,
                st == SHMS__CELL_AVAILABLE ? "idle" : "granted", cell->worker);
  }
}

/*
 * Let go of the mapping of slots [begin, end), which the loop has read: a check reads every slot,
 * and with them it would keep the whole segment mapped (a 4 GB segment, 4 GB resident).
 * Only this process's page tables change: the pages are the segment's, and the next read of
 * one maps it again from the segment's file (in /dev/shm or wherever it is).
 */
#define UNMAP_BYTES (16u << 20) /* of slots read */

static void unmap_read(const struct shms__cls *k, uint32_t begin, uint32_t end) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = ((uintptr_t)shms__slot_at(k, begin) + page - 1) & ~(page - 1);
  uintptr_t hi = (uintptr_t)shms__slot_at(k, end) & ~(page - 1);
  if (hi > lo)
    madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* A keyed job whose submitter's share a recovery dropped (docs/protocol.md, "Keyed jobs") goes on
 * for its joiners, still in the dead submitter's name: waited for, not abandoned. */
static int joiners_wait(const struct shms__slot *s, uint64_t w) {
  if (!(shms__load_32((uint32_t *)&s->options) & SHMS__OPT_KEYED))
    return 0;
  uint64_t v = shms__load_64((uint64_t *)&s->waiters);
  return SHMS__WAIT_SEQ(v) == SHMS__SLOT_SEQ(w) && !(v & SHMS__WAIT_OWNER) &&
         SHMS__WAIT_COUNT(v) != 0;
}

static void audit_slots(struct audit *a, uint32_t *queued, uint32_t *used) {
  const struct shms__cls *k = a->k;
  *queued = *used = 0;
  uint32_t every = k->slot_size < UNMAP_BYTES ? UNMAP_BYTES / k->slot_size : 1;
  for (uint32_t i = 0; i < k->nslots; i++) {
    if (i % every == 0 && i > 0)
      unmap_read(k, i - every, i);
    const struct shms__slot *s = shms__slot_at(k, i);
    uint64_t w = shms__load_64((uint64_t *)&s->word);
    uint32_t st = SHMS__SLOT_STATE(w);
    int free_bit = shms__hbm_test(&k->sfree, i);
    if (st > SHMS__SLOT_RUNNING)
      corrupt(a, "slot %u: state %u is not a slot state", i, st);
    if (st == SHMS__SLOT_FREE) {
      if (!free_bit)
        violation(a, "slot %u: free but missing from the free-slot map (lost)", i);
      continue;
    }
    (*used)++;
    if (free_bit)
      violation(a, "slot %u: in use (state %u) but marked free", i, st);
    if (st == SHMS__SLOT_CLAIMED)
      violation(a, "slot %u: claimed by an enqueue that never finished (needs recovery)", i);
    if (st == SHMS__SLOT_QUEUED) {
      (*queued)++;
      /* LATE: its grant was revoked, and its waiter re-indexes it when it comes back. */
      if (!(w & (SHMS__SLOT_INDEXED | SHMS__SLOT_LATE)) && !shms__hbm_test(&k->sattn, i))
        violation(a,
                  "slot %u: queued but neither indexed nor awaiting the dispatcher (sequence "
                  "%llu, flags 0x%x, owner %u %s, tenant '%.*s')",
                  i, (unsigned long long)shms__load_64((uint64_t *)&s->seq), (unsigned)(w & 0xff0u),
                  s->owner, alive(a, s->owner) ? "alive" : "dead", SHMS_TENANT_MAX, s->tenant_name);
    }
    if (st == SHMS__SLOT_GRANTED) {
      const struct shms__cell *cell = s->cell < k->ncells ? &k->cells[s->cell] : NULL;
      uint64_t cw = cell ? shms__load_64((uint64_t *)&cell->word) : 0;
      if (cell == NULL || SHMS__CELL_STATE(cw) != SHMS__CELL_GRANTED || cell->slot != i + 1 ||
          SHMS__CELL_GEN(cw) != s->generation)
        violation(a,
                  "slot %u: granted cell %u (generation %u), which is not granted to it: a lost "
                  "grant, its waiter waits for ever (sequence %llu)",
                  i, s->cell, s->generation,
                  (unsigned long long)shms__load_64((uint64_t *)&s->seq));
    }
    if ((w & SHMS__SLOT_LATE) && (st != SHMS__SLOT_QUEUED || (w & SHMS__SLOT_INDEXED)))
      violation(a, "slot %u: late (its grant revoked) in state %u, flags 0x%x", i, st,
                (unsigned)(w & 0xff0u));
    if ((w & SHMS__SLOT_INDEXED) && st != SHMS__SLOT_QUEUED && st != SHMS__SLOT_SETTLED)
      violation(a, "slot %u: indexed in state %u", i, st);
    if ((st == SHMS__SLOT_QUEUED || st == SHMS__SLOT_GRANTED) && !alive(a, s->owner) &&
        !joiners_wait(s, w))
      violation(a, "slot %u: waiting for a dead owner (needs recovery)", i);
  }
}

/* Tenant records, the ring and their counts against the indexed slots. */
static void audit_tenants(struct audit *a) {
  const struct shms__cls *k = a->k;
  uint32_t in_ring = 0, with_work = 0;
  for (uint32_t t = 0; t < k->ntenants; t++) {
    const struct shms__tenant *r = &k->tenants[t];
    if (!(r->flags & SHMS__TENANT_INUSE))
      continue;
    uint32_t n = 0, steps = 0;
    for (uint32_t x = r->age_head; x >= 1 && x <= k->nslots && steps++ < k->nslots;
         x = shms__slot_at(k, x - 1)->age_next)
      n++;
    if (n != r->queued)
      violation(a, "tenant '%.31s': %u requests in its list, its count says %u", r->name, n,
                r->queued);
    with_work += r->queued > 0;
    int belongs = r->queued > 0 && !shms__tenant_at_limit(k, t + 1);
    if (belongs != ((r->flags & SHMS__TENANT_INRING) != 0))
      violation(a, "tenant '%.31s': %s the ring but has %u queued", r->name,
                belongs ? "missing from" : "in", r->queued);
    in_ring += (r->flags & SHMS__TENANT_INRING) != 0;
    uint32_t counted = 0;
    for (uint32_t c = 0; c < k->ncells; c++) {
      uint32_t st = SHMS__CELL_STATE(k->cells[c].word);
      counted +=
          (st == SHMS__CELL_LEASED || st == SHMS__CELL_GRANTED) && k->cells[c].tenant == t + 1;
    }
    if (counted != r->active)
      violation(a, "tenant '%.31s': %u leases counted, %u held", r->name, r->active, counted);
  }
  if (in_ring != k->ctl->ring_len)
    violation(a, "ring: %u tenants in it, its length says %u", in_ring, k->ctl->ring_len);
  if (with_work != k->ctl->tenants_queued)
    violation(a, "%u tenants have queued work, the count says %u", with_work,
              k->ctl->tenants_queued);
}

/* A class that overtakes: its list by enqueue time holds exactly the indexed requests, oldest
 * first (its head bounds the overtaking: docs/protocol.md, "Bounded overtaking"). */
static void audit_by_time(struct audit *a) {
  const struct shms__cls *k = a->k;
  if (k->overtake_ns == 0)
    return;
  uint32_t n = 0, indexed = 0, steps = 0, prev = 0;
  for (uint32_t t = 0; t < k->ntenants; t++)
    if (k->tenants[t].flags & SHMS__TENANT_INUSE)
      indexed += k->tenants[t].queued;
  for (uint32_t x = k->ctl->all_head; x >= 1 && x <= k->nslots && steps++ < k->nslots;
       prev = x, x = shms__slot_at(k, x - 1)->all_next) {
    const struct shms__slot *s = shms__slot_at(k, x - 1);
    n++;
    if (!(shms__load_64((uint64_t *)&s->word) & SHMS__SLOT_INDEXED))
      violation(a, "slot %u: in the class's list by time but not indexed", x - 1);
    if (s->all_prev != prev)
      violation(a, "slot %u: the list by time links back to %u, not %u", x - 1, s->all_prev, prev);
    if (prev != 0 && shms__slot_at(k, prev - 1)->enqueue_ns > s->enqueue_ns)
      violation(a, "slot %u: in the list by time after a younger request (slot %u)", x - 1,
                prev - 1);
  }
  if (n != indexed)
    violation(a, "the class's list by time holds %u requests, %u are indexed", n, indexed);
}

/* The calendar of a class fair by time: each bucket's list whole, its members filed under it
 * (the quantum of their charge, or the base's for those marked behind it, and counted), within
 * its reach, oldest turn first; a bit for each bucket with members; the base's bucket the first
 * with members. Returns how many it holds. */
static uint32_t audit_calendar(struct audit *a) {
  const struct shms__cls *k = a->k;
  const struct shms__class_ctl *ctl = k->ctl;
  uint64_t base = ctl->cal_base;
  uint32_t filed = 0, behind = 0;
  for (uint32_t b = 0; b < SHMS__FAIR_BUCKETS; b++) {
    uint32_t first = ctl->cal_head[b];
    if ((first != 0) != ((ctl->cal_bits >> b) & 1))
      violation(a, "calendar: bucket %u %s members, its bit says otherwise", b,
                first != 0 ? "has" : "has no");
    uint32_t at = first,
             prev = first != 0 && first <= k->ntenants ? shms__tenant_at(k, first)->cal_prev : 0;
    uint64_t q = base + ((b - base) & (SHMS__FAIR_BUCKETS - 1)), turn = 0;
    for (uint32_t n = 0; first != 0; n++) {
      if (at < 1 || at > k->ntenants || n >= k->ntenants) {
        violation(a, "calendar: bucket %u's list is torn", b);
        break;
      }
      const struct shms__tenant *t = shms__tenant_at(k, at);
      uint64_t tq = t->vt >> SHMS__FAIR_QUANTUM_SHIFT;
      if (t->heap_pos != (SHMS__FAIR_FILED | b) || t->cal_prev != prev)
        violation(a, "'%.31s': in calendar bucket %u, its record says otherwise", t->name, b);
      if ((tq > base ? tq : base) != q)
        violation(a, "'%.31s': in calendar bucket %u (quantum %llu), charged for quantum %llu",
                  t->name, b, (unsigned long long)q, (unsigned long long)tq);
      if (!(t->flags & SHMS__TENANT_BEHIND) != (tq >= base))
        violation(a, "'%.31s': in calendar bucket %u, %s behind its base", t->name, b,
                  tq >= base ? "marked" : "not marked");
      behind += (t->flags & SHMS__TENANT_BEHIND) != 0;
      if (n > 0 && t->turn < turn)
        violation(a, "'%.31s': in calendar bucket %u after a newer turn", t->name, b);
      turn = t->turn;
      filed++;
      prev = at;
      at = t->cal_next;
      if (at == first)
        break;
    }
  }
  if (ctl->cal_bits != 0 && ctl->cal_head[base & (SHMS__FAIR_BUCKETS - 1)] == 0)
    violation(a, "calendar: its base's bucket has no members");
  if (behind != ctl->cal_behind)
    violation(a, "calendar: %u members behind its base, it counts %u", behind, ctl->cal_behind);
  return filed;
}

/* A class fair by time: its order (calendar and heap) holds exactly the ring's tenants without
 * a team and the teams with a member in it, each where its record says; the heap holds only
 * those beyond the calendar's reach (or all, the calendar empty), none before its parent; every
 * member of the ring in a team is in its team's heap (core/fair.c). */
static void audit_heap(struct audit *a) {
  const struct shms__cls *k = a->k;
  if (!k->timed)
    return;
  uint32_t n = k->ctl->heap_len, turns = 0, filed = 0;
  for (uint32_t i = 0; i < k->ntenants; i++) {
    const struct shms__tenant *r = &k->tenants[i];
    int in_ring = (r->flags & (SHMS__TENANT_INUSE | SHMS__TENANT_INRING)) ==
                  (SHMS__TENANT_INUSE | SHMS__TENANT_INRING);
    turns += (in_ring && r->team == 0) || ((r->flags & SHMS__TENANT_TEAM) && r->mroot != 0);
    filed += (r->heap_pos & SHMS__FAIR_FILED) != 0;
    if (in_ring && r->team != 0 && !(r->flags & SHMS__TENANT_MEMBER))
      violation(a, "tenant '%.31s': in the ring, not in its team's heap", r->name);
  }
  uint32_t listed = audit_calendar(a);
  if (listed != filed)
    violation(a, "calendar: %u in its buckets, %u records say they are", listed, filed);
  if (n + filed != turns)
    violation(a, "heap: %u tenants and teams in it and %u in the calendar, %u have a turn", n,
              filed, turns);
  for (uint32_t pos = 0; pos < n && pos < k->ntenants; pos++) {
    uint32_t ref = k->theap[pos].ref;
    if (ref < 1 || ref > k->ntenants) {
      violation(a, "heap: place %u holds %u, not a tenant", pos, ref);
      continue;
    }
    const struct shms__tenant *t = shms__tenant_at(k, ref);
    int has_turn = t->flags & SHMS__TENANT_TEAM ? t->mroot != 0 : t->flags & SHMS__TENANT_INRING;
    if (t->heap_pos != pos + 1 || !has_turn)
      violation(a, "%s '%.31s': at heap place %u, its record says %u%s",
                t->flags & SHMS__TENANT_TEAM ? "team" : "tenant", t->name, pos,
                t->heap_pos ? t->heap_pos - 1 : UINT32_MAX, has_turn ? "" : " (and no turn)");
    if (k->theap[pos].vt != t->vt || k->theap[pos].turn != t->turn)
      violation(a, "%s '%.31s': at heap place %u, ordered by a charge or turn not its record's",
                t->flags & SHMS__TENANT_TEAM ? "team" : "tenant", t->name, pos);
    if (k->ctl->cal_bits != 0 &&
        (t->vt >> SHMS__FAIR_QUANTUM_SHIFT) < k->ctl->cal_base + SHMS__FAIR_BUCKETS)
      violation(a, "%s '%.31s': in the heap, charged within the calendar's reach",
                t->flags & SHMS__TENANT_TEAM ? "team" : "tenant", t->name);
    uint32_t up = pos ? k->theap[(pos - 1) / 2].ref : 0;
    if (up >= 1 && up <= k->ntenants && shms__fair_before(t, shms__tenant_at(k, up)))
      violation(a, "tenant '%.31s': in the heap below '%.31s', charged more", t->name,
                shms__tenant_at(k, up)->name);
  }
}

/* Each quota's units in use in the class equal the units its leases hold. */
static void audit_quotas(struct audit *a) {
  const struct shms__cls *k = a->k;
  for (uint32_t q = 0; q < SHMS_QUOTAS_MAX; q++) {
    const struct shms__quota *e = &k->quotas[q];
    if (shms__load_32((uint32_t *)&e->state) != SHMS__QUOTA_LIVE)
      continue;
    uint32_t held = shms__quota_count(k, q);
    uint32_t used = SHMS__QUOTA_FIELD(shms__load_64((uint64_t *)&e->used), k->id);
    if (used != held)
      violation(a, "quota '%.31s': %u units in use, %u held by leases", e->name, used, held);
  }
}

static void audit_class(struct audit *a) {
  const struct shms__cls *k = a->k;
  uint32_t quarantined, queued, used;
  audit_cells(a, &quarantined);
  audit_slots(a, &queued, &used);
  audit_tenants(a);
  audit_by_time(a);
  audit_heap(a);
  audit_quotas(a);
  uint64_t fast = shms__load_64(&k->ctl->fast);
  uint32_t field = shms__fast_free_field(k);
  if (SHMS__FAST_LOW(fast) != field)
    violation(a,
              k->fast_map ? "free-cell map %#x, but the available cells are %#x"
                          : "free count %u, but %u cells are available",
              SHMS__FAST_LOW(fast), field);
  if (SHMS__FAST_QUEUED(fast) != queued)
    violation(a, "queued count %u, but %u requests are queued", SHMS__FAST_QUEUED(fast), queued);
  if (shms__load_32(&k->ctl->used) != used)
    violation(a, "used count %u, but %u slots are in use", k->ctl->used, used);
  if (shms__load_32(&k->ctl->quarantined) != quarantined)
    violation(a, "quarantined count %u, but %u cells are quarantined", k->ctl->quarantined,
              quarantined);
  if (shms__load_32(&k->ctl->obs_seq) & 1)
    violation(a, "the observation sequence is odd while the class stands still (a writer died)");
  uint64_t baton = shms__load_64(&k->ctl->baton);
  if (baton != 0) {
    uint32_t idx = SHMS__OWNER_INDEX((uint32_t)baton);
    const struct shms__proc *p = idx < a->h->layout.procs_count ? shms__proc_at(a->h, idx) : NULL;
    violation(a,
              "the dispatcher baton is held while the class stands still (holder pid %d, %s, "
              "%u operations under way)",
              p ? p->pid : -1, alive(a, (uint32_t)baton) ? "alive" : "dead: needs recovery",
              p ? p->ops[k->id] + (uint32_t)__builtin_popcount(p->marks_used & SHMS__MARKS_CLAIMED)
                : 0);
  }
}

int shms_check(shms_t *h, char *report, size_t cap, uint32_t *violations) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if (report == NULL || cap == 0 || violations == NULL)
    return shms__fail(SHMS_EINVAL, "report or violations is NULL");
  struct audit a = {.h = h, .out = report, .cap = cap};
  report[0] = '\0';
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    if (h->cls[c].id < 0)
      continue;
    a.k = &h->cls[c];
    if (shms__freeze(h, a.k) != SHMS_OK) {
      /* Held up by a process (stopped, or a corrupt word): said, and the class left as it was. */
      const char *why = shms_last_error_detail();
      size_t n = strlen(shms_class_name(a.k->id));
      if (strncmp(why, "class ", 6) == 0 && strncmp(why + 6, shms_class_name(a.k->id), n) == 0 &&
          why[6 + n] == ':')
        why += 6 + n + 2;
      violation(&a, "not checked: %s", why);
      continue;
    }
    audit_class(&a);
    shms__thaw(a.h, a.k, shms__load_64(&a.k->ctl->fast)); /* exactly as it was */
  }
  *violations = a.violations;
  return SHMS_OK;
}
