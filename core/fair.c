/* Fairness by cell-time: the heap of tenants with a turn, charges and their corrections (fair.h).
 */
#include "fair.h"

#include <ck_pr.h>
#include <string.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/hbm.h"
#include "account.h"
#include "sched.h"
#include "tally.h"
#include "tenant.h"

/* How long a releaser waits for the tenant table's lock to add a tenant it charges (a live
 * holder's change is a few stores). */
#define FAST_LOOKUP_NS (10ull * 1000 * 1000)

static int valid_ref(const struct shms__cls *k, uint32_t ref) {
  return ref >= 1 && ref <= k->ntenants;
}

/* ns of cell-time as a charge of a tenant of weight w. */
static uint64_t charge(uint64_t ns, uint32_t w) {
  unsigned __int128 c = (unsigned __int128)ns * SHMS__FAIR_SCALE / (w >= 1 ? w : 1);
  return c > UINT64_MAX / 4 ? UINT64_MAX / 4 : (uint64_t)c;
}

/* The order: charges by quanta, then the older turn. */
static inline int key_before(uint64_t vt_a, uint64_t turn_a, uint64_t vt_b, uint64_t turn_b) {
  uint64_t qa = vt_a >> SHMS__FAIR_QUANTUM_SHIFT, qb = vt_b >> SHMS__FAIR_QUANTUM_SHIFT;
  return qa != qb ? qa < qb : turn_a < turn_b;
}

int shms__fair_before(const struct shms__tenant *a, const struct shms__tenant *b) {
  return key_before(a->vt, a->turn, b->vt, b->turn);
}

/* The same order on the keys the heap's places carry. */
static int place_before(const struct shms__heap_place *a, const struct shms__heap_place *b) {
  return key_before(a->vt, a->turn, b->vt, b->turn);
}

/* ref's team's record, if it is in a team (a link out of range reads as none: the audit says). */
static uint32_t team_of(const struct shms__cls *k, const struct shms__tenant *t) {
  uint32_t x = t->team;
  return valid_ref(k, x) && (shms__tenant_at(k, x)->flags & SHMS__TENANT_TEAM) ? x : 0;
}

/* ---- the class's order of turns: tenants without a team, and teams ----
 *
 * A calendar of charge quanta: those charged within SHMS__FAIR_BUCKETS quanta of cal_base are
 * filed in the bucket of their quantum, in the order they came to it; a grant moves its tenant to
 * the back of its new quantum's bucket, O(1) however many tenants take turns. Those charged
 * further ahead (a weight of 1 beside 1000, leases of seconds) wait in the heap, and are filed as
 * cal_base comes within reach of them; while the calendar is empty the heap alone orders them.
 * The order is the one key_before gives: each bucket holds its members by turn, oldest first,
 * because a member comes to a bucket only with the newest turn of all, or (from the heap) into a
 * bucket none was filed in yet. cal_base moves back for a member charged less than the first
 * bucket's quantum, unless the calendar's members would then span more than its reach; only
 * then is the member filed under cal_base (BEHIND: taking its turn with those charged more
 * than it, after those filed there before it). */

#define BUCKET_MASK (SHMS__FAIR_BUCKETS - 1)

static uint64_t quantum(uint64_t vt) { return vt >> SHMS__FAIR_QUANTUM_SHIFT; }

/* The quantum a member with charge vt is filed under. */
static uint64_t filed_quantum(const struct shms__class_ctl *ctl, uint64_t vt) {
  uint64_t q = quantum(vt);
  return q > ctl->cal_base ? q : ctl->cal_base;
}

static int reach(const struct shms__class_ctl *ctl, uint64_t vt) {
  return quantum(vt) < ctl->cal_base + SHMS__FAIR_BUCKETS;
}

/* Whether a member charged vt belongs in the calendar (not empty, and within its reach). */
static int within_calendar(const struct shms__class_ctl *ctl, uint64_t vt) {
  return ctl->cal_bits != 0 && reach(ctl, vt);
}

static int is_filed(const struct shms__tenant *t) { return (t->heap_pos & SHMS__FAIR_FILED) != 0; }

/* The calendar's buckets in order from cal_base's: bit i for the bucket i quanta on. */
static uint64_t rotated_bits(const struct shms__class_ctl *ctl) {
  unsigned s = (unsigned)(ctl->cal_base & BUCKET_MASK);
  return s == 0 ? ctl->cal_bits : ctl->cal_bits >> s | ctl->cal_bits << (SHMS__FAIR_BUCKETS - s);
}

