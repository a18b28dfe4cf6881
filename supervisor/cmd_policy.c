/* shmsched policy: tenants' weights, changed at runtime (fair share). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_config.h"
#include "cli_sched.h"
#include "json_out.h"

static const char policy_help[] =
    "Usage: shmsched policy NAME --tenant T --weight N\n"
    "       shmsched policy NAME [--json]\n"
    "\n"
    "Set a tenant's weight (1..1000, default 1) in the segment's tenant table; or,\n"
    "without --tenant, list the table. A class fair by time (fairness=time) divides\n"
    "cell-time between tenants with queued work by their weights: a tenant of\n"
    "weight 3 beside one of weight 1 holds three quarters. A change takes effect at\n"
    "each class's next grant; queued requests keep their places. Setting policy is\n"
    "for the segment's owner, root and members of its admin-group; the change is\n"
    "recorded in 'shmsched events'. A record with a policy is kept for good; when\n"
    "the table is full, the least recently active records without one are folded\n"
    "into '_other' (their cell-time kept there).\n"
    "\n"
    "Options:\n"
    "  -t, --tenant T   the tenant to set\n"
    "  -w, --weight N   its weight, 1..1000\n"
    "  -j, --json       list as JSON\n"
    "  -h, --help       show this help\n"
    "\n"
    "Exit status: 0 done, 1 failed (permission-denied, queue-full: the tenant table\n"
    "has no room, ...), 2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched policy jobs --tenant paying --weight 3\n"
    "  shmsched policy jobs\n"
    "  shmsched policy jobs --json\n";

struct policy_args {
  const char *tenant;
  uint32_t weight;
  int json;
};

static const char *flags_text(uint32_t flags) {
  return flags & SHMS_POLICY_OTHER ? "other" : flags & SHMS_POLICY_SET ? "policy" : "seen";
}

static int list(const char *name, int json) {
  shms_t *h;
  int rc = shms_attach(name, SHMS_ATTACH_OBSERVER, &h);
  if (rc != SHMS_OK)
    return cli_fail_lib(rc);
  uint32_t n = 0;
  shms_policy_row *rows = NULL;
  rc = shms_policy_list(h, NULL, 0, &n);
  if (rc == SHMS_OK && n != 0 && (rows = calloc(n, sizeof *rows)) == NULL)
    rc = SHMS_ENOMEM;
  uint32_t got = n;
  if (rc == SHMS_OK && n != 0)
    rc = shms_policy_list(h, rows, n, &got);
  shms_config cfg;
  if (rc == SHMS_OK)
    rc = shms_get_config(h, &cfg);
  shms_detach(h);
  if (rc != SHMS_OK) {
    free(rows);
    return cli_fail_lib(rc);
  }
  n = got < n ? got : n;
  if (json) {
    struct json_out j;
    json_open(&j, stdout);
    json_begin_array(&j, "records");
    for (uint32_t i = 0; i < n; i++) {
      json_begin_object(&j, NULL);
      json_str(&j, "tenant", rows[i].name);
      json_u64(&j, "weight", rows[i].weight);
      json_bool(&j, "policy", (rows[i].flags & SHMS_POLICY_SET) != 0);
      json_bool(&j, "other", (rows[i].flags & SHMS_POLICY_OTHER) != 0);
      json_begin_object(&j, "cell_seconds");
      for (int c = 0; c < SHMS_CLASS_COUNT; c++)
        if (cfg.classes[c].configured)
          json_double(&j, shms_class_name((shms_class_t)c), (double)rows[i].cell_ns[c] / 1e9);
      json_end(&j);
      json_end(&j);
    }
    json_end(&j);
    json_close(&j);
  } else {
    printf("%-31s %-6s %6s %s\n", "TENANT", "RECORD", "WEIGHT", "CELL_SECONDS");
    for (uint32_t i = 0; i < n; i++) {
      double cs = 0;
      for (int c = 0; c < SHMS_CLASS_COUNT; c++)
        cs += (double)rows[i].cell_ns[c] / 1e9;
      printf("%-31s %-6s %6" PRIu32 " %.3f\n", rows[i].name, flags_text(rows[i].flags),
             rows[i].weight, cs);
    }
  }
  free(rows);
  return CLI_EXIT_OK;
}

static int set(const char *name, const struct policy_args *a) {
  shms_t *h;
  int rc = cli_attach(name, 0, &h);
  if (rc != 0)
    return rc;
  rc = shms_policy_tenant(h, a->tenant, a->weight);
  int code = rc == SHMS_OK ? CLI_EXIT_OK : cli_fail_lib(rc);
  shms_detach(h);
  if (code == CLI_EXIT_OK)
    printf("tenant %s: weight %" PRIu32 "\n", a->tenant, a->weight);
  return code;
}

int cmd_policy(int argc, char **argv) {
  static const struct option opts[] = {
      {"tenant", required_argument, NULL, 't'}, {"team", required_argument, NULL, 'T'},
      {"weight", required_argument, NULL, 'w'}, {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
  struct policy_args a = {0};
  char err[256];
  int c, weight_given = 0;
  while ((c = getopt_long(argc, argv, ":t:w:jh", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(policy_help);
    if (c == 't') {
      a.tenant = optarg;
    } else if (c == 'w') {
      if (cli_parse_u32(optarg, &a.weight, err, sizeof err) != 0)
        return cli_usage("policy: --weight: %s", err);
      if (a.weight < 1 || a.weight > SHMS_WEIGHT_MAX)
        return cli_usage("policy: --weight: must be 1..%u, got %" PRIu32, SHMS_WEIGHT_MAX,
                         a.weight);
      weight_given = 1;
    } else if (c == 'j') {
      a.json = 1;
    } else {
      return cli_bad_option("policy", c, argv);
    }
  }
  const char *name;
  if (cli_take_name("policy", argc, argv, &name) != 0)
    return CLI_EXIT_USAGE;
  if (a.tenant == NULL) {
    if (weight_given)
      return cli_usage("policy: --weight needs --tenant (see 'shmsched policy --help')");
    return list(name, a.json);
  }
  if (a.json)
    return cli_usage("policy: --json lists the table: leave --tenant out");
  if (!weight_given)
    return cli_usage("policy: --tenant T: give --weight N");
  return set(name, &a);
}
