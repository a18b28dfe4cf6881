/* The leases of one step's tasks (spank_step.h). */
#include "spank_step.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct task {
  struct spank_step *s;
  int sock[2]; /* [0] slurmstepd's end, [1] the task's: the grant, or why there is none */
  pid_t pid;   /* the task, leader of its own process group once it waits */
  shms_ticket ticket;
  int queued; /* ticket names its request (under s->mu once the waiter runs) */
  shms_lease lease;
  int held; /* lease is this task's (under s->mu once the waiter runs) */
  pthread_t thread;
  int running;
  int exited, status; /* under s->mu */
};

struct spank_step {
  struct spank_conf c;
  char tenant[SHMS_TENANT_MAX + 1];
  shms_t *h;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ending; /* under mu */
  uint32_t n;
  struct task t[];
};

/* What scancel, a time limit and a terminal send to end a task. */
static const int ending_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};

/* How often a released task's group is looked at until it is empty. */
#define GROUP_POLL_NS 50000000ull

static int fail(char *err, size_t n, int rc, const char *what) {
  const char *d = shms_last_error_detail();
  snprintf(err, n, "%s: %s", what, d[0] != '\0' ? d : shms_strerror(rc));
  return -1;
}

/* Take a free cell now, or queue: the fast path first, as `shmsched run` does. */
static int take_or_queue(struct spank_step *s, struct task *t, char *err, size_t n) {
  shms_request req = {.cls = (shms_class_t)s->c.cls, .tenant = s->tenant, .cells = s->c.cells};
  int rc = shms_try_acquire(s->h, &req, &t->lease);
  if (rc == SHMS_OK) {
    t->held = 1;
    return 0;
  }
  if (rc != SHMS_EWOULDBLOCK)
    return fail(err, n, rc, "no lease");
  if ((rc = shms_enqueue(s->h, &req, &t->ticket)) != SHMS_OK)
    return fail(err, n, rc, "cannot queue");
  t->queued = 1;
  return 0;
}

/* Give up what task t holds or waits for, now (the step failed or ends). */
static void drop(struct spank_step *s, struct task *t) {
  if (t->held)
    shms_release(s->h, &t->lease);
  else if (t->queued && shms_cancel(s->h, &t->ticket) == 0) {
    shms_lease l; /* granted before the cancel reached it: take the lease to release it */
    if (shms_wait(s->h, &t->ticket, 0, &l) == SHMS_OK)
      shms_release(s->h, &l);
  }
  t->held = t->queued = 0;
}

static void free_step(struct spank_step *s) {
  for (uint32_t i = 0; i < s->n; i++)
    for (int k = 0; k < 2; k++)
      if (s->t[i].sock[k] >= 0)
        close(s->t[i].sock[k]);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}

/* Attach and check what the step asks of its class, before anything is taken. */
static int attach(struct spank_step *s, char *err, size_t n) {
  int rc = shms_attach(s->c.segment, 0, &s->h);
  if (rc != SHMS_OK)
    return fail(err, n, rc, "cannot attach");
  shms_config cfg;
  if ((rc = shms_get_config(s->h, &cfg)) != SHMS_OK)
    return fail(err, n, rc, "cannot read the segment's configuration");
  const char *cls = shms_class_name((shms_class_t)s->c.cls);
  const shms_class_config *k = &cfg.classes[s->c.cls];
  if (k->cells == 0) {
    snprintf(err, n, "segment '%s' has no class %s", s->c.segment, cls);
    return -1;
  }
  if (s->c.cells > k->cells) {
    snprintf(err, n, "%u cells asked of class %s, which has %u", s->c.cells, cls, k->cells);
    return -1;
  }
  return run_cell_env_check(&s->c.cell_env, k->cells, cls, err, n);
}

