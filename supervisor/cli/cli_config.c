/* The --class grammar and the segment-wide settings (cli_config.h). */
#include "cli_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_class.h"

/* Prefix err (a reason) with "--class NAME: ". */
static int class_fail(const char *cls, char *err, size_t n) {
  char why[384];
  snprintf(why, sizeof why, "%s", err);
  snprintf(err, n, "--class %s: %s", cls, why);
  return SHMS_EINVAL;
}

/* Split "key=value" items separated by ',' and apply each to b. */
static int class_items(struct cli_class_build *b, char *items, const char *cls, char *err,
                       size_t n) {
  char q[96];
  for (char *save = NULL, *it = items;; it = NULL) {
    char *tok = strtok_r(it, ",", &save);
    if (tok == NULL)
      return 0;
    char *eq = strchr(tok, '=');
    if (eq == NULL) {
      snprintf(err, n, "'%s': expected key=value", cli_quote(q, sizeof q, tok));
      return class_fail(cls, err, n);
    }
    *eq = '\0';
    if (cli_class_set(b, tok, eq + 1, 0, err, n) < 0)
      return class_fail(cls, err, n);
  }
}

int cli_parse_class_spec(shms_config *cfg, const char *spec, char *err, size_t n) {
  char q[96];
  const char *colon = spec == NULL ? NULL : strchr(spec, ':');
  if (colon == NULL) {
    snprintf(err, n, "--class '%s': expected CLASS:cells=N,queue=N[,key=value...]",
             cli_quote(q, sizeof q, spec == NULL ? "" : spec));
    return SHMS_EINVAL;
  }
  char cls[32];
  snprintf(cls, sizeof cls, "%.*s", (int)(colon - spec), spec);
  int c = shms_class_from_name(cls);
  if (c < 0 || (size_t)(colon - spec) >= sizeof cls) {
    snprintf(err, n,
             "--class '%s': unknown class (expected tiny, small, standard, large or extra-large)",
             cli_quote(q, sizeof q, cls));
    return SHMS_EINVAL;
  }
  if (cfg->classes[c].configured) {
    snprintf(err, n, "--class %s: class given twice", cls);
    return SHMS_EINVAL;
  }
  /* ",," or a trailing ',' is a typo, not an empty item to skip. */
  const char *items = colon + 1;
  size_t len = strlen(items);
  if (len == 0 || items[0] == ',' || items[len - 1] == ',' || strstr(items, ",,") != NULL) {
    snprintf(err, n, "empty key=value item in '%s'", cli_quote(q, sizeof q, items));
    return class_fail(cls, err, n);
  }
  char *copy = strdup(items);
  if (copy == NULL) {
    snprintf(err, n, "--class %s: out of memory", cls);
    return SHMS_EINVAL;
  }
  struct cli_class_build b;
  int key;
  cli_class_begin(&b, c);
  int rc = class_items(&b, copy, cls, err, n);
  free(copy);
  if (rc == 0 && cli_class_finish(&b, cfg, err, n, &key) != 0)
    rc = class_fail(cls, err, n);
  return rc;
}

