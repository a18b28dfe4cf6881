/*
 * Handle: one attachment to a segment, owned by the process that made it. Lifecycle, the
 * fork check, and the calls that read or administer the segment; the scheduling calls are in
 * handle_ops.c, the method table at the end.
 */
#include <string.h>
#include <unistd.h>

#include "handle_ops.h"

int pyshms_handle_usable(HandleObject *self, int member) {
  if (self->fork_gen != pyshms_fork_gen) {
    PyObject *msg = PyUnicode_FromFormat(
        "segment %R was attached by process %d, and this is process %d, forked from it: a "
        "handle does not survive fork() (the lock that proves its process alive is not "
        "inherited), so attach again in the child with shmsched.Segment(%R)",
        self->name, (int)self->pid, (int)getpid(), self->name);
    const char *detail = msg != NULL ? PyUnicode_AsUTF8(msg) : NULL;
    if (detail != NULL)
      pyshms_raise(PYSHMS_FORKED, detail);
    Py_XDECREF(msg);
    return -1;
  }
  if (self->h == NULL) {
    pyshms_raise_inval("segment %R is closed", self->name);
    return -1;
  }
  if (member && self->observer) {
    pyshms_raise_inval("segment %R was opened as an observer: it cannot take part in scheduling",
                       self->name);
    return -1;
  }
  return 0;
}

static int handle_init(HandleObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"name", "observer", NULL};
  PyObject *name;
  int observer = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "U|p", kwlist, &name, &observer))
    return -1;
  if (self->h != NULL) {
    pyshms_raise_inval("this handle is already attached");
    return -1;
  }
  Py_ssize_t len;
  const char *cname = PyUnicode_AsUTF8AndSize(name, &len);
  if (cname == NULL)
    return -1;
  if ((size_t)len != strlen(cname)) {
    pyshms_raise_inval("segment name %R contains a NUL byte", name);
    return -1;
  }
  shms_t *h = NULL;
  int rc;
  PYSHMS_UNLOCKED(rc = shms_attach(cname, observer ? SHMS_ATTACH_OBSERVER : 0, &h));
  if (rc != SHMS_OK) {
    pyshms_raise(rc == SHMS_ENOTFOUND ? PYSHMS_SEGMENT_NOT_FOUND : rc, shms_last_error_detail());
    return -1;
  }
  self->h = h;
  Py_INCREF(name);
  Py_XSETREF(self->name, name);
  self->pid = getpid();
  self->fork_gen = pyshms_fork_gen;
  self->observer = observer;
  return 0;
}

/* Detach, unless forked from the attaching process: then the parent's handle is left alone. */
static void detach_quietly(HandleObject *self) {
  shms_t *h = self->h;
  self->h = NULL;
  if (h != NULL && self->fork_gen == pyshms_fork_gen)
    PYSHMS_UNLOCKED(shms_detach(h));
}

static PyObject *handle_detach(HandleObject *self, PyObject *unused) {
  (void)unused;
  if (self->h == NULL)
    Py_RETURN_NONE;
  if (self->fork_gen != pyshms_fork_gen) { /* the child's copy of the parent's: just forget it */
    self->h = NULL;
    Py_RETURN_NONE;
  }
  if (self->workers > 0)
    return pyshms_raise_inval("segment %R cannot be closed while %d of its workers are open: "
                              "close them first",
                              self->name, self->workers);
  if (self->active > 0)
    return pyshms_raise_inval("segment %R cannot be closed while %d calls on it are under way "
                              "in other threads: end them first (cancel their requests)",
                              self->name, self->active);
  shms_t *h = self->h;
  self->h = NULL;
  int rc;
  PYSHMS_UNLOCKED(rc = shms_detach(h));
  return rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
}