struct spank_step *spank_step_open(const struct spank_conf *c, const char *tenant, uint32_t ntasks,
                                   char *err, size_t n) {
  struct spank_step *s = calloc(1, sizeof *s + ntasks * sizeof s->t[0]);
  if (s == NULL) {
    snprintf(err, n, "out of memory");
    return NULL;
  }
  s->c = *c;
  snprintf(s->tenant, sizeof s->tenant, "%s", tenant);
  s->n = ntasks;
  pthread_mutex_init(&s->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  for (uint32_t i = 0; i < ntasks; i++) {
    s->t[i].s = s;
    s->t[i].sock[0] = s->t[i].sock[1] = -1;
  }
  int ok = attach(s, err, n) == 0;
  for (uint32_t i = 0; ok && i < ntasks; i++) {
    struct task *t = &s->t[i];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t->sock) != 0) {
      snprintf(err, n, "socketpair: %s", strerror(errno));
      ok = 0;
    } else
      ok = take_or_queue(s, t, err, n) == 0;
  }
  if (ok)
    return s;
  if (s->h != NULL) {
    for (uint32_t i = 0; i < ntasks; i++)
      drop(s, &s->t[i]);
    shms_detach(s->h);
  }
  free_step(s);
  return NULL;
}

/* Write all of buf, or fail: the task may be gone (no SIGPIPE then). */
static int send_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

/* The message to a task: 'Y' and its program's environment as "VAR=value" strings, each
 * NUL-ended, or 'N' and why; after a 4-byte length, so that the task needs no EOF. */
static void tell(struct task *t, char kind, const char *body, uint32_t len) {
  uint32_t total = len + 1;
  if (send_all(t->sock[0], &total, sizeof total) == 0 && send_all(t->sock[0], &kind, 1) == 0)
    send_all(t->sock[0], body, len);
}

static void tell_granted(struct spank_step *s, struct task *t) {
  uint32_t want = t->lease.cells > 0 ? t->lease.cells : 1;
  uint32_t *cells = malloc(want * sizeof *cells);
  int k = cells != NULL ? shms_lease_cells(s->h, &t->lease, cells, want) : -1;
  struct run_env env;
  if (k <= 0 ||
      run_env_build(&env, s->c.segment, shms_class_name((shms_class_t)s->c.cls), s->tenant, cells,
                    (uint32_t)k, t->queued ? &t->ticket : NULL, &s->c.cell_env) != 0) {
    static const char why[] = "cannot describe the lease to the task";
    tell(t, 'N', why, sizeof why);
    free(cells);
    return;
  }
  free(cells);
  size_t len = 0;
  for (char **e = env.list; *e != NULL; e++)
    len += strlen(*e) + 1;
  char *body = malloc(len + 1), *o = body;
  if (body != NULL) {
    for (char **e = env.list; *e != NULL; e++)
      o = stpcpy(o, *e) + 1;
    tell(t, 'Y', body, (uint32_t)len);
  }
  free(body);
  run_env_free(&env);
}

