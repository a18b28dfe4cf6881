/* Running one job's command for `shmsched worker` (worker.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker.h"

/* The most written to the command's stdin at once: a pipe's default capacity. */
#define FEED_CHUNK 65536

/* The pipes to one command: our ends, -1 once closed. */
struct pipes {
  int in;  /* its stdin, written from the payload */
  int out; /* its stdout, read into the result */
  size_t fed;
};

static void close_end(int *fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* What the child needs: the job and its ends of the pipes. */
struct child_args {
  const struct job_run *j;
  int in, out;
};

/* In the child: the pipes as stdin and stdout, the job's environment, then exec. */
static void child(void *arg) {
  const struct child_args *x = arg;
  /* The worker keeps fds 0..2 open, so in and out are above 2 and dup2 never targets them. */
  dup2(x->in, STDIN_FILENO);
  dup2(x->out, STDOUT_FILENO);
  for (size_t i = 0; x->j->env[i] != NULL; i++)
    putenv(x->j->env[i]); /* the strings outlive the exec: it replaces this memory anyway */
  run_exec_child(x->j->cmd, x->j->s, "worker");
}

/* Start the command; our pipe ends non-blocking into *p. Returns 0, or -1 with errno. */
static int start(const struct job_run *j, struct pipes *p) {
  int pi[2], po[2];
  if (pipe2(pi, O_CLOEXEC) != 0)
    return -1;
  if (pipe2(po, O_CLOEXEC) != 0) {
    int e = errno;
    close(pi[0]);
    close(pi[1]);
    errno = e;
    return -1;
  }
  struct child_args x = {j, pi[0], po[1]};
  int rc = contain_start(j->c, child, &x), e = errno;
  close(pi[0]);
  close(po[1]);
  *p = (struct pipes){.in = pi[1], .out = po[0]};
  if (rc != 0) {
    close_end(&p->in);
    close_end(&p->out);
    errno = e;
    return -1;
  }
  fcntl(p->in, F_SETFL, O_NONBLOCK);
  fcntl(p->out, F_SETFL, O_NONBLOCK);
  if (j->payload_len == 0)
    close_end(&p->in);
  return 0;
}

/* Write what the pipe takes of the payload; at its end (or EPIPE: it stopped reading), EOF. */
static void feed(const struct job_run *j, struct pipes *p) {
  size_t left = j->payload_len - p->fed;
  ssize_t r =
      write(p->in, (const char *)j->payload + p->fed, left < FEED_CHUNK ? left : FEED_CHUNK);
  if (r > 0)
    p->fed += (size_t)r;
  /* EPIPE leaves a SIGPIPE pending, blocked: harmless, and the child starts without it. */
  if (p->fed == j->payload_len || (r < 0 && errno != EAGAIN && errno != EINTR))
    close_end(&p->in);
}

/*
 * Read once from its stdout. More than cap bytes in all is an overflow: its
 * stdout and stdin are closed, so that it gets EPIPE or SIGPIPE rather than
 * run on unheard. Returns the bytes read, 0 at EOF or overflow, -1 when
 * nothing is there yet.
 */
static ssize_t collect(struct job_run *j, struct pipes *p) {
  ssize_t r = read(p->out, j->out + j->out_len, j->cap + 1 - j->out_len);
  if (r < 0 && (errno == EAGAIN || errno == EINTR))
    return -1;
  if (r <= 0) {
    close_end(&p->out);
    return 0;
  }
  j->out_len += (size_t)r;
  if (j->out_len > j->cap) {
    j->overflow = 1;
    j->out_len = 0;
    close_end(&p->out);
    close_end(&p->in);
    return 0;
  }
  return r;
}

/* Signals that came: a stop signal is noted and forwarded to its group; SIGCHLD only wakes us. */
static void take_signals(struct job_run *j) {
  struct signalfd_siginfo si;
  while (read(j->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
    int sig = (int)si.ssi_signo;
    if (sig == SIGCHLD)
      continue;
    j->stop_signo = sig;
    contain_forward(j->c, sig); /* its own group: nothing sent to ours reached it */
  }
}

/* How long poll may sleep: until the next cancel check, the job's time limit, or a kill. */
static int poll_ms(const struct job_run *j, uint64_t until, int kill_ms) {
  int ms = WORKER_CANCEL_POLL_MS;
  if (kill_ms >= 0 && kill_ms < ms)
    ms = kill_ms;
  if (until != 0 && !j->timed_out) {
    uint64_t now = run_monotonic_ns();
    uint64_t left = now >= until ? 0 : (until - now + 999999) / 1000000;
    if (left < (uint64_t)ms)
      ms = (int)left;
  }
  return ms;
}

/* Once a cancel or the time limit calls for it, SIGTERM (once; SIGKILL follows kill_after). */
static void maybe_end(struct job_run *j, uint64_t until) {
  if (!j->cancel_sent && !j->timed_out && j->cancelled(j->ctx)) {
    contain_forward(j->c, SIGTERM);
    j->cancel_sent = 1;
  }
  if (until != 0 && !j->timed_out && !j->cancel_sent && run_monotonic_ns() >= until) {
    contain_forward(j->c, SIGTERM);
    j->timed_out = 1;
  }
}

int worker_run_job(struct job_run *j) {
  j->out_len = 0;
  j->overflow = j->cancel_sent = j->timed_out = j->stop_signo = 0;
  struct pipes p;
  if (start(j, &p) != 0)
    return -1;
  uint64_t until = j->timeout_ns != 0 ? run_monotonic_ns() + j->timeout_ns : 0;
  while (!contain_reap(j->c)) {
    if (j->c->leader_done && p.out >= 0) {
      /*
       * It has ended, so everything it wrote is in the pipe: read that, and no
       * more (a process it left behind may hold the pipe open, but its output is
       * not the command's).
       */
      while (p.out >= 0 && collect(j, &p) > 0)
        ;
      close_end(&p.out);
      close_end(&p.in);
    }
    int kill_ms = contain_tick(j->c);
    struct pollfd fds[3] = {{.fd = j->sigfd, .events = POLLIN},
                            {.fd = p.in, .events = POLLOUT},
                            {.fd = p.out, .events = POLLIN}};
    /* A closed end is -1, which poll skips. SIGCHLD wakes it when a process of the tree ends. */
    poll(fds, 3, poll_ms(j, until, kill_ms));
    if (fds[0].revents != 0)
      take_signals(j);
    if (p.in >= 0 && fds[1].revents != 0)
      feed(j, &p);
    if (p.out >= 0 && fds[2].revents != 0)
      collect(j, &p);
    if (!j->c->leader_done)
      maybe_end(j, until);
  }
  while (p.out >= 0 && collect(j, &p) > 0)
    ;
  close_end(&p.out);
  close_end(&p.in);
  j->status = j->c->status;
  contain_end(j->c);
  return 0;
}
