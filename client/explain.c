/*
 * explain and tenants: read the index under the baton, so what they report
 * is one consistent picture. They wait for a live baton holder at most a
 * second; these are diagnostics, never on a hot path.
 */
#include <ck_pr.h>
#include <string.h>

#include "../core/fair.h"
#include "../core/held.h"
#include "../core/order.h"
#include "../core/quota.h"
#include "../core/tenant.h"
#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "../shm/proc.h"
#include "client.h"

#define BATON_WAIT_NS (1000ull * 1000 * 1000)

/* Where ref takes its turns in a class fair by time: its team's record, or its own. */
static uint32_t entry_of(const struct shms__cls *k, uint32_t ref) {
  uint32_t team = shms__tenant_at(k, ref)->team;
  return team >= 1 && team <= k->ntenants ? team : ref;
}

/* How many turns come before ref's (0 = its turn is next), or UINT32_MAX if it has no turn: its
 * place in the ring; or in a class fair by time, the tenants and teams charged less (or alike
 * with an older turn) by the class's order, and in its team the members charged less
 * (core/fair.c). */
static uint32_t ring_position(const struct shms__cls *k, uint32_t ref) {
  if (k->timed) {
    const struct shms__tenant *t = shms__tenant_at(k, ref);
    uint32_t me = entry_of(k, ref);
    if (!(t->flags & SHMS__TENANT_INRING) || shms__tenant_at(k, me)->heap_pos == 0)
      return UINT32_MAX;
    uint32_t ahead = shms__fair_ahead(k, me);
    for (uint32_t i = 1; me != ref && i <= k->ntenants; i++) {
      const struct shms__tenant *o = shms__tenant_at(k, i);
      ahead +=
          i != ref && (o->flags & SHMS__TENANT_MEMBER) && o->team == me && shms__fair_before(o, t);
    }
    return ahead;
  }
  uint32_t at = k->ctl->ring_head;
  for (uint32_t n = 0; at != 0 && at <= k->ntenants && n < k->ntenants; n++) {
    if (at == ref)
      return n;
    at = shms__tenant_at(k, at)->ring_next;
  }
  return UINT32_MAX;
}

static void explain_queued(struct shms *h, const struct shms__cls *k, uint32_t i, uint64_t w,
                           shms_explanation *out) {
  const struct shms__slot *s = shms__slot_at(k, i);
  uint64_t now = shms__now_ns(), since = shms__load_64((uint64_t *)&s->enqueue_ns);
  out->waited_ns = now > since ? now - since : 0;
  out->ring_length = k->ctl->ring_len;
  out->tenants_ahead = UINT32_MAX;
  uint32_t quotas = SHMS__QUOTAS_NAMED(shms__load_32((uint32_t *)&s->quotas));
  for (uint32_t q = 0; q < SHMS_QUOTAS_MAX && out->quota[0] == '\0'; q++)
    if ((quotas & (1u << q)) && !shms__quota_room(k, q)) {
      out->blocked_by |= SHMS_BLOCK_QUOTA;
      shms__name_copy(out->quota, k->quotas[q].name);
    }
  if (!(w & SHMS__SLOT_INDEXED) || s->tenant == 0 || s->tenant > k->ntenants)
    return;
  const struct shms__tenant *t = shms__tenant_at(k, s->tenant);
  out->tenants_ahead = ring_position(k, s->tenant);
  out->tenant_queued = t->queued;
  out->ahead_in_tenant = shms__order_ahead(k, t, i, now);
  out->aged = now >= since && now - since >= k->starvation_ns;
  if (SHMS__FAST_LOW(shms__load_64(&k->ctl->fast)) == 0)
    out->blocked_by |= k->cfg->mode == SHMS_MODE_WORKER ? SHMS_BLOCK_NO_WORKER : SHMS_BLOCK_NO_CELL;
  if (shms__tenant_at_limit(k, s->tenant))
    out->blocked_by |= SHMS_BLOCK_TENANT_LIMIT;
  if (shms__segment_state(h) != SHMS_SEG_ACTIVE)
    out->blocked_by |= SHMS_BLOCK_DRAINING;
  if (out->tenants_ahead > 0 || out->ahead_in_tenant > 0)
    out->blocked_by |= SHMS_BLOCK_TURN;
  /* A request of several cells gathering them holds up every other; its own reserved cells are
   * the class's RESERVED ones (core/gather.c). */
  uint32_t gathering = shms__load_32(&k->ctl->gather_slot);
  if (gathering != 0)
    out->blocked_by |= SHMS_BLOCK_GATHER;
  int64_t lowest;
  if (gathering == i + 1)
    out->gathered = shms__gather_reserved(k, &lowest);
}

