/* Fair share's policy: tenants' and teams' weights and tenants' teams, in the tenant table
 * (shmsched.h). */
#include <string.h>

#include "../core/account.h"
#include "../core/quota.h"
#include "../core/report.h"
#include "../shm/atomic.h"
#include "../shm/error.h"
#include "../shm/identity.h"
#include "client.h"

/* How long setting policy waits for the table's lock: others hold it for a few stores. */
#define POLICY_WAIT_NS (1000ull * 1000 * 1000)

/* Check the caller's right and p's names, apply p, and record what changed. */
static int set_policy(shms_t *h, const struct shms__policy_change *p, int reason) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  const char *what = p->kind == SHMS__KIND_TEAM ? "team" : "tenant";
  if (p->name == NULL || shms_tenant_check(p->name) != SHMS_OK)
    return shms__fail(SHMS_EINVAL, "%s name: 1..%d graphic ASCII bytes", what, SHMS_TENANT_MAX);
  if (p->team != NULL && p->team[0] != '\0' && shms_tenant_check(p->team) != SHMS_OK)
    return shms__fail(SHMS_EINVAL, "team name: 1..%d graphic ASCII bytes", SHMS_TENANT_MAX);
  if (p->team == NULL && (p->weight < 1 || p->weight > SHMS_WEIGHT_MAX))
    return shms__fail(SHMS_EINVAL, "%s %s: weight: must be 1..%u, got %u", what, p->name,
                      SHMS_WEIGHT_MAX, p->weight);
  if ((rc = shms__admin_check(h, "set the policy of %s %s", what, p->name)) != SHMS_OK)
    return rc;
  const struct shms__cls *k = shms__table_view(h);
  if (k == NULL)
    return shms__fail(SHMS_EINVAL, "the segment has no class");
  if ((rc = shms__account_set(k, p, POLICY_WAIT_NS)) != SHMS_OK)
    return rc;
  struct shms__ev e = {.kind = SHMS_EVENT_POLICY_CHANGED,
                       .cls = -1,
                       .cell = -1,
                       .pid = h->pid,
                       .reason = reason,
                       .value = p->weight};
  shms__tenant_pack(p->name, e.tenant); /* checked above */
  if (reason == SHMS_POLICY_EVENT_TEAM) /* the team's record, never folded: read back by name */
    e.value = p->team[0] != '\0' ? shms__account_team(k, shms__account_lookup(k, e.tenant, 0)) : 0;
  shms__note(h, &e);
  return SHMS_OK;
}

int shms_policy_tenant(shms_t *h, const char *name, uint32_t weight) {
  struct shms__policy_change p = {.name = name, .kind = SHMS__KIND_TENANT, .weight = weight};
  return set_policy(h, &p, SHMS_POLICY_EVENT_WEIGHT);
}

int shms_policy_team(shms_t *h, const char *team, uint32_t weight) {
  struct shms__policy_change p = {.name = team, .kind = SHMS__KIND_TEAM, .weight = weight};
  return set_policy(h, &p, SHMS_POLICY_EVENT_TEAM_WEIGHT);
}

int shms_policy_tenant_team(shms_t *h, const char *tenant, const char *team) {
  struct shms__policy_change p = {
      .name = tenant, .kind = SHMS__KIND_TENANT, .team = team != NULL ? team : ""};
  return set_policy(h, &p, SHMS_POLICY_EVENT_TEAM);
}

int shms_policy_list(shms_t *h, shms_policy_row *out, uint32_t max, uint32_t *count) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  if (count == NULL || (out == NULL && max != 0))
    return shms__fail(SHMS_EINVAL, "count is NULL, or out is NULL with max > 0");
  const struct shms__cls *k = shms__table_view(h);
  uint32_t n = 0;
  for (uint32_t i = 0; k != NULL && i < k->naccts; i++) {
    const struct shms__account *a = &k->accts[i];
    if (shms__load_32((uint32_t *)&a->state) != SHMS__ACCT_LIVE)
      continue;
    if (n < max) {
      shms_policy_row *r = &out[n];
      memset(r, 0, sizeof *r);
      memcpy(r->name, a->name, SHMS_TENANT_MAX);
      uint32_t flags = shms__load_32((uint32_t *)&a->flags);
      r->flags = (flags & SHMS__ACCT_POLICY ? SHMS_POLICY_SET : 0) |
                 (flags & SHMS__ACCT_OTHER ? SHMS_POLICY_OTHER : 0) |
                 (flags & SHMS__ACCT_TEAM ? SHMS_POLICY_TEAM : 0);
      uint32_t team = shms__account_team(k, i + 1);
      if (team != 0)
        memcpy(r->team, shms__account_at(k, team)->name, SHMS_TENANT_MAX);
      r->weight = shms__account_weight(k, i + 1);
      for (int c = 0; c < SHMS_CLASS_COUNT; c++)
        r->cell_ns[c] = shms__load_64((uint64_t *)&a->cls[c].cell_ns);
    }
    n++;
  }
  *count = n;
  return SHMS_OK;
}

