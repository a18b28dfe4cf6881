/* The build tool's environment and the bridge's loop (js_run.h). */
#include "js_run.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int dropped(const char *entry) {
  static const char *const names[] = {
      "MAKEFLAGS=",       "CARGO_MAKEFLAGS=", "SHMSCHED_SEGMENT=", "SHMSCHED_CLASS=",
      "SHMSCHED_TENANT=", "SHMSCHED_CELL=",   "SHMSCHED_TICKET=",
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strncmp(entry, names[i], strlen(names[i])) == 0)
      return 1;
  return 0;
}

static char *joined(const char *name, const char *value) {
  size_t n = strlen(name) + strlen(value) + 2;
  char *s = malloc(n);
  if (s != NULL)
    snprintf(s, n, "%s=%s", name, value);
  return s;
}

char **js_run_env(const char *makeflags, const char *segment, const char *cls, const char *tenant) {
  size_t n = 0;
  while (environ[n] != NULL)
    n++;
  char **env = calloc(n + 6, sizeof *env);
  if (env == NULL)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (!dropped(environ[i]) && (env[k] = strdup(environ[i])) != NULL)
      k++;
  const char *add[][2] = {{"MAKEFLAGS", makeflags},
                          {"CARGO_MAKEFLAGS", makeflags},
                          {"SHMSCHED_SEGMENT", segment},
                          {"SHMSCHED_CLASS", cls},
                          {"SHMSCHED_TENANT", tenant}};
  for (size_t i = 0; i < 5; i++)
    if ((env[k++] = joined(add[i][0], add[i][1])) == NULL) {
      js_run_env_free(env);
      return NULL;
    }
  return env;
}

void js_run_env_free(char **env) {
  for (size_t i = 0; env != NULL && env[i] != NULL; i++)
    free(env[i]);
  free(env);
}

struct child_args {
  char *const *cmd;
  char **env;
  const struct js_tokens *tk;
  const struct run_signals *s;
};

static void exec_child(void *arg) {
  const struct child_args *x = arg;
  js_tokens_child(x->tk);
  environ = x->env; /* a pointer store: nothing here may allocate after fork */
  run_exec_child(x->cmd, x->s, "jobserver");
}

/* One signal from the signalfd: forward it, or continue the command; SIGCHLD is the reap's. */
static void take_signal(int sfd, struct contain *c) {
  struct signalfd_siginfo si;
  if (read(sfd, &si, sizeof si) != (ssize_t)sizeof si)
    return;
  int sig = (int)si.ssi_signo;
  if (sig == SIGCONT)
    contain_continued(c);
  else if (sig != SIGCHLD)
    contain_forward(c, sig);
}

/* Wait for a signal, a grant, a token written back, or the next step's time. */
static void wait_events(struct js_bridge *b, struct contain *c, int sfd, uint64_t step_ns,
                        int watch_fifo) {
  int kill_ms = contain_tick(c);
  uint64_t ns = step_ns;
  if (kill_ms >= 0 && (uint64_t)kill_ms * 1000000ull < ns)
    ns = (uint64_t)kill_ms * 1000000ull;
  struct pollfd fds[3] = {{.fd = sfd, .events = POLLIN}, {.fd = b->g.efd, .events = POLLIN}};
  nfds_t n = 2;
  if (b->tk->ret >= 0 && !b->tk->ret_eof)
    fds[n++] = (struct pollfd){.fd = b->tk->ret, .events = POLLIN};
  else if (watch_fifo)
    fds[n++] = (struct pollfd){.fd = b->tk->rd, .events = POLLIN};
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  if (ppoll(fds, n, ns == UINT64_MAX ? NULL : &ts, NULL) <= 0)
    return;
  if (fds[0].revents != 0)
    take_signal(sfd, c);
  if (fds[1].revents != 0)
    js_bridge_granted(b);
}

int js_run_command(struct js_bridge *b, char *const cmd[], char **env, const struct run_signals *s,
                   struct contain *c, int *status) {
  /* As run: job control is ours to pass on while it runs (SIGTSTP unless ignored, SIGCONT). */
  sigset_t taken = s->taken, more;
  sigemptyset(&more);
  sigaddset(&more, SIGCONT);
  struct sigaction sa;
  if (sigaction(SIGTSTP, NULL, &sa) == 0 && sa.sa_handler != SIG_IGN)
    sigaddset(&more, SIGTSTP);
  sigprocmask(SIG_BLOCK, &more, NULL);
  sigaddset(&taken, SIGCONT);
  sigaddset(&taken, SIGTSTP);
  int sfd = signalfd(-1, &taken, SFD_CLOEXEC | SFD_NONBLOCK);
  struct child_args x = {cmd, env, b->tk, s};
  if (sfd < 0 || contain_start(c, exec_child, &x) != 0) {
    int e = errno;
    if (sfd >= 0)
      close(sfd);
    sigprocmask(SIG_UNBLOCK, &more, NULL);
    errno = e;
    return -1;
  }
  js_tokens_started(b->tk);
  if (js_bridge_start(b) != 0) /* no thread: ask only for free cells, never queue */
    b->refused = 1;
  while (!contain_reap(c)) {
    int watch_fifo;
    uint64_t step_ns = js_bridge_step(b, run_monotonic_ns(), &watch_fifo);
    wait_events(b, c, sfd, step_ns, watch_fifo);
  }
  *status = c->status;
  contain_end(c);
  close(sfd);
  sigprocmask(SIG_UNBLOCK, &more, NULL);
  return 0;
}