/* The first bucket with members from cal_base's, round the calendar; -1 when none has. */
static int first_bucket(const struct shms__class_ctl *ctl) {
  if (ctl->cal_bits == 0)
    return -1;
  return (int)((ctl->cal_base + (unsigned)__builtin_ctzll(rotated_bits(ctl))) & BUCKET_MASK);
}

/* ref (in neither) at the back of its quantum's bucket. 1 if the bucket's list is torn. */
static int file(const struct shms__cls *k, uint32_t ref) {
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  uint32_t b = (uint32_t)(filed_quantum(ctl, t->vt) & BUCKET_MASK), first = ctl->cal_head[b];
  if (first == 0) {
    t->cal_prev = t->cal_next = ref;
    ctl->cal_head[b] = ref;
    ctl->cal_bits |= 1ull << b;
  } else {
    if (!valid_ref(k, first))
      return 1;
    struct shms__tenant *tf = shms__tenant_at(k, first);
    uint32_t last = tf->cal_prev;
    if (!valid_ref(k, last))
      return 1;
    t->cal_prev = last;
    t->cal_next = first;
    shms__tenant_at(k, last)->cal_next = ref;
    tf->cal_prev = ref;
  }
  t->heap_pos = SHMS__FAIR_FILED | b;
  if (quantum(t->vt) < ctl->cal_base) {
    t->flags |= SHMS__TENANT_BEHIND;
    ctl->cal_behind++;
  }
  return 0;
}

/* ref out of its bucket. 1 if the list is torn. */
static int unfile(const struct shms__cls *k, uint32_t ref) {
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  uint32_t b = t->heap_pos & BUCKET_MASK, next = t->cal_next, prev = t->cal_prev;
  t->heap_pos = 0;
  t->cal_prev = t->cal_next = 0;
  if (t->flags & SHMS__TENANT_BEHIND) {
    t->flags &= ~SHMS__TENANT_BEHIND;
    ctl->cal_behind--;
  }
  if (!valid_ref(k, next) || !valid_ref(k, prev))
    return 1;
  if (next == ref) {
    if (ctl->cal_head[b] != ref)
      return 1;
    ctl->cal_head[b] = 0;
    ctl->cal_bits &= ~(1ull << b);
    return 0;
  }
  shms__tenant_at(k, prev)->cal_next = next;
  shms__tenant_at(k, next)->cal_prev = prev;
  if (ctl->cal_head[b] == ref)
    ctl->cal_head[b] = next;
  return 0;
}

static void place(const struct shms__cls *k, uint32_t pos, struct shms__heap_place e) {
  k->theap[pos] = e;
  shms__tenant_at(k, e.ref)->heap_pos = pos + 1;
}

/*
 * Move the member at pos up or down to its place, its key taken again from its record (the
 * caller changed its charge or turn; every other place's key is its record's). Down, the hole
 * goes to a leaf by the lesser child and the member comes back up from there: one compare a
 * level where a plain sift makes two. 1 if a link read is out of range.
 */
static int sift(const struct shms__cls *k, uint32_t pos) {
  uint32_t n = k->ctl->heap_len, start = pos;
  struct shms__heap_place e = k->theap[pos];
  if (!valid_ref(k, e.ref))
    return 1;
  const struct shms__tenant *t = shms__tenant_at(k, e.ref);
  e.vt = t->vt;
  e.turn = t->turn;
  while (pos > 0) {
    uint32_t up = (pos - 1) / 2;
    struct shms__heap_place p = k->theap[up];
    if (!valid_ref(k, p.ref))
      return 1;
    if (!place_before(&e, &p))
      break;
    place(k, pos, p);
    pos = up;
  }
  if (pos != start) { /* it went up: it is in its place */
    place(k, pos, e);
    return 0;
  }
  for (;;) {
    uint32_t child = 2 * pos + 1;
    if (child >= n)
      break;
    const struct shms__heap_place *c = &k->theap[child];
    if (child + 1 < n && place_before(&k->theap[child + 1], c)) {
      child++;
      c++;
    }
    if (!valid_ref(k, c->ref))
      return 1;
    place(k, pos, *c);
    pos = child;
  }
  while (pos > start) { /* the places above were moved up from the path: their refs are valid */
    uint32_t up = (pos - 1) / 2;
    struct shms__heap_place p = k->theap[up];
    if (!place_before(&e, &p))
      break;
    place(k, pos, p);
    pos = up;
  }
  place(k, pos, e);
  return 0;
}

