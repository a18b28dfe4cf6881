/*
 * The module: the error table the package registers, tuple converters, and the calls that
 * need no handle (create, destroy, the ticket's text form). Handle and Worker are in
 * handle.c, handle_ops.c and worker.c.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pyshms.h"

volatile unsigned long pyshms_fork_gen;

/* code (int) -> exception class, registered by shmsched/errors.py. */
static PyObject *error_table;

PyObject *pyshms_raise(int rc, const char *detail) {
  PyObject *key = PyLong_FromLong(rc), *cls = NULL;
  if (key != NULL && error_table != NULL)
    cls = PyDict_GetItemWithError(error_table, key);
  Py_XDECREF(key);
  if (PyErr_Occurred())
    return NULL;
  if (cls == NULL) /* the package always registers every code; a bare import of _shmsched may not */
    return PyErr_Format(PyExc_RuntimeError, "shmsched error %d (%s): %s", rc, shms_err_name(rc),
                        detail);
  PyObject *exc = PyObject_CallFunction(cls, "s", detail != NULL ? detail : "");
  if (exc != NULL) {
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
  }
  return NULL;
}

PyObject *pyshms_raise_last(int rc) { return pyshms_raise(rc, shms_last_error_detail()); }

PyObject *pyshms_raise_inval(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  PyObject *text = PyUnicode_FromFormatV(fmt, ap); /* PyUnicode_FromFormat's codes: %R, %zd */
  va_end(ap);
  const char *detail = text != NULL ? PyUnicode_AsUTF8(text) : NULL;
  if (detail != NULL)
    pyshms_raise(SHMS_EINVAL, detail);
  Py_XDECREF(text);
  return NULL;
}

uint64_t pyshms_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int pyshms_ticket_conv(PyObject *o, void *out) {
  shms_ticket *t = out;
  unsigned int cls, slot;
  unsigned long long seq, inc;
  if (!PyArg_ParseTuple(o, "IIKK;a ticket is (class, slot, seq, incarnation)", &cls, &slot, &seq,
                        &inc))
    return 0;
  *t = (shms_ticket){.cls = cls, .slot = slot, .seq = seq, .incarnation = inc};
  return 1;
}

int pyshms_lease_conv(PyObject *o, void *out) {
  shms_lease *l = out;
  unsigned int cls, cell, gen;
  unsigned long long token, inc;
  if (!PyArg_ParseTuple(o, "IIIKK;a lease is (class, cell, generation, token, incarnation)", &cls,
                        &cell, &gen, &token, &inc))
    return 0;
  *l =
      (shms_lease){.cls = cls, .cell = cell, .generation = gen, .token = token, .incarnation = inc};
  return 1;
}

PyObject *pyshms_ticket_tuple(const shms_ticket *t) {
  return Py_BuildValue("(IIKK)", t->cls, t->slot, (unsigned long long)t->seq,
                       (unsigned long long)t->incarnation);
}

PyObject *pyshms_lease_tuple(const shms_lease *l) {
  return Py_BuildValue("(IIIKK)", l->cls, l->cell, l->generation, (unsigned long long)l->token,
                       (unsigned long long)l->incarnation);
}

static PyObject *register_errors(PyObject *mod, PyObject *table) {
  (void)mod;
  if (!PyDict_Check(table))
    return PyErr_Format(PyExc_TypeError, "the error table must be a dict");
  Py_INCREF(table);
  Py_XSETREF(error_table, table);
  Py_RETURN_NONE;
}

/* Fill one class's configuration from the package's tuple (shmsched/config.py, _class_tuple). */
static int class_from_tuple(PyObject *t, shms_class_config *k) {
  unsigned int cells, queue, mode, payload, tma, death, crash, bind, fairness;
  unsigned long long grant, overtake;
  PyObject *allow;
  if (!PyArg_ParseTuple(t, "IIIIIIIO!KIKI", &cells, &queue, &mode, &payload, &tma, &death, &crash,
                        &PyTuple_Type, &allow, &grant, &bind, &overtake, &fairness))
    return -1;
  *k = (shms_class_config){.configured = 1,
                           .cells = cells,
                           .queue = queue,
                           .mode = mode,
                           .payload = payload,
                           .tenant_max_active = tma,
                           .on_holder_death = death,
                           .on_command_crash = crash,
                           .tenant_bind = bind,
                           .grant_timeout_ns = grant,
                           .overtake_ns = overtake,
                           .fairness = fairness};
  Py_ssize_t n = PyTuple_GET_SIZE(allow);
  if (n > SHMS_ALLOW_MAX) {
    pyshms_raise_inval("allow: at most %d tenants, got %zd", SHMS_ALLOW_MAX, n);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(allow, i), &len);
    if (name == NULL)
      return -1;
    if (len > SHMS_TENANT_MAX || shms_tenant_check(name) != SHMS_OK) {
      pyshms_raise_inval("allow: %R is not a tenant name (1..%d graphic ASCII bytes)",
                         PyTuple_GET_ITEM(allow, i), SHMS_TENANT_MAX);
      return -1;
    }
    memcpy(k->allow[i], name, (size_t)len + 1);
  }
  k->allow_count = (uint32_t)n;
  return 0;
}

