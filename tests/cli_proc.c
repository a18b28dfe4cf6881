/* Background CLI processes and their cleanup, for end-to-end tests (cli_proc.h). */
#include "cli_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SEGMENTS 32
#define MAX_PIDS     128

/*
 * Check ends a failed test's process with _exit(), so the record lives in
 * memory shared with the runner, whose unchecked teardown cleans up.
 */
struct leftovers {
  char dir[64];
  int nsegs, npids;
  char segs[MAX_SEGMENTS][96];
  pid_t pids[MAX_PIDS];
};
static struct leftovers *left;

void cli_left_setup(void) {
  left = mmap(NULL, sizeof *left, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(left, MAP_FAILED);
  snprintf(left->dir, sizeof left->dir, "/tmp/shmst-cliproc-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(left->dir));
  /* A test writing to a pipe whose reader failed must not die of SIGPIPE. */
  signal(SIGPIPE, SIG_IGN);
}

/* Remove the files in the scratch directory (it holds no subdirectories), then it. */
static void remove_dir(const char *path) {
  DIR *d = opendir(path);
  if (d == NULL)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      unlinkat(dirfd(d), e->d_name, 0);
  closedir(d);
  rmdir(path);
}

void cli_left_teardown(void) {
  for (int i = 0; i < left->npids; i++)
    if (left->pids[i] > 0 && kill(left->pids[i], SIGKILL) == 0)
      waitpid(left->pids[i], NULL, 0);
  for (int i = 0; i < left->nsegs; i++)
    harness_remove(left->segs[i]);
  remove_dir(left->dir);
  munmap(left, sizeof *left);
}

const char *cli_dir(void) { return left->dir; }

const char *cli_path(char *buf, size_t n, const char *file) {
  snprintf(buf, n, "%s/%s", left->dir, file);
  return buf;
}

const char *cli_segment(const char *tag, const char *spec, const char *extra) {
  static char out[1024], err[1024];
  ck_assert_int_lt(left->nsegs, MAX_SEGMENTS);
  char *name = left->segs[left->nsegs++];
  snprintf(name, sizeof left->segs[0], "%s", harness_name(tag));
  const char *argv[] = {"create", name, "--class", spec, extra ? "--class" : NULL, extra, NULL};
  int rc = harness_cli(out, sizeof out, err, sizeof err, argv);
  ck_assert_msg(rc == 0, "create %s: exit %d: %s", spec, rc, err);
  return name;
}

const char *cli_segment_opts(const char *tag, const char *const opts[]) {
  static char out[1024], err[1024];
  ck_assert_int_lt(left->nsegs, MAX_SEGMENTS);
  char *name = left->segs[left->nsegs++];
  snprintf(name, sizeof left->segs[0], "%s", harness_name(tag));
  const char *argv[32] = {"create", name};
  for (size_t i = 0; opts[i] != NULL && i < 29; i++)
    argv[i + 2] = opts[i];
  int rc = harness_cli(out, sizeof out, err, sizeof err, argv);
  ck_assert_msg(rc == 0, "create %s: exit %d: %s", name, rc, err);
  return name;
}

void cli_spawn(struct cli_proc *p, const char *const argv[]) {
  int pi[2], po[2], pe[2];
  ck_assert(pipe2(pi, O_CLOEXEC) == 0 && pipe2(po, O_CLOEXEC) == 0 && pipe2(pe, O_CLOEXEC) == 0);
  ck_assert_int_lt(left->npids, MAX_PIDS);
  p->pid = fork();
  ck_assert(p->pid >= 0);
  if (p->pid == 0) {
    dup2(pi[0], 0);
    dup2(po[1], 1);
    dup2(pe[1], 2);
    const char *args[64] = {SHMS_BIN_DIR "/shmsched"};
    for (size_t i = 0; argv[i] != NULL && i < 62; i++)
      args[i + 1] = argv[i];
    execv(args[0], (char *const *)args);
    _exit(127);
  }
  left->pids[left->npids++] = p->pid;
  close(pi[0]);
  close(po[1]);
  close(pe[1]);
  p->in = pi[1];
  p->out = po[0];
  p->err = pe[0];
}

void cli_read_line(int fd, char *buf, size_t n) {
  size_t len = 0;
  for (;;) {
    char c;
    ssize_t r = read(fd, &c, 1);
    if (r < 0 && errno == EINTR)
      continue;
    buf[len] = '\0';
    ck_assert_msg(r == 1, "EOF before a full line (got '%s')", buf);
    if (c == '\n')
      break;
    if (len + 1 < n)
      buf[len++] = c;
  }
  buf[len] = '\0';
}

size_t cli_slurp(int fd, char *buf, size_t n) {
  size_t len = 0;
  while (len + 1 < n) {
    ssize_t r = read(fd, buf + len, n - 1 - len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    len += (size_t)r;
  }
  buf[len] = '\0';
  return len;
}

/* Read both pipes to EOF without letting either fill up; out's length into *out_len. */
static void drain(int fo, char *out, size_t out_n, size_t *out_len, int fe, char *err,
                  size_t err_n) {
  size_t len[2] = {0, 0}, cap[2] = {out_n, err_n};
  char *dst[2] = {out, err};
  struct pollfd fds[2] = {{.fd = fo, .events = POLLIN}, {.fd = fe, .events = POLLIN}};
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    if (poll(fds, 2, -1) < 0 && errno != EINTR)
      break;
    for (int i = 0; i < 2; i++) {
      if (fds[i].fd < 0 || fds[i].revents == 0)
        continue;
      char tmp[65536];
      ssize_t r = read(fds[i].fd, tmp, sizeof tmp);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        continue;
      }
      size_t take = (size_t)r < cap[i] - 1 - len[i] ? (size_t)r : cap[i] - 1 - len[i];
      memcpy(dst[i] + len[i], tmp, take);
      len[i] += take;
    }
  }
  out[len[0]] = '\0';
  err[len[1]] = '\0';
  if (out_len != NULL)
    *out_len = len[0];
}

int cli_reap(struct cli_proc *p, int close_in, char *out, size_t out_n, size_t *out_len, char *err,
             size_t err_n) {
  if (close_in)
    close(p->in);
  drain(p->out, out, out_n, out_len, p->err, err, err_n);
  int st;
  while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
    ;
  for (int i = 0; i < left->npids; i++) /* reaped: its pid may be reused, never kill it */
    if (left->pids[i] == p->pid)
      left->pids[i] = 0;
  if (!close_in)
    close(p->in);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