/* ref's place in the heap, checked both ways; UINT32_MAX when it is not (or the heap is torn). */
static uint32_t pos_of(const struct shms__cls *k, uint32_t ref) {
  uint32_t pos = shms__tenant_at(k, ref)->heap_pos;
  if (pos == 0 || pos > k->ctl->heap_len || k->theap[pos - 1].ref != ref)
    return UINT32_MAX;
  return pos - 1;
}

static int heap_insert(const struct shms__cls *k, uint32_t ref) {
  uint32_t n = k->ctl->heap_len;
  if (n >= k->ntenants)
    return 1;
  k->ctl->heap_len = n + 1;
  place(k, n, (struct shms__heap_place){.ref = ref}); /* its key: sift takes it */
  return sift(k, n);
}

static int heap_remove(const struct shms__cls *k, uint32_t ref) {
  uint32_t pos = pos_of(k, ref);
  shms__tenant_at(k, ref)->heap_pos = 0;
  if (pos == UINT32_MAX)
    return 1;
  struct shms__heap_place last = k->theap[--k->ctl->heap_len];
  if (pos == k->ctl->heap_len)
    return 0;
  if (!valid_ref(k, last.ref))
    return 1;
  place(k, pos, last);
  return sift(k, pos);
}

/* The heap's members within the calendar's reach, filed in the heap's order. The buckets they go
 * to had no members: they were beyond the calendar's reach, or it was empty. */
static int migrate(const struct shms__cls *k) {
  struct shms__class_ctl *ctl = k->ctl;
  while (ctl->heap_len > 0 && reach(ctl, k->theap[0].vt)) {
    uint32_t ref = k->theap[0].ref;
    if (!valid_ref(k, ref) || heap_remove(k, ref) || file(k, ref))
      return 1;
  }
  return 0;
}

/* After a member left or moved: cal_base on the first bucket with members, and the heap's
 * members that came within reach filed. */
static int advance(const struct shms__cls *k) {
  struct shms__class_ctl *ctl = k->ctl;
  int b = first_bucket(ctl);
  if (b < 0)
    return 0;
  ctl->cal_base += ((uint64_t)b - ctl->cal_base) & BUCKET_MASK;
  return migrate(k);
}

/* ref (in neither) into the calendar, or the heap if charged beyond its reach. An empty calendar
 * starts from the lesser of its charge and the heap's first's. */
static int enter(const struct shms__cls *k, uint32_t ref) {
  struct shms__class_ctl *ctl = k->ctl;
  uint64_t vt = shms__tenant_at(k, ref)->vt, q = quantum(vt);
  if (ctl->cal_bits == 0) {
    uint64_t hq = ctl->heap_len > 0 ? quantum(k->theap[0].vt) : UINT64_MAX;
    ctl->cal_base = q < hq ? q : hq;
    if (migrate(k))
      return 1;
  } else if (q < ctl->cal_base && ctl->cal_behind == 0 &&
             ctl->cal_base + (63u - (unsigned)__builtin_clzll(rotated_bits(ctl))) <
                 q + SHMS__FAIR_BUCKETS) {
    ctl->cal_base = q; /* every member stays within reach, each in its quantum's bucket */
  }
  return reach(ctl, vt) ? file(k, ref) : heap_insert(k, ref);
}

static int top_insert(const struct shms__cls *k, uint32_t ref) {
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (t->heap_pos != 0)
    return is_filed(t) ? 0 : pos_of(k, ref) == UINT32_MAX;
  if (t->vt < ctl->vtime)
    t->vt = ctl->vtime;
  t->turn = ++ctl->turns;
  return enter(k, ref);
}

static int top_remove(const struct shms__cls *k, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (t->heap_pos == 0)
    return 0;
  if (!is_filed(t))
    return heap_remove(k, ref);
  return unfile(k, ref) | advance(k);
}

/*
 * ref's charge or turn changed: its place again. A member that stays in its bucket (filed as
 * before) keeps its place there, unless its turn is now the newest (a grant), which is the
 * bucket's back; one that goes elsewhere comes to it at the back, with the newest turn.
 */