static void record_end(struct spank_step *s, struct task *t, int st) {
  uint64_t how = WIFEXITED(st) ? SHMS_LEASE_EXITED(WEXITSTATUS(st))
                               : SHMS_LEASE_SIGNALLED(WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  shms_lease_event(s->h, &t->lease, t->queued ? &t->ticket : NULL, SHMS_EVENT_LEASE_ENDED, how);
}

/* Whether anything of task t's process group is left. A group of another number than the
 * task's own (a task that died before it made its group) is never looked at. */
static int group_left(const struct task *t) {
  return t->pid > 1 && (kill(-t->pid, 0) == 0 || errno == EPERM);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* At the step's end, what is left of task t's group gets SIGTERM, then SIGKILL once kill-after
 * has passed (as `shmsched run` treats what its command leaves). *term_at is when SIGTERM went,
 * 0 before. The group's number cannot name another group meanwhile: the kernel does not hand out
 * a pid that is still some process's group id, and the group is not empty. */
static void end_leftovers(struct spank_step *s, struct task *t, uint64_t *term_at) {
  if (*term_at == 0) {
    *term_at = now_ns();
    kill(-t->pid, SIGTERM);
  } else if (now_ns() - *term_at >= s->c.kill_after_ns)
    kill(-t->pid, SIGKILL);
}

/* Sleep until task t's process is reaped and its group is empty: a task's lease covers what it
 * started. Processes that left the group (setsid) are not waited for. */
static int wait_task_gone(struct spank_step *s, struct task *t) {
  uint64_t term_at = 0;
  pthread_mutex_lock(&s->mu);
  while (!t->exited && !s->ending)
    pthread_cond_wait(&s->cv, &s->mu);
  while (group_left(t)) {
    if (s->ending)
      end_leftovers(s, t, &term_at);
    /* No word tells when a group empties: look again shortly (or at once when the step ends). */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + GROUP_POLL_NS;
    ts.tv_sec += (time_t)(ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  }
  int st = t->exited ? t->status : 0;
  pthread_mutex_unlock(&s->mu);
  return st;
}

/* One task's waiter, in slurmstepd: the grant, the task told, then the release. */
static void *waiter(void *arg) {
  struct task *t = arg;
  struct spank_step *s = t->s;
  if (!t->held) {
    shms_lease l;
    int rc = shms_wait(s->h, &t->ticket, UINT64_MAX, &l);
    pthread_mutex_lock(&s->mu);
    if (rc == SHMS_OK) {
      t->lease = l;
      t->held = 1;
    } else
      t->queued = 0;
    pthread_mutex_unlock(&s->mu);
    if (rc != SHMS_OK) {
      char why[320];
      fail(why, sizeof why, rc, "no lease");
      tell(t, 'N', why, (uint32_t)strlen(why) + 1);
      return NULL;
    }
  }
  shms_lease_event(s->h, &t->lease, t->queued ? &t->ticket : NULL, SHMS_EVENT_LEASE_STARTED, 0);
  tell_granted(s, t);
  int st = wait_task_gone(s, t);
  record_end(s, t, st);
  shms_release(s->h, &t->lease);
  pthread_mutex_lock(&s->mu);
  t->held = t->queued = 0;
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* Each task's waiter: threads, started once every task has forked (as slurmstepd forks them
 * all before it tells the plugin of any): a task forked while a waiter ran could inherit a lock
 * that thread held. */
static int start_waiters(struct spank_step *s, char *err, size_t n) {
  for (uint32_t i = 0; i < s->n; i++) {
    int e = pthread_create(&s->t[i].thread, NULL, waiter, &s->t[i]);
    if (e != 0) {
      snprintf(err, n, "cannot start the waiter of task %u: %s", i, strerror(e));
      return -1;
    }
    s->t[i].running = 1;
  }
  return 0;
}

int spank_step_task_forked(struct spank_step *s, uint32_t i, pid_t pid, char *err, size_t n) {
  struct task *t = &s->t[i];
  if (t->pid != 0) {
    snprintf(err, n, "task %u forked twice", i);
    return -1;
  }
  t->pid = pid;
  /* The task's end of the pair is the task's alone now. */
  close(t->sock[1]);
  t->sock[1] = -1;
  for (uint32_t j = 0; j < s->n; j++)
    if (s->t[j].pid == 0)
      return 0;
  return start_waiters(s, err, n);
}

static int recv_all(int fd, void *buf, size_t len) {
  char *p = buf;
  while (len > 0) {
    ssize_t r = recv(fd, p, len, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    p += r;
    len -= (size_t)r;
  }
  return 0;
}

/* The "VAR=value\0..." strings of body[0..len) as a NULL-ended list (pointing into body, which
 * the list's last slot keeps for spank_step_env_free). */
static char **env_list(char *body, uint32_t len) {
  size_t k = 0;
  for (uint32_t i = 0; i < len; i++)
    k += body[i] == '\0';
  char **list = calloc(k + 2, sizeof *list);
  if (list == NULL)
    return NULL;
  size_t j = 0;
  for (char *p = body; p < body + len; p += strlen(p) + 1)
    list[j++] = p;
  list[k + 1] = body;
  return list;
}

void spank_step_env_free(char **env) {
  if (env == NULL)
    return;
  size_t k = 0;
  while (env[k] != NULL)
    k++;
  free(env[k + 1]);
  free(env);
}

char **spank_step_task_wait(struct spank_step *s, uint32_t i, char *err, size_t n) {
  /* Only this task's own end stays open here: the others' are theirs. */
  for (uint32_t j = 0; j < s->n; j++)
    for (int k = 0; k < 2; k++)
      if (s->t[j].sock[k] >= 0 && !(j == i && k == 1)) {
        close(s->t[j].sock[k]);
        s->t[j].sock[k] = -1;
      }
  /* A group of its own, for its lease to end when all of it is gone. A session leader (a task
   * with a pseudo-terminal) leads its group already. */
  if (getpgrp() != getpid() && setpgid(0, 0) != 0) {
    snprintf(err, n, "cannot make task %u a process group of its own: %s", i, strerror(errno));
    return NULL;
  }
  /* slurmstepd forks its tasks with the signals that end them blocked (it unblocks them as it
   * executes the program): unblocked for the wait, so that scancel and a time limit end it at
   * once rather than after KillWait's SIGKILL. */
  /* Slurm signals only a step's user commands, never a process named slurmstepd, which a task
   * is until it executes its program: named for what it does meanwhile, so that scancel's
   * signals reach it (and ps tells operators which tasks wait). */
  char name[16] = "";
  prctl(PR_GET_NAME, name);
  prctl(PR_SET_NAME, "shmsched-wait");
  sigset_t ending, old;
  sigemptyset(&ending);
  for (size_t k = 0; k < sizeof ending_signals / sizeof ending_signals[0]; k++)
    sigaddset(&ending, ending_signals[k]);
  sigprocmask(SIG_UNBLOCK, &ending, &old);
  int fd = s->t[i].sock[1];
  uint32_t total;
  char kind;
  int got = recv_all(fd, &total, sizeof total) == 0 && total > 0 && total <= (1u << 24) &&
            recv_all(fd, &kind, 1) == 0;
  sigprocmask(SIG_SETMASK, &old, NULL);
  prctl(PR_SET_NAME, name);
  if (!got) {
    snprintf(err, n, "slurmstepd ended before the lease was granted");
    return NULL;
  }
  char *body = malloc(total);
  if (body == NULL || recv_all(fd, body, total - 1) != 0) {
    free(body);
    snprintf(err, n, "slurmstepd ended before the lease was granted");
    return NULL;
  }
  body[total - 1] = '\0';
  close(fd);
  s->t[i].sock[1] = -1;
  if (kind != 'Y') {
    snprintf(err, n, "%s", body);
    free(body);
    return NULL;
  }
  char **env = env_list(body, total - 1);
  if (env == NULL) {
    free(body);
    snprintf(err, n, "out of memory");
  }
  return env;
}

void spank_step_task_exited(struct spank_step *s, uint32_t i, int st) {
  struct task *t = &s->t[i];
  pthread_mutex_lock(&s->mu);
  t->exited = 1;
  t->status = st;
  int waiting = t->queued && !t->held;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  /* Still queued: the task will never take it. The waiter hears the cancel; a grant that came
   * first is released by the waiter now that the task is gone. A ticket the waiter retired
   * meanwhile is stale (its seq): the cancel then finds nothing. */
  if (waiting)
    shms_cancel(s->h, &t->ticket);
}

void spank_step_close(struct spank_step *s) {
  if (s == NULL)
    return;
  pthread_mutex_lock(&s->mu);
  s->ending = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  for (uint32_t i = 0; i < s->n; i++) {
    struct task *t = &s->t[i];
    if (t->running) {
      pthread_mutex_lock(&s->mu);
      int waiting = t->queued && !t->held;
      pthread_mutex_unlock(&s->mu);
      if (waiting)
        shms_cancel(s->h, &t->ticket);
      pthread_join(t->thread, NULL);
    } else
      drop(s, t);
  }
  shms_detach(s->h);
  free_step(s);
}
