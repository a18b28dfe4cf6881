/* Reading the flight recorder (shms_events_read): the ring's records as the API gives them. */
#include <stdint.h>
#include <string.h>

#include "../shm/error.h"
#include "../shm/events.h"
#include "../shm/proc.h"
#include "client.h"

/* A policy event's team: named in the record (a team's weight), or by the number of its record
 * in the tenant table (a tenant put in it: team records are never folded). */
static void policy_team(const struct shms *h, shms_event *ev, shms_event_record *out) {
  if (ev->reason == SHMS_POLICY_EVENT_TEAM_WEIGHT) {
    memcpy(out->team, ev->tenant, sizeof out->team);
    ev->tenant[0] = '\0';
    return;
  }
  if (ev->reason != SHMS_POLICY_EVENT_TEAM || out->value == 0)
    return;
  const struct shms__cls *k = shms__table_view(h);
  if (k != NULL && out->value <= k->naccts)
    shms__name_copy(out->team, k->accts[out->value - 1].name);
}

/* A valid record as the caller sees it; its words were checked, but their values are another
 * process's: nothing read here indexes anything. */
static void convert(const struct shms *h, const struct shms__pidns *me, uint64_t pos,
                    const struct shms__ev_rec *r, shms_event_record *out) {
  memset(out, 0, sizeof *out);
  out->position = pos;
  out->mono_ns = r->mono_ns;
  out->wall_ns = r->wall_ns;
  out->value = r->value;
  out->writer = (int32_t)(uint32_t)r->writer;
  shms_event *ev = &out->event;
  ev->kind = (uint32_t)(r->what & 0xffu);
  ev->cls = (int32_t)((r->what >> 8) & 0xffu) - 1;
  if (ev->cls >= SHMS_CLASS_COUNT || h->cls[ev->cls < 0 ? 0 : ev->cls].id < 0)
    ev->cls = -1; /* not a class of this segment: name none */
  ev->reason = (int32_t)(uint32_t)(r->what >> 32);
  uint32_t cell_ref = (uint32_t)r->where; /* cell + 1; past INT32_MAX only in a corrupt record */
  ev->cell = cell_ref == 0 || cell_ref - 1 > (uint32_t)INT32_MAX ? -1 : (int32_t)(cell_ref - 1);
  /* Recorded as its own namespace numbers it: named as the reader sees it. */
  struct shms__pidshown shown;
  shms__proc_name_pid(h, me, (int32_t)(uint32_t)(r->where >> 32), (uint32_t)(r->slot >> 32),
                      &shown);
  ev->pid = shown.here;
  ev->ns_pid = shown.own;
  ev->pid_foreign = shown.foreign;
  ev->pidns = shown.ns;
  uint32_t uid_ref = (uint32_t)r->uid;
  ev->uid = uid_ref == 0 ? SHMS_UID_NONE : uid_ref - 1;
  uint32_t slot_ref = (uint32_t)r->slot;
  if (r->ticket_seq != 0 && slot_ref != 0 && ev->cls >= 0)
    ev->ticket = (shms_ticket){.cls = (uint32_t)ev->cls,
                               .slot = slot_ref - 1,
                               .seq = r->ticket_seq,
                               .incarnation = h->incarnation};
  shms__name_copy(ev->tenant, (const char *)r->tenant);
  if (ev->kind == SHMS_EVENT_POLICY_CHANGED)
    policy_team(h, ev, out);
}

int shms_events_read(shms_t *h, uint64_t *cursor, unsigned flags, shms_event_record *out,
                     size_t cap, size_t *count, uint64_t *lost) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  if (cursor == NULL || count == NULL || (out == NULL && cap != 0))
    return shms__fail(SHMS_EINVAL, "cursor, count and (with cap > 0) out must not be NULL");
  if (flags & ~(unsigned)SHMS_EVENTS_SKIP_PENDING)
    return shms__fail(SHMS_EINVAL, "unknown flags 0x%x", flags);
  const struct shms__evlog *log = &h->events;
  uint64_t end = shms__ev_end(log), pos = *cursor, missed = 0;
  *count = 0;
  if (cap == 0) {
    *cursor = end;
    if (lost != NULL)
      *lost = 0;
    return SHMS_OK;
  }
  /* Older than the ring holds: overwritten, lost to this reader. */
  if (log->count != 0 && end > log->count && pos < end - log->count) {
    missed += end - log->count - pos;
    pos = end - log->count;
  }
  if (pos > end) /* a cursor from the future (another segment, or made up): start at the end */
    pos = end;
  struct shms__pidns me;
  shms__pidns_self(&me);
  while (pos < end && *count < cap) {
    struct shms__ev_rec r;
    enum shms__ev_got got = shms__ev_get(log, pos, &r);
    if (got == SHMS__EV_PENDING && !(flags & SHMS_EVENTS_SKIP_PENDING))
      break;
    if (got == SHMS__EV_VALID)
      convert(h, &me, pos, &r, &out[(*count)++]);
    else
      missed++;
    pos++;
  }
  *cursor = pos;
  if (lost != NULL)
    *lost = missed;
  return SHMS_OK;
}

int shms_events_find(shms_t *h, const shms_ticket *ticket, shms_event_record *out) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  if (ticket == NULL || out == NULL)
    return shms__fail(SHMS_EINVAL, "ticket and out must not be NULL");
  const struct shms__evlog *log = &h->events;
  if (log->count == 0)
    return shms__fail(SHMS_ENOTFOUND, "the segment has no event ring (created with events 0)");
  if (ticket->incarnation != h->incarnation || ticket->seq == 0)
    return shms__fail(SHMS_ENOTFOUND, "the ticket is of another segment");
  uint64_t end = shms__ev_end(log), first = end > log->count ? end - log->count : 0;
  for (uint64_t pos = end; pos-- > first;) { /* newest first */
    struct shms__ev_rec r;
    if (shms__ev_get(log, pos, &r) != SHMS__EV_VALID || r.ticket_seq != ticket->seq ||
        (uint32_t)r.slot != ticket->slot + 1 || ((r.what >> 8) & 0xffu) != ticket->cls + 1)
      continue;
    /* A holder's record of its command says how the command went, not how the request
     * ended: the grant (or settle) before it does; nor does a join, which leaves it as it was. */
    uint32_t kind = (uint32_t)(r.what & 0xffu);
    if (kind == SHMS_EVENT_LEASE_STARTED || kind == SHMS_EVENT_LEASE_ENDED ||
        kind == SHMS_EVENT_JOB_JOINED)
      continue;
    struct shms__pidns me;
    shms__pidns_self(&me);
    convert(h, &me, pos, &r, out);
    return SHMS_OK;
  }
  return shms__fail(SHMS_ENOTFOUND, "the event ring holds no record of this request (never "
                                    "recorded, or overwritten since)");
}