static int top_resift(const struct shms__cls *k, uint32_t ref) {
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  if (t->heap_pos == 0)
    return 0;
  if (!is_filed(t)) {
    uint32_t pos = pos_of(k, ref);
    if (pos == UINT32_MAX)
      return 1;
    if (!within_calendar(ctl, t->vt))
      return sift(k, pos);
    t->turn = ++ctl->turns;
    return heap_remove(k, ref) | enter(k, ref);
  }
  uint32_t b = t->heap_pos & BUCKET_MASK, first = ctl->cal_head[b];
  if (!valid_ref(k, first))
    return 1;
  int behind = quantum(t->vt) < ctl->cal_base;
  if (reach(ctl, t->vt) && (filed_quantum(ctl, t->vt) & BUCKET_MASK) == b &&
      behind == !!(t->flags & SHMS__TENANT_BEHIND)) {
    uint32_t last = shms__tenant_at(k, first)->cal_prev;
    if (last == ref || !valid_ref(k, last) || t->turn < shms__tenant_at(k, last)->turn)
      return 0;
    if (first == ref) {
      /* The head to the back of its circular list is the head moving on: the same list as
       * unfiling and filing it gives, without writing a neighbour's link (a grant among
       * thousands of tenants charged alike: each of those is a line of its own). */
      if (!valid_ref(k, t->cal_next))
        return 1;
      ctl->cal_head[b] = t->cal_next;
      return 0;
    }
  } else {
    t->turn = ++ctl->turns;
  }
  int torn = unfile(k, ref);
  return torn | enter(k, ref) | advance(k);
}

/* ---- a team's members with a turn: a pairing heap through their records ---- */

/* Two heaps' roots (0: empty) as one; the root charged more becomes the other's first child.
 * A root out of range (torn) is dropped, and *torn set: the index is rebuilt. */
static uint32_t meld(const struct shms__cls *k, uint32_t a, uint32_t b, int *torn) {
  if (a != 0 && !valid_ref(k, a)) {
    *torn = 1;
    a = 0;
  }
  if (b != 0 && !valid_ref(k, b)) {
    *torn = 1;
    b = 0;
  }
  if (a == 0 || b == 0)
    return a != 0 ? a : b;
  if (shms__fair_before(shms__tenant_at(k, b), shms__tenant_at(k, a))) {
    uint32_t x = a;
    a = b;
    b = x;
  }
  struct shms__tenant *ta = shms__tenant_at(k, a), *tb = shms__tenant_at(k, b);
  if (ta->ph_child != 0 && !valid_ref(k, ta->ph_child)) {
    *torn = 1;
    ta->ph_child = 0;
  }
  tb->ph_next = ta->ph_child;
  if (ta->ph_child != 0)
    shms__tenant_at(k, ta->ph_child)->ph_prev = b;
  tb->ph_prev = a;
  ta->ph_child = b;
  return a;
}

/* The heap of the sibling list from first (their parent gone): melded in pairs left to right,
 * then the pairs right to left. Bounded by the table: a torn list sets *torn. */
static uint32_t merge_pairs(const struct shms__cls *k, uint32_t first, int *torn) {
  uint32_t pairs = 0, steps = 0;
  while (first != 0) {
    if (!valid_ref(k, first) || steps++ > k->ntenants) {
      *torn = 1;
      break;
    }
    struct shms__tenant *ta = shms__tenant_at(k, first);
    uint32_t b = ta->ph_next, next = 0;
    if (b != 0 && !valid_ref(k, b)) {
      *torn = 1;
      b = 0;
    }
    if (b != 0) {
      struct shms__tenant *tb = shms__tenant_at(k, b);
      next = tb->ph_next;
      tb->ph_next = tb->ph_prev = 0;
    }
    ta->ph_next = ta->ph_prev = 0;
    uint32_t m = meld(k, first, b, torn);
    shms__tenant_at(k, m)->ph_next = pairs; /* a stack: the last pair on top */
    pairs = m;
    first = next;
  }
  uint32_t root = 0;
  while (pairs != 0) {
    struct shms__tenant *tp = shms__tenant_at(k, pairs);
    uint32_t next = tp->ph_next;
    tp->ph_next = 0;
    root = meld(k, root, pairs, torn);
    pairs = next;
  }
  return root;
}

static int member_insert(const struct shms__cls *k, struct shms__tenant *team, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  int torn = 0;
  t->ph_child = t->ph_next = t->ph_prev = 0;
  t->flags |= SHMS__TENANT_MEMBER;
  team->mroot = meld(k, team->mroot, ref, &torn);
  return torn;
}

