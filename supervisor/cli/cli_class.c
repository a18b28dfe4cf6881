/* One class's keys (cli_class.h): parsed here, range-checked by the library. */
#include "cli_class.h"

#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "cli_config.h"

static const char *const key_names[CLI_KEY_COUNT] = {
    [CLI_KEY_CELLS] = "cells",
    [CLI_KEY_QUEUE] = "queue",
    [CLI_KEY_MODE] = "mode",
    [CLI_KEY_PAYLOAD] = "payload",
    [CLI_KEY_TENANT_MAX_ACTIVE] = "tenant-max-active",
    [CLI_KEY_ALLOW] = "allow",
    [CLI_KEY_ON_HOLDER_DEATH] = "on-holder-death",
    [CLI_KEY_GRANT_TIMEOUT] = "grant-timeout",
    [CLI_KEY_ON_COMMAND_CRASH] = "on-command-crash",
    [CLI_KEY_TENANT] = "tenant",
    [CLI_KEY_OVERTAKE] = "overtake",
    [CLI_KEY_FAIRNESS] = "fairness",
};

const char *cli_class_key_name(int key) {
  return key >= 0 && key < CLI_KEY_COUNT ? key_names[key] : "?";
}

void cli_class_begin(struct cli_class_build *b, int cls) {
  memset(b, 0, sizeof *b);
  b->cls = cls;
}

/* Prefix err (which holds a value parser's reason) with the key's name. */
static int blame(const char *key, char *err, size_t n) {
  char why[256];
  snprintf(why, sizeof why, "%s", err);
  snprintf(err, n, "%s: %s", key, why);
  return SHMS_EINVAL;
}

static int pick(const char *v, const char *a, const char *b, uint32_t *out, const char *key,
                char *err, size_t n) {
  char q[96];
  if (strcmp(v, a) == 0 || strcmp(v, b) == 0) {
    *out = strcmp(v, a) == 0 ? 0 : 1;
    return 0;
  }
  snprintf(err, n, "%s: must be %s or %s, got '%s'", key, a, b, cli_quote(q, sizeof q, v));
  return SHMS_EINVAL;
}

/* tenant=any|user|group: whom the class's tenant names belong to (shms_tenant_bind_t). */
static int parse_tenant_bind(shms_class_config *k, const char *v, char *err, size_t n) {
  static const char *const words[] = {"any", "user", "group"};
  char q[96];
  for (uint32_t i = 0; i < 3; i++)
    if (strcmp(v, words[i]) == 0) {
      k->tenant_bind = i;
      return 0;
    }
  snprintf(err, n, "tenant: must be any, user or group, got '%s'", cli_quote(q, sizeof q, v));
  return SHMS_EINVAL;
}

/* An allow entry "@GROUP" or "~USER" must name a group or user that exists now (a number is
 * taken as it is): a typo would otherwise lock everyone out. */
static int check_identity(const char *name, char *err, size_t n) {
  char q[96];
  const char *id = name + 1;
  if (strspn(id, "0123456789") == strlen(id) && id[0] != '\0')
    return 0;
  if (name[0] == '@' ? getgrnam(id) != NULL : getpwnam(id) != NULL)
    return 0;
  snprintf(err, n, "allow: '%s': there is no %s named '%s'", cli_quote(q, sizeof q, name),
           name[0] == '@' ? "group" : "user", id);
  return SHMS_EINVAL;
}

/* '+'-separated tenant names (or identities: @GROUP, ~USER) appended to the allow list. */
static int parse_allow(shms_class_config *k, const char *v, char *err, size_t n) {
  char q[96];
  for (const char *p = v;; p++) {
    size_t len = strcspn(p, "+");
    char name[SHMS_TENANT_MAX + 1];
    snprintf(name, sizeof name, "%.*s", (int)len, p);
    if (len == 0) {
      snprintf(err, n, "allow: empty tenant name in '%s'", cli_quote(q, sizeof q, v));
      return SHMS_EINVAL;
    }
    if (len > SHMS_TENANT_MAX) {
      snprintf(err, n, "allow: tenant '%s...' is longer than %d bytes",
               cli_quote(q, sizeof q, name), SHMS_TENANT_MAX);
      return SHMS_EINVAL;
    }
    if (shms_tenant_check(name) != SHMS_OK) {
      snprintf(err, n, "allow: tenant '%s': %s", cli_quote(q, sizeof q, name),
               shms_last_error_detail());
      return SHMS_EINVAL;
    }
    if ((name[0] == '@' || name[0] == '~') && check_identity(name, err, n) != 0)
      return SHMS_EINVAL;
    if (k->allow_count >= SHMS_ALLOW_MAX) {
      snprintf(err, n, "allow: at most %d tenants", SHMS_ALLOW_MAX);
      return SHMS_EINVAL;
    }
    memcpy(k->allow[k->allow_count++], name, len + 1);
    p += len;
    if (*p == '\0')
      return 0;
  }
}

/* overtake=0 (strict hand-off) or a duration, which may be in microseconds (100us): the bound
 * is meant to be shorter than the millisecond every other duration starts at. */
static int parse_overtake(shms_class_config *k, const char *v, char *err, size_t n) {
  size_t digits = strspn(v, "0123456789"), len = strlen(v);
  if (strcmp(v, "0") == 0) {
    k->overtake_ns = SHMS_OVERTAKE_STRICT;
    return 0;
  }
  if (digits > 0 && digits <= 9 && len == digits + 2 && strcmp(v + digits, "us") == 0) {
    uint64_t us = 0;
    for (size_t i = 0; i < digits; i++)
      us = us * 10 + (uint64_t)(v[i] - '0');
    if (us == 0) {
      k->overtake_ns = SHMS_OVERTAKE_STRICT;
      return 0;
    }
    k->overtake_ns = us * 1000;
    return 0;
  }
  if (cli_parse_duration(v, &k->overtake_ns, err, n) == 0)
    return 0;
  char q[96];
  snprintf(err, n, "overtake: must be 0 (strict) or a duration such as 100us or 1ms, got '%s'",
           cli_quote(q, sizeof q, v));
  return SHMS_EINVAL;
}

