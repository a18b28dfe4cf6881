/*
 * A tiny HTTP/1.x server for GET /metrics: one thread, poll(2), non-blocking sockets, and a
 * deadline per connection. Nothing a client does can hold up another: a request is read into a
 * fixed buffer (a longer one is refused, 431), a connection that has not finished its exchange
 * by its deadline is closed, responses are written as the socket takes them, and when every
 * connection slot is taken a new client is closed at once rather than queued. Each response
 * ends the connection (Connection: close), which is how Prometheus scrapes work anyway.
 * Chosen over libmicrohttpd: GET of one path needs a few hundred lines we can read whole and
 * test, with no thread pool and no dependency to keep current (docs/operations.md).
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "metrics.h"
#include "shmsched.h"

#define REQUEST_MAX 8192 /* bytes of request line and headers */
#define CONNS_MAX   64

struct conn {
  int fd; /* -1: a free slot */
  uint64_t deadline_ns;
  size_t in_len;
  char in[REQUEST_MAX];
  char *out; /* the response, once the request is read */
  size_t out_len, out_off;
};

static volatile sig_atomic_t stopping;

static void on_stop(int sig) {
  (void)sig;
  stopping = 1;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "HOST:PORT", "[V6]:PORT", ":PORT" or "PORT" into host and port (host "127.0.0.1" if none). */
static int split_addr(const char *addr, char *host, size_t hn, char *port, size_t pn) {
  const char *colon;
  if (addr[0] == '[') {
    const char *end = strchr(addr, ']');
    if (end == NULL || end[1] != ':')
      return -1;
    snprintf(host, hn, "%.*s", (int)(end - addr - 1), addr + 1);
    colon = end + 1;
  } else {
    colon = strrchr(addr, ':');
    if (colon == NULL) {
      snprintf(host, hn, "127.0.0.1");
      snprintf(port, pn, "%s", addr);
      return port[0] != '\0' && strspn(port, "0123456789") == strlen(port) ? 0 : -1;
    }
    if (colon == addr)
      snprintf(host, hn, "127.0.0.1");
    else
      snprintf(host, hn, "%.*s", (int)(colon - addr), addr);
  }
  snprintf(port, pn, "%s", colon + 1);
  return port[0] != '\0' && strspn(port, "0123456789") == strlen(port) && strlen(port) <= 5 ? 0
                                                                                            : -1;
}

/* A listening socket on addr, its address in bound; -2 (usage, reported) or -1 (reported). */
static int listen_on(const char *addr, char *bound, size_t bn) {
  char host[256], port[16], q[96];
  if (split_addr(addr, host, sizeof host, port, sizeof port) != 0)
    return cli_usage("metrics: --listen: expected ADDR:PORT, [V6ADDR]:PORT or PORT, got '%s'",
                     cli_quote(q, sizeof q, addr)),
           -2;
  struct addrinfo hints = {.ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV | AI_PASSIVE},
                  *res = NULL;
  int gai = getaddrinfo(host, port, &hints, &res);
  if (gai != 0)
    return cli_usage("metrics: --listen: cannot resolve '%s': %s", cli_quote(q, sizeof q, host),
                     gai_strerror(gai)),
           -2;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 64) != 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    freeaddrinfo(res);
    cli_fail(e == EACCES ? SHMS_EPERM : SHMS_ESYSTEM, "metrics: cannot listen on %s: %s",
             cli_quote(q, sizeof q, addr), strerror(e));
    return -1;
  }
  freeaddrinfo(res);
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char h[NI_MAXHOST], p[NI_MAXSERV];
  if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
      getnameinfo((struct sockaddr *)&ss, len, h, sizeof h, p, sizeof p,
                  NI_NUMERICHOST | NI_NUMERICSERV) == 0)
    snprintf(bound, bn, strchr(h, ':') ? "[%s]:%s" : "%s:%s", h, p);
  else
    snprintf(bound, bn, "%s", addr);
  return fd;
}

/* The response to a whole request held in c->in (NUL-terminated). */
static void respond(struct conn *c, const struct metrics_opts *o) {
  char method[16] = "", target[1024] = "", version[16] = "";
  const char *status = "200 OK", *type = METRICS_CONTENT_TYPE, *extra = "";
  char *body = NULL;
  size_t body_len = 0;
  int head = 0;
  if (sscanf(c->in, "%15[A-Z] %1023[^ \r\n] %15[^\r\n]", method, target, version) != 3 ||
      strncmp(version, "HTTP/1.", 7) != 0 || target[0] != '/') {
    status = "400 Bad Request";
  } else if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
    status = "405 Method Not Allowed";
    extra = "Allow: GET, HEAD\r\n";
  } else {
    head = strcmp(method, "HEAD") == 0;
    target[strcspn(target, "?")] = '\0';
    if (strcmp(target, "/metrics") == 0) {
      if (metrics_render(o, &body, &body_len) < 0)
        status = "500 Internal Server Error", body = NULL, body_len = 0;
    } else if (strcmp(target, "/") != 0) {
      status = "404 Not Found";
    }
  }
  if (body == NULL) {
    const char *text = strcmp(status, "200 OK") == 0 ? "shmsched metrics: see /metrics\n" : status;
    body = malloc(strlen(text) + 2);
    if (body != NULL)
      body_len = (size_t)sprintf(body, "%s%s", text, text == status ? "\n" : "");
    type = "text/plain; charset=utf-8";
  }
  FILE *f = open_memstream(&c->out, &c->out_len);
  if (f != NULL) {
    fprintf(f,
            "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
            status, type, body != NULL ? body_len : 0, extra);
    if (body != NULL && !head)
      fwrite(body, 1, body_len, f);
    if (fclose(f) != 0)
      c->out = NULL;
  }
  free(body);
  c->out_off = 0;
}