/* ref out of its team's heap: cut from its parent or sibling, its children merged back. */
static int member_remove(const struct shms__cls *k, struct shms__tenant *team, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  int torn = 0;
  t->flags &= ~SHMS__TENANT_MEMBER;
  if (team->mroot == ref) {
    team->mroot = merge_pairs(k, t->ph_child, &torn);
  } else {
    if (!valid_ref(k, t->ph_prev) || (t->ph_next != 0 && !valid_ref(k, t->ph_next)))
      return 1;
    struct shms__tenant *prev = shms__tenant_at(k, t->ph_prev);
    if (prev->ph_child == ref)
      prev->ph_child = t->ph_next;
    else if (prev->ph_next == ref)
      prev->ph_next = t->ph_next;
    else
      return 1;
    if (t->ph_next != 0)
      shms__tenant_at(k, t->ph_next)->ph_prev = t->ph_prev;
    uint32_t rest = merge_pairs(k, t->ph_child, &torn);
    team->mroot = meld(k, team->mroot, rest, &torn);
  }
  t->ph_child = t->ph_next = t->ph_prev = 0;
  return torn;
}

/* ref's charge changed: its place in its team's heap again. */
static int member_resift(const struct shms__cls *k, struct shms__tenant *team, uint32_t ref) {
  if (!(shms__tenant_at(k, ref)->flags & SHMS__TENANT_MEMBER))
    return 0;
  int torn = member_remove(k, team, ref);
  return torn | member_insert(k, team, ref);
}

/* ref's charge changed: its place (and its team's) in the heaps again. */
static int resift(const struct shms__cls *k, uint32_t ref) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  uint32_t team = team_of(k, t);
  if (team == 0)
    return top_resift(k, ref);
  return member_resift(k, shms__tenant_at(k, team), ref) | top_resift(k, team);
}

uint32_t shms__fair_first(const struct shms__cls *k) {
  SHMS__ASSERT(shms__index_owned(k));
  int b = first_bucket(k->ctl);
  uint32_t first = b >= 0 ? k->ctl->cal_head[b] : k->ctl->heap_len > 0 ? k->theap[0].ref : 0;
  if (first == 0)
    return 0;
  if (!valid_ref(k, first) || !(shms__tenant_at(k, first)->flags & SHMS__TENANT_TEAM))
    return first;
  uint32_t m = shms__tenant_at(k, first)->mroot;
  return m != 0 ? m : UINT32_MAX; /* a team in the order without members: torn */
}

/* Whether a's turn comes before b's in the class's order (a charge behind the calendar's base
 * counts as the base's). */
static int top_before(const struct shms__class_ctl *ctl, const struct shms__tenant *a,
                      const struct shms__tenant *b) {
  if (ctl->cal_bits == 0) /* the heap alone, by charges: the base is of a calendar gone */
    return shms__fair_before(a, b);
  uint64_t qa = filed_quantum(ctl, a->vt), qb = filed_quantum(ctl, b->vt);
  return qa != qb ? qa < qb : a->turn < b->turn;
}

uint32_t shms__fair_ahead(const struct shms__cls *k, uint32_t ref) {
  const struct shms__tenant *me = shms__tenant_at(k, ref);
  uint32_t ahead = 0;
  for (uint32_t i = 1; i <= k->ntenants; i++) {
    const struct shms__tenant *o = shms__tenant_at(k, i);
    ahead += i != ref && o->heap_pos != 0 && top_before(k->ctl, o, me);
  }
  return ahead;
}

int shms__fair_join(const struct shms__cls *k, uint32_t ref) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__tenant *t = shms__tenant_at(k, ref);
  uint32_t team = team_of(k, t);
  if (team == 0)
    return top_insert(k, ref);
  if (t->flags & SHMS__TENANT_MEMBER)
    return 0;
  /* Within its team as a tenant in the class: no credit banked while it had no turn. */
  struct shms__tenant *tm = shms__tenant_at(k, team);
  if (t->vt < tm->mvtime)
    t->vt = tm->mvtime;
  t->turn = ++k->ctl->turns;
  int torn = member_insert(k, tm, ref);
  return torn | top_insert(k, team);
}

int shms__fair_leave(const struct shms__cls *k, uint32_t ref) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__tenant *t = shms__tenant_at(k, ref);
  uint32_t team = team_of(k, t);
  if (team == 0)
    return top_remove(k, ref);
  if (!(t->flags & SHMS__TENANT_MEMBER))
    return 0;
  struct shms__tenant *tm = shms__tenant_at(k, team);
  int torn = member_remove(k, tm, ref);
  return torn | (tm->mroot == 0 ? top_remove(k, team) : 0);
}

