/*
 * shmsched create: lay out a segment from --class specs or a --config file.
 * Everything is parsed and validated before shms_create() is called, so a
 * usage or configuration error (exit 2) never leaves a segment behind.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "../cli/cli.h"
#include "../cli/cli_cfgdiff.h"
#include "../cli/cli_config.h"
#include "shmsched.h"

static const char help[] =
    "Usage: shmsched create NAME --class SPEC [--class SPEC]... [options]\n"
    "       shmsched create NAME --config FILE [options]\n"
    "\n"
    "Lay out a new segment NAME: /dev/shm/NAME, or $SHMSCHED_DIR/NAME when set; a\n"
    "NAME with a '/' is the path of the segment file. If NAME exists it fails\n"
    "(already-exists) and leaves the existing segment untouched; with --if-missing\n"
    "it compares the segment's configuration with the one given instead.\n"
    "\n"
    "Options:\n"
    "  --class SPEC            one class, CLASS:cells=N,queue=N[,KEY=VALUE]...; repeat once\n"
    "                          per class (at least one class, or --config, is required)\n"
    "      CLASS               tiny, small, standard, large or extra-large\n"
    "      cells=N             its parallelism, 1..4096 (required)\n"
    "      queue=N             its exact queue bound, 0..1048576; 0 denies it (required)\n"
    "      mode=lease|worker   (default lease)\n"
    "      payload=BYTES       worker classes only: 1..1048576 (default 4096)\n"
    "      tenant-max-active=N active requests per tenant, 0..cells (default 0: no limit)\n"
    "      allow=T[+T]...      only these tenants, at most 16 (default: any tenant;\n"
    "                          extra-large: none); @GROUP and ~USER entries admit\n"
    "                          only callers in GROUP or who are USER\n"
    "      tenant=any|user|group  tenants must be the caller's login name (user) or a\n"
    "                          group the caller is in (group) (default any)\n"
    "      on-holder-death=quarantine|release  (default quarantine)\n"
    "      on-command-crash=release|quarantine (default release)\n"
    "      fairness=time|grants  what tenants share: cell-time by weight, or turns\n"
    "                          (default time; a worker class: grants)\n"
    "  --config FILE           read the segment and its classes from an INI file\n"
    "                          (docs/config.md); cannot be combined with --class; the\n"
    "                          options below override the file's [segment] settings\n"
    "  --if-missing            if NAME exists, succeed when its configuration is the one\n"
    "                          given (the file's [tenant] and [team] weights aside) and\n"
    "                          fail (already-exists) naming the first difference when\n"
    "                          not; the segment is left as it is either way\n"
    "  --starvation-after DUR  aging threshold, 1ms..24h, unit ms, s, m or h (default 5s)\n"
    "  --max-tenants N         tenants with live requests per class, 1..65536 (default 1024)\n"
    "  --max-processes N       attached-process table size, 1..65536 (default 1024)\n"
    "  --mode OCTAL            permission bits of the segment, owner keeps rw (default 0600)\n"
    "  --group GROUP           group name or gid to own the segment (default: the creator's)\n"
    "  --admin-group GROUP     its members may drain, resume, repair, check --repair,\n"
    "                          supervise, destroy and cancel others' requests, as the\n"
    "                          segment's owner and root may (default: none)\n"
    "  --events N              records in the event ring ('shmsched events'): 0 (none) or\n"
    "                          a power of two 16..1048576 (default 1024)\n"
    "  --quota NAME=MAX        a quota: at most MAX (1..4095) units held at once; repeat\n"
    "  --tenant-table N        records of the tenant table (weights set by 'shmsched\n"
    "                          policy', what fairness by time charged idle tenants),\n"
    "                          16..65536 (default 4096)\n"
    "  -h, --help              show this help\n"
    "\n"
    "Exit status: 0 created (with --if-missing: or found with this configuration), 1 the\n"
    "creation failed (already-exists, permission-denied, no-space, ...), 2 usage or\n"
    "configuration error (nothing is created).\n"
    "\n"
    "Examples:\n"
    "  shmsched create jobs --class standard:cells=8,queue=64\n"
    "  shmsched create farm --class small:cells=4,queue=32,tenant-max-active=2 \\\n"
    "      --class large:cells=1,queue=4,allow=ci+release --starvation-after 2s\n"
    "  shmsched create infer --class large:cells=2,queue=16,mode=worker,payload=65536 \\\n"
    "      --mode 0660 --group infer\n"
    "  shmsched create jobs --config /etc/shmsched/jobs.ini --max-processes 256\n"
    "  shmsched create jobs --config /etc/shmsched/jobs.conf --if-missing\n";

enum { OPT_CLASS = 256, OPT_CONFIG, OPT_IF_MISSING, OPT_QUOTA, OPT_SEGMENT };

/* Indexed by val - OPT_SEGMENT; the names are cli_set_segment_option()'s keys. */
static const char *const segment_keys[] = {
    "starvation-after", "max-tenants", "max-processes", "mode", "group",
    "admin-group",      "events",      "tenant-table"};
