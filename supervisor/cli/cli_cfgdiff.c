/*
 * A segment's configuration against a configuration file's, field by field, in the words of
 * docs/config.md: the first difference, as one line.
 */
#include "cli_cfgdiff.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* One field of both sides, as text; the key is docs/config.md's. */
struct field {
  const char *key;
  char seg[160], file[160];
};

static void put_u32(char *buf, uint32_t v) { snprintf(buf, 160, "%" PRIu32, v); }

/* A duration as the largest unit that divides it: "2s", "300us", "90m". */
static void put_duration(char *buf, uint64_t ns) {
  static const struct {
    uint64_t ns;
    const char *unit;
  } units[] = {{3600000000000ull, "h"},
               {60000000000ull, "m"},
               {1000000000ull, "s"},
               {1000000ull, "ms"},
               {1000ull, "us"}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (ns != 0 && ns % units[i].ns == 0) {
      snprintf(buf, 160, "%" PRIu64 "%s", ns / units[i].ns, units[i].unit);
      return;
    }
  snprintf(buf, 160, "%" PRIu64 "ns", ns);
}

static void put_word(char *buf, uint32_t v, const char *const words[], uint32_t count) {
  if (v < count)
    snprintf(buf, 160, "%s", words[v]);
  else
    put_u32(buf, v);
}

static void put_gid(char *buf, int64_t gid, const char *none) {
  if (gid < 0)
    snprintf(buf, 160, "%s", none);
  else
    snprintf(buf, 160, "%" PRId64, gid);
}

static void put_allow(char *buf, const shms_class_config *k) {
  buf[0] = '\0';
  if (k->allow_count == 0) {
    snprintf(buf, 160, "(none given)");
    return;
  }
  size_t len = 0;
  for (uint32_t i = 0; i < k->allow_count && i < SHMS_ALLOW_MAX && len < 160; i++)
    len += (size_t)snprintf(buf + len, 160 - len, "%s%s", i ? "+" : "", k->allow[i]);
}

/* The values a class's defaults stand for. */
static uint64_t grant_timeout(const shms_class_config *k) {
  if (k->mode == SHMS_MODE_WORKER)
    return 0;
  return k->grant_timeout_ns != 0 ? k->grant_timeout_ns : SHMS_DEFAULT_GRANT_TIMEOUT_NS;
}

static void put_overtake(char *buf, const shms_class_config *k) {
  if (k->mode == SHMS_MODE_WORKER || k->tenant_max_active != 0)
    snprintf(buf, 160, "(none: it never overtakes)");
  else if (k->overtake_ns == SHMS_OVERTAKE_STRICT)
    snprintf(buf, 160, "0");
  else
    put_duration(buf, k->overtake_ns != 0 ? k->overtake_ns : SHMS_DEFAULT_OVERTAKE_NS);
}

/* Fill f[] with one class's fields; returns how many. */
static int class_fields(struct field *f, const shms_class_config *s, const shms_class_config *c) {
  static const char *const modes[] = {"lease", "worker"};
  static const char *const deaths[] = {"quarantine", "release"};
  static const char *const crashes[] = {"release", "quarantine"};
  static const char *const binds[] = {"any", "user", "group"};
  static const char *const fairs[] = {"default", "grants", "time"};
  const shms_class_config *k[2] = {s, c};
  int i = 0;
  f[i++].key = "mode";
  f[i++].key = "cells";
  f[i++].key = "queue";
  f[i++].key = "payload";
  f[i++].key = "tenant-max-active";
  f[i++].key = "on-holder-death";
  f[i++].key = "on-command-crash";
  f[i++].key = "tenant";
  f[i++].key = "allow";
  f[i++].key = "grant-timeout";
  f[i++].key = "overtake";
  f[i++].key = "fairness";
  for (int side = 0; side < 2; side++) {
    const shms_class_config *x = k[side];
    char *v[12];
    for (int j = 0; j < i; j++)
      v[j] = side ? f[j].file : f[j].seg;
    put_word(v[0], x->mode, modes, 2);
    put_u32(v[1], x->cells);
    put_u32(v[2], x->queue);
    put_u32(v[3], x->mode == SHMS_MODE_WORKER ? x->payload : 0);
    put_u32(v[4], x->tenant_max_active);
    put_word(v[5], x->on_holder_death, deaths, 2);
    put_word(v[6], x->on_command_crash, crashes, 2);
    put_word(v[7], x->tenant_bind, binds, 3);
    put_allow(v[8], x);
    put_duration(v[9], grant_timeout(x));
    put_overtake(v[10], x);
    put_word(v[11], (uint32_t)shms_class_fairness(x), fairs, 3);
  }
  return i;
}

static int segment_fields(struct field *f, const shms_config *s, const shms_config *c) {
  const shms_config *k[2] = {s, c};
  int i = 0;
  f[i++].key = "starvation-after";
  f[i++].key = "max-tenants";
  f[i++].key = "max-processes";
  f[i++].key = "mode";
  f[i++].key = "group";
  f[i++].key = "admin-group";
  f[i++].key = "events";
  f[i++].key = "tenant-table";
  for (int side = 0; side < 2; side++) {
    const shms_config *x = k[side];
    char *v[8];
    for (int j = 0; j < i; j++)
      v[j] = side ? f[j].file : f[j].seg;
    put_duration(v[0], x->starvation_after_ns);
    put_u32(v[1], x->max_tenants);
    put_u32(v[2], x->max_processes);
    snprintf(v[3], 160, "%04" PRIo32, x->file_mode);
    put_gid(v[4], x->group, "the creator's");
    put_gid(v[5], x->admin_group, "none");
    put_u32(v[6], x->events);
    put_u32(v[7], x->tenant_table != 0 ? x->tenant_table : SHMS_DEFAULT_TENANT_TABLE);
  }
  return i;
}

/* The first field that differs, into err; 1 if one does, else 0. */
static int first_difference(const struct field *f, int count, const char *what, const char *source,
                            char *err, size_t n) {
  for (int i = 0; i < count; i++)
    if (strcmp(f[i].seg, f[i].file) != 0) {
      snprintf(err, n, "%s: %s is %s in the segment, %s in %s", what, f[i].key, f[i].seg, f[i].file,
               source);
      return 1;
    }
  return 0;
}

/* The quotas each was created with (a maximum changed by policy since is not the segment's
 * configuration, as weights are not): the same names, each with the same maximum. */
static int quota_difference(const shms_config *seg, const shms_config *file, const char *source,
                            char *err, size_t n) {
  const shms_config *side[2] = {file, seg}, *other[2] = {seg, file};
  for (int k = 0; k < 2; k++)
    for (uint32_t i = 0; i < side[k]->quota_count && i < SHMS_QUOTAS_MAX; i++) {
      const char *name = side[k]->quotas[i].name;
      uint32_t j = 0;
      while (j < other[k]->quota_count && j < SHMS_QUOTAS_MAX &&
             strncmp(other[k]->quotas[j].name, name, SHMS_TENANT_MAX + 1) != 0)
        j++;
      if (j == other[k]->quota_count || j == SHMS_QUOTAS_MAX) {
        snprintf(err, n, "quota %.31s: %s in the segment, %s in %s", name, k ? "present" : "absent",
                 k ? "absent" : "present", source);
        return 1;
      }
      if (k == 0 && other[k]->quotas[j].max != side[k]->quotas[i].max) {
        snprintf(err, n, "quota %.31s: max is %" PRIu32 " in the segment, %" PRIu32 " in %s", name,
                 seg->quotas[j].max, file->quotas[i].max, source);
        return 1;
      }
    }
  return 0;
}

int cli_config_diff(const shms_config *seg, const shms_config *file, const char *source, char *err,
                    size_t n) {
  struct field f[16];
  char what[64];
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const shms_class_config *s = &seg->classes[c], *k = &file->classes[c];
    const char *name = shms_class_name((shms_class_t)c);
    snprintf(what, sizeof what, "class %s", name);
    if (!s->configured != !k->configured) {
      snprintf(err, n, "class %s: %s in the segment, %s in %s", name,
               s->configured ? "configured" : "not configured",
               k->configured ? "configured" : "not configured", source);
      return 1;
    }
    if (s->configured && first_difference(f, class_fields(f, s, k), what, source, err, n))
      return 1;
  }
  if (first_difference(f, segment_fields(f, seg, file), "[segment]", source, err, n))
    return 1;
  return quota_difference(seg, file, source, err, n);
}
