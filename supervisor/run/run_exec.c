/* Waiting and running a command: what run, submit and worker share (run.h). */
#include <ck_pr.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../cli/secure.h"
#include "run.h"

void run_signals_block(struct run_signals *s) {
  sigemptyset(&s->stop);
  static const int stops[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
    struct sigaction sa;
    /* A shell starts background jobs with SIGINT ignored: keep it ignored, as the child will. */
    if (sigaction(stops[i], NULL, &sa) == 0 && sa.sa_handler != SIG_IGN)
      sigaddset(&s->stop, stops[i]);
  }
  s->taken = s->stop;
  sigaddset(&s->taken, SIGCHLD);
  /* An inherited SIG_IGN would make the kernel reap the child before we could wait for it. */
  signal(SIGCHLD, SIG_DFL);
  sigprocmask(SIG_BLOCK, &s->taken, &s->old);
}

int run_stop_pending(const struct run_signals *s) {
  static const struct timespec now = {0, 0};
  int sig = sigtimedwait(&s->stop, NULL, &now);
  return sig > 0 ? sig : 0;
}

uint64_t run_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int run_wait_sliced(const struct run_signals *s, int (*wait)(void *ctx, uint64_t slice_ns),
                    void *ctx, uint64_t timeout_ns, int *signo) {
  for (;;) {
    if ((*signo = run_stop_pending(s)) != 0)
      return SHMS_ETIMEDOUT;
    uint64_t slice = RUN_WAIT_SLICE_NS;
    if (timeout_ns != UINT64_MAX) {
      uint64_t now = run_monotonic_ns();
      if (now >= timeout_ns)
        return SHMS_ETIMEDOUT;
      if (timeout_ns - now < slice)
        slice = timeout_ns - now;
    }
    int rc = wait(ctx, slice);
    if (rc != SHMS_ETIMEDOUT)
      return rc;
  }
}

/* Cancel our own request and collect its outcome; a grant that won the race is given back. */
static int cancel_own(shms_t *h, const shms_ticket *t, shms_lease *lease) {
  int rc = SHMS_ETIMEDOUT;
  for (int tries = 0; rc == SHMS_ETIMEDOUT && tries < 3; tries++) {
    shms_cancel(h, t);
    rc = shms_wait(h, t, 0, lease);
  }
  if (rc == SHMS_OK) { /* accepted before the cancel could land: not ours to keep */
    shms_release(h, lease);
    rc = SHMS_ECANCELLED;
  }
  return rc == SHMS_ETIMEDOUT ? SHMS_ECANCELLED : rc;
}

struct lease_wait {
  shms_t *h;
  const shms_ticket *t;
  shms_lease *lease;
};

static int lease_wait_slice(void *ctx, uint64_t slice_ns) {
  struct lease_wait *w = ctx;
  return shms_wait(w->h, w->t, slice_ns, w->lease);
}