/* Every charge moved back alike, once the class's virtual time nears the top of its range; the
 * heap is then put in order again (a charge clamped at 0 may change places with another). */
static int rebase(const struct shms__cls *k) {
  struct shms__class_ctl *ctl = k->ctl;
  ctl->vtime -= SHMS__FAIR_REBASE;
  ctl->rebases++;
  for (uint32_t i = 0; i < k->ntenants; i++) {
    struct shms__tenant *t = &k->tenants[i];
    t->vt = t->vt > SHMS__FAIR_REBASE ? t->vt - SHMS__FAIR_REBASE : 0;
    if (t->flags & SHMS__TENANT_TEAM)
      t->mvtime = t->mvtime > SHMS__FAIR_REBASE ? t->mvtime - SHMS__FAIR_REBASE : 0;
  }
  /* Moved back alike, clamped at 0: an order that held still holds (no charge passes another),
   * so the heaps stand as they are, their keys moved back with the records, and the calendar
   * too, its base moved back by a whole number of rounds (a charge clamped was behind it). */
  for (uint32_t pos = 0; pos < ctl->heap_len && pos < k->ntenants; pos++)
    if (valid_ref(k, k->theap[pos].ref))
      k->theap[pos].vt = shms__tenant_at(k, k->theap[pos].ref)->vt;
  _Static_assert((SHMS__FAIR_REBASE >> SHMS__FAIR_QUANTUM_SHIFT) % SHMS__FAIR_BUCKETS == 0,
                 "a rebase moves the calendar's base by whole rounds");
  uint64_t back = SHMS__FAIR_REBASE >> SHMS__FAIR_QUANTUM_SHIFT;
  if (ctl->cal_base < back)
    return 1; /* the base far behind the charges: filed anew by a rebuild */
  ctl->cal_base -= back;
  return 0;
}

int shms__fair_granted(const struct shms__cls *k, uint32_t ref, uint32_t c, uint32_t cells) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__class_ctl *ctl = k->ctl;
  struct shms__tenant *t = shms__tenant_at(k, ref);
  uint32_t team = team_of(k, t);
  /* The charge a tenant (or team) that takes turns again starts from: the one granted now's. */
  struct shms__tenant *top = team != 0 ? shms__tenant_at(k, team) : t;
  if (top->vt > ctl->vtime)
    ctl->vtime = top->vt;
  if (team != 0 && t->vt > top->mvtime)
    top->mvtime = t->vt;
  uint64_t est = (t->est_ns != 0 ? t->est_ns : ctl->hold_est_ns) * cells;
  shms__store_64(&k->cells[c].charged_ns, est);
  t->vt += charge(est, t->weight);
  t->turn = ++ctl->turns;
  if (team != 0) {
    top->vt += charge(est, top->weight);
    top->turn = ++ctl->turns;
  }
  int torn = ctl->vtime >= SHMS__FAIR_REBASE_AT ? rebase(k) : 0;
  return torn | resift(k, ref);
}

void shms__fair_ended(const struct shms__cls *k, uint32_t ref, int used, uint64_t held_ns,
                      uint64_t charged_ns, uint32_t cells) {
  struct shms__tenant *t = shms__tenant_at(k, ref);
  held_ns *= cells; /* cell-time: a lease of several cells held each of them */
  ck_pr_add_64(&t->corr_ns, held_ns - charged_ns); /* two's complement: may be negative */
  if (used) {
    /* Counted as that many leases of one cell: the estimate stays one cell's hold. */
    ck_pr_add_64(&t->done_ns, held_ns);
    ck_pr_add_32(&t->done_n, cells);
  }
}

/* est_ns taken toward the average of n leases that held held_ns in all: an average over the last
 * few leases, so that a tenant whose leases change length is charged by the new length within a
 * few of them. The class's estimate (for a tenant with none) follows the latest. */
static void estimate(const struct shms__cls *k, uint64_t *est_ns, uint64_t held, uint32_t n) {
  if (n == 0)
    return;
  uint64_t avg = held / n;
  *est_ns = *est_ns != 0 ? (3 * *est_ns + avg) / 4 : avg;
  k->ctl->hold_est_ns = *est_ns;
}

/* What t's leases held, added to the counter its record in the tenant table keeps for the class
 * (read by observers as it grows: shms_policy_list, metrics). Written by the class's baton
 * holder only. */
