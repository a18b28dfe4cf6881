/*
 * The --config INI file (docs/config.md), parsed with libinih.
 *
 * inih splits lines into sections and key/value pairs but reports neither line
 * numbers to the handler nor section boundaries, so lines reach it through our
 * own reader, which counts lines, sees every "[section]" header (an empty or
 * repeated section must be caught too) and stops at the first error. The
 * reader also strips leading blanks: inih would otherwise take an indented
 * line as the continuation of the previous value.
 */
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_class.h"
#include "cli_config.h"
#include "secure.h"

enum { SEC_NONE, SEC_SEGMENT, SEC_CLASS, SEC_TENANT, SEC_QUOTA };

struct ini_ctx {
  shms_config *cfg;
  const char *path;
  FILE *f;
  char *buf;
  size_t cap;
  int lineno;
  int kind;                             /* SEC_* of the current section */
  char section[48];                     /* its name, for messages */
  int section_line;                     /* its header line */
  int first_line[SHMS_CLASS_COUNT + 1]; /* header line per class, [COUNT] = segment */
  int seg_line[9];                      /* line of each [segment] key given, 0 if none */
  int classes;                          /* class sections seen */
  struct cli_class_build b;
  struct cli_policies *pol;        /* [tenant NAME] sections: the current one is the last */
  int quota_line[SHMS_QUOTAS_MAX]; /* [quota NAME] sections: header lines, by table entry */
  int quota_max_line;              /* the current one's max key, 0 if not given yet */
  char *err;
  size_t n;
  int failed;
};

static int ini_fail(struct ini_ctx *x, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record the first error only: "path:line: [section] what". */
static int ini_fail(struct ini_ctx *x, int line, const char *fmt, ...) {
  char what[384];
  va_list ap;
  if (x->failed)
    return SHMS_EINVAL;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (x->kind == SEC_NONE)
    snprintf(x->err, x->n, "%s:%d: %s", x->path, line, what);
  else
    snprintf(x->err, x->n, "%s:%d: [%s] %s", x->path, line, x->section, what);
  x->failed = 1;
  return SHMS_EINVAL;
}

/* The class section just ended: check it and store it. A tenant's must have given a weight. */
static int end_section(struct ini_ctx *x) {
  char why[384];
  int key;
  const struct cli_policy *t = x->kind == SEC_TENANT ? &x->pol->v[x->pol->n - 1] : NULL;
  if (t != NULL && t->is_team && t->weight == 0)
    return ini_fail(x, x->section_line, "weight: missing (a [team NAME] section sets it)");
  if (t != NULL && t->weight == 0 && t->team[0] == '\0')
    return ini_fail(x, x->section_line,
                    "weight or team: missing (a [tenant NAME] section sets one or both)");
  if (x->kind == SEC_QUOTA && x->quota_max_line == 0)
    return ini_fail(x, x->section_line, "max: missing (a [quota NAME] section sets it)");
  if (x->kind != SEC_CLASS)
    return 0;
  if (cli_class_finish(&x->b, x->cfg, why, sizeof why, &key) == 0)
    return 0;
  int line = key >= 0 && x->b.line[key] > 0 ? x->b.line[key] : x->section_line;
  return ini_fail(x, line, "%s", why);
}

/* "tenant NAME" (its weight and team) or "team NAME" (its weight), once each. */
static int begin_tenant(struct ini_ctx *x, const char *name, int is_team) {
  char q[96];
  const char *kind = is_team ? "team" : "tenant";
  snprintf(x->section, sizeof x->section, "%s %s", kind, name);
  x->section_line = x->lineno;
  if (shms_tenant_check(name) != SHMS_OK)
    return ini_fail(x, x->lineno, "[%s %s]: not a %s name (1..%d graphic ASCII bytes)", kind,
                    cli_quote(q, sizeof q, name), kind, SHMS_TENANT_MAX);
  struct cli_policies *p = x->pol;
  for (size_t i = 0; i < p->n; i++)
    if (p->v[i].is_team == is_team && strcmp(p->v[i].tenant, name) == 0)
      return ini_fail(x, x->lineno, "[%s]: duplicate section (first at line %d)", x->section,
                      p->v[i].line);
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 16;
    struct cli_policy *v = realloc(p->v, cap * sizeof *v);
    if (v == NULL)
      return ini_fail(x, x->lineno, "out of memory");
    p->v = v;
    p->cap = cap;
  }
  struct cli_policy *t = &p->v[p->n++];
  memset(t, 0, sizeof *t);
  snprintf(t->tenant, sizeof t->tenant, "%s", name);
  t->is_team = is_team;
  t->line = x->lineno;
  x->kind = SEC_TENANT;
  return 0;
}

