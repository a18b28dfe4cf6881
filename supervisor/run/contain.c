/* Running one command contained: its group, cgroup, terminal and whole tree (contain.h). */
#include "contain.h"
#include "../../shm/procfs.h"

#include "../cli/sigbus.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* The child's exit status when it cannot be started as recorded (it never runs the command). */
#define CONTAIN_NOT_STARTED 126

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int contain_init(struct contain *c, shms_t *h, uint64_t kill_after_ns, int job_control) {
  memset(c, 0, sizeof *c);
  c->h = h;
  c->kill_after_ns = kill_after_ns;
  /* Orphans of the command's tree come to us, not to init: we see the whole tree end. */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    return -1;
  c->tty = job_control ? open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC) : -1; /* -1: none */
  c->cgroup = shms_command_cgroup(h, c->cg, sizeof c->cg) == SHMS_OK;
  if (c->cgroup)
    cli_sigbus_cgroup(c->cg); /* a segment truncated under us: we remove it ourselves */
  return 0;
}

/* We are the terminal's foreground job: our group leads it, and we lead our group. */
static int foreground(const struct contain *c) {
  return c->tty >= 0 && getpgrp() == getpid() && tcgetpgrp(c->tty) == getpgrp();
}

/* Give the terminal to group pgid. From the background, tcsetpgrp raises SIGTTOU: blocked. */
static void set_fg(const struct contain *c, pid_t pgid) {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  sigprocmask(SIG_BLOCK, &ttou, &old);
  tcsetpgrp(c->tty, pgid);
  sigprocmask(SIG_SETMASK, &old, NULL);
}

/* Write text to the file name of our cgroup (cgroup.procs, cgroup.kill). 1 if written. */
static int cg_write(const struct contain *c, const char *name, const char *text) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/%s", c->cg, name);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  size_t n = strlen(text);
  int ok = write(fd, text, n) == (ssize_t)n;
  close(fd);
  return ok;
}

struct child_signal {
  pid_t self;
  int sig;
};

/* A child of ours cannot be reused before we reap it: its pid is safe to signal. */
static int signal_if_child(const struct shms__proc_stat *st, void *ctx) {
  const struct child_signal *cs = ctx;
  if (st->ppid == cs->self && st->state != 'Z')
    kill(st->pid, cs->sig);
  return 0;
}

/* sig to every child of ours: the leader, and the orphans of its tree that came to us. */
static void signal_children(int sig) {
  struct child_signal cs = {getpid(), sig};
  shms__proc_scan(signal_if_child, &cs);
}

/* sig to every process in our cgroup, one by one (cgroup v2 signals only SIGKILL at once). */
static void signal_cgroup(const struct contain *c, int sig) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/cgroup.procs", c->cg);
  FILE *f = fopen(path, "re");
  if (f == NULL)
    return;
  long pid;
  // NOLINTNEXTLINE(cert-err34-c): the kernel writes these numbers; a bad one ends the read
  while (fscanf(f, "%ld", &pid) == 1)
    if (pid > 0)
      kill((pid_t)pid, sig);
  fclose(f);
}

int contain_start(struct contain *c, void (*child)(void *arg), void *arg) {
  c->pid = 0;
  c->in_cgroup = c->gave_tty = c->leader_done = c->status = c->killed = c->mirror_stop = 0;
  c->kill_at = c->forwarded = 0;
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0)
    return -1;
  pid_t parent = getpid();
  fflush(NULL); /* nothing buffered may be written twice */
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(go[0]);
    close(go[1]);
    errno = e;
    return -1;
  }
  if (pid == 0) {
    close(go[1]);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* it died before the death signal was set: nobody records us */
      _exit(CONTAIN_NOT_STARTED);
    /* Run nothing until we are recorded: no process of the tree can escape unrecorded. */
    char b;
    ssize_t r;
    while ((r = read(go[0], &b, 1)) < 0 && errno == EINTR)
      ;
    if (r != 1)
      _exit(CONTAIN_NOT_STARTED);
    close(go[0]);
    child(arg);
    _exit(CONTAIN_NOT_STARTED);
  }
  close(go[0]);
  setpgid(pid, pid); /* as the child does: whichever runs first */
  c->pid = pid;
  char text[24];
  snprintf(text, sizeof text, "%d", (int)pid);
  c->in_cgroup = c->cgroup && cg_write(c, "cgroup.procs", text);
  if (shms_command_set(c->h, pid) != SHMS_OK) {
    int e = errno;
    kill(pid, SIGKILL);
    close(go[1]);
    waitpid(pid, NULL, 0);
    shms_command_clear(c->h);
    c->pid = 0;
    errno = e != 0 ? e : EAGAIN;
    return -1;
  }
  if (foreground(c)) {
    set_fg(c, pid);
    c->gave_tty = 1;
  }
  while (write(go[1], "g", 1) < 0 && errno == EINTR)
    ;
  close(go[1]);
  return 0;
}