static void handle_dealloc(HandleObject *self) {
  detach_quietly(self);
  Py_XDECREF(self->name);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *class_tuple(const shms_class_config *k) {
  PyObject *allow = PyTuple_New(k->allow_count);
  if (allow == NULL)
    return NULL;
  for (uint32_t i = 0; i < k->allow_count; i++) {
    PyObject *s = PyUnicode_FromString(k->allow[i]);
    if (s == NULL) {
      Py_DECREF(allow);
      return NULL;
    }
    PyTuple_SET_ITEM(allow, i, s);
  }
  return Py_BuildValue("(IIIIIIINKIKI)", k->cells, k->queue, k->mode, k->payload,
                       k->tenant_max_active, k->on_holder_death, k->on_command_crash, allow,
                       (unsigned long long)k->grant_timeout_ns, k->tenant_bind,
                       (unsigned long long)k->overtake_ns, k->fairness);
}

static PyObject *handle_config(HandleObject *self, PyObject *unused) {
  (void)unused;
  if (pyshms_handle_usable(self, 0) < 0)
    return NULL;
  shms_config cfg;
  int rc = shms_get_config(self->h, &cfg);
  if (rc != SHMS_OK)
    return pyshms_raise_last(rc);
  PyObject *classes = PyDict_New();
  for (int c = 0; classes != NULL && c < SHMS_CLASS_COUNT; c++) {
    if (!cfg.classes[c].configured)
      continue;
    PyObject *key = PyLong_FromLong(c), *value = class_tuple(&cfg.classes[c]);
    if (key == NULL || value == NULL || PyDict_SetItem(classes, key, value) < 0)
      Py_CLEAR(classes);
    Py_XDECREF(key);
    Py_XDECREF(value);
  }
  if (classes == NULL)
    return NULL;
  return Py_BuildValue("(NKIIILL)", classes, (unsigned long long)cfg.starvation_after_ns,
                       cfg.max_tenants, cfg.max_processes, cfg.file_mode, (long long)cfg.group,
                       (long long)cfg.admin_group);
}

static PyObject *handle_info(HandleObject *self, PyObject *unused) {
  (void)unused;
  if (pyshms_handle_usable(self, 0) < 0)
    return NULL;
  shms_segment_info i;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_segment_info_get(self->h, &i));
  if (rc != SHMS_OK)
    return pyshms_raise_last(rc);
  return Py_BuildValue("(KKKIIIIII)", (unsigned long long)i.incarnation,
                       (unsigned long long)i.created_unix_ns, (unsigned long long)i.size,
                       i.layout_version, i.state, i.live_processes, i.max_processes, i.file_mode,
                       i.file_gid);
}

static PyObject *handle_observe(HandleObject *self, PyObject *arg) {
  long c = PyLong_AsLong(arg);
  if ((c == -1 && PyErr_Occurred()) || pyshms_handle_usable(self, 0) < 0)
    return NULL;
  shms_class_stats s;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_observe(self->h, (shms_class_t)c, &s));
  if (rc != SHMS_OK)
    return pyshms_raise_last(rc);
  return Py_BuildValue("(IIIIIIIIKKKKKKKIKKIK)", s.cells, s.available, s.leased, s.quarantined,
                       s.offline, s.queue_capacity, s.queue_depth, s.queued_tenants,
                       (unsigned long long)s.granted, (unsigned long long)s.rejected,
                       (unsigned long long)s.cancelled, (unsigned long long)s.expired,
                       (unsigned long long)s.total_wait_ns, (unsigned long long)s.max_wait_ns,
                       (unsigned long long)s.oldest_lease_age_ns, s.granted_unaccepted,
                       (unsigned long long)s.oldest_grant_age_ns, (unsigned long long)s.revoked,
                       s.reserved, (unsigned long long)s.joined);
}

