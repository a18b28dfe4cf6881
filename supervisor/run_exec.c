/* Waiting in slices and running a command: what run, submit and worker share (run.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

void run_signals_block(struct run_signals *s) {
  sigemptyset(&s->stop);
  static const int stops[] = {SIGINT, SIGTERM};
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

int run_get_lease(shms_t *h, const shms_request *req, int fast, int print_ticket,
                  const struct run_signals *s, shms_lease *lease, int *signo) {
  *signo = 0;
  int rc;
  if (fast && !print_ticket && (rc = shms_try_acquire(h, req, lease)) != SHMS_EWOULDBLOCK)
    return rc;
  shms_ticket t;
  if ((rc = shms_enqueue(h, req, &t)) != SHMS_OK)
    return rc;
  if (print_ticket) {
    char text[SHMS_TICKET_STRLEN];
    shms_ticket_format(&t, text);
    fprintf(stderr, "%s\n", text);
    fflush(stderr);
  }
  struct lease_wait w = {h, &t, lease};
  rc = run_wait_sliced(s, lease_wait_slice, &w, UINT64_MAX, signo);
  return *signo != 0 ? cancel_own(h, &t, lease) : rc;
}

void run_exec_child(char *const cmd[], const struct run_signals *s, const char *who) {
  sigprocmask(SIG_SETMASK, &s->old, NULL);
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

int run_forwardable(int sig, int code) { return sig != SIGCHLD && code != SI_KERNEL; }

int run_command(char *const cmd[], const struct run_signals *s, int *status) {
  fflush(NULL); /* nothing buffered may be written twice */
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0)
    run_exec_child(cmd, s, "run");
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid)
      return 0;
    if (r < 0 && errno != EINTR)
      return -1;
    /* SIGCHLD is blocked, so a child that ends after waitpid leaves it pending: no lost wake-up. */
    siginfo_t si;
    int sig = sigwaitinfo(&s->taken, &si);
    if (sig > 0 && run_forwardable(sig, si.si_code))
      kill(pid, sig);
  }
}