enum { SEGMENT_KEYS = sizeof segment_keys / sizeof segment_keys[0] };

static const struct option opts[] = {
    {"class", required_argument, NULL, OPT_CLASS},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"if-missing", no_argument, NULL, OPT_IF_MISSING},
    {"quota", required_argument, NULL, OPT_QUOTA},
    {"starvation-after", required_argument, NULL, OPT_SEGMENT + 0},
    {"max-tenants", required_argument, NULL, OPT_SEGMENT + 1},
    {"max-processes", required_argument, NULL, OPT_SEGMENT + 2},
    {"mode", required_argument, NULL, OPT_SEGMENT + 3},
    {"group", required_argument, NULL, OPT_SEGMENT + 4},
    {"admin-group", required_argument, NULL, OPT_SEGMENT + 5},
    {"events", required_argument, NULL, OPT_SEGMENT + 6},
    {"tenant-table", required_argument, NULL, OPT_SEGMENT + 7},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct create_args {
  shms_config cfg;
  struct cli_policies policies;            /* the file's [tenant NAME] and [team NAME] sections */
  int classes;                             /* --class options, parsed into cfg as they come */
  const char *config;                      /* --config FILE */
  int if_missing;                          /* --if-missing */
  const char *segment[SEGMENT_KEYS];       /* last value of each segment option */
  const char *quotas[SHMS_QUOTAS_MAX + 1]; /* --quota NAME=MAX, in order */
  int nquotas;
};

/* Returns -1 to go on, else the exit code (help, or a usage error). */
static int parse_options(int argc, char **argv, struct create_args *a) {
  char err[512];
  int c;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(help);
    if (c == OPT_CLASS) {
      if (cli_parse_class_spec(&a->cfg, optarg, err, sizeof err) != 0)
        return cli_usage("%s", err);
      a->classes++;
    } else if (c == OPT_CONFIG) {
      a->config = optarg;
    } else if (c == OPT_IF_MISSING) {
      a->if_missing = 1;
    } else if (c == OPT_QUOTA) {
      if (a->nquotas > SHMS_QUOTAS_MAX)
        return cli_usage("--quota %s: the quota table is full (%d quotas)", optarg,
                         SHMS_QUOTAS_MAX);
      a->quotas[a->nquotas++] = optarg;
    } else if (c >= OPT_SEGMENT && c < OPT_SEGMENT + SEGMENT_KEYS) {
      a->segment[c - OPT_SEGMENT] = optarg;
    } else {
      return cli_bad_option("create", c, argv);
    }
  }
  return -1;
}

/* The file first, then the options that override it; then the whole-config checks. */
static int build_config(struct create_args *a) {
  char err[512];
  if (a->config != NULL && a->classes > 0)
    return cli_usage("create: --config and --class cannot be combined: put the classes in "
                     "the file");
  if (a->config != NULL &&
      cli_load_config_file_policies(&a->cfg, a->config, &a->policies, err, sizeof err) != 0)
    return cli_usage("%s", err);
  for (int i = 0; i < SEGMENT_KEYS; i++)
    if (a->segment[i] != NULL &&
        cli_set_segment_option(&a->cfg, segment_keys[i], a->segment[i], err, sizeof err) != 0)
      return cli_usage("--%s", err);
  for (int i = 0; i < a->nquotas; i++)
    if (cli_add_quota(&a->cfg, a->quotas[i], err, sizeof err) != 0)
      return cli_usage("--%s", err);
  if (a->config == NULL && a->classes == 0)
    return cli_usage("create: no class: give --class CLASS:cells=N,queue=N or --config FILE "
                     "(see 'shmsched create --help')");
  if (cli_config_check(&a->cfg, err, sizeof err) != 0)
    return cli_usage("create: %s", err);
  uint32_t table = a->cfg.tenant_table != 0 ? a->cfg.tenant_table : SHMS_DEFAULT_TENANT_TABLE;
  if (a->policies.n >= table) /* `_other` needs a record of its own */
    return cli_usage("create: %s: %zu [tenant NAME] and [team NAME] sections, but the tenant "
                     "table has %u records (set tenant-table above %zu)",
                     a->config, a->policies.n, table, a->policies.n);
  return 0;
}

