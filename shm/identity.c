/* The caller's identity against the segment's rules (identity.h, docs/security.md). */
#include "identity.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crashpoint.h"
#include "error.h"
#include "handle.h"

/* Room for a passwd or group record's strings; a group with many members may need more. */
enum { RECORD_BYTES = 16384 };

int shms__cred_in_group(gid_t g) {
  if (g == getgid() || (g == getegid() && !getauxval(AT_SECURE)))
    return 1;
  gid_t small[64];
  gid_t *list = small;
  int n = getgroups(64, small);
  if (n < 0 && errno == EINVAL) { /* more than 64: ask how many, then read them all */
    int want = getgroups(0, NULL);
    list = want > 0 ? malloc((size_t)want * sizeof *list) : NULL;
    n = list != NULL ? getgroups(want, list) : -1;
  }
  int found = 0;
  for (int i = 0; i < n && !found; i++)
    found = list[i] == g;
  if (list != small)
    free(list);
  return found;
}

/*
 * The user and group databases are files (or a directory service) behind NSS: a lookup costs
 * microseconds and several system calls, far more than a lease. So each thread keeps its last
 * answers for a second: a name renamed or a group made in the meantime counts from then on.
 * The caller's own credentials are never cached: they are asked of the kernel every time.
 */
#define LOOKUP_TTL_NS 1000000000ull
enum { CACHED = 4 };

struct lookup {
  char name[SHMS_TENANT_MAX + 1]; /* the name looked up ("" for a slot never used)... */
  char kind;                      /* ... as a group ('@'), a user ('~'), or a uid's login ('#') */
  int found;
  uint32_t id;         /* the gid or uid found; for '#', the uid whose login name is `name`... */
  uint64_t expires_ns; /* CLOCK_MONOTONIC_COARSE */
};
static SHMS__TLS struct lookup cache[CACHED];
static SHMS__TLS unsigned cache_next;

static uint64_t coarse_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The cached answer for (kind, name) or, for '#', for uid `id`; NULL if none is fresh. */
static struct lookup *cached(char kind, const char *name, uint32_t id, uint64_t now) {
  for (unsigned i = 0; i < CACHED; i++) {
    struct lookup *l = &cache[i];
    if (l->kind == kind && now < l->expires_ns &&
        (kind == '#' ? l->id == id : strcmp(l->name, name) == 0))
      return l;
  }
  return NULL;
}

static void remember(char kind, const char *name, int found, uint32_t id, uint64_t now) {
  struct lookup *l = &cache[cache_next++ % CACHED];
  snprintf(l->name, sizeof l->name, "%s", name);
  l->kind = kind;
  l->found = found;
  l->id = id;
  l->expires_ns = now + LOOKUP_TTL_NS;
}

/* name as a decimal id, if it is one. */
static int numeric_id(const char *name, uint32_t *id) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(name, &end, 10);
  if (*name < '0' || *name > '9' || *end != '\0' || errno != 0 || v >= UINT32_MAX)
    return 0;
  *id = (uint32_t)v;
  return 1;
}

/* A group ('@') or user ('~') by name or number: its id into *id; 0 if there is none. */
static int name_id(char kind, const char *name, uint32_t *id) {
  if (numeric_id(name, id))
    return 1;
  uint64_t now = coarse_ns();
  const struct lookup *l = cached(kind, name, 0, now);
  if (l != NULL) {
    *id = l->id;
    return l->found;
  }
  char *buf = malloc(RECORD_BYTES);
  int found = 0;
  if (kind == '@') {
    struct group g, *r = NULL;
    if (buf != NULL && getgrnam_r(name, &g, buf, RECORD_BYTES, &r) == 0 && r != NULL)
      *id = (uint32_t)r->gr_gid, found = 1;
  } else {
    struct passwd p, *r = NULL;
    if (buf != NULL && getpwnam_r(name, &p, buf, RECORD_BYTES, &r) == 0 && r != NULL)
      *id = (uint32_t)r->pw_uid, found = 1;
  }
  free(buf);
  if (buf != NULL) /* out of memory is no answer to remember */
    remember(kind, name, found, found ? *id : 0, now);
  return found;
}

static int group_id(const char *name, gid_t *gid) {
  uint32_t id = 0;
  int found = name_id('@', name, &id);
  *gid = (gid_t)id;
  return found;
}

static int user_id(const char *name, uid_t *uid) {
  uint32_t id = 0;
  int found = name_id('~', name, &id);
  *uid = (uid_t)id;
  return found;
}

