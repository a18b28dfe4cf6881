/* The environment `shmsched run` gives its command (run_env.h). */
#include "run_env.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli_config.h"

static int name_ok(const char *s, size_t len) {
  if (len == 0 || (s[0] >= '0' && s[0] <= '9'))
    return 0;
  for (size_t i = 0; i < len; i++)
    if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9')))
      return 0;
  return 1;
}

/* Items of a comma list (at least one: the list is not empty). */
static uint32_t items(const char *list) {
  uint32_t k = 1;
  for (const char *p = list; *p; p++)
    k += *p == ',';
  return k;
}

int run_cell_env_add(struct cell_envs *e, const char *spec, char *err, size_t n) {
  char q[96];
  const char *eq = strchr(spec, '=');
  if (eq == NULL || !name_ok(spec, (size_t)(eq - spec))) {
    snprintf(err, n, "'%s': expected VAR=LIST, VAR a name of letters, digits and '_'",
             cli_quote(q, sizeof q, spec));
    return -1;
  }
  const char *list = eq + 1;
  size_t len = strlen(list);
  if (len == 0 || list[0] == ',' || list[len - 1] == ',' || strstr(list, ",,") != NULL) {
    snprintf(err, n, "'%s': the list has an empty item", cli_quote(q, sizeof q, spec));
    return -1;
  }
  for (unsigned i = 0; i < e->n; i++)
    if (strncmp(e->spec[i], spec, (size_t)(eq - spec) + 1) == 0) {
      snprintf(err, n, "%.*s: given twice", (int)(eq - spec), spec);
      return -1;
    }
  if (e->n >= RUN_CELL_ENV_MAX) {
    snprintf(err, n, "at most %d of them", RUN_CELL_ENV_MAX);
    return -1;
  }
  e->spec[e->n++] = spec;
  return 0;
}

int run_cell_env_check(const struct cell_envs *e, uint32_t cells, const char *cls, char *err,
                       size_t n) {
  for (unsigned i = 0; i < e->n; i++) {
    const char *eq = strchr(e->spec[i], '=');
    uint32_t k = items(eq + 1);
    if (k < cells) {
      snprintf(err, n, "%.*s: %" PRIu32 " value%s for class %s's %" PRIu32 " cells (one per cell)",
               (int)(eq - e->spec[i]), e->spec[i], k, k == 1 ? "" : "s", cls, cells);
      return -1;
    }
  }
  return 0;
}

/* The item-th item of a comma list: where it starts, and its length. */
static const char *item_at(const char *list, uint32_t item, size_t *len) {
  const char *p = list;
  for (uint32_t i = 0; i < item; i++)
    p = strchr(p, ',') + 1; /* checked: the list has more than item items */
  *len = strcspn(p, ",");
  return p;
}

/* prefix followed by, for each of cells[0..n), the cell's item of list (NULL: its number),
 * comma-separated; malloc'd. */
static char *joined(const char *prefix, size_t plen, const char *list, const uint32_t *cells,
                    uint32_t n) {
  size_t cap = plen + 1;
  for (uint32_t i = 0; i < n; i++) {
    size_t len = 10;
    if (list != NULL)
      (void)item_at(list, cells[i], &len);
    cap += len + 1;
  }
  char *out = malloc(cap), *o = out;
  if (out == NULL)
    return NULL;
  memcpy(o, prefix, plen);
  o += plen;
  for (uint32_t i = 0; i < n; i++) {
    if (i > 0)
      *o++ = ',';
    if (list == NULL) {
      o += snprintf(o, cap - (size_t)(o - out), "%" PRIu32, cells[i]);
      continue;
    }
    size_t len;
    const char *p = item_at(list, cells[i], &len);
    memcpy(o, p, len);
    o += len;
  }
  *o = '\0';
  return out;
}

int run_env_build(struct run_env *env, const char *segment, const char *cls, const char *tenant,
                  const uint32_t *cells, uint32_t n, const shms_ticket *ticket,
                  const struct cell_envs *e) {
  memset(env, 0, sizeof *env);
  size_t k = 0;
  snprintf(env->segment, sizeof env->segment, "SHMSCHED_SEGMENT=%s", segment);
  snprintf(env->cls, sizeof env->cls, "SHMSCHED_CLASS=%s", cls);
  snprintf(env->tenant, sizeof env->tenant, "SHMSCHED_TENANT=%s", tenant);
  static const char cell_var[] = "SHMSCHED_CELL=";
  if ((env->cell = joined(cell_var, sizeof cell_var - 1, NULL, cells, n)) == NULL)
    return -1;
  env->list[k++] = env->segment;
  env->list[k++] = env->cls;
  env->list[k++] = env->cell;
  env->list[k++] = env->tenant;
  if (ticket != NULL) {
    char text[SHMS_TICKET_STRLEN];
    shms_ticket_format(ticket, text);
    snprintf(env->ticket, sizeof env->ticket, "SHMSCHED_TICKET=%s", text);
    env->list[k++] = env->ticket;
  }
  for (unsigned i = 0; i < e->n; i++) {
    const char *eq = strchr(e->spec[i], '=');
    env->cell_values[i] = joined(e->spec[i], (size_t)(eq - e->spec[i]) + 1, eq + 1, cells, n);
    if (env->cell_values[i] == NULL)
      return -1;
    env->list[k++] = env->cell_values[i];
  }
  env->list[k] = NULL;
  return 0;
}

void run_env_free(struct run_env *env) {
  free(env->cell);
  for (unsigned i = 0; i < RUN_CELL_ENV_MAX; i++)
    free(env->cell_values[i]);
}
