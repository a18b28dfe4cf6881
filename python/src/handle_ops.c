/*
 * Scheduling through a Handle: requests, waits, leases, jobs. Every call releases the GIL;
 * the waits go through pyshms_block (wait.c) so that ^C ends them.
 */
#include "handle_ops.h"

#include <string.h>

/* The quotas a request names: a tuple of str (the package checked its length and types), as
 * C strings borrowed from it into names (room for SHMS_REQUEST_QUOTAS_MAX). */
static int quota_names(PyObject *tuple, const char **names, uint32_t *n) {
  *n = 0;
  if (tuple == NULL)
    return 0;
  Py_ssize_t len = PyTuple_GET_SIZE(tuple);
  if (len > SHMS_REQUEST_QUOTAS_MAX) {
    pyshms_raise_inval("a request names at most %d quotas, got %zd", SHMS_REQUEST_QUOTAS_MAX, len);
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *q = PyTuple_GET_ITEM(tuple, i);
    Py_ssize_t qlen;
    const char *name = PyUnicode_Check(q) ? PyUnicode_AsUTF8AndSize(q, &qlen) : NULL;
    if (name == NULL) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "a quota name is a str, not %.100s", Py_TYPE(q)->tp_name);
      return -1;
    }
    if ((size_t)qlen != strlen(name)) {
      pyshms_raise_inval("quota %R contains a NUL byte", q);
      return -1;
    }
    names[i] = name;
  }
  *n = (uint32_t)len;
  return 0;
}

/*
 * Parse (cls, tenant, priority, deadline_ns, activation[, cells[, quotas]]) into req, or with a
 * payload (cls, tenant, priority, deadline_ns, activation, payload, flags[, quotas[, key]]);
 * strings borrowed from args, quota names into qbuf (SHMS_REQUEST_QUOTAS_MAX entries).
 */
static int parse_request(PyObject *args, shms_request *req, const char **qbuf, Py_buffer *payload,
                         unsigned *flags, const char **key) {
  int cls, priority;
  unsigned long long deadline;
  unsigned int cells = 1;
  const char *tenant, *activation;
  PyObject *quotas = NULL;
  int ok = payload == NULL
               ? PyArg_ParseTuple(args, "isiKz|IO!", &cls, &tenant, &priority, &deadline,
                                  &activation, &cells, &PyTuple_Type, &quotas)
               : PyArg_ParseTuple(args, "isiKzy*I|O!z", &cls, &tenant, &priority, &deadline,
                                  &activation, payload, flags, &PyTuple_Type, &quotas, key);
  if (!ok)
    return -1;
  uint32_t nquotas;
  if (quota_names(quotas, qbuf, &nquotas) < 0) {
    if (payload != NULL)
      PyBuffer_Release(payload);
    return -1;
  }
  *req = (shms_request){.cls = (shms_class_t)cls,
                        .tenant = tenant,
                        .priority = priority,
                        .deadline_ns = deadline,
                        .activation = activation,
                        .cells = cells,
                        .quotas = nquotas > 0 ? qbuf : NULL,
                        .nquotas = nquotas};
  return 0;
}

PyObject *pyshms_enqueue(HandleObject *self, PyObject *args) {
  shms_request req;
  const char *q[SHMS_REQUEST_QUOTAS_MAX];
  if (parse_request(args, &req, q, NULL, NULL, NULL) < 0 || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  shms_ticket t;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_enqueue(self->h, &req, &t));
  return rc == SHMS_OK ? pyshms_ticket_tuple(&t) : pyshms_raise_last(rc);
}

PyObject *pyshms_try_acquire(HandleObject *self, PyObject *args) {
  shms_request req;
  const char *q[SHMS_REQUEST_QUOTAS_MAX];
  if (parse_request(args, &req, q, NULL, NULL, NULL) < 0 || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  shms_lease l;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_try_acquire(self->h, &req, &l));
  if (rc == SHMS_EWOULDBLOCK)
    Py_RETURN_NONE;
  return rc == SHMS_OK ? pyshms_lease_tuple(&l) : pyshms_raise_last(rc);
}

PyObject *pyshms_prepare(HandleObject *self, PyObject *args) {
  shms_request req;
  const char *q[SHMS_REQUEST_QUOTAS_MAX];
  if (parse_request(args, &req, q, NULL, NULL, NULL) < 0 || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  shms_prepared p;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_request_prepare(self->h, &req, &p));
  return rc == SHMS_OK ? PyBytes_FromStringAndSize((const char *)&p, sizeof p)
                       : pyshms_raise_last(rc);
}

/* The prepared request's bytes are the caller's: copied whole (the library judges them), only
 * their size is checked here. */
