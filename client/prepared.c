/*
 * Prepared requests: a request's class and tenant validated once (shms_request_prepare) for the
 * acquires that follow (shms_acquire_prepared, shms_try_acquire_prepared). The prepared request
 * is the caller's memory, so every use checks that it is still what this handle made: its
 * segment incarnation, its handle, and a check word keyed by the handle's secret over the words
 * it uses. It guards against a stale copy, another handle's and stray writes; it is no
 * security boundary against the process itself, which can read the key (docs/security.md: a
 * process is trusted with its own memory).
 */
#include <ck_pr.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../core/report.h"
#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "../shm/identity.h"
#include "client.h"

/* The words of a prepared request (shms_prepared.opaque). */
enum {
  P_INCARNATION,                         /* the segment's incarnation */
  P_HANDLE,                              /* the preparing handle's number (prepared_id) */
  P_TENANT,                              /* SHMS__NAME_WORDS words: the tenant, packed */
  P_CLASS = P_TENANT + SHMS__NAME_WORDS, /* class | flags << 32 */
  P_PRIORITY,                            /* priority | P_MAGIC << 32 */
  P_CHECK,                               /* seal() of the tenant, class and priority words */
  P_WORDS
};
/* Every byte of shms_prepared is covered: a stray write anywhere in it is seen. */
_Static_assert(P_WORDS == sizeof(shms_prepared) / sizeof(uint64_t), "shms_prepared is P_WORDS");

#define P_MAGIC 0x50524550ull /* "PREP" */
/* The class's rules name users or groups: the caller's credentials are checked on every call. */
#define P_CREDENTIALS (1u << 0)
/* The class has tenant-max-active: no fast path (the dispatcher keeps the tenant's books). */
#define P_LIMITED (1u << 1)

/*
 * The check word of the words a prepared request keeps for use (the tenant, the class and flags,
 * the priority): each word mixed with the handle's key and rotated by its own amount, the six
 * summed, then an xorshift-multiply finish. A change to any one word changes the sum (xor with a
 * key and a rotation are bijections, and so is adding the rest) and the finish is a bijection,
 * so it is always seen; changes to several cancel out by chance alone (two words swapped land
 * under different rotations). Rotations and adds, one multiply: a few cycles on every prepared
 * acquire (six multiplies cost 0.3-0.5 ns more, design/fast-path.md). The incarnation and the
 * handle's number are compared whole instead.
 */
static inline uint64_t rotl(uint64_t x, int r) { return x << r | x >> (64 - r); }

static inline uint64_t seal(const uint64_t key[2], const uint64_t *w) {
  _Static_assert(P_CHECK - P_TENANT == 6, "seal() covers six words");
  uint64_t x = (w[P_TENANT] ^ key[0]) + rotl(w[P_TENANT + 1] ^ key[1], 11) +
               rotl(w[P_TENANT + 2] ^ key[0], 23) + rotl(w[P_TENANT + 3] ^ key[1], 37) +
               rotl(w[P_CLASS] ^ key[0], 47) + rotl(w[P_PRIORITY] ^ key[1], 59);
  x ^= x >> 32;
  x *= 0x8ebc6af09c88c6e3ull;
  return x ^ (x >> 29);
}

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void shms__prepared_setup(struct shms *h) {
  static uint64_t handles; /* numbers of this process's handles: never reused */
  h->prepared_id = ck_pr_faa_64(&handles, 1) + 1;
  if (getrandom(h->prepared_key, sizeof h->prepared_key, GRND_NONBLOCK) ==
      (ssize_t)sizeof h->prepared_key)
    return;
  /* No entropy yet (early boot): a key that still differs per handle and per process. */
  uint64_t x =
      shms__real_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)h ^ h->prepared_id;
  h->prepared_key[0] = splitmix(&x);
  h->prepared_key[1] = splitmix(&x);
}

/* Whether class k's rules depend on who the caller is (docs/security.md, "Identities"). */
static int names_identities(const struct shms__cls *k) {
  if (k->cfg->tenant_bind != SHMS_TENANT_ANY)
    return 1;
  for (uint32_t i = 0; i < k->cfg->allow_count && i < SHMS_ALLOW_MAX; i++)
    if (shms__allow_is_identity(k->cfg->allow[i]))
      return 1;
  return 0;
}

int shms_request_prepare(shms_t *h, const shms_request *req, shms_prepared *out) {
  shms__clear_detail();
  if (req == NULL)
    return shms__fail(SHMS_EINVAL, "request is NULL");
  if (req->cells > 1)
    return shms__fail(SHMS_EINVAL, "a prepared request takes one cell (cells=%u: use shms_acquire)",
                      req->cells);
  if (req->nquotas != 0)
    return shms__fail(SHMS_EINVAL, "a prepared request names no quotas (use shms_acquire for a "
                                   "request that does)");
  if (req->deadline_ns != 0 || req->activation != NULL)
    return shms__fail(SHMS_EINVAL, "a prepared request takes no deadline and no activation id "
                                   "(each belongs to one request: use shms_acquire for them)");
  struct shms__cls *k = NULL;
  uint64_t w[P_WORDS] = {0};
  int rc = shms__check_request(h, req, SHMS_MODE_LEASE, out, "prepared request", &k, &w[P_TENANT]);
  if (rc != SHMS_OK)
    return rc;
  uint32_t flags =
      (names_identities(k) ? P_CREDENTIALS : 0) | (k->cfg->tenant_max_active != 0 ? P_LIMITED : 0);
  w[P_INCARNATION] = h->incarnation;
  w[P_HANDLE] = h->prepared_id;
  w[P_CLASS] = (uint64_t)(uint32_t)k->id | (uint64_t)flags << 32;
  w[P_PRIORITY] = (uint64_t)(uint32_t)req->priority | P_MAGIC << 32;
  w[P_CHECK] = seal(h->prepared_key, w);
  memset(out, 0, sizeof *out);
  memcpy(out->opaque, w, sizeof w);
  return SHMS_OK;
}