/* uid's login name into out (SHMS_TENANT_MAX + 1 bytes); 0 if it has none that fits. */
static int login_name(uid_t uid, char *out) {
  uint64_t now = coarse_ns();
  const struct lookup *l = cached('#', "", (uint32_t)uid, now);
  if (l != NULL) {
    memcpy(out, l->name, sizeof l->name);
    return l->found;
  }
  struct passwd p, *found = NULL;
  char *buf = malloc(RECORD_BYTES);
  int ok = buf != NULL && getpwuid_r(uid, &p, buf, RECORD_BYTES, &found) == 0 && found != NULL &&
           strlen(found->pw_name) <= SHMS_TENANT_MAX;
  out[0] = '\0';
  if (ok)
    snprintf(out, SHMS_TENANT_MAX + 1, "%s", found->pw_name);
  if (buf != NULL)
    remember('#', out, ok, (uint32_t)uid, now);
  free(buf);
  return ok;
}

static int check_binding(const shms_class_config *k, const char *cn, const char *tenant) {
  if (k->tenant_bind == SHMS_TENANT_ANY)
    return SHMS_OK; /* no system call on the fast path of an unbound class */
  uid_t uid = geteuid();
  if (k->tenant_bind == SHMS_TENANT_USER) {
    char login[SHMS_TENANT_MAX + 1];
    if (!login_name(uid, login))
      return shms__fail(SHMS_EPERM,
                        "class %s binds tenants to users (tenant=user): uid %u has no login name "
                        "to be a tenant",
                        cn, (unsigned)uid);
    if (strcmp(login, tenant) != 0)
      return shms__fail(SHMS_EPERM,
                        "class %s binds tenants to users (tenant=user): tenant '%s' is not the "
                        "caller's login name '%s' (uid %u)",
                        cn, tenant, login, (unsigned)uid);
  } else if (k->tenant_bind == SHMS_TENANT_GROUP) {
    gid_t gid = 0;
    if (!group_id(tenant, &gid))
      return shms__fail(SHMS_EPERM,
                        "class %s binds tenants to groups (tenant=group): there is no group named "
                        "'%s'",
                        cn, tenant);
    if (!shms__cred_in_group(gid))
      return shms__fail(SHMS_EPERM,
                        "class %s binds tenants to groups (tenant=group): the caller (uid %u) is "
                        "not in group '%s' (gid %u)",
                        cn, (unsigned)uid, tenant, (unsigned)gid);
  }
  return SHMS_OK;
}

/* 1 if allow-list identity entry e ("@GROUP", "~USER") names the caller. */
static int identity_matches(const char *e) {
  if (e[0] == '@') {
    gid_t gid = 0;
    return group_id(e + 1, &gid) && shms__cred_in_group(gid);
  }
  uid_t uid = 0;
  return user_id(e + 1, &uid) && uid == geteuid();
}

int shms__identity_check(const shms_class_config *k, const char *cn, const char *tenant) {
  int rc = check_binding(k, cn, tenant);
  if (rc != SHMS_OK)
    return rc;
  int identities = 0;
  for (uint32_t i = 0; i < k->allow_count && i < SHMS_ALLOW_MAX; i++) {
    char e[SHMS_TENANT_MAX + 1];
    memcpy(e, k->allow[i], SHMS_TENANT_MAX);
    e[SHMS_TENANT_MAX] = '\0';
    if (!shms__allow_is_identity(e))
      continue;
    if (identity_matches(e))
      return SHMS_OK;
    identities++;
  }
  if (identities > 0)
    return shms__fail(SHMS_EPERM,
                      "class %s allows only the users and groups its allow list names: the "
                      "caller (uid %u) is none of them",
                      cn, (unsigned)geteuid());
  return SHMS_OK;
}

int shms__admin_check(const struct shms *h, const char *fmt, ...) {
  uid_t uid = geteuid();
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  struct stat st;
  if (uid == 0)
    return SHMS_OK;
  if (fstat(h->fd, &st) != 0)
    return shms__fail(shms__from_errno(errno), "cannot stat the segment file: %s", strerror(errno));
  if (uid == st.st_uid)
    return SHMS_OK;
  int64_t admin = h->config.admin_group;
  if (admin >= 0 && shms__cred_in_group((gid_t)admin))
    return SHMS_OK;
  if (admin >= 0)
    return shms__fail(SHMS_EPERM,
                      "only the segment's owner (uid %u), root and members of its admin-group "
                      "(gid %u) may %s; the caller is uid %u",
                      (unsigned)st.st_uid, (unsigned)admin, what, (unsigned)uid);
  return shms__fail(SHMS_EPERM,
                    "only the segment's owner (uid %u) and root may %s (the segment has no "
                    "admin-group); the caller is uid %u",
                    (unsigned)st.st_uid, what, (unsigned)uid);
}
