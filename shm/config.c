/* Configuration defaults and validation: the single authority on what is valid. */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "layout.h"

static const char *const class_names[SHMS_CLASS_COUNT] = {
    [SHMS_CLASS_TINY] = "tiny",
    [SHMS_CLASS_SMALL] = "small",
    [SHMS_CLASS_STANDARD] = "standard",
    [SHMS_CLASS_LARGE] = "large",
    [SHMS_CLASS_EXTRA_LARGE] = "extra-large",
};

const char *shms_class_name(shms_class_t c) {
  if ((unsigned)c >= SHMS_CLASS_COUNT)
    return NULL;
  return class_names[c];
}

int shms_class_from_name(const char *name) {
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (name != NULL && strcmp(name, class_names[c]) == 0)
      return c;
  return -1;
}

void shms_config_init(shms_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->starvation_after_ns = SHMS_DEFAULT_STARVATION_NS;
  cfg->max_tenants = SHMS_DEFAULT_MAX_TENANTS;
  cfg->max_processes = SHMS_DEFAULT_MAX_PROCESSES;
  cfg->file_mode = SHMS_DEFAULT_FILE_MODE;
  cfg->group = -1;
  cfg->admin_group = -1;
  cfg->events = SHMS_DEFAULT_EVENTS;
}

void shms__name_clean(char *name) {
  for (int i = 0; name[i] != '\0'; i++)
    if (name[i] <= ' ' || name[i] > '~')
      name[i] = '?';
}

void shms__name_copy(char *out, const char *name) {
  memcpy(out, name, SHMS_TENANT_MAX);
  out[SHMS_TENANT_MAX] = '\0';
  shms__name_clean(out);
}

/*
 * A name holding a byte it may not, at i: the failure, naming the byte for what it is ("a space
 * (0x20)", "a control byte 0x0a", "a non-ASCII byte 0xc3"). Tenant and segment
 * names share it, so the library, the CLI and the binding describe them alike. Out of line: the
 * tenant check is on every acquire.
 */
__attribute__((noinline, cold)) static int bad_name_byte(const char *what, unsigned char ch,
                                                         size_t i, const char *rule) {
  char buf[32];
  const char *desc = buf;
  if (ch == ' ')
    desc = "a space (0x20)";
  else
    snprintf(buf, sizeof buf, "%s 0x%02x%s", ch > 0x7f ? "a non-ASCII byte" : "a control byte", ch,
             ch == 0x7f ? " (DEL)" : "");
  return shms__fail(SHMS_EINVAL, "%s name has %s at %zu (%s)", what, desc, i, rule);
}

int shms__tenant_pack(const char *name, uint64_t words[SHMS__NAME_WORDS]) {
  shms__clear_detail();
  if (name == NULL || name[0] == '\0')
    return shms__fail(SHMS_EINVAL, "tenant name is empty");
  /* One pass (this is on every acquire): graphic ASCII only, so names print and parse
   * unambiguously, and a NUL within the first SHMS_TENANT_MAX + 1 bytes. Each word is built
   * in a register and stored whole (bytes stored one by one and read back as words would stall
   * store forwarding). */
  size_t i = 0;
  for (size_t w = 0; w < SHMS__NAME_WORDS; w++) {
    uint64_t word = 0;
    for (unsigned b = 0; b < 8; b++, i++) {
      unsigned char ch = (unsigned char)name[i];
      if (ch == '\0') {
        words[w] = word;
        while (++w < SHMS__NAME_WORDS)
          words[w] = 0;
        return SHMS_OK;
      }
      if (ch < 0x21 || ch > 0x7e)
        return bad_name_byte("tenant", ch, i, "no spaces, controls or non-ASCII bytes");
      word |= (uint64_t)ch << (8 * b);
    }
    words[w] = word;
  }
  return shms__fail(SHMS_EINVAL, "tenant name is longer than %d bytes", SHMS_TENANT_MAX);
}

int shms_tenant_check(const char *name) {
  uint64_t words[SHMS__NAME_WORDS];
  return shms__tenant_pack(name, words);
}

/* A path's last component (after its last '/'): it must name a file. */
static int last_component_check(const char *name) {
  const char *last = strrchr(name, '/');
  if (last == NULL)
    return SHMS_OK;
  last++;
  if (*last == '\0')
    return shms__fail(
        SHMS_EINVAL, "segment path '%s' ends in '/': name the segment file, not a directory", name);
  if (strcmp(last, ".") == 0 || strcmp(last, "..") == 0)
    return shms__fail(SHMS_EINVAL,
                      "segment path '%s' ends in '%s', a directory: name the segment file", name,
                      last);
  return SHMS_OK;
}

