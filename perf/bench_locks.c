#include "bench_locks.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <mqueue.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench_util.h"

/* Lives in memory shared by the parent and its children; each system uses its part. */
struct bl_shared {
  const struct bl_system *sys; /* the same binary in every process: the pointer holds */
  char segment[64];            /* shmsched */
  int semid;                   /* sysv-sem-undo */
  int pipefd[2];               /* jobserver-pipe (inherited across fork) */
  mqd_t mq;                    /* posix-mq (a descriptor, inherited across fork) */
  sem_t sem __attribute__((aligned(64)));
  uint32_t fcount __attribute__((aligned(64))); /* futex: free units */
  uint32_t fwaiters;                            /* futex: processes about to sleep */
  pthread_mutex_t mtx __attribute__((aligned(64)));
  pthread_cond_t cond;
  uint32_t count, waiters;
};

/* ---- shmsched ----------------------------------------------------------- */

/* The class's overtake bound: BENCH_OVERTAKE_US (microseconds, 0 for strict hand-off) if set,
 * for the sweep of design/overtaking.md ("Choosing the bound"); else the default. */
static uint64_t bench_overtake(void) {
  const char *v = getenv("BENCH_OVERTAKE_US");
  if (v == NULL || *v == '\0')
    return 0;
  char *end;
  unsigned long long us = strtoull(v, &end, 10);
  if (*end != '\0')
    bu_die("BENCH_OVERTAKE_US: not a number of microseconds: '%s'", v);
  return us == 0 ? SHMS_OVERTAKE_STRICT : us * 1000;
}

/* events: the segment's event ring (the default), or 0 for none (shmsched-noevents: the
 * recorder's cost, side by side); fairness: shms_fairness_t. */
static void shmsched_make_fair(bl_shared *sh, unsigned cells, uint64_t overtake, uint32_t events,
                               uint32_t fairness) {
  static unsigned serial;
  snprintf(sh->segment, sizeof sh->segment, "shms-bench-%d-%u", (int)getpid(), serial++);
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_STANDARD] = (shms_class_config){.configured = 1,
                                                         .cells = cells,
                                                         .queue = 1024,
                                                         .overtake_ns = overtake,
                                                         .fairness = fairness};
  cfg.events = events;
  int rc = shms_create(sh->segment, &cfg);
  if (rc != SHMS_OK)
    bu_die_shms("shms_create", rc);
}
static void shmsched_make(bl_shared *sh, unsigned cells, uint64_t overtake, uint32_t events) {
  shmsched_make_fair(sh, cells, overtake, events, SHMS_FAIRNESS_DEFAULT);
}
/* fairness=grants: equal turns whatever a lease holds (the default is fairness by time). */
static void shmsched_grants_create(bl_shared *sh, unsigned cells) {
  shmsched_make_fair(sh, cells, bench_overtake(), SHMS_DEFAULT_EVENTS, SHMS_FAIRNESS_GRANTS);
}
static void shmsched_create(bl_shared *sh, unsigned cells) {
  shmsched_make(sh, cells, bench_overtake(), SHMS_DEFAULT_EVENTS);
}
static void shmsched_create_noevents(bl_shared *sh, unsigned cells) {
  shmsched_make(sh, cells, bench_overtake(), 0);
}

/* overtake=0: every release hands its cell to the queue (the behaviour before overtaking). */
static void shmsched_strict_create(bl_shared *sh, unsigned cells) {
  shmsched_make(sh, cells, SHMS_OVERTAKE_STRICT, SHMS_DEFAULT_EVENTS);
}

/* A class that binds tenants to users (tenant=user, docs/security.md): what the identity check
 * costs each acquire. */
static void shmsched_user_create(bl_shared *sh, unsigned cells) {
  static unsigned serial;
  snprintf(sh->segment, sizeof sh->segment, "shms-bench-user-%d-%u", (int)getpid(), serial++);
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_STANDARD] = (shms_class_config){
      .configured = 1, .cells = cells, .queue = 1024, .tenant_bind = SHMS_TENANT_USER};
  int rc = shms_create(sh->segment, &cfg);
  if (rc != SHMS_OK)
    bu_die_shms("shms_create", rc);
}