PyObject *pyshms_try_acquire_prepared(HandleObject *self, PyObject *arg) {
  Py_buffer b;
  if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
    return NULL;
  shms_prepared p;
  Py_ssize_t len = b.len;
  if (len == (Py_ssize_t)sizeof p)
    memcpy(&p, b.buf, sizeof p);
  PyBuffer_Release(&b);
  if (len != (Py_ssize_t)sizeof p)
    return PyErr_Format(PyExc_ValueError, "a prepared request is %zu bytes, not %zd", sizeof p,
                        len);
  if (pyshms_handle_usable(self, 1) < 0)
    return NULL;
  shms_lease l;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_try_acquire_prepared(self->h, &p, &l));
  if (rc == SHMS_EWOULDBLOCK)
    Py_RETURN_NONE;
  return rc == SHMS_OK ? pyshms_lease_tuple(&l) : pyshms_raise_last(rc);
}

/*
 * End our own request t and collect its outcome; a lease accepted before the cancel landed is
 * released (it was never handed to the caller). As `shmsched run` does on a stop signal.
 */
static void withdraw(shms_t *h, const shms_ticket *t) {
  shms_lease l;
  int rc = SHMS_ETIMEDOUT;
  for (int tries = 0; rc == SHMS_ETIMEDOUT && tries < 3; tries++) {
    shms_cancel(h, t);
    rc = shms_wait(h, t, tries == 0 ? 0 : PYSHMS_SLICE_NS, &l);
  }
  if (rc == SHMS_OK)
    shms_release(h, &l);
}

struct lease_wait {
  struct pyshms_wait w; /* first: the wait.c view */
  shms_t *h;
  shms_ticket t;
  uint64_t timeout_ns;
  shms_lease lease;
};

static int lease_run(struct pyshms_wait *w) {
  struct lease_wait *x = (struct lease_wait *)w;
  return shms_wait(x->h, &x->t, x->timeout_ns, &x->lease);
}

static int lease_look(struct pyshms_wait *w) {
  struct lease_wait *x = (struct lease_wait *)w;
  return shms_wait(x->h, &x->t, 0, &x->lease);
}

/* Cancelling wakes the waiter through its slot's futex at once. */
static void lease_abort(struct pyshms_wait *w) {
  struct lease_wait *x = (struct lease_wait *)w;
  shms_cancel(x->h, &x->t);
}

PyObject *pyshms_wait(HandleObject *self, PyObject *args) {
  struct lease_wait x = {.w = {.run = lease_run, .look = lease_look, .abort = lease_abort}};
  unsigned long long timeout;
  if (!PyArg_ParseTuple(args, "O&K", pyshms_ticket_conv, &x.t, &timeout) ||
      pyshms_handle_usable(self, 1) < 0)
    return NULL;
  x.h = self->h;
  x.timeout_ns = timeout;
  x.w.look_only = timeout == 0;
  self->active++;
  int interrupted = pyshms_block(&x.w);
  if (interrupted) { /* a handler raised (^C): the request must not outlive the wait */
    if (x.w.rc == SHMS_OK)
      PYSHMS_UNLOCKED(shms_release(x.h, &x.lease));
    else if (x.w.rc == SHMS_ETIMEDOUT)
      PYSHMS_UNLOCKED(withdraw(x.h, &x.t));
  }
  self->active--;
  if (interrupted)
    return NULL;
  return x.w.rc == SHMS_OK ? pyshms_lease_tuple(&x.lease) : pyshms_raise(x.w.rc, x.w.detail);
}

PyObject *pyshms_withdraw(HandleObject *self, PyObject *arg) {
  shms_ticket t;
  if (!pyshms_ticket_conv(arg, &t) || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  PYSHMS_HANDLE_CALL(self, withdraw(self->h, &t));
  Py_RETURN_NONE;
}

PyObject *pyshms_cancel(HandleObject *self, PyObject *arg) {
  shms_ticket t;
  if (!pyshms_ticket_conv(arg, &t) || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_cancel(self->h, &t));
  return rc >= 0 ? PyBool_FromLong(rc) : pyshms_raise_last(rc);
}

PyObject *pyshms_release(HandleObject *self, PyObject *arg) {
  shms_lease l;
  if (!pyshms_lease_conv(arg, &l) || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_release(self->h, &l));
  return rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
}

PyObject *pyshms_lease_cells(HandleObject *self, PyObject *arg) {
  shms_lease l;
  if (!pyshms_lease_conv(arg, &l) || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  uint32_t cells[SHMS_CELLS_MAX];
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_lease_cells(self->h, &l, cells, SHMS_CELLS_MAX));
  if (rc < 0)
    return pyshms_raise_last(rc);
  PyObject *out = PyTuple_New(rc);
  for (int i = 0; out != NULL && i < rc; i++) {
    PyObject *v = PyLong_FromUnsignedLong(cells[i]);
    if (v == NULL)
      Py_CLEAR(out);
    else
      PyTuple_SET_ITEM(out, i, v);
  }
  return out;
}

PyObject *pyshms_quarantine(HandleObject *self, PyObject *args) {
  shms_lease l;
  int reason;
  if (!PyArg_ParseTuple(args, "O&i", pyshms_lease_conv, &l, &reason) ||
      pyshms_handle_usable(self, 1) < 0)
    return NULL;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_quarantine(self->h, &l, reason));
  return rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
}