/* "quota NAME": a quota of the segment's table, its max given by the section's one key. */
static int begin_quota(struct ini_ctx *x, const char *name) {
  char q[96];
  snprintf(x->section, sizeof x->section, "quota %s", name);
  x->section_line = x->lineno;
  if (shms_tenant_check(name) != SHMS_OK)
    return ini_fail(x, x->lineno, "[quota %s]: not a quota name (1..%d graphic ASCII bytes)",
                    cli_quote(q, sizeof q, name), SHMS_TENANT_MAX);
  shms_config *cfg = x->cfg;
  for (uint32_t i = 0; i < cfg->quota_count && i < SHMS_QUOTAS_MAX; i++)
    if (strncmp(cfg->quotas[i].name, name, sizeof cfg->quotas[i].name) == 0)
      return ini_fail(x, x->lineno, "[%s]: duplicate section (first at line %d)", x->section,
                      x->quota_line[i]);
  if (cfg->quota_count >= SHMS_QUOTAS_MAX)
    return ini_fail(x, x->lineno, "[%s]: the quota table is full (%d quotas)", x->section,
                    SHMS_QUOTAS_MAX);
  x->quota_line[cfg->quota_count] = x->lineno;
  memset(cfg->quotas[cfg->quota_count].name, 0, sizeof cfg->quotas[0].name);
  snprintf(cfg->quotas[cfg->quota_count].name, sizeof cfg->quotas[0].name, "%s", name);
  cfg->quotas[cfg->quota_count++].max = 0; /* until its max key */
  x->quota_max_line = 0;
  x->kind = SEC_QUOTA;
  return 0;
}

/* "segment" or "class NAME" (blanks around and between the words allowed). */
static int begin_section(struct ini_ctx *x, const char *name, size_t len) {
  char q[96], raw[64];
  if (end_section(x) != 0)
    return SHMS_EINVAL;
  snprintf(raw, sizeof raw, "%.*s", (int)(len < sizeof raw - 1 ? len : sizeof raw - 1), name);
  char word[16] = "", arg[32] = "", extra[2] = "";
  int words = sscanf(raw, "%15s %31s %1s", word, arg, extra);
  x->kind = SEC_NONE;
  x->section_line = x->lineno;
  int slot = -1;
  if (words == 2 && (strcmp(word, "tenant") == 0 || strcmp(word, "team") == 0) && len < sizeof raw)
    return begin_tenant(x, arg, strcmp(word, "team") == 0);
  if (words == 2 && strcmp(word, "quota") == 0 && len < sizeof raw)
    return begin_quota(x, arg);
  if (words == 1 && strcmp(word, "segment") == 0)
    slot = SHMS_CLASS_COUNT;
  else if (words == 2 && strcmp(word, "class") == 0)
    slot = shms_class_from_name(arg);
  if (slot < 0 || len >= sizeof raw)
    return ini_fail(x, x->lineno,
                    "[%s]: unknown section (expected [segment], [class NAME] with NAME one of "
                    "tiny, small, standard, large, extra-large, [tenant NAME], [team NAME] or "
                    "[quota NAME])",
                    cli_quote(q, sizeof q, raw));
  if (slot == SHMS_CLASS_COUNT)
    snprintf(x->section, sizeof x->section, "segment");
  else
    snprintf(x->section, sizeof x->section, "class %s", arg);
  if (x->first_line[slot] < 0)
    return ini_fail(x, x->lineno, "[%s]: class is already configured", x->section);
  if (x->first_line[slot] != 0)
    return ini_fail(x, x->lineno, "[%s]: duplicate section (first at line %d)", x->section,
                    x->first_line[slot]);
  x->first_line[slot] = x->lineno;
  x->kind = slot == SHMS_CLASS_COUNT ? SEC_SEGMENT : SEC_CLASS;
  if (x->kind == SEC_CLASS) {
    cli_class_begin(&x->b, slot);
    x->classes++;
  }
  return 0;
}