int shms_name_check(const char *name) {
  shms__clear_detail();
  if (name == NULL || name[0] == '\0')
    return shms__fail(SHMS_EINVAL, "segment name is empty");
  size_t n = strnlen(name, SHMS_NAME_MAX + 1);
  if (n > SHMS_NAME_MAX)
    return shms__fail(SHMS_EINVAL,
                      "segment name is longer than %d bytes (SHMS_NAME_MAX, a path's whole length "
                      "included)",
                      SHMS_NAME_MAX);
  if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
    return shms__fail(SHMS_EINVAL, "segment name '%s' is reserved", name);
  /* A '/' makes the name a path to the segment file (shm/segpath.h); the bytes allowed are the
   * same either way, so that every name and path prints and parses unambiguously. */
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)name[i];
    if (ch < 0x21 || ch > 0x7e)
      return bad_name_byte("segment", ch, i, "no spaces, controls or non-ASCII bytes");
  }
  return last_component_check(name);
}

static int validate_class(const shms_config *cfg, int c) {
  const shms_class_config *k = &cfg->classes[c];
  const char *cn = class_names[c];
  if (k->cells < 1 || k->cells > SHMS_CELLS_MAX)
    return shms__fail(SHMS_EINVAL, "class %s: cells: must be 1..%d, got %u", cn, SHMS_CELLS_MAX,
                      k->cells);
  if (k->queue > SHMS_QUEUE_MAX)
    return shms__fail(SHMS_EINVAL, "class %s: queue: must be 0..%u, got %u", cn, SHMS_QUEUE_MAX,
                      k->queue);
  if (k->mode != SHMS_MODE_LEASE && k->mode != SHMS_MODE_WORKER)
    return shms__fail(SHMS_EINVAL, "class %s: mode: must be lease or worker", cn);
  if (k->mode == SHMS_MODE_WORKER && (k->payload < 1 || k->payload > SHMS_PAYLOAD_MAX))
    return shms__fail(SHMS_EINVAL, "class %s: payload: must be 1..%u bytes, got %u", cn,
                      SHMS_PAYLOAD_MAX, k->payload);
  if (k->mode == SHMS_MODE_LEASE && k->payload != 0)
    return shms__fail(SHMS_EINVAL, "class %s: payload: only a worker class carries payloads", cn);
  if (k->tenant_max_active > k->cells)
    return shms__fail(SHMS_EINVAL, "class %s: tenant-max-active: must be 0..cells (%u), got %u", cn,
                      k->cells, k->tenant_max_active);
  if (k->on_holder_death != SHMS_ON_DEATH_QUARANTINE && k->on_holder_death != SHMS_ON_DEATH_RELEASE)
    return shms__fail(SHMS_EINVAL, "class %s: on-holder-death: must be quarantine or release", cn);
  if (k->grant_timeout_ns != 0 && k->mode == SHMS_MODE_WORKER)
    return shms__fail(SHMS_EINVAL,
                      "class %s: grant-timeout: only a lease class revokes grants (a worker "
                      "class's cell is its worker)",
                      cn);
  if (k->grant_timeout_ns != 0 &&
      (k->grant_timeout_ns < SHMS_MIN_DURATION_NS || k->grant_timeout_ns > SHMS_MAX_DURATION_NS))
    return shms__fail(SHMS_EINVAL, "class %s: grant-timeout: must be 1ms..24h", cn);
  if (k->overtake_ns != 0 && k->mode == SHMS_MODE_WORKER)
    return shms__fail(SHMS_EINVAL,
                      "class %s: overtake: only a lease class has a fast path that overtakes", cn);
  if (k->overtake_ns != 0 && k->tenant_max_active != 0)
    return shms__fail(SHMS_EINVAL,
                      "class %s: overtake: a class with tenant-max-active always queues (it has "
                      "no fast path to overtake with)",
                      cn);
  if (k->overtake_ns != 0 && k->overtake_ns != SHMS_OVERTAKE_STRICT &&
      (k->overtake_ns < SHMS_OVERTAKE_MIN_NS || k->overtake_ns > SHMS_OVERTAKE_MAX_NS))
    return shms__fail(SHMS_EINVAL, "class %s: overtake: must be 0 (strict) or 1us..1s", cn);
  if (k->fairness > SHMS_FAIRNESS_TIME)
    return shms__fail(SHMS_EINVAL, "class %s: fairness: must be time or grants", cn);
  if (k->fairness == SHMS_FAIRNESS_TIME && k->mode == SHMS_MODE_WORKER)
    return shms__fail(SHMS_EINVAL,
                      "class %s: fairness: a worker class is fair by grants (time is for lease "
                      "classes)",
                      cn);
  if (k->position > SHMS_CLASS_COUNT)
    return shms__fail(SHMS_EINVAL, "class %s: position: must be 0..%d, got %u", cn,
                      SHMS_CLASS_COUNT, k->position);
  for (int o = 0; o < c; o++)
    if (k->position != 0 && cfg->classes[o].configured && cfg->classes[o].position == k->position)
      return shms__fail(SHMS_EINVAL, "class %s: position: %u is class %s's too", cn, k->position,
                        class_names[o]);
  if (k->on_command_crash != SHMS_ON_CRASH_RELEASE &&
      k->on_command_crash != SHMS_ON_CRASH_QUARANTINE)
    return shms__fail(SHMS_EINVAL, "class %s: on-command-crash: must be release or quarantine", cn);
  if (k->tenant_bind > SHMS_TENANT_GROUP)
    return shms__fail(SHMS_EINVAL, "class %s: tenant: must be any, user or group", cn);
  if (k->allow_count > SHMS_ALLOW_MAX)
    return shms__fail(SHMS_EINVAL, "class %s: allow: at most %d tenants, got %u", cn,
                      SHMS_ALLOW_MAX, k->allow_count);
  for (uint32_t i = 0; i < k->allow_count; i++) {
    char tenant[SHMS_TENANT_MAX + 1];
    memcpy(tenant, k->allow[i], sizeof tenant);
    tenant[SHMS_TENANT_MAX] = '\0';
    if (strnlen(k->allow[i], sizeof k->allow[i]) > SHMS_TENANT_MAX ||
        shms_tenant_check(tenant) != SHMS_OK) {
      char why[200];
      snprintf(why, sizeof why, "%s", shms_last_error_detail());
      return shms__fail(SHMS_EINVAL, "class %s: allow: entry %u: %s", cn, i + 1, why);
    }
    if ((tenant[0] == '@' || tenant[0] == '~') && tenant[1] == '\0')
      return shms__fail(SHMS_EINVAL, "class %s: allow: entry %u: '%c' names no %s", cn, i + 1,
                        tenant[0], tenant[0] == '@' ? "group" : "user");
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(k->allow[i], k->allow[j]) == 0)
        return shms__fail(SHMS_EINVAL, "class %s: allow: tenant '%s' is listed twice", cn, tenant);
  }
  return SHMS_OK;
}