/* The file's tenants' and teams' policy, into the segment just made; on failure it is removed
 * again. */
static int apply_policies(const char *name, const struct create_args *a) {
  if (a->policies.n == 0)
    return CLI_EXIT_OK;
  shms_t *h = NULL;
  int rc = shms_attach(name, 0, &h);
  for (size_t i = 0; rc == SHMS_OK && i < a->policies.n; i++) {
    const struct cli_policy *p = &a->policies.v[i];
    if (p->is_team)
      rc = shms_policy_team(h, p->tenant, p->weight);
    else if (p->weight != 0)
      rc = shms_policy_tenant(h, p->tenant, p->weight);
    if (rc == SHMS_OK && !p->is_team && p->team[0] != '\0')
      rc = shms_policy_tenant_team(h, p->tenant, p->team);
  }
  if (rc == SHMS_OK)
    return shms_detach(h) == SHMS_OK ? CLI_EXIT_OK : cli_fail_lib(SHMS_ESYSTEM);
  int code = cli_fail_lib(rc);
  if (h != NULL)
    shms_detach(h);
  shms_destroy(name, SHMS_DESTROY_FORCE);
  return code;
}

static void print_created(const char *name, const shms_config *cfg) {
  char list[128] = "";
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    size_t len = strlen(list);
    if (cfg->classes[c].configured)
      snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
               shms_class_name((shms_class_t)c));
  }
  printf("created segment '%s': %llu bytes, classes %s\n", name,
         (unsigned long long)shms_segment_size(cfg), list);
}

/* --if-missing and NAME exists: the same configuration is a success, another a failure naming
 * the first difference; the segment is left as it is either way. */
static int compare_existing(const char *name, const struct create_args *a) {
  shms_t *h = NULL;
  shms_config seg;
  int rc = shms_attach(name, SHMS_ATTACH_OBSERVER, &h);
  if (rc == SHMS_OK)
    rc = shms_get_config(h, &seg);
  if (rc != SHMS_OK) {
    int code = cli_fail_lib(rc);
    if (h != NULL)
      shms_detach(h);
    return code;
  }
  shms_detach(h);
  char diff[512];
  const char *source = a->config != NULL ? a->config : "the --class options";
  if (cli_config_diff(&seg, &a->cfg, source, diff, sizeof diff) != 0)
    return cli_fail(SHMS_EEXISTS, "segment '%s' exists with another configuration: %s", name, diff);
  printf("segment '%s' exists with the configuration of %s: left as it is\n", name, source);
  return CLI_EXIT_OK;
}

int cmd_create(int argc, char **argv) {
  struct create_args a = {.classes = 0, .policies = {0}};
  shms_config_init(&a.cfg);
  int rc = parse_options(argc, argv, &a);
  if (rc >= 0)
    return rc;
  const char *name;
  if (cli_take_name("create", argc, argv, &name) != 0)
    return CLI_EXIT_USAGE;
  if ((rc = build_config(&a)) != 0) {
    cli_policies_free(&a.policies);
    return rc;
  }
  if ((rc = shms_create(name, &a.cfg)) != SHMS_OK) {
    if (rc == SHMS_EEXISTS && a.if_missing)
      rc = compare_existing(name, &a);
    else
      rc = cli_fail_lib(rc);
    cli_policies_free(&a.policies);
    return rc;
  }
  rc = apply_policies(name, &a);
  cli_policies_free(&a.policies);
  if (rc != CLI_EXIT_OK)
    return rc;
  print_created(name, &a.cfg);
  return CLI_EXIT_OK;
}
