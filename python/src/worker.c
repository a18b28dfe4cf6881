/*
 * Worker: this process bound to one cell of a worker class. One thread at a time uses it (a
 * second thread's take is refused, not queued); take waits in one-second slices (the
 * library's poll interval, so an idle worker wakes no more often than a C one), because an
 * idle worker's sleep cannot be cut short through the public API: ^C ends it within a slice.
 */
#include "handle_ops.h"

PyObject *pyshms_worker_open(HandleObject *self, PyObject *args) {
  int cls;
  Py_ssize_t payload_max;
  if (!PyArg_ParseTuple(args, "in", &cls, &payload_max) || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  shms_worker_t *w = NULL;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_worker_open(self->h, (shms_class_t)cls, &w));
  if (rc != SHMS_OK)
    return pyshms_raise_last(rc);
  WorkerObject *o = PyObject_New(WorkerObject, &pyshms_worker_type);
  if (o == NULL) {
    PYSHMS_UNLOCKED(shms_worker_close(w));
    return NULL;
  }
  Py_INCREF(self);
  o->handle = self;
  o->w = w;
  o->payload_max = (size_t)payload_max;
  o->busy = 0;
  o->holding = 0;
  self->workers++;
  return (PyObject *)o;
}

/* 0 if the worker may be used now by this thread; else -1 with the exception set. */
static int worker_usable(WorkerObject *self) {
  if (pyshms_handle_usable(self->handle, 1) < 0)
    return -1;
  if (self->w == NULL) {
    pyshms_raise_inval("the worker is closed");
    return -1;
  }
  if (self->busy) {
    pyshms_raise_inval("the worker is in use by another thread (a worker serves one thread)");
    return -1;
  }
  return 0;
}

struct take_wait {
  struct pyshms_wait w;
  shms_worker_t *worker;
  uint64_t timeout_ns;
  shms_job job;
};

static int take_run(struct pyshms_wait *w) {
  struct take_wait *x = (struct take_wait *)w;
  uint64_t end = x->timeout_ns == UINT64_MAX ? 0 : pyshms_monotonic_ns() + x->timeout_ns;
  for (;;) {
    uint64_t slice = PYSHMS_SLICE_NS, now = end != 0 ? pyshms_monotonic_ns() : 0;
    if (end != 0 && end - now < slice)
      slice = now >= end ? 0 : end - now;
    int rc = shms_worker_take(x->worker, slice, &x->job);
    if (rc != SHMS_ETIMEDOUT || slice == 0 || __atomic_load_n(&w->stop, __ATOMIC_ACQUIRE))
      return rc;
  }
}

static int take_look(struct pyshms_wait *w) {
  struct take_wait *x = (struct take_wait *)w;
  return shms_worker_take(x->worker, 0, &x->job);
}

static void take_abort(struct pyshms_wait *w) { (void)w; /* the stop flag ends the slices */ }

static PyObject *job_tuple(const WorkerObject *self) {
  const shms_job *j = &self->job;
  return Py_BuildValue("(NNy#si)", pyshms_ticket_tuple(&j->ticket), pyshms_lease_tuple(&j->lease),
                       (const char *)j->payload, (Py_ssize_t)j->payload_len, j->tenant,
                       j->priority);
}

static PyObject *worker_take(WorkerObject *self, PyObject *args) {
  unsigned long long timeout;
  if (!PyArg_ParseTuple(args, "K", &timeout) || worker_usable(self) < 0)
    return NULL;
  if (self->holding)
    return pyshms_raise_inval("the worker still holds a job: complete it first");
  struct take_wait x = {.w = {.run = take_run, .look = take_look, .abort = take_abort},
                        .worker = self->w,
                        .timeout_ns = timeout};
  x.w.look_only = timeout == 0;
  self->busy = 1;
  self->handle->active++;
  int interrupted = pyshms_block(&x.w);
  if (interrupted && x.w.rc == SHMS_OK) {
    /* A job granted as the wait was interrupted: it never ran. It ends with status 1 and no
     * result (docs/python.md), as a job left uncompleted does. */
    PYSHMS_UNLOCKED(shms_worker_complete(x.worker, &x.job, 1, NULL, 0));
  }
  self->handle->active--;
  self->busy = 0;
  if (interrupted)
    return NULL;
  if (x.w.rc != SHMS_OK)
    return pyshms_raise(x.w.rc, x.w.detail);
  self->job = x.job;
  self->holding = 1;
  /* Copied out now: the payload lives in the job's slot, where the result will be written. */
  PyObject *out = job_tuple(self);
  if (out == NULL) { /* cannot hand it over: end it as a job left uncompleted */
    PYSHMS_UNLOCKED(shms_worker_complete(self->w, &self->job, 1, NULL, 0));
    self->holding = 0;
  }
  return out;
}

