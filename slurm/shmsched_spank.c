/*
 * shmsched_spank.so: each task of a Slurm step waits for a shmsched lease before it executes.
 * Slurm's callbacks, in the order they run; the work is in spank_conf.c (settings),
 * spank_account.c (the job's account) and spank_step.c (the leases). docs/slurm.md is the
 * user's view.
 */
#include <inttypes.h>
#include <pwd.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spank_account.h"
#include "spank_conf.h"
#include "spank_step.h"

SPANK_PLUGIN(shmsched, 1);

_Static_assert(SPANK_ID_BATCH == SLURM_BATCH_SCRIPT, "Slurm's batch step id");
_Static_assert(SPANK_ID_EXTERN == SLURM_EXTERN_CONT, "Slurm's extern step id");
_Static_assert(SPANK_ID_INTERACTIVE == SLURM_INTERACTIVE_STEP, "Slurm's interactive step id");

static struct spank_conf conf;
static const char *opt_class, *opt_cells; /* the job's options, applied over conf */
static int active;                        /* this step's tasks take leases */
static char step_error[512];              /* why they cannot: each task says it and fails */
static struct spank_step *step;
static char tenant_name[SHMS_TENANT_MAX + 1];

static int take_class(int val, const char *optarg, int remote);
static int take_cells(int val, const char *optarg, int remote);

struct spank_option spank_options[] = {
    {"shmsched-class", "CLASS",
     "Each task waits for a shmsched lease on a cell of CLASS (tiny, small, standard, large, "
     "extra-large) before it runs",
     1, 0, take_class},
    {"shmsched-cells", "K", "Each task's shmsched lease holds K cells of its class at once", 1, 0,
     take_cells},
    SPANK_OPTIONS_TABLE_END,
};

/* A job option's value, checked where the user gives it (srun, sbatch, salloc) so that a typo
 * fails there, and kept for init_post_opt. */
static int take_option(const char *option, const char *value, const char **keep,
                       int (*check)(struct spank_conf *, const char *, char *, size_t)) {
  struct spank_conf c;
  char err[256];
  if (check(&c, value, err, sizeof err) != 0) {
    slurm_error("%s %s", option, err);
    return -1;
  }
  *keep = value;
  return 0;
}

static int take_class(int val, const char *optarg, int remote) {
  (void)val;
  (void)remote;
  return take_option("--shmsched-class", optarg, &opt_class, spank_conf_class);
}

static int take_cells(int val, const char *optarg, int remote) {
  (void)val;
  (void)remote;
  return take_option("--shmsched-cells", optarg, &opt_cells, spank_conf_cells);
}

/* The plugstack.conf arguments; a bad one is logged (slurmd's log) and kept in conf_error for
 * the job's tasks to say and fail on: the job's stderr is where its user looks. */
static char conf_error[300];

static int parse_conf(int ac, char **av) {
  char err[256];
  if (spank_conf_parse(&conf, ac, av, err, sizeof err) != 0) {
    slurm_error("shmsched: plugstack.conf: %s", err);
    snprintf(conf_error, sizeof conf_error, "plugstack.conf: %s", err);
    return -1;
  }
  return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av) {
  (void)sp;
  if (spank_context() == S_CTX_REMOTE)
    parse_conf(ac, av);
  return 0;
}

/* The tenant: the job's user, or its account as the prolog kept it. Root here. */
static int step_tenant(spank_t sp, char *out, size_t cap) {
  uint32_t job = 0;
  uid_t uid = 0;
  if (conf.tenant_user) {
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
        getpwuid_r(uid, &pw, buf, sizeof buf, &res) != 0 || res == NULL) {
      snprintf(step_error, sizeof step_error, "the job's user (uid %u) has no name", (unsigned)uid);
      return -1;
    }
    if (shms_tenant_check(pw.pw_name) != SHMS_OK) {
      snprintf(step_error, sizeof step_error, "user name cannot be a tenant: %s",
               shms_last_error_detail());
      return -1;
    }
    snprintf(out, cap, "%s", pw.pw_name);
    return 0;
  }
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) {
    snprintf(step_error, sizeof step_error, "cannot read the job's id");
    return -1;
  }
  return spank_account_load(conf.state, job, out, cap, step_error, sizeof step_error);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (spank_context() != S_CTX_REMOTE)
    return 0;
  uint32_t stepid = 0;
  if (spank_get_item(sp, S_JOB_STEPID, &stepid) != ESPANK_SUCCESS ||
      !spank_conf_takes_step(&conf, stepid))
    return 0;
  if (conf_error[0] != '\0') {
    active = 1; /* its tasks say it and fail */
    snprintf(step_error, sizeof step_error, "%s", conf_error);
    return 0;
  }
  char err[256];
  if ((opt_class != NULL && spank_conf_class(&conf, opt_class, err, sizeof err) != 0) ||
      (opt_cells != NULL && spank_conf_cells(&conf, opt_cells, err, sizeof err) != 0)) {
    slurm_error("shmsched: %s", err);
    return -1;
  }
  if (conf.cls < 0)
    return 0; /* no class, from plugstack.conf or the job: the job takes no lease */
  active = 1;
  /* Read as root, kept for user_init, which opens the step as the job's user. */
  step_tenant(sp, tenant_name, sizeof tenant_name);
  return 0;
}