static void held_time(const struct shms__cls *k, const struct shms__tenant *t, uint64_t held) {
  if (t->acct == 0 || k->id < 0 || held == 0)
    return;
  uint64_t *c = &shms__account_at(k, t->acct)->cls[k->id].cell_ns;
  shms__store_64(c, shms__load_64(c) + held);
}

/* t's charge corrected by corr ns of cell-time (held minus charged: either way). */
static void correct(struct shms__tenant *t, int64_t corr) {
  if (corr > 0) {
    t->vt += charge((uint64_t)corr, t->weight);
  } else {
    uint64_t back = charge((uint64_t)-corr, t->weight);
    t->vt -= t->vt > back ? back : t->vt;
  }
}

int shms__fair_settle(const struct shms__cls *k, uint32_t ref) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__tenant *t = shms__tenant_at(k, ref);
  int64_t corr = (int64_t)shms__fas_64(&t->corr_ns, 0);
  uint32_t n = shms__fas_32(&t->done_n, 0);
  uint64_t held = shms__fas_64(&t->done_ns, 0);
  held_time(k, t, held);
  estimate(k, &t->est_ns, held, n);
  uint32_t team = team_of(k, t);
  if (team != 0)
    held_time(k, shms__tenant_at(k, team), held);
  if (corr == 0)
    return 0;
  correct(t, corr);
  if (team != 0)
    correct(shms__tenant_at(k, team), corr);
  return resift(k, ref);
}

void shms__fair_fast_ended(const struct shms__cls *k, const uint64_t *name, uint64_t held_ns) {
  if ((name[0] & 0xff) == 0 || k->id < 0)
    return;
  /* Most leases of a contended class are short: each adds its charge to its process's own tally
   * (a line no other process writes), and the sum goes to the tenant's record, whose line the
   * dispatcher's passes take, once it is worth their look, or when the tally moves. */
  struct shms__tally *t = shms__tally_of(k->h, k, name);
  if (t != NULL) {
    shms__tally_add(k->h, &t->pending_n, 1);
    if (shms__tally_add(k->h, &t->pending_ns, held_ns) < SHMS__FAST_PENDING_NS)
      return;
  }
  /* The name's words as the lease's cell holds them: the table's records hold the same. */
  uint32_t ref = shms__account_lookup(k, name, FAST_LOOKUP_NS);
  if (ref == 0)
    return; /* the table full of records with a policy, or its lock held too long: the tally
               keeps the sum (a move finds the table as full), or the charge is lost */
  uint64_t n = 1;
  if (t != NULL) {
    n = shms__fas_64(&t->pending_n, 0);
    held_ns = shms__fas_64(&t->pending_ns, 0);
  }
  shms__account_charge_fast(k, ref, n, held_ns);
}

/* The charge an account holds for k, moved back as every charge of the class was since it was
 * left there. */
static uint64_t stored_vt(const struct shms__cls *k, const struct shms__account_class *a) {
  uint64_t behind = k->ctl->rebases - shms__load_64((uint64_t *)&a->rebases);
  uint64_t vt = shms__load_64((uint64_t *)&a->vt);
  return behind >= 2 || vt < behind * SHMS__FAIR_REBASE ? 0 : vt - behind * SHMS__FAIR_REBASE;
}

/* vt charged held_ns more, from no less than floor: as a lease granted now would have been (what
 * a tenant held while nobody else was charged earns it nothing back). */
static uint64_t charged_from(uint64_t floor, uint64_t vt, uint64_t held_ns, uint32_t weight) {
  return (vt > floor ? vt : floor) + charge(held_ns, weight);
}

/* What an account keeps for the class, charged held_ns from floor. */
static void charge_account(const struct shms__cls *k, uint32_t aref, uint64_t floor, uint64_t held,
                           uint32_t n) {
  struct shms__account_class *a = &shms__account_at(k, aref)->cls[k->id];
  uint64_t est = shms__load_64(&a->est_ns);
  estimate(k, &est, held, n);
  shms__store_64(&a->vt, charged_from(floor, stored_vt(k, a), held, shms__account_weight(k, aref)));
  shms__store_64(&a->rebases, k->ctl->rebases);
  shms__store_64(&a->est_ns, est);
  shms__store_64(&a->cell_ns, a->cell_ns + held);
}

