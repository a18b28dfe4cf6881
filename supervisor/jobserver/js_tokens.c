/* The jobserver's pipes and FIFO (js_tokens.h). */
#include "js_tokens.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* A token's byte. make writes back '+' whatever it read; others write back what they read. */
#define JS_TOKEN '+'

static void closed(int *fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* A second open file description of pipe end fd: its own O_NONBLOCK, shared with no one. */
static int reopen(int fd, int flags) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  return open(path, flags | O_NONBLOCK | O_CLOEXEC);
}

/* A directory for the FIFO whose path has no space (MAKEFLAGS splits words at spaces). */
static int make_dir(struct js_tokens *t) {
  const char *tmp = secure_getenv("TMPDIR");
  if (tmp == NULL || tmp[0] != '/' || strpbrk(tmp, " \t\n\\") != NULL ||
      strlen(tmp) > sizeof t->dir - 32)
    tmp = "/tmp";
  snprintf(t->dir, sizeof t->dir, "%s/shmsched-jobserver-XXXXXX", tmp);
  if (mkdtemp(t->dir) == NULL) {
    t->dir[0] = '\0';
    return -1;
  }
  return 0;
}

static int open_fifo(struct js_tokens *t, char *err, size_t n) {
  if (make_dir(t) != 0) {
    snprintf(err, n, "cannot make a directory for the FIFO in %s: %s",
             secure_getenv("TMPDIR") ? secure_getenv("TMPDIR") : "/tmp", strerror(errno));
    return -1;
  }
  snprintf(t->path, sizeof t->path, "%s/fifo", t->dir);
  /* O_RDWR: we are a reader and a writer, so no open blocks and no read sees EOF. */
  if (mkfifo(t->path, 0600) != 0 || (t->wr = open(t->path, O_RDWR | O_CLOEXEC)) < 0 ||
      (t->rd = open(t->path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
    snprintf(err, n, "cannot make the FIFO %s: %s", t->path, strerror(errno));
    return -1;
  }
  snprintf(t->auth, sizeof t->auth, "--jobserver-auth=fifo:%s", t->path);
  return 0;
}

static int open_pipes(struct js_tokens *t, char *err, size_t n) {
  int tok[2], back[2];
  if (pipe2(tok, O_CLOEXEC) != 0) {
    snprintf(err, n, "cannot make the token pipe: %s", strerror(errno));
    return -1;
  }
  t->child_r = tok[0];
  t->wr = tok[1];
  if (pipe2(back, O_CLOEXEC) != 0) {
    snprintf(err, n, "cannot make the returns pipe: %s", strerror(errno));
    return -1;
  }
  t->ret = back[0];
  t->child_w = back[1];
  if (fcntl(t->ret, F_SETFL, O_NONBLOCK) != 0 || (t->rd = reopen(t->child_r, O_RDONLY)) < 0) {
    snprintf(err, n, "cannot reopen the token pipe (/proc/self/fd): %s", strerror(errno));
    return -1;
  }
  snprintf(t->auth, sizeof t->auth, "--jobserver-auth=%d,%d", t->child_r, t->child_w);
  return 0;
}

int js_tokens_open(struct js_tokens *t, enum js_style style, char *err, size_t n) {
  memset(t, 0, sizeof *t);
  t->style = style;
  t->child_r = t->child_w = t->wr = t->rd = t->ret = -1;
  int rc = style == JS_STYLE_FIFO ? open_fifo(t, err, n) : open_pipes(t, err, n);
  if (rc != 0)
    js_tokens_close(t);
  return rc;
}

void js_tokens_child(const struct js_tokens *t) {
  if (t->child_r >= 0)
    fcntl(t->child_r, F_SETFD, 0);
  if (t->child_w >= 0)
    fcntl(t->child_w, F_SETFD, 0);
}

void js_tokens_started(struct js_tokens *t) {
  closed(&t->child_r);
  closed(&t->child_w);
}

unsigned js_tokens_unread(const struct js_tokens *t) {
  int n = 0;
  if (ioctl(t->rd, FIONREAD, &n) != 0 || n < 0)
    return 0;
  return (unsigned)n;
}

unsigned js_tokens_put(struct js_tokens *t, unsigned k) {
  char buf[256];
  unsigned done = 0;
  memset(buf, JS_TOKEN, sizeof buf);
  while (done < k) {
    size_t want = k - done < sizeof buf ? k - done : sizeof buf;
    ssize_t w = write(t->wr, buf, want);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      break;
    done += (unsigned)w;
  }
  return done;
}

/* Read up to k bytes from fd without blocking; *eof set when it reads EOF. */
static unsigned drain(int fd, unsigned k, int *eof) {
  char buf[256];
  unsigned done = 0;
  while (done < k) {
    size_t want = k - done < sizeof buf ? k - done : sizeof buf;
    ssize_t r = read(fd, buf, want);
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0 && eof != NULL)
      *eof = 1;
    if (r <= 0)
      break;
    done += (unsigned)r;
  }
  return done;
}

unsigned js_tokens_take(struct js_tokens *t, unsigned k) { return drain(t->rd, k, NULL); }

unsigned js_tokens_returns(struct js_tokens *t) {
  if (t->ret < 0 || t->ret_eof)
    return 0;
  return drain(t->ret, UINT_MAX, &t->ret_eof);
}

void js_tokens_close(struct js_tokens *t) {
  js_tokens_started(t);
  closed(&t->wr);
  closed(&t->rd);
  closed(&t->ret);
  if (t->path[0] != '\0')
    unlink(t->path);
  if (t->dir[0] != '\0')
    rmdir(t->dir);
  t->path[0] = t->dir[0] = '\0';
}