/* The quota table from the package's tuple of (name, max); shms_config_validate judges them. */
static int quotas_from_tuple(PyObject *t, shms_config *cfg) {
  Py_ssize_t n = PyTuple_GET_SIZE(t);
  if (n > SHMS_QUOTAS_MAX) {
    pyshms_raise_inval("quotas: at most %d, got %zd", SHMS_QUOTAS_MAX, n);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    const char *name;
    Py_ssize_t len;
    unsigned int max;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(t, i), "s#I;a quota is (name, max)", &name, &len, &max))
      return -1;
    if (len > SHMS_TENANT_MAX || shms_tenant_check(name) != SHMS_OK) {
      pyshms_raise_inval("quota %R: name: 1..%d graphic ASCII bytes",
                         PyTuple_GET_ITEM(PyTuple_GET_ITEM(t, i), 0), SHMS_TENANT_MAX);
      return -1;
    }
    memcpy(cfg->quotas[i].name, name, (size_t)len + 1);
    cfg->quotas[i].max = max;
  }
  cfg->quota_count = (uint32_t)n;
  return 0;
}

static PyObject *create(PyObject *mod, PyObject *args) {
  (void)mod;
  const char *name;
  PyObject *classes;
  unsigned long long starve;
  unsigned int tenants, procs, mode;
  long long group, admin_group;
  PyObject *quotas = NULL;
  if (!PyArg_ParseTuple(args, "sO!KIIILL|O!", &name, &PyDict_Type, &classes, &starve, &tenants,
                        &procs, &mode, &group, &admin_group, &PyTuple_Type, &quotas))
    return NULL;
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.starvation_after_ns = starve;
  cfg.max_tenants = tenants;
  cfg.max_processes = procs;
  cfg.file_mode = mode;
  cfg.group = group;
  cfg.admin_group = admin_group;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(classes, &pos, &key, &value)) {
    long c = PyLong_AsLong(key);
    if (c == -1 && PyErr_Occurred())
      return NULL;
    if (c < 0 || c >= SHMS_CLASS_COUNT)
      return pyshms_raise_inval("class index %ld out of range", c);
    if (class_from_tuple(value, &cfg.classes[c]) < 0)
      return NULL;
  }
  if (quotas != NULL && quotas_from_tuple(quotas, &cfg) < 0)
    return NULL;
  int rc;
  PYSHMS_UNLOCKED(rc = shms_create(name, &cfg));
  if (rc != SHMS_OK)
    return pyshms_raise(rc == SHMS_ENOTFOUND ? PYSHMS_SEGMENT_NOT_FOUND : rc,
                        shms_last_error_detail());
  Py_RETURN_NONE;
}

static PyObject *destroy(PyObject *mod, PyObject *args) {
  (void)mod;
  const char *name;
  int force;
  if (!PyArg_ParseTuple(args, "sp", &name, &force))
    return NULL;
  int rc;
  PYSHMS_UNLOCKED(rc = shms_destroy(name, force ? SHMS_DESTROY_FORCE : 0));
  if (rc != SHMS_OK)
    return pyshms_raise(rc == SHMS_ENOTFOUND ? PYSHMS_SEGMENT_NOT_FOUND : rc,
                        shms_last_error_detail());
  Py_RETURN_NONE;
}

static PyObject *ticket_parse(PyObject *mod, PyObject *arg) {
  (void)mod;
  const char *text = PyUnicode_AsUTF8(arg);
  if (text == NULL)
    return NULL;
  shms_ticket t;
  int rc = shms_ticket_parse(text, &t);
  return rc == SHMS_OK ? pyshms_ticket_tuple(&t) : pyshms_raise_last(rc);
}

static PyObject *ticket_format(PyObject *mod, PyObject *arg) {
  (void)mod;
  shms_ticket t;
  if (!pyshms_ticket_conv(arg, &t))
    return NULL;
  char buf[SHMS_TICKET_STRLEN];
  shms_ticket_format(&t, buf);
  return PyUnicode_FromString(buf);
}

