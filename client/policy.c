/* Fair share's policy: tenants' and teams' weights and tenants' teams, in the tenant table
 * (shmsched.h). */
#include <string.h>

#include "../core/account.h"
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
    e.value = p->team[0] != '\0' ? shms__account_team(k, shms__account_lookup(k, p->name, 0)) : 0;
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
