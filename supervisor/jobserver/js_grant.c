/* The bridge's queued request and the thread that waits for it (js_grant.h). */
#include "js_grant.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

enum { JS_GRANT_IDLE, JS_GRANT_WAITING, JS_GRANT_DONE };

static void *waiter(void *arg) {
  struct js_grant *g = arg;
  pthread_mutex_lock(&g->mu);
  for (;;) {
    while (g->state != JS_GRANT_WAITING && !g->quit)
      pthread_cond_wait(&g->cv, &g->mu);
    if (g->quit && g->state != JS_GRANT_WAITING)
      break;
    shms_ticket t = g->t;
    pthread_mutex_unlock(&g->mu);
    shms_lease lease;
    /* No time limit: a cancel (js_grant_cancel) wakes it through the slot's futex. */
    int rc = shms_wait(g->h, &t, UINT64_MAX, &lease);
    pthread_mutex_lock(&g->mu);
    g->rc = rc;
    g->lease = lease;
    g->state = JS_GRANT_DONE;
    uint64_t one = 1;
    ssize_t w = write(g->efd, &one, sizeof one);
    (void)w; /* an eventfd's counter cannot overflow from one write per request */
  }
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

int js_grant_start(struct js_grant *g, shms_t *h) {
  memset(g, 0, sizeof *g);
  g->h = h;
  g->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g->efd < 0)
    return -1;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  /* The thread takes no signal: the main thread takes them all, synchronously. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int rc = pthread_create(&g->th, NULL, waiter, g);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    close(g->efd);
    g->efd = -1;
    errno = rc;
    return -1;
  }
  return 0;
}

int js_grant_enqueue(struct js_grant *g, const shms_request *req) {
  shms_ticket t;
  int rc = shms_enqueue(g->h, req, &t);
  if (rc != SHMS_OK)
    return rc;
  pthread_mutex_lock(&g->mu);
  g->t = t;
  g->state = JS_GRANT_WAITING;
  pthread_cond_signal(&g->cv);
  pthread_mutex_unlock(&g->mu);
  return SHMS_OK;
}

int js_grant_pending(struct js_grant *g) {
  if (g->efd < 0)
    return 0;
  pthread_mutex_lock(&g->mu);
  int p = g->state != JS_GRANT_IDLE;
  pthread_mutex_unlock(&g->mu);
  return p;
}

int js_grant_collect(struct js_grant *g, int *rc, shms_lease *lease) {
  uint64_t v;
  ssize_t r = read(g->efd, &v, sizeof v);
  (void)r; /* only a wake-up: the state says whether an outcome is in */
  pthread_mutex_lock(&g->mu);
  int done = g->state == JS_GRANT_DONE;
  if (done) {
    *rc = g->rc;
    *lease = g->lease;
    g->state = JS_GRANT_IDLE;
  }
  pthread_mutex_unlock(&g->mu);
  return done;
}

void js_grant_cancel(struct js_grant *g) {
  if (g->efd < 0)
    return;
  pthread_mutex_lock(&g->mu);
  shms_ticket t = g->t;
  int waiting = g->state == JS_GRANT_WAITING;
  pthread_mutex_unlock(&g->mu);
  if (waiting)
    shms_cancel(g->h, &t); /* 0 when it has already ended: its outcome is on its way */
}

void js_grant_stop(struct js_grant *g) {
  if (g->efd < 0)
    return;
  js_grant_cancel(g);
  pthread_mutex_lock(&g->mu);
  g->quit = 1;
  pthread_cond_signal(&g->cv);
  pthread_mutex_unlock(&g->mu);
  pthread_join(g->th, NULL);
  if (g->state == JS_GRANT_DONE && g->rc == SHMS_OK)
    shms_release(g->h, &g->lease); /* granted before the cancel landed: not ours to keep */
  g->state = JS_GRANT_IDLE;
  close(g->efd);
  g->efd = -1;
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
}