PyObject *pyshms_explain(HandleObject *self, PyObject *arg) {
  shms_ticket t;
  if (!pyshms_ticket_conv(arg, &t) || pyshms_handle_usable(self, 0) < 0)
    return NULL;
  shms_explanation x;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_explain(self->h, &t, &x));
  if (rc != SHMS_OK)
    return pyshms_raise_last(rc);
  return Py_BuildValue("(IisiKIIIIIIIiIKIIiIKs)", x.state, x.outcome, x.tenant, x.priority,
                       (unsigned long long)x.waited_ns, x.aged, x.tenants_ahead, x.ring_length,
                       x.ahead_in_tenant, x.tenant_queued, x.blocked_by, x.cell, x.holder_pid,
                       x.holder_alive, (unsigned long long)x.held_ns, x.cells, x.gathered,
                       x.holder_ns_pid, x.holder_foreign, (unsigned long long)x.holder_pidns,
                       x.quota);
}

/* Returns (ticket, joined): joined is True when a key's live job was joined (shms_submit_key). */
PyObject *pyshms_submit(HandleObject *self, PyObject *args) {
  shms_request req;
  const char *q[SHMS_REQUEST_QUOTAS_MAX], *key = NULL;
  Py_buffer payload;
  unsigned flags = 0;
  if (parse_request(args, &req, q, &payload, &flags, &key) < 0)
    return NULL;
  PyObject *out = NULL;
  if (pyshms_handle_usable(self, 1) == 0) {
    shms_ticket t;
    int rc, joined = 0;
    if (key != NULL)
      PYSHMS_HANDLE_CALL(self, rc = shms_submit_key(self->h, &req, key, payload.buf,
                                                    (size_t)payload.len, flags, &t, &joined));
    else
      PYSHMS_HANDLE_CALL(
          self, rc = shms_submit(self->h, &req, payload.buf, (size_t)payload.len, flags, &t));
    out = rc == SHMS_OK
              ? Py_BuildValue("(NO)", pyshms_ticket_tuple(&t), joined ? Py_True : Py_False)
              : pyshms_raise_last(rc);
  }
  PyBuffer_Release(&payload);
  return out;
}

/* One job of submit_batch's list: (tenant, priority, deadline_ns, payload bytes, key or None,
 * quotas tuple), borrowed; its quotas' names into names (room for SHMS_REQUEST_QUOTAS_MAX). */
static int batch_job(PyObject *item, shms_batch_job *j, const char **names) {
  const char *tenant, *key;
  int priority;
  unsigned long long deadline;
  const char *payload;
  Py_ssize_t len;
  PyObject *quotas;
  uint32_t nquotas;
  if (!PyArg_ParseTuple(item, "siKy#zO!", &tenant, &priority, &deadline, &payload, &len, &key,
                        &PyTuple_Type, &quotas) ||
      quota_names(quotas, names, &nquotas) < 0)
    return -1;
  *j = (shms_batch_job){.tenant = tenant,
                        .priority = priority,
                        .deadline_ns = deadline,
                        .payload = payload,
                        .len = (size_t)len,
                        .quotas = nquotas > 0 ? names : NULL,
                        .nquotas = nquotas,
                        .key = key};
  return 0;
}

PyObject *pyshms_submit_batch(HandleObject *self, PyObject *args) {
  int cls;
  PyObject *list;
  unsigned flags;
  if (!PyArg_ParseTuple(args, "iO!I", &cls, &PyList_Type, &list, &flags) ||
      pyshms_handle_usable(self, 1) < 0)
    return NULL;
  Py_ssize_t n = PyList_GET_SIZE(list);
  shms_batch_job *jobs = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof *jobs);
  shms_ticket *t = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof *t);
  const char **names =
      PyMem_Calloc((n > 0 ? (size_t)n : 1) * SHMS_REQUEST_QUOTAS_MAX, sizeof *names);
  PyObject *out = NULL;
  if (jobs == NULL || t == NULL || names == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  /* The list holds its tuples, and they their strings and bytes, for the whole call: the
   * list is the caller's own (submit_batch builds it), never changed meanwhile. */
  for (Py_ssize_t i = 0; i < n; i++)
    if (batch_job(PyList_GET_ITEM(list, i), &jobs[i], names + i * SHMS_REQUEST_QUOTAS_MAX) < 0)
      goto done;
  int rc;
  size_t failed;
  PYSHMS_HANDLE_CALL(
      self, rc = shms_submit_batch(self->h, (shms_class_t)cls, jobs, (size_t)n, flags, t, &failed));
  if (rc != SHMS_OK) {
    pyshms_raise_last(rc);
    goto done;
  }
  out = PyList_New(n);
  for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
    PyObject *v = pyshms_ticket_tuple(&t[i]);
    if (v == NULL)
      Py_CLEAR(out);
    else
      PyList_SET_ITEM(out, i, v);
  }