int cli_add_quota(shms_config *cfg, const char *spec, char *err, size_t n) {
  char q[96], name[SHMS_TENANT_MAX + 2], why[256];
  const char *eq = strchr(spec, '=');
  size_t len = eq != NULL ? (size_t)(eq - spec) : 0;
  if (eq == NULL || len == 0) {
    snprintf(err, n, "quota %s: expected NAME=MAX", cli_quote(q, sizeof q, spec));
    return SHMS_EINVAL;
  }
  if (len > SHMS_TENANT_MAX) {
    snprintf(err, n, "quota %s: name: 1..%d graphic ASCII bytes", cli_quote(q, sizeof q, spec),
             SHMS_TENANT_MAX);
    return SHMS_EINVAL;
  }
  memcpy(name, spec, len);
  name[len] = '\0';
  if (shms_tenant_check(name) != SHMS_OK) {
    snprintf(err, n, "quota %s: name: %s", cli_quote(q, sizeof q, name), shms_last_error_detail());
    return SHMS_EINVAL;
  }
  uint32_t max = 0;
  if (cli_parse_u32(eq + 1, &max, why, sizeof why) != 0) {
    snprintf(err, n, "quota %s: max: %s", name, why);
    return SHMS_EINVAL;
  }
  if (max < 1 || max > SHMS_QUOTA_UNITS_MAX) {
    snprintf(err, n, "quota %s: max: must be 1..%u, got %u", name, SHMS_QUOTA_UNITS_MAX, max);
    return SHMS_EINVAL;
  }
  for (uint32_t i = 0; i < cfg->quota_count; i++)
    if (strncmp(cfg->quotas[i].name, name, sizeof cfg->quotas[i].name) == 0) {
      snprintf(err, n, "quota %s: given twice", name);
      return SHMS_EINVAL;
    }
  if (cfg->quota_count >= SHMS_QUOTAS_MAX) {
    snprintf(err, n, "quota %s: the quota table is full (%d quotas)", name, SHMS_QUOTAS_MAX);
    return SHMS_EINVAL;
  }
  memset(cfg->quotas[cfg->quota_count].name, 0, sizeof cfg->quotas[0].name);
  memcpy(cfg->quotas[cfg->quota_count].name, name, len);
  cfg->quotas[cfg->quota_count].max = max;
  cfg->quota_count++;
  return 0;
}

enum seg_key {
  SEG_STARVATION,
  SEG_MAX_TENANTS,
  SEG_MAX_PROCESSES,
  SEG_MODE,
  SEG_GROUP,
  SEG_ADMIN_GROUP,
  SEG_EVENTS,
  SEG_TENANT_TABLE,
  SEG_COUNT
};

static const char *const seg_names[SEG_COUNT] = {
    "starvation-after", "max-tenants", "max-processes", "mode", "group",
    "admin-group",      "events",      "tenant-table",
};

/* Parse into the field; returns 0, or SHMS_EINVAL with the parser's reason in err. */
static int seg_parse(shms_config *cfg, int key, const char *value, char *err, size_t n) {
  switch (key) {
  case SEG_STARVATION:
    return cli_parse_duration(value, &cfg->starvation_after_ns, err, n);
  case SEG_MAX_TENANTS:
    return cli_parse_u32(value, &cfg->max_tenants, err, n);
  case SEG_MAX_PROCESSES:
    return cli_parse_u32(value, &cfg->max_processes, err, n);
  case SEG_MODE:
    return cli_parse_mode(value, &cfg->file_mode, err, n);
  case SEG_ADMIN_GROUP:
    return cli_parse_group(value, &cfg->admin_group, err, n);
  case SEG_EVENTS:
    return cli_parse_u32(value, &cfg->events, err, n);
  case SEG_TENANT_TABLE:
    return cli_parse_u32(value, &cfg->tenant_table, err, n);
  default:
    return cli_parse_group(value, &cfg->group, err, n);
  }
}

int cli_set_segment_option(shms_config *cfg, const char *key, const char *value, char *err,
                           size_t n) {
  char q[96], why[384];
  int k = 0;
  while (k < SEG_COUNT && strcmp(key, seg_names[k]) != 0)
    k++;
  if (k == SEG_COUNT) {
    snprintf(err, n,
             "%s: unknown key (expected starvation-after, max-tenants, max-processes, mode, "
             "group, admin-group, events or tenant-table)",
             cli_quote(q, sizeof q, key));
    return SHMS_EINVAL;
  }
  /* Range-check this field alone, beside one minimal class, so its error names it. */
  shms_config alone;
  shms_config_init(&alone);
  alone.classes[SHMS_CLASS_TINY] = (shms_class_config){.configured = 1, .cells = 1};
  char prefix[40];
  snprintf(prefix, sizeof prefix, "%s: ", key);
  if (seg_parse(&alone, k, value, why, sizeof why) != 0 ||
      cli_validate_field(&alone, prefix, why, sizeof why) != 0) {
    snprintf(err, n, "%s: %s", key, why);
    return SHMS_EINVAL;
  }
  return seg_parse(cfg, k, value, why, sizeof why);
}

int cli_config_check(const shms_config *cfg, char *err, size_t n) {
  if (shms_config_validate(cfg) == SHMS_OK)
    return 0;
  snprintf(err, n, "%s", shms_last_error_detail());
  return SHMS_EINVAL;
}