/* Arm the SIGKILL of what is left, kill_after from now, unless it is armed already. */
static void arm(struct contain *c) {
  if (c->kill_at == 0)
    c->kill_at = mono_ns() + c->kill_after_ns;
}

void contain_forward(struct contain *c, int sig) {
  if (c->pid <= 0)
    return;
  if (!c->leader_done)
    kill(-c->pid, sig);
  else /* its group id is no longer ours to trust: what is left of the tree is our children */
    signal_children(sig);
  c->forwarded |= 1ull << sig;
  if (sig == SIGTSTP)
    c->mirror_stop = 1;
  else if (sig != SIGCONT)
    arm(c);
}

void contain_continued(struct contain *c) {
  if (c->pid <= 0 || c->leader_done)
    return;
  if (!c->gave_tty && foreground(c)) {
    set_fg(c, c->pid);
    c->gave_tty = 1;
  }
  kill(-c->pid, SIGCONT);
}

/*
 * The leader stopped with sig. If the terminal (or our forwarded SIGTSTP) stopped it, stop
 * ourselves too, so that the shell sees its job stopped; SIGCONT continues us and then it
 * (contain_continued). Any other stop (a debugger, a SIGSTOP sent to it) is the command's.
 */
static void leader_stopped(struct contain *c, int sig) {
  int tty_stop = sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
  if (!(c->gave_tty && tty_stop) && !c->mirror_stop)
    return;
  c->mirror_stop = 0;
  if (c->gave_tty) {
    set_fg(c, getpgrp());
    c->gave_tty = 0;
  }
  kill(getpid(), SIGSTOP); /* returns once we are continued */
}

/* 1 if we have a child left (running, stopped or a zombie). */
static int children_left(void) {
  siginfo_t si;
  int rc;
  while ((rc = waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT)) != 0 && errno == EINTR)
    ;
  return rc == 0;
}

/* The leader has ended: what is left of its tree is told to end, then killed kill_after later. */
static void leader_ended(struct contain *c, int st) {
  c->leader_done = 1;
  c->status = st;
  if (c->gave_tty) {
    set_fg(c, getpgrp());
    c->gave_tty = 0;
  }
  if (!children_left())
    return;                 /* the usual case: nothing to look for in /proc */
  signal_children(SIGTERM); /* orphans that left the group, a daemon among them */
  if (c->in_cgroup)
    signal_cgroup(c, SIGTERM);
  arm(c);
}

int contain_reap(struct contain *c) {
  for (;;) {
    siginfo_t si;
    si.si_pid = 0;
    /* Look before reaping: the leader's zombie keeps its group id ours while we signal it. */
    if (waitid(P_ALL, 0, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR)
        continue;
      return c->leader_done; /* no child left: the whole tree is gone */
    }
    if (si.si_pid == 0)
      return 0; /* some of it is left, and nothing changed */
    pid_t pid = si.si_pid;
    if (pid == c->pid && !c->leader_done && si.si_code != CLD_STOPPED && si.si_code != CLD_TRAPPED)
      kill(-c->pid, SIGTERM); /* what is left of its group */
    int st;
    if (waitpid(pid, &st, WNOHANG | WUNTRACED) != pid || pid != c->pid)
      continue; /* an orphan of the tree, reaped (or stopped: not ours to mirror) */
    if (WIFSTOPPED(st))
      leader_stopped(c, WSTOPSIG(st));
    else
      leader_ended(c, st);
  }
}

int contain_tick(struct contain *c) {
  if (c->kill_at == 0)
    return -1;
  uint64_t now = mono_ns();
  if (now < c->kill_at)
    return (int)((c->kill_at - now + 999999) / 1000000);
  if (c->in_cgroup)
    cg_write(c, "cgroup.kill", "1");
  if (!c->leader_done)
    kill(-c->pid, SIGKILL);
  signal_children(SIGKILL);
  if (!c->killed)
    c->forwarded |= 1ull << SIGKILL;
  c->killed = 1;
  /* Again shortly: an orphan of a killed parent comes to us without a SIGCHLD. */
  return 10;
}

void contain_end(struct contain *c) {
  if (c->gave_tty) {
    set_fg(c, getpgrp());
    c->gave_tty = 0;
  }
  shms_command_clear(c->h);
  c->pid = 0;
}

int contain_crashed(const struct contain *c, int st) {
  if (!WIFSIGNALED(st))
    return 0;
  int sig = WTERMSIG(st);
  if (c->forwarded & (1ull << sig))
    return 0;
  /* Faults. Not SIGXCPU or SIGXFSZ: the kernel enforcing a limit someone set, as timeout(1)
   * would; nor SIGQUIT: a person asking for a core. */
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT ||
         sig == SIGSYS || sig == SIGTRAP;
}