/* Strip leading blanks (and a BOM), then act on headers and reject lines inih would. */
static int screen_line(struct ini_ctx *x, char *line) {
  char q[96];
  size_t skip = 0;
  if (x->lineno == 1 && strncmp(line, "\xEF\xBB\xBF", 3) == 0)
    skip = 3;
  skip += strspn(line + skip, " \t");
  memmove(line, line + skip, strlen(line + skip) + 1);
  char *nl = line + strcspn(line, "\r\n");
  if (line[0] == '\0' || line == nl || line[0] == ';' || line[0] == '#')
    return 0;
  if (line[0] == '[') {
    char *end = memchr(line, ']', (size_t)(nl - line));
    if (end == NULL)
      return ini_fail(x, x->lineno, "syntax error: section header lacks ']'");
    return begin_section(x, line + 1, (size_t)(end - line - 1));
  }
  if (strcspn(line, "=:") >= (size_t)(nl - line)) {
    char text[128];
    snprintf(text, sizeof text, "%.*s", (int)(nl - line < 100 ? nl - line : 100), line);
    return ini_fail(x, x->lineno, "syntax error: expected 'key = value', got '%s'",
                    cli_quote(q, sizeof q, text));
  }
  return 0;
}

/* inih's fgets-like reader: exactly one physical line per call. */
static char *read_line(char *str, int num, void *stream) {
  struct ini_ctx *x = stream;
  if (x->failed)
    return NULL;
  ssize_t len = getline(&x->buf, &x->cap, x->f);
  if (len < 0)
    return NULL;
  x->lineno++;
  /* inih needs room for "\r\n\0" beyond the text; a split line would shift every line number. */
  if (len + 3 > num) {
    ini_fail(x, x->lineno, "line is longer than %d bytes", num - 3);
    return NULL;
  }
  if (memchr(x->buf, '\0', (size_t)len) != NULL) {
    ini_fail(x, x->lineno, "line contains a NUL byte");
    return NULL;
  }
  if (screen_line(x, x->buf) != 0)
    return NULL;
  memcpy(str, x->buf, strlen(x->buf) + 1);
  return str;
}

static const char *const seg_keys[] = {
    "starvation-after", "max-tenants", "max-processes", "mode", "group",
    "admin-group",      "events",      "tenant-table"};
enum { SEG_KEYS = sizeof seg_keys / sizeof seg_keys[0] };

static int segment_pair(struct ini_ctx *x, const char *name, const char *value) {
  char why[384];
  int k = 0;
  while (k < SEG_KEYS && strcmp(name, seg_keys[k]) != 0)
    k++;
  if (k < SEG_KEYS && x->seg_line[k] != 0)
    return ini_fail(x, x->lineno, "%s: given twice (first at line %d)", name, x->seg_line[k]);
  if (cli_set_segment_option(x->cfg, name, value, why, sizeof why) != 0)
    return ini_fail(x, x->lineno, "%s", why);
  x->seg_line[k] = x->lineno;
  return 0;
}

static int class_pair(struct ini_ctx *x, const char *name, const char *value) {
  char why[384];
  int key = cli_class_set(&x->b, name, value, 1, why, sizeof why);
  if (key < 0)
    return ini_fail(x, x->lineno, "%s", why);
  if (x->b.line[key] == 0)
    x->b.line[key] = x->lineno;
  return 0;
}

static int tenant_pair(struct ini_ctx *x, const char *name, const char *value) {
  char q[96], why[256];
  struct cli_policy *t = &x->pol->v[x->pol->n - 1];
  if (!t->is_team && strcmp(name, "team") == 0) {
    if (t->team[0] != '\0')
      return ini_fail(x, x->lineno, "team: given twice");
    if (shms_tenant_check(value) != SHMS_OK)
      return ini_fail(x, x->lineno, "team: not a team name (1..%d graphic ASCII bytes): %s",
                      SHMS_TENANT_MAX, cli_quote(q, sizeof q, value));
    snprintf(t->team, sizeof t->team, "%s", value);
    return 0;
  }
  if (strcmp(name, "weight") != 0)
    return ini_fail(x, x->lineno, "%s: unknown key (expected weight%s)",
                    cli_quote(q, sizeof q, name), t->is_team ? "" : " or team");
  if (t->weight != 0)
    return ini_fail(x, x->lineno, "weight: given twice");
  if (cli_parse_u32(value, &t->weight, why, sizeof why) != 0)
    return ini_fail(x, x->lineno, "weight: %s", why);
  if (t->weight < 1 || t->weight > SHMS_WEIGHT_MAX)
    return ini_fail(x, x->lineno, "weight: must be 1..%u, got %u", SHMS_WEIGHT_MAX, t->weight);
  return 0;
}

