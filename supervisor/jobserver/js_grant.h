/*
 * The jobserver bridge's one queued request at a time: a thread sleeps in
 * shms_wait for its grant (no polling), and says the outcome is in by an
 * eventfd that the bridge's poll loop watches. One request at a time is what
 * fairness needs: a tenant with queued work takes its turn in the ring, and a
 * build that wants more than one more job asks again once it has its grant.
 *
 * Only the bridge's main thread calls these; the handle is shared with the
 * waiting thread (a handle may be used by several threads at once).
 */
#ifndef SHMS_SUPERVISOR_JS_GRANT_H
#define SHMS_SUPERVISOR_JS_GRANT_H

#include <pthread.h>

#include "shmsched.h"

struct js_grant {
  shms_t *h;
  int efd; /* readable once an outcome is in */
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int state; /* JS_GRANT_IDLE, _WAITING, _DONE; guarded by mu */
  int quit;
  shms_ticket t;
  int rc;
  shms_lease lease;
};

/* Start the waiting thread. 0, or -1 with errno. */
int js_grant_start(struct js_grant *g, shms_t *h);

/* Queue req and have the thread wait for it. SHMS_OK, or enqueue's error (nothing queued). */
int js_grant_enqueue(struct js_grant *g, const shms_request *req);

/* 1 while a request is queued or its outcome not yet collected. */
int js_grant_pending(struct js_grant *g);

/* The outcome, if in: 1 with *rc (and *lease on SHMS_OK), else 0. Consumes the eventfd. */
int js_grant_collect(struct js_grant *g, int *rc, shms_lease *lease);

/* Cancel the queued request (its outcome still comes: cancelled, or a grant that won). */
void js_grant_cancel(struct js_grant *g);

/* Cancel what is queued, release a lease that won the race, stop the thread. */
void js_grant_stop(struct js_grant *g);

#endif