static PyObject *tenant_check(PyObject *mod, PyObject *arg) {
  (void)mod;
  Py_ssize_t len;
  const char *name = PyUnicode_AsUTF8AndSize(arg, &len);
  if (name == NULL)
    return NULL;
  if ((size_t)len != strlen(name))
    return pyshms_raise_inval("tenant %R contains a NUL byte", arg);
  int rc = shms_tenant_check(name);
  return rc == SHMS_OK ? Py_NewRef(Py_None) : pyshms_raise_last(rc);
}

static PyObject *monotonic_ns(PyObject *mod, PyObject *unused) {
  (void)mod;
  (void)unused;
  return PyLong_FromUnsignedLongLong(pyshms_monotonic_ns());
}

static PyObject *err_name(PyObject *mod, PyObject *arg) {
  (void)mod;
  long rc = PyLong_AsLong(arg);
  if (rc == -1 && PyErr_Occurred())
    return NULL;
  return Py_BuildValue("(ss)", shms_err_name((int)rc), shms_strerror((int)rc));
}

static PyMethodDef methods[] = {
    {"_register_errors", register_errors, METH_O, "Register the code -> exception class table."},
    {"create", create, METH_VARARGS,
     "create(name, classes, starvation_after_ns, max_tenants, max_processes, mode, group, "
     "admin_group[, ((quota, max), ...)])"},
    {"destroy", destroy, METH_VARARGS, "destroy(name, force)"},
    {"ticket_parse", ticket_parse, METH_O,
     "A ticket's text form -> (cls, slot, seq, incarnation)."},
    {"ticket_format", ticket_format, METH_O, "(cls, slot, seq, incarnation) -> its text form."},
    {"tenant_check", tenant_check, METH_O, "Raise invalid-argument unless a valid tenant name."},
    {"monotonic_ns", monotonic_ns, METH_NOARGS, "CLOCK_MONOTONIC in nanoseconds."},
    {"err_name", err_name, METH_O, "code -> (reason word, message)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_shmsched",
    "The C layer of shmsched: use the shmsched package, which gives it its shape.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL};

/* In a forked child every handle of the parent is stale: one counter tells them all. */
static void after_fork_in_child(void) { pyshms_fork_gen++; }

static int add_constants(PyObject *m) {
#define PYSHMS__XX(code, word, msg)                                                                \
  if (PyModule_AddIntConstant(m, "E" #code, SHMS_E##code) < 0)                                     \
    return -1;
  SHMS_ERRNO_MAP(PYSHMS__XX)
#undef PYSHMS__XX
  if (PyModule_AddIntConstant(m, "SEGMENT_NOT_FOUND", PYSHMS_SEGMENT_NOT_FOUND) < 0 ||
      PyModule_AddIntConstant(m, "FORKED", PYSHMS_FORKED) < 0 ||
      PyModule_AddStringConstant(m, "LIBRARY_VERSION", SHMS_VERSION_STRING) < 0 ||
      PyModule_AddIntConstant(m, "TENANT_MAX", SHMS_TENANT_MAX) < 0 ||
      PyModule_AddIntConstant(m, "PAYLOAD_MAX", SHMS_PAYLOAD_MAX) < 0 ||
      PyModule_AddIntConstant(m, "REQUEST_QUOTAS_MAX", SHMS_REQUEST_QUOTAS_MAX) < 0 ||
      PyModule_AddIntConstant(m, "KEY_MAX", SHMS_KEY_MAX) < 0 ||
      PyModule_AddIntConstant(m, "SUBMIT_SUPERSEDE", SHMS_SUBMIT_SUPERSEDE) < 0 ||
      PyModule_AddIntConstant(m, "SUBMIT_SUPERSEDE_RUNNING", SHMS_SUBMIT_SUPERSEDE_RUNNING) < 0)
    return -1;
  return 0;
}

PyMODINIT_FUNC PyInit__shmsched(void) {
  static int fork_handler;
  if (!fork_handler && pthread_atfork(NULL, NULL, after_fork_in_child) == 0)
    fork_handler = 1;
  if (PyType_Ready(&pyshms_handle_type) < 0 || PyType_Ready(&pyshms_worker_type) < 0)
    return NULL;
  PyObject *m = PyModule_Create(&module);
  if (m == NULL)
    return NULL;
  if (add_constants(m) < 0 ||
      PyModule_AddObjectRef(m, "Handle", (PyObject *)&pyshms_handle_type) < 0 ||
      PyModule_AddObjectRef(m, "Worker", (PyObject *)&pyshms_worker_type) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