shms_fairness_t shms_class_fairness(const shms_class_config *k) {
  if (k->fairness != SHMS_FAIRNESS_DEFAULT)
    return (shms_fairness_t)k->fairness;
  /* By time where leases are held (their cost is the time held); a worker class's jobs are
   * divided by count. */
  return k->mode == SHMS_MODE_LEASE ? SHMS_FAIRNESS_TIME : SHMS_FAIRNESS_GRANTS;
}

int shms_class_order(const shms_config *cfg, shms_class_t out[SHMS_CLASS_COUNT]) {
  int n = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    if (!cfg->classes[c].configured)
      continue;
    /* Insertion by position (0 sorts as after every other, ties in class order). */
    uint32_t p = cfg->classes[c].position ? cfg->classes[c].position : UINT32_MAX;
    int i = n++;
    for (; i > 0; i--) {
      uint32_t q = cfg->classes[out[i - 1]].position;
      if ((q ? q : UINT32_MAX) <= p)
        break;
      out[i] = out[i - 1];
    }
    out[i] = (shms_class_t)c;
  }
  return n;
}

/* The quota table: at most SHMS_QUOTAS_MAX entries, each named as a tenant is, none twice,
 * each with a maximum of 1..SHMS_QUOTA_UNITS_MAX. */
static int validate_quotas(const shms_config *cfg) {
  if (cfg->quota_count > SHMS_QUOTAS_MAX)
    return shms__fail(SHMS_EINVAL, "quotas: the table holds %u, got %u", SHMS_QUOTAS_MAX,
                      cfg->quota_count);
  for (uint32_t q = 0; q < cfg->quota_count; q++) {
    char name[SHMS_TENANT_MAX + 1];
    memcpy(name, cfg->quotas[q].name, SHMS_TENANT_MAX);
    name[SHMS_TENANT_MAX] = '\0';
    if (cfg->quotas[q].name[SHMS_TENANT_MAX] != '\0' || shms_tenant_check(name) != SHMS_OK)
      return shms__fail(SHMS_EINVAL, "quota %u: name: 1..%d graphic ASCII bytes", q + 1,
                        SHMS_TENANT_MAX);
    if (cfg->quotas[q].max < 1 || cfg->quotas[q].max > SHMS_QUOTA_UNITS_MAX)
      return shms__fail(SHMS_EINVAL, "quota %s: max: must be 1..%u, got %u", name,
                        SHMS_QUOTA_UNITS_MAX, cfg->quotas[q].max);
    for (uint32_t p = 0; p < q; p++)
      if (strncmp(cfg->quotas[p].name, name, SHMS_TENANT_MAX + 1) == 0)
        return shms__fail(SHMS_EINVAL, "quota %s: named twice", name);
  }
  return SHMS_OK;
}