/* shmsched-quota: every request names a quota as large as the class, so it never waits for it:
 * what naming a quota costs (the request goes through the queue and the dispatcher, which takes
 * and gives back its unit). */
static void shmsched_quota_create(bl_shared *sh, unsigned cells) {
  static unsigned serial;
  snprintf(sh->segment, sizeof sh->segment, "shms-bench-quota-%d-%u", (int)getpid(), serial++);
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_STANDARD] =
      (shms_class_config){.configured = 1, .cells = cells, .queue = 1024};
  cfg.quota_count = 1;
  snprintf(cfg.quotas[0].name, sizeof cfg.quotas[0].name, "bench");
  cfg.quotas[0].max = cells < SHMS_QUOTA_UNITS_MAX ? cells : SHMS_QUOTA_UNITS_MAX;
  int rc = shms_create(sh->segment, &cfg);
  if (rc != SHMS_OK)
    bu_die_shms("shms_create", rc);
}

static void shmsched_open(bl_proc *p) {
  int rc = shms_attach(p->sh->segment, 0, &p->h);
  if (rc != SHMS_OK)
    bu_die_shms("shms_attach", rc);
}

/* tenant=user: the tenant is the caller's login name. */
static void shmsched_user_open(bl_proc *p) {
  shmsched_open(p);
  struct passwd *pw = getpwuid(geteuid());
  if (pw == NULL)
    bu_die("uid %u has no login name", (unsigned)geteuid());
  snprintf(p->tenant, sizeof p->tenant, "%s", pw->pw_name);
}

static void shmsched_acquire(bl_proc *p) {
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = p->tenant, .cells = p->width};
  int rc = shms_acquire(p->h, &req, &p->lease);
  if (rc != SHMS_OK)
    bu_die_shms("shms_acquire", rc);
}

static void shmsched_quota_acquire(bl_proc *p) {
  static const char *const quotas[] = {"bench"};
  shms_request req = {
      .cls = SHMS_CLASS_STANDARD, .tenant = p->tenant, .quotas = quotas, .nquotas = 1};
  int rc = shms_acquire(p->h, &req, &p->lease);
  if (rc != SHMS_OK)
    bu_die_shms("shms_acquire", rc);
}

/* shmsched-prepared: the request validated once, here, for every acquire of the run. */
static void shmsched_prepared_open(bl_proc *p) {
  shmsched_open(p);
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = p->tenant};
  int rc = shms_request_prepare(p->h, &req, &p->prepared);
  if (rc != SHMS_OK)
    bu_die_shms("shms_request_prepare", rc);
}

static void shmsched_prepared_acquire(bl_proc *p) {
  int rc = shms_acquire_prepared(p->h, &p->prepared, &p->lease);
  if (rc != SHMS_OK)
    bu_die_shms("shms_acquire_prepared", rc);
}

static void shmsched_try_acquire(bl_proc *p) {
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = p->tenant};
  int rc;
  while ((rc = shms_try_acquire(p->h, &req, &p->lease)) == SHMS_EWOULDBLOCK)
    sched_yield();
  if (rc != SHMS_OK)
    bu_die_shms("shms_try_acquire", rc);
}

static void shmsched_release(bl_proc *p) {
  int rc = shms_release(p->h, &p->lease);
  if (rc != SHMS_OK)
    bu_die_shms("shms_release", rc);
}

static void shmsched_close(bl_proc *p) { shms_detach(p->h); }

int bl_wait_stats(const bl_shared *sh, uint64_t *max_ns, uint64_t *mean_ns) {
  if (strncmp(sh->sys->name, "shmsched", 8) != 0)
    return 0;
  shms_t *h;
  shms_class_stats st;
  if (shms_attach(sh->segment, 0, &h) != SHMS_OK)
    return 0;
  int rc = shms_observe(h, SHMS_CLASS_STANDARD, &st);
  shms_detach(h);
  if (rc != SHMS_OK)
    return 0;
  *max_ns = st.max_wait_ns;
  uint64_t waits = 0;
  for (int b = 0; b < SHMS_WAIT_BUCKETS; b++)
    waits += st.wait_buckets[b];
  *mean_ns = waits ? st.total_wait_ns / waits : 0;
  return 1;
}
uint64_t bl_overtake_ns(const bl_shared *sh) {
  if (strncmp(sh->sys->name, "shmsched", 8) != 0 || strcmp(sh->sys->name, "shmsched-strict") == 0)
    return 0;
  uint64_t x = bench_overtake();
  return x == 0 ? SHMS_DEFAULT_OVERTAKE_NS : x == SHMS_OVERTAKE_STRICT ? 0 : x;
}
static void shmsched_destroy(bl_shared *sh) { shms_destroy(sh->segment, SHMS_DESTROY_FORCE); }