static void *watch(void *arg) {
  struct run_watch *w = arg;
  struct pollfd fds[2] = {{.fd = w->sigfd, .events = POLLIN}, {.fd = w->donefd, .events = POLLIN}};
  for (;;) {
    if (poll(fds, 2, -1) < 0)
      continue; /* EINTR: every signal is blocked here, but a debugger may interrupt */
    if (fds[1].revents != 0)
      return NULL;
    struct signalfd_siginfo si;
    if (fds[0].revents != 0 && read(w->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
      int n = ck_pr_faa_int(&w->count, 1) + 1;
      if (n == 1)
        ck_pr_store_int(&w->first, (int)si.ssi_signo);
      ck_pr_store_int(&w->last, (int)si.ssi_signo);
      w->on_signal(w->ctx, (int)si.ssi_signo, n);
    }
  }
}

int run_watch_start(struct run_watch *w, const struct run_signals *s,
                    void (*on_signal)(void *ctx, int signo, int nth), void *ctx) {
  *w = (struct run_watch){.on_signal = on_signal, .ctx = ctx};
  w->sigfd = signalfd(-1, &s->stop, SFD_CLOEXEC);
  w->donefd = eventfd(0, EFD_CLOEXEC);
  if (w->sigfd >= 0 && w->donefd >= 0 && pthread_create(&w->thread, NULL, watch, w) == 0)
    return 0;
  if (w->sigfd >= 0)
    close(w->sigfd);
  if (w->donefd >= 0)
    close(w->donefd);
  return -1;
}

void run_watch_stop(struct run_watch *w) {
  uint64_t one = 1;
  if (write(w->donefd, &one, sizeof one) != (ssize_t)sizeof one)
    pthread_cancel(w->thread);
  pthread_join(w->thread, NULL);
  close(w->sigfd);
  close(w->donefd);
}

struct lease_watch {
  shms_t *h;
  const shms_ticket *t;
};

/* A stop signal ends the request and wakes the main thread's shms_wait through the slot's
 * futex. */
static void cancel_on_signal(void *ctx, int signo, int nth) {
  (void)signo;
  const struct lease_watch *l = ctx;
  if (nth == 1)
    shms_cancel(l->h, l->t);
}

/* Wait for ticket t's grant with no time limit; a stop signal (in *signo) cancels it. */
static int wait_watched(shms_t *h, const shms_ticket *t, const struct run_signals *s,
                        shms_lease *lease, int *signo) {
  struct lease_watch l = {h, t};
  struct run_watch w;
  if (run_watch_start(&w, s, cancel_on_signal, &l) != 0) {
    struct lease_wait lw = {h, t, lease}; /* no thread: wait in slices */
    return run_wait_sliced(s, lease_wait_slice, &lw, UINT64_MAX, signo);
  }
  int rc = shms_wait(h, t, UINT64_MAX, lease);
  run_watch_stop(&w);
  *signo = w.first;
  return rc;
}

int run_get_lease(shms_t *h, const shms_request *req, int fast, int print_ticket,
                  const struct run_signals *s, shms_lease *lease, shms_ticket *t, int *queued,
                  int *signo) {
  *signo = 0;
  *queued = 0;
  int rc;
  if (fast && !print_ticket && (rc = shms_try_acquire(h, req, lease)) != SHMS_EWOULDBLOCK)
    return rc;
  if ((rc = shms_enqueue(h, req, t)) != SHMS_OK)
    return rc;
  *queued = 1;
  if (print_ticket) {
    char text[SHMS_TICKET_STRLEN];
    shms_ticket_format(t, text);
    fprintf(stderr, "%s\n", text);
    fflush(stderr);
  }
  rc = wait_watched(h, t, s, lease, signo);
  if (*signo == 0)
    return rc;
  if (rc == SHMS_ETIMEDOUT) /* the sliced wait noticed it: the request is still ours to cancel */
    return cancel_own(h, t, lease);
  if (rc == SHMS_OK) { /* accepted before the cancel could land: not ours to keep */
    shms_release(h, lease);
    rc = SHMS_ECANCELLED;
  }
  return rc;
}

void run_exec_child(char *const cmd[], const struct run_signals *s, const char *who) {
  sigprocmask(SIG_SETMASK, &s->old, NULL);
  /* Never lend a setgid front end's group to the user's command (docs/security.md). */
  if (cli_drop_group() != 0) {
    dprintf(STDERR_FILENO,
            "shmsched: permission-denied: %s: cannot drop the group before "
            "running '%s': %s\n",
            who, cmd[0], strerror(errno));
    _exit(126);
  }
  execvp(cmd[0], cmd);
  int e = errno;
  /* One line, like every error of ours; dprintf: no stdio state shared with the parent. */
  dprintf(STDERR_FILENO, "shmsched: %s: %s: cannot execute '%s': %s\n",
          e == ENOENT   ? "not-found"
          : e == EACCES ? "permission-denied"
                        : "system-error",
          who, cmd[0], strerror(e));
  _exit(e == ENOENT ? 127 : 126);
}

/* In the child: its environment, then the exec. */
struct exec_args {
  char *const *cmd;
  char *const *env;
  const struct run_signals *s;
};

static void exec_child(void *arg) {
  const struct exec_args *x = arg;
  for (size_t i = 0; x->env != NULL && x->env[i] != NULL; i++)
    putenv(x->env[i]); /* the strings outlive the exec: it replaces this memory anyway */
  run_exec_child(x->cmd, x->s, "run");
}

int run_command(char *const cmd[], char *const env[], const struct run_signals *s,
                struct contain *c, int *status) {
  /* While it runs, job control is ours to pass on: SIGTSTP (unless ignored) and SIGCONT. */
  sigset_t taken = s->taken, more;
  sigemptyset(&more);
  sigaddset(&more, SIGCONT);
  struct sigaction sa;
  if (sigaction(SIGTSTP, NULL, &sa) == 0 && sa.sa_handler != SIG_IGN)
    sigaddset(&more, SIGTSTP);
  sigprocmask(SIG_BLOCK, &more, NULL);
  sigaddset(&taken, SIGCONT);
  sigaddset(&taken, SIGTSTP);
  struct exec_args x = {cmd, env, s};
  if (contain_start(c, exec_child, &x) != 0) {
    int e = errno;
    sigprocmask(SIG_UNBLOCK, &more, NULL);
    errno = e;
    return -1;
  }
  /* SIGCHLD is blocked, so a child that ends after contain_reap leaves it pending: no lost
   * wake-up. */
  while (!contain_reap(c)) {
    int ms = contain_tick(c);
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    siginfo_t si;
    int sig = sigtimedwait(&taken, &si, ms < 0 ? NULL : &ts);
    if (sig == SIGCONT)
      contain_continued(c);
    else if (sig > 0 && sig != SIGCHLD)
      contain_forward(c, sig);
  }
  *status = c->status;
  contain_end(c);
  sigprocmask(SIG_UNBLOCK, &more, NULL);
  return 0;
}