int shms__fair_charge_fast(const struct shms__cls *k, uint32_t aref,
                           uint32_t (*record_of)(const struct shms__cls *, uint32_t)) {
  SHMS__ASSERT(shms__index_owned(k));
  struct shms__account *acct = shms__account_at(k, aref);
  struct shms__account_class *a = &acct->cls[k->id];
  uint64_t held = shms__fas_64(&a->fast_ns, 0);
  uint32_t n = shms__fas_32(&a->fast_n, 0);
  if (shms__load_32(&acct->state) != SHMS__ACCT_LIVE || (held == 0 && n == 0))
    return 0;
  shms__store_64(&acct->active_ns, shms__now_ns());
  n = held != 0 ? n : 0; /* unstamped leases tell nothing of how long leases hold */
  uint64_t vtime = k->ctl->vtime;
  uint32_t ref = record_of(k, aref), team_acct = shms__account_team(k, aref);
  uint32_t team = ref != 0         ? team_of(k, shms__tenant_at(k, ref))
                  : team_acct != 0 ? record_of(k, team_acct)
                                   : 0;
  struct shms__tenant *tm = team != 0 ? shms__tenant_at(k, team) : NULL;
  /* A member is charged within its team (from its members' charge), the team in the class. */
  if (tm != NULL) {
    tm->vt = charged_from(vtime, tm->vt, held, tm->weight);
    held_time(k, tm, held);
  } else if (team_acct != 0) {
    charge_account(k, team_acct, vtime, held, 0);
  }
  /* A member's floor is its team's members' charge; without the team's record here (no member
   * taking turns) there is none to go by. A tenant with a record outside its team (it joins the
   * team when it next takes turns) is charged as one in none. */
  uint64_t floor = tm != NULL ? tm->mvtime : ref != 0 || team_acct == 0 ? vtime : 0;
  if (ref == 0) {
    charge_account(k, aref, floor, held, n);
    return team != 0 ? top_resift(k, team) : 0;
  }
  struct shms__tenant *t = shms__tenant_at(k, ref);
  t->vt = charged_from(floor, t->vt, held, t->weight);
  held_time(k, t, held);
  estimate(k, &t->est_ns, held, n);
  return resift(k, ref);
}

void shms__fair_reset(const struct shms__cls *k) {
  SHMS__ASSERT(shms__index_owned(k));
  k->ctl->heap_len = 0;
  k->ctl->cal_bits = k->ctl->cal_base = 0;
  k->ctl->cal_behind = 0;
  memset(k->ctl->cal_head, 0, sizeof k->ctl->cal_head);
  for (uint32_t i = 0; i < k->ntenants; i++) {
    struct shms__tenant *t = &k->tenants[i];
    t->heap_pos = t->mroot = 0;
    t->cal_prev = t->cal_next = 0;
    t->ph_child = t->ph_next = t->ph_prev = 0;
    t->flags &= ~(SHMS__TENANT_MEMBER | SHMS__TENANT_BEHIND);
  }
  /* A charge added by a process that died before it marked the record is found here. */
  for (uint32_t i = 0; k->id >= 0 && i < k->naccts; i++)
    if (shms__load_64(&k->accts[i].cls[k->id].fast_ns) != 0)
      shms__hbm_set(&k->aattn, i);
}

int shms__fair_refresh(const struct shms__cls *k) {
  SHMS__ASSERT(shms__index_owned(k));
  uint64_t gen = shms__load_64(&k->actl->policy_gen);
  if (gen == k->ctl->policy_gen)
    return 0;
  k->ctl->policy_gen = gen;
  for (uint32_t i = 0; i < k->ntenants; i++) {
    struct shms__tenant *t = &k->tenants[i];
    if ((t->flags & (SHMS__TENANT_INUSE | SHMS__TENANT_TEAM)) && t->acct != 0)
      t->weight = shms__account_weight(k, t->acct);
  }
  return 1;
}

void shms__fair_load(const struct shms__cls *k, struct shms__tenant *t) {
  t->weight = shms__account_weight(k, t->acct);
  if (t->acct == 0 || k->id < 0)
    return;
  const struct shms__account_class *a = &shms__account_at(k, t->acct)->cls[k->id];
  t->vt = stored_vt(k, a);
  t->est_ns = shms__load_64((uint64_t *)&a->est_ns);
}

void shms__fair_store(const struct shms__cls *k, struct shms__tenant *t) {
  if (t->acct == 0 || k->id < 0)
    return;
  struct shms__account_class *a = &shms__account_at(k, t->acct)->cls[k->id];
  shms__store_64(&a->vt, t->vt);
  shms__store_64(&a->est_ns, t->est_ns);
  shms__store_64(&a->rebases, k->ctl->rebases);
}