/* ---- posix-sem ---------------------------------------------------------- */

static void psem_create(bl_shared *sh, unsigned cells) {
  if (sem_init(&sh->sem, 1, cells) != 0)
    bu_die("sem_init: %s", strerror(errno));
}
static void psem_acquire(bl_proc *p) {
  for (unsigned i = 0; i < (p->width > 1 ? p->width : 1); i++)
    while (sem_wait(&p->sh->sem) != 0)
      if (errno != EINTR)
        bu_die("sem_wait: %s", strerror(errno));
}
static void psem_release(bl_proc *p) {
  for (unsigned i = 0; i < (p->width > 1 ? p->width : 1); i++)
    sem_post(&p->sh->sem);
}
static void psem_destroy(bl_shared *sh) { sem_destroy(&sh->sem); }

/* ---- sysv-sem-undo ------------------------------------------------------ */

static void sysv_create(bl_shared *sh, unsigned cells) {
  sh->semid = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
  if (sh->semid < 0 || semctl(sh->semid, 0, SETVAL, (int)cells) != 0)
    bu_die("semget/semctl: %s", strerror(errno));
}
static void sysv_op(bl_proc *p, short delta) {
  struct sembuf op = {.sem_num = 0, .sem_op = delta, .sem_flg = SEM_UNDO};
  while (semop(p->sh->semid, &op, 1) != 0)
    if (errno != EINTR)
      bu_die("semop: %s", strerror(errno));
}
static short sysv_width(const bl_proc *p) { return (short)(p->width > 1 ? p->width : 1); }
static void sysv_acquire(bl_proc *p) { sysv_op(p, (short)-sysv_width(p)); }
static void sysv_release(bl_proc *p) { sysv_op(p, sysv_width(p)); }
static void sysv_destroy(bl_shared *sh) { semctl(sh->semid, 0, IPC_RMID); }

/* ---- jobserver-pipe ----------------------------------------------------- */

static void pipe_create(bl_shared *sh, unsigned cells) {
  if (pipe(sh->pipefd) != 0)
    bu_die("pipe: %s", strerror(errno));
  for (unsigned i = 0; i < cells; i++)
    if (write(sh->pipefd[1], "+", 1) != 1)
      bu_die("pipe write: %s", strerror(errno));
}
static void pipe_acquire(bl_proc *p) {
  char c;
  while (read(p->sh->pipefd[0], &c, 1) != 1)
    if (errno != EINTR)
      bu_die("pipe read: %s", strerror(errno));
}
static void pipe_release(bl_proc *p) {
  if (write(p->sh->pipefd[1], "+", 1) != 1)
    bu_die("pipe write: %s", strerror(errno));
}
static void pipe_destroy(bl_shared *sh) {
  close(sh->pipefd[0]);
  close(sh->pipefd[1]);
}

/* ---- futex -------------------------------------------------------------- */

static long futex(uint32_t *w, int op, uint32_t val) {
  return syscall(SYS_futex, w, op, val, NULL, NULL, 0); /* shared: no FUTEX_PRIVATE_FLAG */
}
static void futex_create(bl_shared *sh, unsigned cells) { sh->fcount = cells; }

/*
 * Take a unit with one CAS; when none is free, announce ourselves in fwaiters
 * (a full barrier), then sleep while the count is still 0. The releaser adds
 * to the count (full barrier) and then reads fwaiters: of the two, whichever
 * goes second sees the other's write, so no wake-up is lost.
 */