static PyObject *tenant_list(const shms_tenant_stats *t, uint32_t n) {
  PyObject *list = PyList_New(n);
  for (uint32_t i = 0; list != NULL && i < n; i++) {
    PyObject *row =
        Py_BuildValue("(sIIIKKKIsKd)", t[i].name, t[i].queued, t[i].active, t[i].in_ring,
                      (unsigned long long)t[i].granted, (unsigned long long)t[i].total_wait_ns,
                      (unsigned long long)t[i].max_wait_ns, t[i].weight, t[i].team,
                      (unsigned long long)t[i].cell_ns, t[i].entitled_share);
    if (row == NULL)
      Py_CLEAR(list);
    else
      PyList_SET_ITEM(list, i, row);
  }
  return list;
}

static PyObject *handle_tenants(HandleObject *self, PyObject *arg) {
  long c = PyLong_AsLong(arg);
  if ((c == -1 && PyErr_Occurred()) || pyshms_handle_usable(self, 0) < 0)
    return NULL;
  /* The count can grow between two calls: ask again with room for what the last one said. */
  uint32_t cap = 64, count = 0;
  for (;;) {
    shms_tenant_stats *t = PyMem_Calloc(cap, sizeof *t);
    if (t == NULL)
      return PyErr_NoMemory();
    int rc;
    PYSHMS_HANDLE_CALL(self, rc = shms_tenants(self->h, (shms_class_t)c, t, cap, &count));
    PyObject *out = rc != SHMS_OK  ? pyshms_raise_last(rc)
                    : count <= cap ? tenant_list(t, count)
                                   : NULL;
    PyMem_Free(t);
    if (rc != SHMS_OK || count <= cap)
      return out;
    cap = count + 16;
  }
}

static PyObject *handle_check(HandleObject *self, PyObject *unused) {
  (void)unused;
  if (pyshms_handle_usable(self, 0) < 0)
    return NULL;
  size_t cap = 1 << 16;
  char *report = PyMem_Malloc(cap);
  if (report == NULL)
    return PyErr_NoMemory();
  uint32_t violations = 0;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_check(self->h, report, cap, &violations));
  PyObject *out = rc == SHMS_OK ? Py_BuildValue("(Is)", violations, report) : pyshms_raise_last(rc);
  PyMem_Free(report);
  return out;
}

static PyObject *handle_drain(HandleObject *self, PyObject *unused) {
  (void)unused;
  if (pyshms_handle_usable(self, 1) < 0)
    return NULL;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_drain(self->h));
  return rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
}

static PyObject *handle_resume(HandleObject *self, PyObject *unused) {
  (void)unused;
  if (pyshms_handle_usable(self, 1) < 0)
    return NULL;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_resume(self->h));
  return rc >= SHMS_OK ? PyBool_FromLong(rc) : pyshms_raise_last(rc);
}

static PyObject *handle_repair(HandleObject *self, PyObject *args) {
  int c, cell;
  if (!PyArg_ParseTuple(args, "ii", &c, &cell) || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_repair(self->h, (shms_class_t)c, cell));
  return rc >= 0 ? PyLong_FromLong(rc) : pyshms_raise_last(rc);
}

static PyObject *handle_policy_tenant(HandleObject *self, PyObject *args) {
  const char *tenant;
  unsigned int weight;
  if (!PyArg_ParseTuple(args, "sI", &tenant, &weight) || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_policy_tenant(self->h, tenant, weight));
  return rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
}

static PyObject *handle_policy_team(HandleObject *self, PyObject *args) {
  const char *team;
  unsigned int weight;
  if (!PyArg_ParseTuple(args, "sI", &team, &weight) || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_policy_team(self->h, team, weight));
  return rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
}

/* team None: the tenant in no team. */
static PyObject *handle_policy_tenant_team(HandleObject *self, PyObject *args) {
  const char *tenant, *team;
  if (!PyArg_ParseTuple(args, "sz", &tenant, &team) || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_policy_tenant_team(self->h, tenant, team));
  return rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
}

