/* Waiting for a lease and running the command: `shmsched run`'s moving parts (run.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

/*
 * One shms_wait slice. A stop signal is noticed within a slice. It is longer
 * than the library's own poll interval (200ms): shms_wait checks on a dead
 * dispatcher only when that interval runs out inside one call, so shorter
 * slices would never get to it.
 */
#define WAIT_SLICE_NS (250ull * 1000 * 1000)

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

/* A pending stop signal, taken, or 0. */
static int stop_pending(const struct run_signals *s) {
  static const struct timespec now = {0, 0};
  int sig = sigtimedwait(&s->stop, NULL, &now);
  return sig > 0 ? sig : 0;
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
  for (;;) {
    if ((*signo = stop_pending(s)) != 0)
      return cancel_own(h, &t, lease);
    if ((rc = shms_wait(h, &t, WAIT_SLICE_NS, lease)) != SHMS_ETIMEDOUT)
      return rc;
  }
}

/* In the child: the original signal mask, then exec; a failure exits 127 (not found) or 126. */
static void exec_child(char *const cmd[], const struct run_signals *s) {
  sigprocmask(SIG_SETMASK, &s->old, NULL);
  execvp(cmd[0], cmd);
  int e = errno;
  /* One line, like every error of ours; dprintf: no stdio state shared with the parent. */
  dprintf(STDERR_FILENO, "shmsched: %s: run: cannot execute '%s': %s\n",
          e == ENOENT   ? "not-found"
          : e == EACCES ? "permission-denied"
                        : "system-error",
          cmd[0], strerror(e));
  _exit(e == ENOENT ? 127 : 126);
}

int run_command(char *const cmd[], const struct run_signals *s, int *status) {
  fflush(NULL); /* nothing buffered may be written twice */
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0)
    exec_child(cmd, s);
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid)
      return 0;
    if (r < 0 && errno != EINTR)
      return -1;
    /* SIGCHLD is blocked, so a child that ends after waitpid leaves it pending: no lost wake-up. */
    siginfo_t si;
    int sig = sigwaitinfo(&s->taken, &si);
    /* SI_KERNEL: the terminal sent it to the whole foreground group, the child included. */
    if (sig > 0 && sig != SIGCHLD && si.si_code != SI_KERNEL)
      kill(pid, sig);
  }
}
