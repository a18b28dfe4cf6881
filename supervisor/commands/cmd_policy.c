/* shmsched policy: tenants' and teams' weights and tenants' teams, changed at runtime (fair
 * share). */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"
#include "../cli/json_out.h"

static const char policy_help[] =
    "Usage: shmsched policy NAME --tenant T [--weight N] [--team X | --no-team]\n"
    "       shmsched policy NAME --team X --weight N\n"
    "       shmsched policy NAME --quota Q --max N\n"
    "       shmsched policy NAME [--json]\n"
    "\n"
    "Set a tenant's weight (1..1000, default 1) or team, or a team's weight, in the\n"
    "segment's tenant table; or, with neither --tenant nor --team, list the table. A\n"
    "class fair by time (the default of a lease class) divides cell-time between the\n"
    "teams with queued work by their weights, then within a team between its tenants\n"
    "by theirs; a tenant in no team is a team of its own. A tenant of weight 3 beside\n"
    "one of weight 1 holds three quarters. A change takes effect at each class's next\n"
    "grant; queued requests keep their places. Setting policy is for the segment's\n"
    "owner, root and members of its admin-group; each change is recorded in\n"
    "'shmsched events'. A record with a policy is kept for good; when the table is\n"
    "full, the least recently active records without one are folded into '_other'\n"
    "(their cell-time kept there).\n"
    "\n"
    "Options:\n"
    "  -t, --tenant T   the tenant to set\n"
    "  -T, --team X     with --tenant: put it in team X (made if new); else the team\n"
    "                   whose --weight to set\n"
    "      --no-team    with --tenant: take it out of its team\n"
    "  -w, --weight N   the weight, 1..1000\n"
    "  -q, --quota Q    the quota whose --max to set (added to the segment's table if\n"
    "                   new, at most 16): requests naming it ('run --quota Q') are\n"
    "                   granted a cell only while fewer than N units are held; a\n"
    "                   lower maximum takes no unit back\n"
    "  -m, --max N      the quota's maximum, 1..4095\n"
    "  -j, --json       list as JSON\n"
    "  -h, --help       show this help\n"
    "\n"
    "Exit status: 0 done, 1 failed (permission-denied, queue-full: the tenant table\n"
    "has no room, ...), 2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched policy jobs --tenant paying --weight 3\n"
    "  shmsched policy jobs --tenant alice --team research\n"
    "  shmsched policy jobs --team research --weight 2\n"
    "  shmsched policy jobs --quota licence --max 4\n"
    "  shmsched policy jobs\n"
    "  shmsched policy jobs --json\n";