static void drop(struct conn *c) {
  close(c->fd);
  free(c->out);
  c->fd = -1;
  c->out = NULL;
}

/* Read what the client sent; once the headers are whole (or too long), make the response. */
static void on_readable(struct conn *c, const struct metrics_opts *o) {
  ssize_t n = recv(c->fd, c->in + c->in_len, sizeof c->in - 1 - c->in_len, 0);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    drop(c); /* it went away, or failed, before its request was whole */
    return;
  }
  if (n < 0)
    return;
  c->in_len += (size_t)n;
  c->in[c->in_len] = '\0';
  if (strstr(c->in, "\r\n\r\n") != NULL || strstr(c->in, "\n\n") != NULL) {
    respond(c, o);
  } else if (c->in_len == sizeof c->in - 1) { /* no end of headers within the cap */
    c->out = strdup("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
                    "Connection: close\r\n\r\n");
    c->out_len = c->out != NULL ? strlen(c->out) : 0;
    c->out_off = 0;
  } else {
    return; /* more to come */
  }
  if (c->out == NULL)
    drop(c); /* out of memory for the response */
}

static void on_writable(struct conn *c) {
  ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n < 0) {
    drop(c);
    return;
  }
  c->out_off += (size_t)n;
  if (c->out_off == c->out_len) {
    shutdown(c->fd, SHUT_WR);
    drop(c);
  }
}

static void accept_all(int lfd, struct conn *conns, uint64_t timeout_ns) {
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return; /* EAGAIN: none left; anything else: the next poll tries again */
    int i = 0;
    while (i < CONNS_MAX && conns[i].fd >= 0)
      i++;
    if (i == CONNS_MAX) {
      close(fd); /* every slot busy: refuse now rather than let it wait behind the others */
      continue;
    }
    conns[i].fd = fd;
    conns[i].in_len = 0;
    conns[i].out = NULL;
    conns[i].deadline_ns = now_ns() + timeout_ns;
  }
}

/* ppoll(2)'s timeout: until the earliest deadline; NULL if none. */
static struct timespec *poll_timeout(const struct conn *conns, uint64_t now, struct timespec *ts) {
  uint64_t first = UINT64_MAX;
  for (int i = 0; i < CONNS_MAX; i++)
    if (conns[i].fd >= 0 && conns[i].deadline_ns < first)
      first = conns[i].deadline_ns;
  if (first == UINT64_MAX)
    return NULL;
  uint64_t wait = first <= now ? 0 : first - now;
  *ts = (struct timespec){(time_t)(wait / 1000000000u), (long)(wait % 1000000000u)};
  return ts;
}

/* The stop signals are blocked but inside ppoll, which unblocks them (waking) atomically: a
 * signal between the check of `stopping` and the wait cannot be lost. */
static void serve(int lfd, struct conn *conns, uint64_t timeout_ns, const struct metrics_opts *o,
                  const sigset_t *waitmask) {
  struct pollfd pfd[CONNS_MAX + 1];
  int who[CONNS_MAX + 1];
  while (!stopping) {
    uint64_t now = now_ns();
    int n = 0;
    pfd[n++] = (struct pollfd){.fd = lfd, .events = POLLIN};
    for (int i = 0; i < CONNS_MAX; i++) {
      if (conns[i].fd < 0)
        continue;
      if (now >= conns[i].deadline_ns) {
        drop(&conns[i]); /* too slow: its time is up, whatever it was doing */
        continue;
      }
      who[n] = i;
      pfd[n++] = (struct pollfd){.fd = conns[i].fd, .events = conns[i].out ? POLLOUT : POLLIN};
    }
    struct timespec ts;
    int rc = ppoll(pfd, (nfds_t)n, poll_timeout(conns, now, &ts), waitmask);
    if (rc <= 0)
      continue; /* a deadline, or a signal (stopping is checked at the top) */
    for (int k = 1; k < n; k++) {
      struct conn *c = &conns[who[k]];
      if (c->fd < 0 || pfd[k].revents == 0)
        continue;
      if (c->out != NULL)
        on_writable(c);
      else
        on_readable(c, o);
    }
    if (pfd[0].revents & POLLIN)
      accept_all(lfd, conns, timeout_ns);
  }
}

int metrics_serve(const char *addr, uint64_t timeout_ns, const struct metrics_opts *o) {
  char bound[300];
  int lfd = listen_on(addr, bound, sizeof bound);
  if (lfd < 0)
    return lfd == -2 ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
  struct conn *conns = calloc(CONNS_MAX, sizeof *conns);
  if (conns == NULL) {
    close(lfd);
    return cli_fail(SHMS_ENOMEM, "metrics: cannot allocate the connection table");
  }
  for (int i = 0; i < CONNS_MAX; i++)
    conns[i].fd = -1;
  sigset_t stop, waitmask;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop, &waitmask);
  struct sigaction sa = {.sa_handler = on_stop};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  printf("listening on %s\n", bound);
  fflush(stdout);
  serve(lfd, conns, timeout_ns, o, &waitmask);
  for (int i = 0; i < CONNS_MAX; i++)
    if (conns[i].fd >= 0)
      drop(&conns[i]);
  free(conns);
  close(lfd);
  return CLI_EXIT_OK;
}