static PyObject *worker_cancelled(WorkerObject *self, PyObject *unused) {
  (void)unused;
  if (worker_usable(self) < 0)
    return NULL;
  if (!self->holding)
    return pyshms_raise_inval("the worker holds no job");
  int rc = shms_worker_cancelled(self->w, &self->job);
  return rc >= 0 ? PyBool_FromLong(rc) : pyshms_raise_last(rc);
}

static PyObject *worker_complete(WorkerObject *self, PyObject *args) {
  int status;
  Py_buffer result;
  if (!PyArg_ParseTuple(args, "iy*", &status, &result))
    return NULL;
  PyObject *out = NULL;
  if (worker_usable(self) == 0 && !self->holding)
    pyshms_raise_inval("the worker holds no job (already completed?)");
  else if (!PyErr_Occurred() && (size_t)result.len > self->payload_max)
    pyshms_raise_inval("a result of %zd bytes is larger than the class's payload size (%zd)",
                       result.len, (Py_ssize_t)self->payload_max);
  else if (!PyErr_Occurred()) {
    int rc;
    PYSHMS_HANDLE_CALL(self->handle, rc = shms_worker_complete(self->w, &self->job, status,
                                                               result.buf, (size_t)result.len));
    /* Whatever the outcome (lease-mismatch: the job was taken from us), it is no longer ours. */
    self->holding = rc == SHMS_EINVAL;
    out = rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
  }
  PyBuffer_Release(&result);
  return out;
}

static PyObject *worker_quarantine(WorkerObject *self, PyObject *args) {
  int reason;
  if (!PyArg_ParseTuple(args, "i", &reason) || worker_usable(self) < 0)
    return NULL;
  if (!self->holding)
    return pyshms_raise_inval("the worker holds no job");
  int rc;
  PYSHMS_HANDLE_CALL(self->handle, rc = shms_worker_quarantine(self->w, &self->job, reason));
  self->holding = rc == SHMS_EINVAL;
  return rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
}

/* Unbind; a job still held ends with status 1 first, rather than as a dead worker's would. */
static int close_worker(WorkerObject *self) {
  shms_worker_t *w = self->w;
  self->w = NULL;
  if (w != NULL)
    self->handle->workers--;
  if (w == NULL || self->handle->fork_gen != pyshms_fork_gen || self->handle->h == NULL)
    return SHMS_OK; /* a forked child's copy, or the segment already detached: nothing is ours */
  int rc;
  if (self->holding)
    PYSHMS_UNLOCKED(shms_worker_complete(w, &self->job, 1, NULL, 0));
  self->holding = 0;
  PYSHMS_UNLOCKED(rc = shms_worker_close(w));
  return rc;
}

static PyObject *worker_close(WorkerObject *self, PyObject *unused) {
  (void)unused;
  if (self->busy)
    return pyshms_raise_inval("the worker is in use by another thread: it cannot be closed now");
  int rc = close_worker(self);
  return rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
}

static void worker_dealloc(WorkerObject *self) {
  close_worker(self);
  Py_XDECREF(self->handle);
  PyObject_Free(self);
}

static PyObject *get_cell(WorkerObject *self, void *unused) {
  (void)unused;
  if (self->w == NULL)
    return pyshms_raise_inval("the worker is closed");
  return PyLong_FromUnsignedLong(shms_worker_cell(self->w));
}

static PyObject *get_holding(WorkerObject *self, void *unused) {
  (void)unused;
  return PyBool_FromLong(self->holding);
}

#define METH(name, fn, flags, doc)                                                                 \
  { name, (PyCFunction)(void (*)(void))(fn), flags, doc }

static PyMethodDef worker_methods[] = {
    METH("take", worker_take, METH_VARARGS,
         "take(timeout_ns) -> (ticket, lease, payload, tenant, priority)."),
    METH("cancelled", worker_cancelled, METH_NOARGS, "Whether the held job's client cancelled it."),
    METH("complete", worker_complete, METH_VARARGS, "complete(status, result)."),
    METH("quarantine", worker_quarantine, METH_VARARGS, "quarantine(reason)."),
    METH("close", worker_close, METH_NOARGS, "Unbind the cell."),
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef worker_getset[] = {
    {"cell", (getter)get_cell, NULL, "The cell this worker is bound to.", NULL},
    {"holding", (getter)get_holding, NULL, "A job is taken and not yet completed.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject pyshms_worker_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmsched._shmsched.Worker",
    .tp_basicsize = sizeof(WorkerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A worker bound to one cell (made by Handle.worker_open).",
    .tp_dealloc = (destructor)worker_dealloc,
    .tp_methods = worker_methods,
    .tp_getset = worker_getset,
};
