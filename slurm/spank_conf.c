/* The SPANK plugin's arguments and job options (spank_conf.h). */
#include "spank_conf.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli_config.h"

static int fail(char *err, size_t n, const char *arg, const char *why) {
  char q[96];
  snprintf(err, n, "'%s': %s", cli_quote(q, sizeof q, arg), why);
  return -1;
}

int spank_conf_class(struct spank_conf *c, const char *value, char *err, size_t n) {
  int k = shms_class_from_name(value);
  if (k < 0)
    return fail(err, n, value, "not a class (tiny, small, standard, large or extra-large)");
  c->cls = k;
  return 0;
}

int spank_conf_cells(struct spank_conf *c, const char *value, char *err, size_t n) {
  char why[128];
  uint32_t k;
  if (cli_parse_u32(value, &k, why, sizeof why) != 0)
    return fail(err, n, value, why);
  if (k == 0)
    return fail(err, n, value, "must be at least 1");
  c->cells = k;
  return 0;
}

/* steps=LIST: a comma list of normal, batch and extern. */
static int parse_steps(struct spank_conf *c, const char *list, char *err, size_t n) {
  static const struct {
    const char *word;
    unsigned bit;
  } kinds[] = {
      {"normal", SPANK_STEP_NORMAL}, {"batch", SPANK_STEP_BATCH}, {"extern", SPANK_STEP_EXTERN}};
  unsigned steps = 0;
  const char *p = list;
  for (;;) {
    size_t len = strcspn(p, ",");
    unsigned bit = 0;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
      if (strlen(kinds[i].word) == len && strncmp(kinds[i].word, p, len) == 0)
        bit = kinds[i].bit;
    if (bit == 0)
      return fail(err, n, list, "steps are a comma list of normal, batch and extern");
    steps |= bit;
    if (p[len] == '\0')
      break;
    p += len + 1;
  }
  c->steps = steps;
  return 0;
}

/* "KEY: why" for a bad value: why quotes the value where it names it. */
static int fail_key(char *err, size_t n, const char *arg, size_t klen, const char *why) {
  snprintf(err, n, "%.*s: %s", (int)klen, arg, why);
  return -1;
}

/* One KEY=VALUE argument. */
static int parse_arg(struct spank_conf *c, const char *arg, char *err, size_t n) {
  const char *eq = strchr(arg, '=');
  if (eq == NULL)
    return fail(
        err, n, arg,
        "expected KEY=VALUE (segment, class, tenant, cells, cell-env, steps, kill-after, state)");
  size_t klen = (size_t)(eq - arg);
  const char *v = eq + 1;
  char why[160];
#define KEY(s) (klen == sizeof(s) - 1 && strncmp(arg, s, klen) == 0)
  if (KEY("segment")) {
    if (shms_name_check(v) != SHMS_OK)
      return fail_key(err, n, arg, klen, shms_last_error_detail());
    snprintf(c->segment, sizeof c->segment, "%s", v);
    return 0;
  }
  if (KEY("class"))
    return spank_conf_class(c, v, why, sizeof why) == 0 ? 0 : fail_key(err, n, arg, klen, why);
  if (KEY("cells"))
    return spank_conf_cells(c, v, why, sizeof why) == 0 ? 0 : fail_key(err, n, arg, klen, why);
  if (KEY("tenant")) {
    if (strcmp(v, "account") != 0 && strcmp(v, "user") != 0)
      return fail(err, n, arg, "tenant is 'account' (the job's Slurm account) or 'user'");
    c->tenant_user = strcmp(v, "user") == 0;
    return 0;
  }
  if (KEY("cell-env"))
    return run_cell_env_add(&c->cell_env, v, why, sizeof why) == 0
               ? 0
               : fail_key(err, n, arg, klen, why);
  if (KEY("steps"))
    return parse_steps(c, v, err, n);
  if (KEY("kill-after"))
    return cli_parse_duration(v, &c->kill_after_ns, why, sizeof why) == 0
               ? 0
               : fail_key(err, n, arg, klen, why);
  if (KEY("state")) {
    if (v[0] != '/' || strlen(v) >= sizeof c->state - 32)
      return fail(err, n, arg, "state is an absolute directory of at most 223 bytes");
    snprintf(c->state, sizeof c->state, "%s", v);
    return 0;
  }
#undef KEY
  return fail(
      err, n, arg,
      "unknown argument (segment, class, tenant, cells, cell-env, steps, kill-after, state)");
}

int spank_conf_parse(struct spank_conf *c, int ac, char **av, char *err, size_t n) {
  memset(c, 0, sizeof *c);
  c->cls = -1;
  c->cells = 1;
  c->steps = SPANK_STEP_NORMAL;
  c->kill_after_ns = 10000000000ull; /* as `shmsched run --kill-after` */
  snprintf(c->state, sizeof c->state, "%s", SPANK_STATE_DEFAULT);
  for (int i = 0; i < ac; i++)
    if (parse_arg(c, av[i], err, n) != 0)
      return -1;
  if (c->segment[0] == '\0') {
    snprintf(err, n, "segment=NAME is required");
    return -1;
  }
  return 0;
}

int spank_conf_takes_step(const struct spank_conf *c, uint32_t stepid) {
  if (stepid == SPANK_ID_BATCH)
    return (c->steps & SPANK_STEP_BATCH) != 0;
  if (stepid == SPANK_ID_EXTERN)
    return (c->steps & SPANK_STEP_EXTERN) != 0;
  return (c->steps & SPANK_STEP_NORMAL) != 0; /* srun's steps and the interactive step */
}