done:
  PyMem_Free(jobs);
  PyMem_Free(t);
  PyMem_Free(names);
  return out;
}

PyObject *pyshms_cancel_batch(HandleObject *self, PyObject *arg) {
  if (!PyList_Check(arg))
    return PyErr_Format(PyExc_TypeError, "cancel_batch takes a list of tickets");
  Py_ssize_t n = PyList_GET_SIZE(arg);
  shms_ticket *t = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof *t);
  if (t == NULL)
    return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < n; i++)
    if (!pyshms_ticket_conv(PyList_GET_ITEM(arg, i), &t[i])) {
      PyMem_Free(t);
      return NULL;
    }
  if (pyshms_handle_usable(self, 0) < 0) {
    PyMem_Free(t);
    return NULL;
  }
  int rc;
  size_t cancelled = 0;
  PYSHMS_HANDLE_CALL(self, rc = shms_cancel_batch(self->h, t, (size_t)n, &cancelled));
  PyMem_Free(t);
  return rc == SHMS_OK ? PyLong_FromSize_t(cancelled) : pyshms_raise_last(rc);
}

struct result_wait {
  struct pyshms_wait w;
  shms_t *h;
  shms_ticket t;
  uint64_t timeout_ns;
  char *buf;
  size_t cap;
  shms_result res;
};

/*
 * In slices: cancelling a running job only flags it (its worker decides when it ends), so an
 * interrupted wait must be able to stop on its own. A slice is the library's own poll interval.
 */
static int result_run(struct pyshms_wait *w) {
  struct result_wait *x = (struct result_wait *)w;
  uint64_t end = x->timeout_ns == UINT64_MAX ? 0 : pyshms_monotonic_ns() + x->timeout_ns;
  for (;;) {
    uint64_t slice = PYSHMS_SLICE_NS, now = end != 0 ? pyshms_monotonic_ns() : 0;
    if (end != 0 && end - now < slice)
      slice = now >= end ? 0 : end - now;
    int rc = shms_wait_result(x->h, &x->t, slice, x->buf, x->cap, &x->res);
    if (rc != SHMS_ETIMEDOUT || slice == 0 || __atomic_load_n(&w->stop, __ATOMIC_ACQUIRE))
      return rc;
  }
}

static int result_look(struct pyshms_wait *w) {
  struct result_wait *x = (struct result_wait *)w;
  return shms_wait_result(x->h, &x->t, 0, x->buf, x->cap, &x->res);
}

/* A queued job ends at once; a running one is flagged, and the slices notice the stop. */
static void result_abort(struct pyshms_wait *w) {
  struct result_wait *x = (struct result_wait *)w;
  shms_cancel(x->h, &x->t);
}

PyObject *pyshms_wait_result(HandleObject *self, PyObject *args) {
  struct result_wait x = {.w = {.run = result_run, .look = result_look, .abort = result_abort}};
  unsigned long long timeout;
  Py_ssize_t cap;
  if (!PyArg_ParseTuple(args, "O&Kn", pyshms_ticket_conv, &x.t, &timeout, &cap) ||
      pyshms_handle_usable(self, 1) < 0)
    return NULL;
  if (cap < 0 || (size_t)cap > SHMS_PAYLOAD_MAX)
    return pyshms_raise_inval("result buffer of %zd bytes", cap);
  PyObject *data = PyBytes_FromStringAndSize(NULL, cap);
  if (data == NULL)
    return NULL;
  x.h = self->h;
  x.timeout_ns = timeout;
  x.buf = PyBytes_AS_STRING(data);
  x.cap = (size_t)cap;
  x.w.look_only = timeout == 0;
  self->active++;
  int interrupted = pyshms_block(&x.w);
  self->active--;
  if (interrupted || x.w.rc != SHMS_OK) {
    Py_DECREF(data);
    return interrupted ? NULL : pyshms_raise(x.w.rc, x.w.detail);
  }
  if (_PyBytes_Resize(&data, (Py_ssize_t)x.res.result_len) < 0)
    return NULL;
  return Py_BuildValue("(iN)", x.res.status, data);
}