/* Under the table's lock: quota name's entry, made if absent; -1 if the table is full. */
static int quota_entry(const struct shms__cls *k, const char *name) {
  int q = shms__quota_find(k->quotas, name);
  if (q >= 0)
    return q;
  for (q = 0; q < SHMS_QUOTAS_MAX; q++) {
    struct shms__quota *e = &k->quotas[q];
    if (shms__load_32(&e->state) == SHMS__QUOTA_LIVE)
      continue;
    /* A free entry is written by the lock's holder only (one who died half way left it FREE). */
    memset(e->name, 0, sizeof e->name);
    strncpy(e->name, name, SHMS_TENANT_MAX);
    shms__store_64(&e->used, 0);
    return q;
  }
  return -1;
}

int shms_policy_quota(shms_t *h, const char *quota, uint32_t max) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if (quota == NULL || shms_tenant_check(quota) != SHMS_OK)
    return shms__fail(SHMS_EINVAL, "quota name: 1..%d graphic ASCII bytes", SHMS_TENANT_MAX);
  if (max < 1 || max > SHMS_QUOTA_UNITS_MAX)
    return shms__fail(SHMS_EINVAL, "quota %s: max: must be 1..%u, got %u", quota,
                      SHMS_QUOTA_UNITS_MAX, max);
  if ((rc = shms__admin_check(h, "set the maximum of quota %s", quota)) != SHMS_OK)
    return rc;
  const struct shms__cls *k = shms__table_view(h);
  if (k == NULL)
    return shms__fail(SHMS_EINVAL, "the segment has no class");
  if ((rc = shms__accounts_lock(k, POLICY_WAIT_NS)) != SHMS_OK)
    return rc;
  int q = quota_entry(k, quota);
  if (q >= 0) {
    shms__store_32(&k->quotas[q].max, max);
    /* The name is whole before anyone can find it. */
    shms__store_32(&k->quotas[q].state, SHMS__QUOTA_LIVE);
  }
  shms__accounts_unlock(k);
  if (q < 0)
    return shms__fail(SHMS_EQUEUEFULL, "the quota table is full (%d quotas): quota %s not added",
                      SHMS_QUOTAS_MAX, quota);
  /* Requests parked for it may fit under a higher maximum: every class looks. */
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (h->cls[c].id >= 0 && shms__load_32(&h->cls[c].ctl->quota_parked) != 0)
      SHMS__OP_VOID(h, &h->cls[c], shms__kick(h, &h->cls[c]));
  struct shms__ev e = {.kind = SHMS_EVENT_POLICY_CHANGED,
                       .cls = -1,
                       .cell = -1,
                       .pid = h->pid,
                       .reason = SHMS_POLICY_EVENT_QUOTA,
                       .value = max};
  shms__tenant_pack(quota, e.tenant); /* checked above */
  shms__note(h, &e);
  return SHMS_OK;
}

int shms_quota_list(shms_t *h, shms_quota_row *out, uint32_t max, uint32_t *count) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  if (count == NULL || (out == NULL && max != 0))
    return shms__fail(SHMS_EINVAL, "count is NULL, or out is NULL with max > 0");
  const struct shms__cls *k = shms__table_view(h);
  uint32_t n = 0;
  for (uint32_t q = 0; k != NULL && q < SHMS_QUOTAS_MAX; q++) {
    const struct shms__quota *e = &k->quotas[q];
    if (shms__load_32((uint32_t *)&e->state) != SHMS__QUOTA_LIVE)
      continue;
    if (n < max) {
      shms_quota_row *r = &out[n];
      memset(r, 0, sizeof *r);
      memcpy(r->name, e->name, SHMS_TENANT_MAX);
      shms__name_clean(r->name);
      r->max = shms__load_32((uint32_t *)&e->max);
      r->used = shms__quota_used(e);
      r->waiters = shms__quota_waiters(h, q);
    }
    n++;
  }
  *count = n;
  return SHMS_OK;
}