/*
 * The ticket's slot no longer holds it: an accepted lease-mode request gave it
 * back. Its lease may still be held: say where, by whom, since when.
 */
static int explain_held(struct shms *h, const struct shms__cls *k, const shms_ticket *ticket,
                        shms_explanation *out) {
  struct shms__held held;
  if (!shms__held_find(k, ticket->slot, ticket->seq, &held))
    return SHMS_ENOTFOUND; /* the detail says so already */
  shms__clear_detail();
  memset(out, 0, sizeof *out);
  out->state = SHMS_REQ_HELD;
  out->cell = held.cell;
  out->uid = shms__load_32(&k->cells[held.cell].uid); /* written at the lease's start */
  /* The entry still names the holder only while its generation is the owner id's. */
  struct shms__pidref ref;
  shms__owner_ref(h, held.owner, &ref);
  shms__pid_show_into(&ref, 1, &out->holder_pid, &out->holder_ns_pid, &out->holder_foreign,
                      &out->holder_pidns);
  out->holder_alive = !shms__owner_dead(h, held.owner);
  uint64_t now = shms__coarse_now_ns();
  out->held_ns = now > held.start_ns ? now - held.start_ns : 0;
  return SHMS_OK;
}

int shms_explain(shms_t *h, const shms_ticket *ticket, shms_explanation *out) {
  struct shms__cls *k = NULL;
  uint32_t i = 0;
  int rc = shms__check_ticket(h, ticket, out, "out", &k, &i);
  if (rc != SHMS_OK)
    return rc;
  shms__op_enter(h, k);
  if ((rc = shms__baton_acquire(h, k, BATON_WAIT_NS)) != SHMS_OK) {
    shms__op_leave(h, k);
    return shms__fail(rc, "the dispatcher stayed busy for a second");
  }
  const struct shms__slot *s = shms__slot_at(k, i);
  uint64_t w = shms__load_64((uint64_t *)&s->word);
  uint32_t st = SHMS__SLOT_STATE(w);
  memset(out, 0, sizeof *out);
  if (SHMS__SLOT_SEQ(w) != (uint32_t)ticket->seq || s->seq != ticket->seq ||
      st < SHMS__SLOT_QUEUED) {
    rc = shms__fail(SHMS_ENOTFOUND, "no live request for this ticket (stale or retired)");
  } else {
    memcpy(out->tenant, s->tenant_name, sizeof out->tenant);
    out->priority = s->priority;
    out->uid = s->uid;
    out->cells = SHMS__OPT_CELLS(s->options);
    out->state = st == SHMS__SLOT_QUEUED    ? SHMS_REQ_QUEUED
                 : st == SHMS__SLOT_GRANTED ? SHMS_REQ_GRANTED
                 : st == SHMS__SLOT_RUNNING ? SHMS_REQ_RUNNING
                                            : SHMS_REQ_ENDED;
    out->outcome = st == SHMS__SLOT_SETTLED ? SHMS__SLOT_REASON(w) : 0;
    if (st == SHMS__SLOT_QUEUED)
      explain_queued(h, k, i, w, out);
  }
  shms__baton_done(h, k);
  shms__op_leave(h, k);
  return rc == SHMS_ENOTFOUND ? explain_held(h, k, ticket, out) : rc;
}

int shms_tenants(shms_t *h, shms_class_t c, shms_tenant_stats *out, uint32_t max, uint32_t *count) {
  struct shms__cls *k = NULL;
  int rc = shms__check_class(h, c, &k);
  if (rc != SHMS_OK)
    return rc;
  if (count == NULL || (out == NULL && max > 0))
    return shms__fail(SHMS_EINVAL, "out or count is NULL");
  shms__op_enter(h, k);
  if ((rc = shms__baton_acquire(h, k, BATON_WAIT_NS)) != SHMS_OK) {
    shms__op_leave(h, k);
    return shms__fail(rc, "the dispatcher stayed busy for a second");
  }
  /* Under the baton the records hold still: the rows read as an observer's are then one
   * instant but for their counts of leases running. */
  rc = shms__tenant_view(k, out, max, count);
  shms__baton_done(h, k);
  shms__op_leave(h, k);
  return rc;
}
