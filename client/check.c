/* Validation shared by the client calls: nothing is touched until a request passes. */
#include <ck_pr.h>
#include <string.h>

#include "../core/quota.h"
#include "../core/report.h"
#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "../shm/identity.h"
#include "client.h"

uint32_t shms__segment_state(const struct shms *h) { return shms__load_32(&h->hdr->state); }

/* The allow list's tenant entries (its identity entries are shms__identity_check's). */
static int tenant_allowed(const struct shms__cls *k, const char *tenant) {
  if (k->cfg->allow_count == 0)
    return k->id != SHMS_CLASS_EXTRA_LARGE; /* extra-large is restricted by default */
  int tenants = 0;
  for (uint32_t i = 0; i < k->cfg->allow_count && i < SHMS_ALLOW_MAX; i++) {
    if (shms__allow_is_identity(k->cfg->allow[i]))
      continue;
    if (strncmp(k->cfg->allow[i], tenant, SHMS_TENANT_MAX + 1) == 0)
      return 1;
    tenants++;
  }
  return tenants == 0; /* a list of identities only: any tenant, for them */
}

static int check_names(const shms_request *req, uint64_t *tenant_words) {
  uint64_t scratch[SHMS__NAME_WORDS];
  if (shms__tenant_pack(req->tenant, tenant_words != NULL ? tenant_words : scratch) != SHMS_OK)
    return SHMS_EINVAL;
  if (req->activation != NULL && shms_tenant_check(req->activation) != SHMS_OK) {
    char why[160];
    strncpy(why, shms_last_error_detail(), sizeof why - 1);
    why[sizeof why - 1] = '\0';
    return shms__fail(SHMS_EINVAL, "activation id: %s", why + (strncmp(why, "tenant ", 7) ? 0 : 7));
  }
  return SHMS_OK;
}

/* A request of several cells: where it can be served (docs/contract.md, "Multi-cell
 * requests"). */
static int check_cells(const struct shms__cls *k, uint32_t cells, const char *cn) {
  if (k->cfg->mode == SHMS_MODE_WORKER)
    return shms__fail(SHMS_EINVAL, "class %s is a worker class: a job runs on one cell (cells=%u)",
                      cn, cells);
  if (cells > k->ncells)
    return shms__fail(SHMS_EINVAL, "class %s has %u cells: a request cannot hold %u at once", cn,
                      k->ncells, cells);
  if (k->cfg->tenant_max_active != 0)
    return shms__fail(SHMS_EINVAL,
                      "class %s has tenant-max-active, which counts leases of one cell: "
                      "a request of %u cells is refused there",
                      cn, cells);
  return SHMS_OK;
}

int shms__check_request(struct shms *h, const shms_request *req, unsigned mode, const void *result,
                        const char *result_name, struct shms__cls **out, uint64_t *tenant_words) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if (req == NULL)
    return shms__fail(SHMS_EINVAL, "request is NULL");
  if (result == NULL)
    return shms__fail(SHMS_EINVAL, "%s is NULL", result_name);
  struct shms__cls *k = shms__class(h, (int)req->cls);
  if (k == NULL)
    return SHMS_EINVAL;
  const char *cn = shms_class_name(req->cls);
  if ((rc = check_names(req, tenant_words)) != SHMS_OK)
    return rc;
  if (k->cfg->mode != mode)
    return shms__fail(SHMS_EINVAL,
                      mode == SHMS_MODE_LEASE ? "class %s is a worker class: submit jobs to it"
                                              : "class %s is a lease class: acquire leases from it",
                      cn);
  if (req->cells > 1 && (rc = check_cells(k, req->cells, cn)) != SHMS_OK)
    return rc;
  if (k->nslots == 0)
    return shms__fail(SHMS_EDENIED, "class %s is denied (queue=0)", cn);
  if (!tenant_allowed(k, req->tenant))
    return shms__fail(SHMS_EDENIED, "class %s does not allow tenant '%s'", cn, req->tenant);
  /* A class that binds no tenant and lists nobody asks nothing of the caller's credentials:
   * not even the call, on every acquire. */
  if ((k->cfg->tenant_bind != SHMS_TENANT_ANY || k->cfg->allow_count != 0) &&
      (rc = shms__identity_check(k->cfg, cn, req->tenant)) != SHMS_OK)
    return rc;
  if (req->deadline_ns != 0 && shms__now_ns() >= req->deadline_ns)
    return shms__fail(SHMS_EDEADLINE, "the deadline has already passed");
  /* Refused at the door for the segment's or the class's state: recorded like a refusal at
   * the queue (the operator asks why a run did not start), at the cost of the refusal only. */
  if (shms__segment_state(h) != SHMS_SEG_ACTIVE) {
    shms__note_refused(h, k, req->tenant, SHMS_ESHUTDOWN);
    return shms__fail(SHMS_ESHUTDOWN, "the segment is draining");
  }
  if (shms__load_32(&k->ctl->quarantined) >= k->ncells) {
    shms__note_refused(h, k, req->tenant, SHMS_EQUARANTINED);
    return shms__fail(SHMS_EQUARANTINED, "every cell of class %s is quarantined", cn);
  }
  *out = k;
  return SHMS_OK;
}

