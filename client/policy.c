/* Fair share's policy: tenants' weights, in the tenant table (shmsched.h). */
#include <string.h>

#include "../core/account.h"
#include "../core/report.h"
#include "../shm/atomic.h"
#include "../shm/error.h"
#include "../shm/identity.h"
#include "client.h"

/* The table is the segment's; any class's view reaches it. */
static const struct shms__cls *any_view(const struct shms *h) {
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (h->cls[c].id >= 0)
      return &h->cls[c];
  return NULL;
}

/* How long setting policy waits for the table's lock: others hold it for a few stores. */
#define POLICY_WAIT_NS (1000ull * 1000 * 1000)

int shms_policy_tenant(shms_t *h, const char *name, uint32_t weight) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if (name == NULL || shms_tenant_check(name) != SHMS_OK)
    return shms__fail(SHMS_EINVAL, "tenant name: 1..%d graphic ASCII bytes", SHMS_TENANT_MAX);
  if (weight < 1 || weight > SHMS_WEIGHT_MAX)
    return shms__fail(SHMS_EINVAL, "tenant %s: weight: must be 1..%u, got %u", name,
                      SHMS_WEIGHT_MAX, weight);
  if ((rc = shms__admin_check(h, "set the policy of tenant %s", name)) != SHMS_OK)
    return rc;
  const struct shms__cls *k = any_view(h);
  if (k == NULL)
    return shms__fail(SHMS_EINVAL, "the segment has no class");
  if ((rc = shms__account_set(k, name, weight, POLICY_WAIT_NS)) != SHMS_OK)
    return rc;
  struct shms__ev e = {
      .kind = SHMS_EVENT_POLICY_CHANGED, .cls = -1, .cell = -1, .pid = h->pid, .value = weight};
  shms__tenant_pack(name, e.tenant); /* checked above */
  shms__note(h, &e);
  return SHMS_OK;
}

int shms_policy_list(shms_t *h, shms_policy_row *out, uint32_t max, uint32_t *count) {
  shms__clear_detail();
  int rc = shms__handle_check(h);
  if (rc != SHMS_OK)
    return rc;
  if (count == NULL || (out == NULL && max != 0))
    return shms__fail(SHMS_EINVAL, "count is NULL, or out is NULL with max > 0");
  const struct shms__cls *k = any_view(h);
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
                 (flags & SHMS__ACCT_OTHER ? SHMS_POLICY_OTHER : 0);
      r->weight = shms__account_weight(k, i + 1);
      for (int c = 0; c < SHMS_CLASS_COUNT; c++)
        r->cell_ns[c] = shms__load_64((uint64_t *)&a->cls[c].cell_ns);
    }
    n++;
  }
  *count = n;
  return SHMS_OK;
}