/* The tenant table: a list of (name, weight, flags, (cell_ns per class), team). */
static PyObject *handle_policy_list(HandleObject *self, PyObject *unused) {
  (void)unused;
  if (pyshms_handle_usable(self, 0) < 0)
    return NULL;
  uint32_t n = 0, got = 0;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_policy_list(self->h, NULL, 0, &n));
  if (rc != SHMS_OK)
    return pyshms_raise_last(rc);
  shms_policy_row *rows = PyMem_Calloc(n ? n : 1, sizeof *rows);
  if (rows == NULL)
    return PyErr_NoMemory();
  PYSHMS_HANDLE_CALL(self, rc = shms_policy_list(self->h, rows, n, &got));
  PyObject *list = rc == SHMS_OK ? PyList_New(0) : NULL;
  for (uint32_t i = 0; list != NULL && i < n && i < got; i++) {
    const uint64_t *c = rows[i].cell_ns;
    PyObject *row =
        Py_BuildValue("(sII(KKKKK)s)", rows[i].name, rows[i].weight, rows[i].flags,
                      (unsigned long long)c[0], (unsigned long long)c[1], (unsigned long long)c[2],
                      (unsigned long long)c[3], (unsigned long long)c[4], rows[i].team);
    if (row == NULL || PyList_Append(list, row) < 0) {
      Py_XDECREF(row);
      Py_CLEAR(list);
      break;
    }
    Py_DECREF(row);
  }
  PyMem_Free(rows);
  return rc == SHMS_OK ? list : pyshms_raise_last(rc);
}

static PyObject *handle_policy_quota(HandleObject *self, PyObject *args) {
  const char *quota;
  unsigned int max;
  if (!PyArg_ParseTuple(args, "sI", &quota, &max) || pyshms_handle_usable(self, 1) < 0)
    return NULL;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_policy_quota(self->h, quota, max));
  return rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
}

/* The quota table: a list of (name, max, used, waiters). */
static PyObject *handle_quota_list(HandleObject *self, PyObject *unused) {
  (void)unused;
  if (pyshms_handle_usable(self, 0) < 0)
    return NULL;
  shms_quota_row rows[SHMS_QUOTAS_MAX]; /* the table never holds more */
  uint32_t n = 0;
  int rc;
  PYSHMS_HANDLE_CALL(self, rc = shms_quota_list(self->h, rows, SHMS_QUOTAS_MAX, &n));
  if (rc != SHMS_OK)
    return pyshms_raise_last(rc);
  if (n > SHMS_QUOTAS_MAX)
    n = SHMS_QUOTAS_MAX;
  PyObject *list = PyList_New(n);
  for (uint32_t i = 0; list != NULL && i < n; i++) {
    PyObject *row =
        Py_BuildValue("(sIII)", rows[i].name, rows[i].max, rows[i].used, rows[i].waiters);
    if (row == NULL)
      Py_CLEAR(list);
    else
      PyList_SET_ITEM(list, i, row);
  }
  return list;
}