int shms__check_ticket(struct shms *h, const shms_ticket *t, const void *result,
                       const char *result_name, struct shms__cls **out, uint32_t *slot) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if (t == NULL)
    return shms__fail(SHMS_EINVAL, "ticket is NULL");
  if (result_name != NULL && result == NULL)
    return shms__fail(SHMS_EINVAL, "%s is NULL", result_name);
  if (t->incarnation != h->incarnation)
    return shms__fail(SHMS_ENOTFOUND, "the ticket belongs to another segment or incarnation");
  if (t->cls >= SHMS_CLASS_COUNT || h->cls[t->cls].id < 0)
    return shms__fail(SHMS_ENOTFOUND, "the ticket's class is not configured");
  struct shms__cls *k = &h->cls[t->cls];
  if (t->slot >= k->nslots)
    return shms__fail(SHMS_ENOTFOUND, "the ticket's slot %u is out of range", t->slot);
  *out = k;
  *slot = t->slot;
  return SHMS_OK;
}

uint64_t shms__wait_end(uint64_t timeout_ns) {
  return timeout_ns == UINT64_MAX ? 0 : shms__real_now_ns() + timeout_ns;
}

int shms__ticket_live(const struct shms *h, const struct shms__slot *s, const shms_ticket *t,
                      const char *what, uint64_t *wp) {
  uint64_t w = *wp = shms__load_64(&s->word);
  uint32_t st = SHMS__SLOT_STATE(w);
  if (SHMS__SLOT_SEQ(w) != (uint32_t)t->seq || shms__load_64(&s->seq) != t->seq ||
      st < SHMS__SLOT_QUEUED || (st == SHMS__SLOT_SETTLED && (w & SHMS__SLOT_COLLECTED)))
    return shms__fail(SHMS_ENOTFOUND, "no live %s for this ticket (stale or retired)", what);
  if (shms__load_32(&s->owner) != h->owner &&
      !((shms__load_32(&s->options) & SHMS__OPT_KEYED) &&
        shms__share_of(h, &h->cls[t->cls], t->slot, t->seq) != SHMS__SHARE_NONE))
    return shms__not_ours(); /* a joiner of a keyed job waits for it as its submitter does */
  return SHMS_OK;
}

const struct shms__cls *shms__table_view(const struct shms *h) {
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (h->cls[c].id >= 0)
      return &h->cls[c];
  return NULL;
}

int shms__check_class(struct shms *h, shms_class_t c, struct shms__cls **k) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  *k = shms__class(h, (int)c);
  return *k != NULL ? SHMS_OK : SHMS_EINVAL;
}

int shms__not_ours(void) {
  return shms__fail(SHMS_EINVAL,
                    "the request belongs to another process: only the process that "
                    "queued it may wait for it (cancel and explain work from anywhere)");
}

int shms__check_quotas(const struct shms__cls *k, const shms_request *req, uint32_t *mask) {
  *mask = 0;
  if (req->cells > 1)
    return shms__fail(SHMS_EINVAL, "a request of %u cells names no quotas (one cell holds a unit)",
                      req->cells);
  if (req->nquotas > SHMS_REQUEST_QUOTAS_MAX)
    return shms__fail(SHMS_EINVAL, "a request names at most %d quotas, got %u",
                      SHMS_REQUEST_QUOTAS_MAX, req->nquotas);
  if (req->quotas == NULL)
    return shms__fail(SHMS_EINVAL, "quotas is NULL with nquotas %u", req->nquotas);
  for (uint32_t i = 0; i < req->nquotas; i++) {
    const char *name = req->quotas[i];
    if (name == NULL || shms_tenant_check(name) != SHMS_OK)
      return shms__fail(SHMS_EINVAL, "quota %u: name: 1..%d graphic ASCII bytes", i + 1,
                        SHMS_TENANT_MAX);
    int q = shms__quota_find(k->quotas, name);
    if (q < 0)
      return shms__fail(SHMS_EINVAL, "no quota '%s' in the segment (shmsched status lists them)",
                        name);
    if (*mask & (1u << q))
      return shms__fail(SHMS_EINVAL, "quota '%s' is named twice", name);
    *mask |= 1u << q;
  }
  return SHMS_OK;
}
