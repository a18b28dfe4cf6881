/*
 * The CPython extension module shmsched._shmsched: a thin layer over the public
 * header. The pure-Python package (python/shmsched/) gives it its shape; this layer
 * converts arguments, releases the GIL around every call into the segment, raises
 * the package's exceptions, refuses a handle used after fork(), and keeps waits
 * interruptible (wait.c).
 */
#ifndef PYSHMS_H
#define PYSHMS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <shmsched.h>
#include <sys/types.h>

/* A segment handle (Segment's _handle). */
typedef struct {
  PyObject_HEAD shms_t *h; /* NULL once detached */
  PyObject *name;          /* str */
  pid_t pid;               /* the process that attached */
  unsigned long fork_gen;  /* pyshms_fork_gen when attached: a fork in between makes it stale */
  int observer;
  int active;  /* calls under way with the GIL released (other threads): detach refuses */
  int workers; /* open Workers (they use the handle): detach refuses */
} HandleObject;

/* A worker bound to one cell of a worker class (Worker's _worker). */
typedef struct {
  PyObject_HEAD HandleObject *handle; /* strong reference */
  shms_worker_t *w;                   /* NULL once closed */
  size_t payload_max;                 /* the class's payload bytes */
  int busy;                           /* a take under way in some thread */
  int holding;                        /* a job taken and not yet completed */
  shms_job job;                       /* the job held, when holding */
} WorkerObject;

extern PyTypeObject pyshms_handle_type;
extern PyTypeObject pyshms_worker_type;

/* Incremented in the child by a fork handler: handles of an older generation are the parent's. */
extern volatile unsigned long pyshms_fork_gen;

/* Key of the error table for not-found when a segment (not a ticket) was not found. */
#define PYSHMS_SEGMENT_NOT_FOUND 1000
/* Key of the error table for a handle used in a forked child. */
#define PYSHMS_FORKED 1001

/* Raise the package's exception for rc (a negative SHMS_E* code, or a PYSHMS_* key). NULL. */
PyObject *pyshms_raise(int rc, const char *detail);
/* Raise for rc with the calling thread's shms_last_error_detail(). NULL. */
PyObject *pyshms_raise_last(int rc);
/* Raise invalid-argument with a detail in PyUnicode_FromFormat's format (%R, %zd ...). NULL. */
PyObject *pyshms_raise_inval(const char *fmt, ...);

/* 0 if self may be used by this process now; else -1 with the exception set. */
int pyshms_handle_usable(HandleObject *self, int member);

/* Run stmt with the GIL released (it must not touch Python objects). */
#define PYSHMS_UNLOCKED(stmt)                                                                      \
  do {                                                                                             \
    PyThreadState *pyshms__ts = PyEval_SaveThread();                                               \
    stmt;                                                                                          \
    PyEval_RestoreThread(pyshms__ts);                                                              \
  } while (0)

/* The same for a call on self's handle: detach refuses while it is under way. */
#define PYSHMS_HANDLE_CALL(self, stmt)                                                             \
  do {                                                                                             \
    (self)->active++;                                                                              \
    PYSHMS_UNLOCKED(stmt);                                                                         \
    (self)->active--;                                                                              \
  } while (0)

/* Converters for PyArg_Parse "O&". */
int pyshms_ticket_conv(PyObject *o, void *out);
int pyshms_lease_conv(PyObject *o, void *out);
PyObject *pyshms_ticket_tuple(const shms_ticket *t);
PyObject *pyshms_lease_tuple(const shms_lease *l);

/* Nanoseconds of CLOCK_MONOTONIC (what request deadlines are measured in). */
uint64_t pyshms_monotonic_ns(void);

/*
 * A blocking call made interruptible. run() does the call (in a helper thread when the
 * caller is the main thread, else inline with the GIL released) and returns its code;
 * abort() makes run() return soon (cancels the request, or sets stop). See wait.c.
 */
struct pyshms_wait {
  int (*run)(struct pyshms_wait *w);
  /* Optional: the same call with no wait ("just look"), made inline first; SHMS_ETIMEDOUT when
   * it would have to wait. Spares a thread when the outcome is already there. */
  int (*look)(struct pyshms_wait *w);
  int look_only; /* a zero timeout: the look's answer is the answer */
  void (*abort)(struct pyshms_wait *w);
  int stop;         /* set (atomically) before abort(); run() loops that wait in slices read it */
  int rc;           /* what run() returned */
  char detail[512]; /* shms_last_error_detail() of the thread that ran it */
  int efd;          /* an eventfd the helper writes once run() returned */
};

/* One second: the slice of waits that cannot be cut short by a cancel (the library's poll). */
#define PYSHMS_SLICE_NS (1000ull * 1000 * 1000)

/*
 * Run w->run without holding the GIL. Returns 0 when it ran to its end (w->rc, w->detail), or
 * -1 when a signal handler raised meanwhile: then w->abort was called, w->run still ran to its
 * end (w->rc says how: the caller undoes whatever it got), and the exception is set.
 */
int pyshms_block(struct pyshms_wait *w);

#endif