static int find_key(const char *key) {
  for (int i = 0; i < CLI_KEY_COUNT; i++)
    if (strcmp(key, key_names[i]) == 0)
      return i;
  return -1;
}

static int set_value(shms_class_config *k, int key, const char *v, char *err, size_t n) {
  uint32_t *num = NULL;
  switch (key) {
  case CLI_KEY_CELLS:
    num = &k->cells;
    break;
  case CLI_KEY_QUEUE:
    num = &k->queue;
    break;
  case CLI_KEY_PAYLOAD:
    num = &k->payload;
    break;
  case CLI_KEY_TENANT_MAX_ACTIVE:
    num = &k->tenant_max_active;
    break;
  case CLI_KEY_MODE:
    return pick(v, "lease", "worker", &k->mode, "mode", err, n);
  case CLI_KEY_ON_HOLDER_DEATH:
    return pick(v, "quarantine", "release", &k->on_holder_death, "on-holder-death", err, n);
  case CLI_KEY_GRANT_TIMEOUT:
    return cli_parse_duration(v, &k->grant_timeout_ns, err, n) != 0 ? blame(key_names[key], err, n)
                                                                    : 0;
  case CLI_KEY_ON_COMMAND_CRASH:
    return pick(v, "release", "quarantine", &k->on_command_crash, "on-command-crash", err, n);
  case CLI_KEY_ALLOW:
    return parse_allow(k, v, err, n);
  case CLI_KEY_TENANT:
    return parse_tenant_bind(k, v, err, n);
  case CLI_KEY_OVERTAKE:
    return parse_overtake(k, v, err, n);
  case CLI_KEY_FAIRNESS: {
    uint32_t timed = 0;
    int rc = pick(v, "grants", "time", &timed, "fairness", err, n);
    k->fairness = timed ? SHMS_FAIRNESS_TIME : SHMS_FAIRNESS_GRANTS;
    return rc;
  }
  default:
    return SHMS_EINVAL;
  }
  if (cli_parse_u32(v, num, err, n) != 0)
    return blame(key_names[key], err, n);
  return 0;
}

int cli_class_set(struct cli_class_build *b, const char *key, const char *value, int allow_append,
                  char *err, size_t n) {
  char q[96];
  int i = find_key(key);
  if (i < 0) {
    snprintf(err, n,
             "%s: unknown key (expected cells, queue, mode, payload, tenant-max-active, allow, "
             "on-holder-death, on-command-crash, grant-timeout, tenant, overtake or fairness)",
             cli_quote(q, sizeof q, key));
    return SHMS_EINVAL;
  }
  if ((b->seen & (1u << i)) && !(i == CLI_KEY_ALLOW && allow_append)) {
    snprintf(err, n, "%s: given twice", key_names[i]);
    return SHMS_EINVAL;
  }
  if (set_value(&b->k, i, value, err, n) != 0)
    return SHMS_EINVAL;
  b->seen |= 1u << i;
  return i;
}

int cli_validate_field(const shms_config *cfg, const char *prefix, char *err, size_t n) {
  if (shms_config_validate(cfg) == SHMS_OK)
    return 0;
  const char *d = shms_last_error_detail();
  size_t len = strlen(prefix);
  /* Anything else (the segment's total size) depends on other settings: checked at the end. */
  if (strncmp(d, prefix, len) != 0)
    return 0;
  snprintf(err, n, "%s", d + len);
  return SHMS_EINVAL;
}

int cli_class_finish(struct cli_class_build *b, shms_config *cfg, char *err, size_t n, int *key) {
  *key = -1;
  for (int i = CLI_KEY_CELLS; i <= CLI_KEY_QUEUE; i++)
    if (!(b->seen & (1u << i))) {
      *key = i;
      snprintf(err, n, "%s: missing (required)", key_names[i]);
      return SHMS_EINVAL;
    }
  b->k.configured = 1;
  if (b->k.mode == SHMS_MODE_WORKER && !(b->seen & (1u << CLI_KEY_PAYLOAD)))
    b->k.payload = SHMS_DEFAULT_PAYLOAD;
  /* Range-check this class on its own, so the error can name the key that set the field. */
  shms_config alone;
  char prefix[48];
  shms_config_init(&alone);
  alone.classes[b->cls] = b->k;
  snprintf(prefix, sizeof prefix, "class %s: ", shms_class_name((shms_class_t)b->cls));
  if (cli_validate_field(&alone, prefix, err, n) != 0) {
    char field[32];
    snprintf(field, sizeof field, "%.*s", (int)strcspn(err, ":"), err);
    *key = find_key(field);
    return SHMS_EINVAL;
  }
  /* Its place in the configuration: after every class configured before it (one configured
   * again keeps its place). */
  uint32_t last = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (c != b->cls && cfg->classes[c].configured && cfg->classes[c].position > last)
      last = cfg->classes[c].position;
  b->k.position = cfg->classes[b->cls].configured && cfg->classes[b->cls].position != 0
                      ? cfg->classes[b->cls].position
                      : last + 1;
  cfg->classes[b->cls] = b->k;
  return 0;
}