static PyObject *handle_usable(HandleObject *self, PyObject *unused) {
  (void)unused;
  return pyshms_handle_usable(self, 0) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *get_closed(HandleObject *self, void *unused) {
  (void)unused;
  return PyBool_FromLong(self->h == NULL);
}

static PyObject *get_pid(HandleObject *self, void *unused) {
  (void)unused;
  return PyLong_FromLong(self->pid);
}

#define METH(name, fn, flags, doc)                                                                 \
  { name, (PyCFunction)(void (*)(void))(fn), flags, doc }

static PyMethodDef handle_methods[] = {
    METH("detach", handle_detach, METH_NOARGS, "Detach (refused while other threads' calls run)."),
    METH("usable", handle_usable, METH_NOARGS, "Raise unless this process may use the handle."),
    METH("config", handle_config, METH_NOARGS, "The segment's configuration, as tuples."),
    METH("info", handle_info, METH_NOARGS, "shms_segment_info_get, as a tuple."),
    METH("observe", handle_observe, METH_O, "shms_observe(class), as a tuple."),
    METH("tenants", handle_tenants, METH_O, "shms_tenants(class), as a list of tuples."),
    METH("check", handle_check, METH_NOARGS, "shms_check: (violations, report)."),
    METH("drain", handle_drain, METH_NOARGS, "shms_drain."),
    METH("resume", handle_resume, METH_NOARGS, "shms_resume."),
    METH("repair", handle_repair, METH_VARARGS, "shms_repair(class, cell)."),
    METH("policy_tenant", handle_policy_tenant, METH_VARARGS,
         "shms_policy_tenant(tenant, weight)."),
    METH("policy_team", handle_policy_team, METH_VARARGS, "shms_policy_team(team, weight)."),
    METH("policy_tenant_team", handle_policy_tenant_team, METH_VARARGS,
         "shms_policy_tenant_team(tenant, team or None)."),
    METH("policy_list", handle_policy_list, METH_NOARGS,
         "shms_policy_list: [(name, weight, flags, (cell_ns per class), team)]."),
    METH("policy_quota", handle_policy_quota, METH_VARARGS, "shms_policy_quota(quota, max)."),
    METH("quota_list", handle_quota_list, METH_NOARGS,
         "shms_quota_list: [(name, max, used, waiters)]."),
    METH("enqueue", pyshms_enqueue, METH_VARARGS,
         "enqueue(cls, tenant, priority, deadline_ns, activation[, cells[, (quota, ...)]])."),
    METH("try_acquire", pyshms_try_acquire, METH_VARARGS, "A lease tuple, or None (would-block)."),
    METH("prepare", pyshms_prepare, METH_VARARGS, "shms_request_prepare: the prepared bytes."),
    METH("try_acquire_prepared", pyshms_try_acquire_prepared, METH_O,
         "try_acquire_prepared(bytes): a lease tuple, or None (would-block)."),
    METH("wait", pyshms_wait, METH_VARARGS,
         "wait(ticket, timeout_ns) -> lease tuple (interruptible)."),
    METH("withdraw", pyshms_withdraw, METH_O,
         "Cancel our own request; release a lease that raced in."),
    METH("cancel", pyshms_cancel, METH_O, "cancel(ticket) -> bool."),
    METH("release", pyshms_release, METH_O, "release(lease)."),
    METH("lease_cells", pyshms_lease_cells, METH_O, "lease_cells(lease) -> (cell, ...)."),
    METH("quarantine", pyshms_quarantine, METH_VARARGS, "quarantine(lease, reason)."),
    METH("explain", pyshms_explain, METH_O, "explain(ticket), as a tuple."),
    METH("submit", pyshms_submit, METH_VARARGS,
         "submit(cls, tenant, priority, deadline_ns, activation, payload, flags[, (quota, ...)[, "
         "key]]) -> (ticket, joined)."),
    METH("submit_batch", pyshms_submit_batch, METH_VARARGS,
         "submit_batch(cls, [(tenant, priority, deadline_ns, payload, key), ...], flags) -> "
         "[ticket, ...], all or none."),
    METH("cancel_batch", pyshms_cancel_batch, METH_O,
         "cancel_batch([ticket, ...]) -> how many unstarted jobs were cancelled."),
    METH("wait_result", pyshms_wait_result, METH_VARARGS,
         "wait_result(ticket, timeout_ns, cap) -> (status, bytes)."),
    METH("worker_open", pyshms_worker_open, METH_VARARGS,
         "worker_open(cls, payload_max) -> Worker."),
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef handle_getset[] = {
    {"closed", (getter)get_closed, NULL, "True once detached.", NULL},
    {"pid", (getter)get_pid, NULL, "The process that attached.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject pyshms_handle_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "shmsched._shmsched.Handle",
    .tp_basicsize = sizeof(HandleObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Handle(name, observer=False): an attachment to the segment NAME (/dev/shm/NAME, "
              "$SHMSCHED_DIR/NAME, or the path NAME when it has a '/').",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)handle_init,
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_methods = handle_methods,
    .tp_getset = handle_getset,
};
