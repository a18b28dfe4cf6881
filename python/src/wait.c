/*
 * Interruptible waits without polling.
 *
 * The library's waits sleep on a futex and go back to sleep when a signal interrupts them
 * (a waiter must not give up its place for a signal), so Python's own signal handlers,
 * which run only in the main thread and only when it returns to the interpreter, would
 * never get to run during a wait with no time limit. Waiting in short slices would, at the
 * cost of waking every idle waiter several times a second; the project keeps an idle waiter
 * to one wake-up a second (design/waking.md, "Idle waiters and the safety poll").
 *
 * So in the main thread the call runs in a helper thread that blocks every signal, and the
 * main thread sleeps in poll() on an eventfd the helper writes when the call returns, with
 * the GIL released. A signal therefore interrupts the main thread's poll (EINTR): it runs
 * the Python handlers (PyErr_CheckSignals), and if one raised (KeyboardInterrupt for ^C)
 * it calls abort(), which cancels the request (shms_cancel wakes the helper's wait through
 * its futex at once), waits for the helper to return, and leaves the exception set so that
 * the caller releases any lease that raced in. A handler that returns normally changes
 * nothing: the request keeps its place. In any other thread signal handlers never run, so
 * the call runs inline there with the GIL released.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "pyshms.h"

static void finish(struct pyshms_wait *w, int rc) {
  w->rc = rc;
  snprintf(w->detail, sizeof w->detail, "%s", shms_last_error_detail());
}

static void *helper(void *arg) {
  struct pyshms_wait *w = arg;
  finish(w, w->run(w));
  uint64_t one = 1;
  /* An eventfd write of 1 cannot fail short of overflow, which one write cannot reach. */
  while (write(w->efd, &one, sizeof one) < 0 && errno == EINTR)
    ;
  return NULL;
}

/* The main thread of the process: the one Python runs signal handlers in (after a fork, the
 * forking thread, which becomes the child's main thread: its tid is the child's pid). */
static int in_main_thread(void) { return gettid() == getpid(); }

static void run_inline(struct pyshms_wait *w) {
  PyThreadState *ts = PyEval_SaveThread();
  finish(w, w->run(w));
  PyEval_RestoreThread(ts);
}

/* A handler raised: make run() return soon. */
static void abort_run(struct pyshms_wait *w) {
  PyThreadState *ts = PyEval_SaveThread();
  __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
  w->abort(w);
  PyEval_RestoreThread(ts);
}

/* Sleep until the helper says run() returned; 1 if a signal handler raised meanwhile. */
static int sleep_until_done(struct pyshms_wait *w) {
  int interrupted = 0;
  for (;;) {
    struct pollfd p = {.fd = w->efd, .events = POLLIN};
    PyThreadState *ts = PyEval_SaveThread();
    int r = poll(&p, 1, -1), err = errno;
    PyEval_RestoreThread(ts);
    if (r > 0)
      return interrupted;
    /* Once a handler raised, later signals wait for the interpreter: the wait is ending. */
    if (r < 0 && err == EINTR && !interrupted && PyErr_CheckSignals() < 0) {
      interrupted = 1;
      abort_run(w);
    }
  }
}

int pyshms_block(struct pyshms_wait *w) {
  __atomic_store_n(&w->stop, 0, __ATOMIC_RELEASE);
  if (w->look != NULL) {
    PyThreadState *ts = PyEval_SaveThread();
    finish(w, w->look(w));
    PyEval_RestoreThread(ts);
    if (w->rc != SHMS_ETIMEDOUT || w->look_only)
      return 0;
  }
  if (!in_main_thread()) {
    run_inline(w);
    return 0;
  }
  /* A ^C that came just before the wait ends it before it starts. */
  if (PyErr_CheckSignals() < 0) {
    abort_run(w);
    run_inline(w);
    return -1;
  }
  w->efd = eventfd(0, EFD_CLOEXEC);
  pthread_t th;
  int err = w->efd < 0 ? errno : 0;
  if (err == 0) {
    /* The helper never takes a signal: the kernel gives a signal sent to the process to a
     * thread that does not block it, the main thread first, whose poll it interrupts. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    err = pthread_create(&th, NULL, helper, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  if (err != 0) { /* no thread to spare: wait uninterruptibly rather than not at all */
    if (w->efd >= 0)
      close(w->efd);
    run_inline(w);
    return 0;
  }
  int interrupted = sleep_until_done(w);
  PyThreadState *ts = PyEval_SaveThread();
  pthread_join(th, NULL);
  PyEval_RestoreThread(ts);
  close(w->efd);
  /* A signal that came as the call returned: its handler runs now, while the caller can still
   * undo what it got, rather than in the caller's Python code, where a lease would be lost. */
  if (!interrupted && PyErr_CheckSignals() < 0)
    interrupted = 1;
  return interrupted ? -1 : 0;
}