/* As the job's user (privileges dropped), before the tasks fork: the class's tenant= and allow
 * rules see the job's user. */
int slurm_spank_user_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (!active || step_error[0] != '\0')
    return 0;
  uint32_t ntasks = 0;
  if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS || ntasks == 0) {
    snprintf(step_error, sizeof step_error, "cannot read the step's task count");
    return 0;
  }
  step = spank_step_open(&conf, tenant_name, ntasks, step_error, sizeof step_error);
  return 0;
}

int slurm_spank_task_post_fork(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (step == NULL)
    return 0;
  int task = -1;
  pid_t pid = 0;
  char err[256];
  if (spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS || task < 0) {
    slurm_error("shmsched: cannot read the task's id and pid");
    return -1;
  }
  if (spank_step_task_forked(step, (uint32_t)task, pid, err, sizeof err) != 0) {
    slurm_error("shmsched: %s", err);
    return -1;
  }
  return 0;
}

/* One line on the task's stderr (the job's output): why it has no lease, naming the segment,
 * and the class and tenant once they are known. */
static void say(const char *why) {
  if (conf.segment[0] == '\0')
    fprintf(stderr, "shmsched: %s\n", why);
  else if (tenant_name[0] != '\0')
    fprintf(stderr, "shmsched: %s: class %s, tenant '%s': %s\n", conf.segment,
            shms_class_name((shms_class_t)conf.cls), tenant_name, why);
  else
    fprintf(stderr, "shmsched: %s: %s\n", conf.segment, why);
}

/* In the task, as the job's user, before its program: wait for the lease. */
int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  if (!active)
    return 0;
  char err[512];
  int task = -1;
  if (step_error[0] != '\0') {
    say(step_error);
    return -1;
  }
  if (step == NULL || spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS || task < 0) {
    say("cannot tell which task this is");
    return -1;
  }
  char **env = spank_step_task_wait(step, (uint32_t)task, err, sizeof err);
  if (env == NULL) {
    say(err);
    return -1;
  }
  int rc = 0;
  for (char **e = env; *e != NULL && rc == 0; e++) {
    char *eq = strchr(*e, '=');
    *eq = '\0';
    if (spank_setenv(sp, *e, eq + 1, 1) != ESPANK_SUCCESS) {
      fprintf(stderr, "shmsched: cannot set %s for the task\n", *e);
      rc = -1;
    }
  }
  spank_step_env_free(env);
  return rc;
}

int slurm_spank_task_exit(spank_t sp, int ac, char **av) {
  (void)ac;
  (void)av;
  int task = -1, st = 0;
  if (step == NULL || spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS || task < 0)
    return 0;
  spank_get_item(sp, S_TASK_EXIT_STATUS, &st);
  spank_step_task_exited(step, (uint32_t)task, st);
  return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av) {
  (void)sp;
  (void)ac;
  (void)av;
  if (spank_context() == S_CTX_REMOTE) {
    spank_step_close(step);
    step = NULL;
  }
  return 0;
}

/* slurmd gives the prolog the job's account from its credential: kept for the steps. */
int slurm_spank_job_prolog(spank_t sp, int ac, char **av) {
  /* slurm_spank_init does not run for the prolog. A failing prolog drains the node: for what
   * is wrong here, the job's steps fail instead, saying why. */
  if (parse_conf(ac, av) != 0)
    return 0;
  if (conf.tenant_user)
    return 0;
  uint32_t job = 0;
  char err[320];
  const char *account = getenv("SLURM_JOB_ACCOUNT");
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) {
    slurm_error("shmsched: job prolog: cannot read the job's id");
    return 0;
  }
  if (spank_account_save(conf.state, job, account != NULL ? account : "", err, sizeof err) != 0)
    slurm_error("shmsched: job prolog: %s", err); /* its steps will say none was kept */
  return 0;
}

/* What the job left: its account, and anything its dead processes held, disposed of now rather
 * than at the supervisor's next look. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av) {
  if (parse_conf(ac, av) != 0)
    return 0;
  uint32_t job = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) == ESPANK_SUCCESS)
    spank_account_forget(conf.state, job);
  shms_t *h;
  if (shms_attach(conf.segment, 0, &h) != SHMS_OK)
    return 0; /* no segment: nothing held */
  shms_recovery r;
  if (shms_recover_dead(h, 0, NULL, NULL, &r) == SHMS_OK && r.dead_processes > 0)
    slurm_info("shmsched: job %" PRIu32 " epilog: recovered %u dead processes of %s", job,
               r.dead_processes, conf.segment);
  shms_detach(h);
  return 0;
}