/* The prepared request's tenant name, unpacked (the words are NUL-padded). */
static void tenant_of(const uint64_t *w, char name[SHMS_TENANT_MAX + 1]) {
  memcpy(name, &w[P_TENANT], SHMS_TENANT_MAX);
  name[SHMS_TENANT_MAX] = '\0';
}

/* Why the prepared request w is not this handle's to use (SHMS_ESTALE with the detail). */
__attribute__((noinline, cold)) static int refuse(const struct shms *h, const uint64_t *w) {
  if (w[P_INCARNATION] != h->incarnation)
    return shms__fail(SHMS_ESTALE,
                      "the prepared request belongs to another segment or incarnation");
  if (w[P_HANDLE] != h->prepared_id)
    return shms__fail(SHMS_ESTALE, "the request was prepared with another handle (prepared "
                                   "requests are the handle's own: prepare it with this one)");
  return shms__fail(SHMS_ESTALE, "the prepared request is corrupt (its bytes are not as "
                                 "shms_request_prepare left them)");
}

/*
 * The prologue of a prepared call: h a member handle, p this handle's prepared request, whole,
 * then what can change since it was prepared: the caller's credentials where the class's rules
 * name them, the segment's state, the class's quarantine. Then *wp is p's words and *kp the
 * class. The words are used where they are, not copied: the prepared request is only read while
 * in use (api.md), and a caller writing it meanwhile races itself; the fast path then records
 * the name it read for observers only (a fast-path lease has no tenant record), and the queued
 * path validates its request again.
 */
static int check_prepared(struct shms *h, const shms_prepared *p, const shms_lease *lease,
                          const uint64_t **wp, struct shms__cls **kp) {
  shms__clear_detail();
  int rc = shms__handle_check_member(h);
  if (rc != SHMS_OK)
    return rc;
  if (p == NULL)
    return shms__fail(SHMS_EINVAL, "prepared request is NULL");
  if (lease == NULL)
    return shms__fail(SHMS_EINVAL, "lease is NULL");
  const uint64_t *w = p->opaque;
  uint32_t cls = (uint32_t)w[P_CLASS], flags = (uint32_t)(w[P_CLASS] >> 32);
  /* One branch for the three ways to be refused; which one, off the fast path. The class is in
   * range once sealed, but an index into h is checked whatever the seal says. */
  if (w[P_INCARNATION] != h->incarnation || w[P_HANDLE] != h->prepared_id ||
      w[P_CHECK] != seal(h->prepared_key, w) || cls >= SHMS_CLASS_COUNT || h->cls[cls].id < 0)
    return refuse(h, w);
  struct shms__cls *k = &h->cls[cls];
  if (flags & P_CREDENTIALS) {
    char name[SHMS_TENANT_MAX + 1];
    tenant_of(w, name);
    if ((rc = shms__identity_check(k->cfg, shms_class_name(k->id), name)) != SHMS_OK)
      return rc;
  }
  int door = shms__segment_state(h) != SHMS_SEG_ACTIVE          ? SHMS_ESHUTDOWN
             : shms__load_32(&k->ctl->quarantined) >= k->ncells ? SHMS_EQUARANTINED
                                                                : SHMS_OK;
  if (door != SHMS_OK) { /* recorded as shms__check_request records it */
    char name[SHMS_TENANT_MAX + 1];
    tenant_of(w, name);
    shms__note_refused(h, k, name, door);
    return door == SHMS_ESHUTDOWN
               ? shms__fail(door, "the segment is draining")
               : shms__fail(door, "every cell of class %s is quarantined", shms_class_name(k->id));
  }
  *wp = w;
  *kp = k;
  return SHMS_OK;
}

/* The request p was prepared from (the slow paths queue it), its tenant's name in name. */
static shms_request request_of(const uint64_t *w, char name[SHMS_TENANT_MAX + 1]) {
  tenant_of(w, name);
  return (shms_request){.cls = (shms_class_t)(uint32_t)w[P_CLASS],
                        .tenant = name,
                        .priority = (int32_t)(uint32_t)w[P_PRIORITY]};
}

int shms_acquire_prepared(shms_t *h, const shms_prepared *p, shms_lease *lease) {
  const uint64_t *w = NULL;
  struct shms__cls *k = NULL;
  int rc = check_prepared(h, p, lease, &w, &k);
  if (rc != SHMS_OK)
    return rc;
  if (!((w[P_CLASS] >> 32) & P_LIMITED) &&
      (rc = shms__take_blocking(h, k, &w[P_TENANT], 0, lease, 0)) != SHMS_EWOULDBLOCK)
    return rc;
  char name[SHMS_TENANT_MAX + 1];
  shms_request req = request_of(w, name);
  return shms__acquire_queued(h, &req, lease);
}

int shms_try_acquire_prepared(shms_t *h, const shms_prepared *p, shms_lease *lease) {
  const uint64_t *w = NULL;
  struct shms__cls *k = NULL;
  int rc = check_prepared(h, p, lease, &w, &k);
  if (rc != SHMS_OK)
    return rc;
  if (!((w[P_CLASS] >> 32) & P_LIMITED))
    return shms__try_now(h, k, &w[P_TENANT], 0, lease);
  char name[SHMS_TENANT_MAX + 1];
  shms_request req = request_of(w, name);
  return shms__try_limited(h, k, &req, lease);
}