struct policy_args {
  const char *tenant;
  const char *team; /* with a tenant: its team ("" none), NULL unchanged */
  uint32_t weight;  /* 0: unchanged */
  int json;
  const char *quota; /* --quota Q: its maximum, max */
  uint32_t max;
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
      int team = (rows[i].flags & SHMS_POLICY_TEAM) != 0;
      json_str(&j, "name", rows[i].name);
      json_str(&j, "kind", team ? "team" : "tenant");
      json_u64(&j, "weight", rows[i].weight);
      if (rows[i].team[0] != '\0')
        json_str(&j, "team", rows[i].team);
      else
        json_null(&j, "team");
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
    printf("%-31s %-6s %-6s %6s %-31s %s\n", "NAME", "KIND", "RECORD", "WEIGHT", "TEAM",
           "CELL_SECONDS");
    for (uint32_t i = 0; i < n; i++) {
      double cs = 0;
      for (int c = 0; c < SHMS_CLASS_COUNT; c++)
        cs += (double)rows[i].cell_ns[c] / 1e9;
      printf("%-31s %-6s %-6s %6" PRIu32 " %-31s %.3f\n", rows[i].name,
             rows[i].flags & SHMS_POLICY_TEAM ? "team" : "tenant", flags_text(rows[i].flags),
             rows[i].weight, rows[i].team[0] != '\0' ? rows[i].team : "-", cs);
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
  if (a->quota != NULL) {
    rc = shms_policy_quota(h, a->quota, a->max);
  } else if (a->tenant == NULL) {
    rc = shms_policy_team(h, a->team, a->weight);
  } else {
    rc = a->weight != 0 ? shms_policy_tenant(h, a->tenant, a->weight) : SHMS_OK;
    if (rc == SHMS_OK && a->team != NULL)
      rc = shms_policy_tenant_team(h, a->tenant, a->team);
  }
  int code = rc == SHMS_OK ? CLI_EXIT_OK : cli_fail_lib(rc);
  shms_detach(h);
  if (code != CLI_EXIT_OK)
    return code;
  if (a->quota != NULL)
    printf("quota %s: max %" PRIu32 "\n", a->quota, a->max);
  else if (a->tenant == NULL)
    printf("team %s: weight %" PRIu32 "\n", a->team, a->weight);
  if (a->tenant != NULL && a->weight != 0)
    printf("tenant %s: weight %" PRIu32 "\n", a->tenant, a->weight);
  if (a->tenant != NULL && a->team != NULL)
    printf(a->team[0] != '\0' ? "tenant %s: team %s\n" : "tenant %s: no team\n", a->tenant,
           a->team);
  return code;
}

int cmd_policy(int argc, char **argv) {
  enum { OPT_NO_TEAM = 256 };
  static const struct option opts[] = {{"tenant", required_argument, NULL, 't'},
                                       {"team", required_argument, NULL, 'T'},
                                       {"no-team", no_argument, NULL, OPT_NO_TEAM},
                                       {"weight", required_argument, NULL, 'w'},
                                       {"quota", required_argument, NULL, 'q'},
                                       {"max", required_argument, NULL, 'm'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  struct policy_args a = {0};
  char err[256];
  int c, weight_given = 0, no_team = 0, max_given = 0;
  while ((c = getopt_long(argc, argv, ":t:T:w:q:m:jh", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(policy_help);
    if (c == 't') {
      a.tenant = optarg;
    } else if (c == 'T') {
      if (shms_tenant_check(optarg) != SHMS_OK)
        return cli_usage("policy: --team: a team name is 1..%d graphic ASCII bytes, got '%s'",
                         SHMS_TENANT_MAX, optarg);
      a.team = optarg;
    } else if (c == OPT_NO_TEAM) {
      no_team = 1;
    } else if (c == 'w') {
      if (cli_parse_u32(optarg, &a.weight, err, sizeof err) != 0)
        return cli_usage("policy: --weight: %s", err);
      if (a.weight < 1 || a.weight > SHMS_WEIGHT_MAX)
        return cli_usage("policy: --weight: must be 1..%u, got %" PRIu32, SHMS_WEIGHT_MAX,
                         a.weight);
      weight_given = 1;
    } else if (c == 'q') {
      if (shms_tenant_check(optarg) != SHMS_OK)
        return cli_usage("policy: --quota: a quota name is 1..%d graphic ASCII bytes, got '%s'",
                         SHMS_TENANT_MAX, optarg);
      a.quota = optarg;
    } else if (c == 'm') {
      if (cli_parse_u32(optarg, &a.max, err, sizeof err) != 0)
        return cli_usage("policy: --max: %s", err);
      if (a.max < 1 || a.max > SHMS_QUOTA_UNITS_MAX)
        return cli_usage("policy: --max: must be 1..%u, got %" PRIu32, SHMS_QUOTA_UNITS_MAX, a.max);
      max_given = 1;
    } else if (c == 'j') {
      a.json = 1;
    } else {
      return cli_bad_option("policy", c, argv);
    }
  }
  const char *name;
  if (cli_take_name("policy", argc, argv, &name) != 0)
    return CLI_EXIT_USAGE;
  if (a.quota != NULL || max_given) {
    if (a.quota == NULL || !max_given)
      return cli_usage("policy: --quota Q and --max N go together");
    if (a.tenant != NULL || a.team != NULL || weight_given || no_team || a.json)
      return cli_usage("policy: --quota Q --max N sets a quota alone: leave --tenant, --team, "
                       "--weight and --json out");
    return set(name, &a);
  }
  if (no_team && (a.team != NULL || a.tenant == NULL))
    return cli_usage("policy: --no-team goes with --tenant, without --team");
  if (no_team)
    a.team = "";
  if (a.tenant == NULL && a.team == NULL) {
    if (weight_given)
      return cli_usage("policy: --weight needs --tenant or --team (see 'shmsched policy --help')");
    return list(name, a.json);
  }
  if (a.json)
    return cli_usage("policy: --json lists the table: leave --tenant and --team out");
  if (a.tenant == NULL && !weight_given)
    return cli_usage("policy: --team X alone: give --weight N (a tenant joins with --tenant)");
  if (a.tenant != NULL && !weight_given && a.team == NULL)
    return cli_usage("policy: --tenant T: give --weight N, --team X or --no-team");
  return set(name, &a);
}