static int quota_pair(struct ini_ctx *x, const char *name, const char *value) {
  char q[96], why[256];
  uint32_t *max = &x->cfg->quotas[x->cfg->quota_count - 1].max;
  if (strcmp(name, "max") != 0)
    return ini_fail(x, x->lineno, "%s: unknown key (expected max)", cli_quote(q, sizeof q, name));
  if (x->quota_max_line != 0)
    return ini_fail(x, x->lineno, "max: given twice (first at line %d)", x->quota_max_line);
  if (cli_parse_u32(value, max, why, sizeof why) != 0)
    return ini_fail(x, x->lineno, "max: %s", why);
  if (*max < 1 || *max > SHMS_QUOTA_UNITS_MAX)
    return ini_fail(x, x->lineno, "max: must be 1..%u, got %u", SHMS_QUOTA_UNITS_MAX, *max);
  x->quota_max_line = x->lineno;
  return 0;
}

/* inih's handler: nonzero means the pair was accepted. */
static int on_pair(void *user, const char *section, const char *name, const char *value) {
  struct ini_ctx *x = user;
  char q[96];
  (void)section; /* the reader tracks sections, with their lines */
  if (x->failed)
    return 0;
  if (x->kind == SEC_NONE)
    return ini_fail(x, x->lineno, "%s: key outside any section", cli_quote(q, sizeof q, name)), 0;
  int rc = x->kind == SEC_CLASS    ? class_pair(x, name, value)
           : x->kind == SEC_TENANT ? tenant_pair(x, name, value)
           : x->kind == SEC_QUOTA  ? quota_pair(x, name, value)
                                   : segment_pair(x, name, value);
  return rc == 0;
}

/* Run inih over the open file; x->err holds the first error. */
static int parse_open_file(struct ini_ctx *x) {
  int rc = ini_parse_stream(read_line, x, on_pair, x);
  if (!x->failed && rc == -2)
    ini_fail(x, x->lineno, "out of memory");
  else if (!x->failed && rc > 0) {
    x->kind = SEC_NONE; /* inih went on past that line: the current section is not its own */
    ini_fail(x, rc, "syntax error: expected 'key = value' or '[section]'");
  }
  if (!x->failed && ferror(x->f))
    ini_fail(x, x->lineno, "read error: %s", strerror(errno));
  if (!x->failed && end_section(x) == 0 && x->classes == 0) {
    snprintf(x->err, x->n, "%s: no [class NAME] section: at least one class is required", x->path);
    x->failed = 1;
  }
  return x->failed ? SHMS_EINVAL : 0;
}

int cli_load_config_file(shms_config *cfg, const char *path, char *err, size_t n) {
  struct cli_policies pol = {0};
  int rc = cli_load_config_file_policies(cfg, path, &pol, err, n);
  cli_policies_free(&pol);
  return rc;
}

void cli_policies_free(struct cli_policies *pol) {
  free(pol->v);
  *pol = (struct cli_policies){0};
}

int cli_load_config_file_policies(shms_config *cfg, const char *path, struct cli_policies *pol,
                                  char *err, size_t n) {
  char q[96];
  struct ini_ctx x = {.cfg = cfg, .path = path, .pol = pol, .err = err, .n = n};
  x.f = cli_fopen_as_user(path); /* as the user: never with a setgid front end's group */
  if (x.f == NULL) {
    snprintf(err, n, "%s: cannot open: %s", cli_quote(q, sizeof q, path), strerror(errno));
    return SHMS_EINVAL;
  }
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (cfg->classes[c].configured)
      x.first_line[c] = -1;
  int rc = parse_open_file(&x);
  free(x.buf);
  fclose(x.f);
  return rc;
}