int shms_config_validate(const shms_config *cfg) {
  shms__clear_detail();
  if (cfg == NULL)
    return shms__fail(SHMS_EINVAL, "configuration is NULL");
  int any = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    if (cfg->classes[c].configured > 1)
      return shms__fail(SHMS_EINVAL, "class %s: configured flag is not 0 or 1", class_names[c]);
    if (!cfg->classes[c].configured)
      continue;
    any = 1;
    int rc = validate_class(cfg, c);
    if (rc != SHMS_OK)
      return rc;
  }
  if (!any)
    return shms__fail(SHMS_EINVAL, "class: at least one class must be configured");
  if (cfg->starvation_after_ns < SHMS_MIN_DURATION_NS ||
      cfg->starvation_after_ns > SHMS_MAX_DURATION_NS)
    return shms__fail(SHMS_EINVAL, "starvation-after: must be 1ms..24h");
  if (cfg->max_tenants < 1 || cfg->max_tenants > SHMS_TENANTS_MAX)
    return shms__fail(SHMS_EINVAL, "max-tenants: must be 1..%u, got %u", SHMS_TENANTS_MAX,
                      cfg->max_tenants);
  if (cfg->max_processes < 1 || cfg->max_processes > SHMS_PROCS_MAX)
    return shms__fail(SHMS_EINVAL, "max-processes: must be 1..%u, got %u", SHMS_PROCS_MAX,
                      cfg->max_processes);
  if (cfg->file_mode & ~0777u)
    return shms__fail(SHMS_EINVAL, "mode: only permission bits (0..0777) are allowed, got 0%o",
                      cfg->file_mode);
  if ((cfg->file_mode & 0600u) != 0600u)
    return shms__fail(SHMS_EINVAL, "mode: the owner must keep read and write (0600), got 0%03o",
                      cfg->file_mode);
  if (cfg->group < -1 || cfg->group > (int64_t)UINT32_MAX - 1)
    return shms__fail(SHMS_EINVAL, "group: not a valid gid");
  if (cfg->admin_group < -1 || cfg->admin_group > (int64_t)UINT32_MAX - 1)
    return shms__fail(SHMS_EINVAL, "admin-group: not a valid gid");
  if (cfg->events != 0 && (cfg->events < SHMS_EVENTS_MIN || cfg->events > SHMS_EVENTS_MAX ||
                           (cfg->events & (cfg->events - 1)) != 0))
    return shms__fail(SHMS_EINVAL,
                      "events: must be 0 (no event ring) or a power of two %u..%u, got %u",
                      SHMS_EVENTS_MIN, SHMS_EVENTS_MAX, cfg->events);
  if (cfg->tenant_table != 0 &&
      (cfg->tenant_table < SHMS_TENANT_TABLE_MIN || cfg->tenant_table > SHMS_TENANTS_MAX))
    return shms__fail(SHMS_EINVAL, "tenant-table: must be %u..%u records, got %u",
                      SHMS_TENANT_TABLE_MIN, SHMS_TENANTS_MAX, cfg->tenant_table);
  int rc = validate_quotas(cfg);
  if (rc != SHMS_OK)
    return rc;
  uint64_t size = shms__layout_size(cfg);
  if (size == 0 || size > SHMS_SEGMENT_MAX)
    return shms__fail(SHMS_EINVAL,
                      "configuration needs a segment of %llu bytes, more than the %llu allowed",
                      (unsigned long long)size, (unsigned long long)SHMS_SEGMENT_MAX);
  return SHMS_OK;
}