static void futex_acquire(bl_proc *p) {
  uint32_t *c = &p->sh->fcount;
  for (;;) {
    uint32_t v = __atomic_load_n(c, __ATOMIC_RELAXED);
    if (v > 0) {
      if (__atomic_compare_exchange_n(c, &v, v - 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
      continue;
    }
    __atomic_add_fetch(&p->sh->fwaiters, 1, __ATOMIC_SEQ_CST);
    futex(c, FUTEX_WAIT, 0);
    __atomic_sub_fetch(&p->sh->fwaiters, 1, __ATOMIC_SEQ_CST);
  }
}
static void futex_release(bl_proc *p) {
  __atomic_add_fetch(&p->sh->fcount, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&p->sh->fwaiters, __ATOMIC_SEQ_CST) > 0)
    futex(&p->sh->fcount, FUTEX_WAKE, 1);
}

/* ---- posix-mq ----------------------------------------------------------- */

static void mq_create(bl_shared *sh, unsigned cells) {
  char name[64];
  snprintf(name, sizeof name, "/shms-bench-%d", (int)getpid());
  struct mq_attr attr = {.mq_maxmsg = 10, .mq_msgsize = 1}; /* 10: fs.mqueue.msg_max */
  if (cells > 10)
    bu_die("posix-mq holds at most 10 messages, asked for %u cells", cells);
  sh->mq = mq_open(name, O_CREAT | O_EXCL | O_RDWR, 0600, &attr);
  if (sh->mq == (mqd_t)-1)
    bu_die("mq_open: %s", strerror(errno));
  mq_unlink(name); /* the descriptor lives on; nothing is left behind if we die */
  for (unsigned i = 0; i < cells; i++)
    if (mq_send(sh->mq, "+", 1, 0) != 0)
      bu_die("mq_send: %s", strerror(errno));
}
static void mq_acquire(bl_proc *p) {
  char c;
  while (mq_receive(p->sh->mq, &c, 1, NULL) != 1)
    if (errno != EINTR)
      bu_die("mq_receive: %s", strerror(errno));
}
static void mq_release(bl_proc *p) {
  while (mq_send(p->sh->mq, "+", 1, 0) != 0)
    if (errno != EINTR)
      bu_die("mq_send: %s", strerror(errno));
}
static void mq_destroy(bl_shared *sh) { mq_close(sh->mq); }

/* ---- robust-mutex ------------------------------------------------------- */

static void rm_create(bl_shared *sh, unsigned cells) {
  pthread_mutexattr_t ma;
  pthread_condattr_t ca;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
  pthread_condattr_init(&ca);
  pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
  if (pthread_mutex_init(&sh->mtx, &ma) != 0 || pthread_cond_init(&sh->cond, &ca) != 0)
    bu_die("pthread_mutex_init/pthread_cond_init failed");
  sh->count = cells;
}
/* A holder that died leaves the mutex EOWNERDEAD: the count is still sound, mark it so. */
static void rm_lock(bl_shared *sh) {
  if (pthread_mutex_lock(&sh->mtx) == EOWNERDEAD)
    pthread_mutex_consistent(&sh->mtx);
}
static void rm_acquire(bl_proc *p) {
  bl_shared *sh = p->sh;
  rm_lock(sh);
  while (sh->count == 0) {
    sh->waiters++;
    if (pthread_cond_wait(&sh->cond, &sh->mtx) == EOWNERDEAD)
      pthread_mutex_consistent(&sh->mtx);
    sh->waiters--;
  }
  sh->count--;
  pthread_mutex_unlock(&sh->mtx);
}
static void rm_release(bl_proc *p) {
  bl_shared *sh = p->sh;
  rm_lock(sh);
  sh->count++;
  if (sh->waiters > 0)
    pthread_cond_signal(&sh->cond);
  pthread_mutex_unlock(&sh->mtx);
}
static void rm_destroy(bl_shared *sh) {
  pthread_cond_destroy(&sh->cond);
  pthread_mutex_destroy(&sh->mtx);
}

/* ---- the table ---------------------------------------------------------- */

static void nothing(bl_proc *p) { (void)p; }
static void nothing_create(bl_shared *sh, unsigned cells) { (void)sh, (void)cells; }

static const struct bl_system systems[] = {
    {"shmsched", shmsched_create, shmsched_open, shmsched_acquire, shmsched_release, shmsched_close,
     shmsched_destroy},
    {"shmsched-strict", shmsched_strict_create, shmsched_open, shmsched_acquire, shmsched_release,
     shmsched_close, shmsched_destroy},
    {"shmsched-grants", shmsched_grants_create, shmsched_open, shmsched_acquire, shmsched_release,
     shmsched_close, shmsched_destroy},
    {"shmsched-try", shmsched_create, shmsched_open, shmsched_try_acquire, shmsched_release,
     shmsched_close, shmsched_destroy},
    {"shmsched-prepared", shmsched_create, shmsched_prepared_open, shmsched_prepared_acquire,
     shmsched_release, shmsched_close, shmsched_destroy},
    {"shmsched-prepared-grants", shmsched_grants_create, shmsched_prepared_open,
     shmsched_prepared_acquire, shmsched_release, shmsched_close, shmsched_destroy},
    {"shmsched-quota", shmsched_quota_create, shmsched_open, shmsched_quota_acquire,
     shmsched_release, shmsched_close, shmsched_destroy},
    {"shmsched-user", shmsched_user_create, shmsched_user_open, shmsched_acquire, shmsched_release,
     shmsched_close, shmsched_destroy},
    {"shmsched-noevents", shmsched_create_noevents, shmsched_open, shmsched_acquire,
     shmsched_release, shmsched_close, shmsched_destroy},
    {"posix-sem", psem_create, nothing, psem_acquire, psem_release, nothing, psem_destroy},
    {"sysv-sem-undo", sysv_create, nothing, sysv_acquire, sysv_release, nothing, sysv_destroy},
    {"jobserver-pipe", pipe_create, nothing, pipe_acquire, pipe_release, nothing, pipe_destroy},
    {"futex", futex_create, nothing, futex_acquire, futex_release, nothing, NULL},
    {"posix-mq", mq_create, nothing, mq_acquire, mq_release, nothing, mq_destroy},
    {"robust-mutex", rm_create, nothing, rm_acquire, rm_release, nothing, rm_destroy},
    /* No lock at all: what the benchmark loop itself costs (acquire-release only). */
    {"harness", nothing_create, nothing, nothing, nothing, nothing, NULL},
};

int bl_takes_width(const struct bl_system *sys) {
  return sys->acquire == shmsched_acquire || sys->acquire == psem_acquire ||
         sys->acquire == sysv_acquire;
}

const struct bl_system *bl_find(const char *name) {
  for (size_t i = 0; i < sizeof systems / sizeof systems[0]; i++)
    if (strcmp(systems[i].name, name) == 0)
      return &systems[i];
  return NULL;
}

const char *bl_names(void) {
  return "shmsched shmsched-strict shmsched-grants shmsched-try shmsched-prepared "
         "shmsched-prepared-grants shmsched-quota "
         "shmsched-user "
         "shmsched-noevents "
         "posix-sem "
         "sysv-sem-undo "
         "jobserver-pipe futex "
         "posix-mq "
         "robust-mutex harness";
}

void bl_set_policy(bl_shared *sh, const char *const *tenants, const double *weights,
                   const double *teams, int n) {
  shms_t *h;
  int rc = shms_attach(sh->segment, 0, &h);
  if (rc != SHMS_OK)
    bu_die_shms("shms_attach", rc);
  for (int i = 0; i < n; i++) {
    char team[16];
    snprintf(team, sizeof team, "team%d", (int)teams[i]);
    if ((rc = shms_policy_tenant(h, tenants[i], (uint32_t)weights[i])) != SHMS_OK)
      bu_die_shms("shms_policy_tenant", rc);
    if (teams[i] != 0 && (rc = shms_policy_tenant_team(h, tenants[i], team)) != SHMS_OK)
      bu_die_shms("shms_policy_tenant_team", rc);
  }
  shms_detach(h);
}

bl_shared *bl_create(const struct bl_system *sys, unsigned cells) {
  bl_shared *sh = bu_shared(sizeof *sh);
  sh->sys = sys;
  sys->create(sh, cells);
  return sh;
}

void bl_open(bl_proc *p, bl_shared *sh, const char *tenant) {
  memset(p, 0, sizeof *p);
  p->sys = sh->sys;
  p->sh = sh;
  snprintf(p->tenant, sizeof p->tenant, "%s", tenant);
  p->sys->open(p);
}

void bl_close(bl_proc *p) { p->sys->close(p); }

void bl_destroy(bl_shared *sh) {
  if (sh->sys->destroy)
    sh->sys->destroy(sh);
}
