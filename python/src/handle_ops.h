/* The Handle methods that schedule (handle_ops.c) and open workers (worker.c). */
#ifndef PYSHMS_HANDLE_OPS_H
#define PYSHMS_HANDLE_OPS_H

#include "pyshms.h"

PyObject *pyshms_enqueue(HandleObject *self, PyObject *args);
PyObject *pyshms_try_acquire(HandleObject *self, PyObject *args);
PyObject *pyshms_prepare(HandleObject *self, PyObject *args);
PyObject *pyshms_try_acquire_prepared(HandleObject *self, PyObject *arg);
PyObject *pyshms_wait(HandleObject *self, PyObject *args);
PyObject *pyshms_withdraw(HandleObject *self, PyObject *arg);
PyObject *pyshms_cancel(HandleObject *self, PyObject *arg);
PyObject *pyshms_release(HandleObject *self, PyObject *arg);
PyObject *pyshms_lease_cells(HandleObject *self, PyObject *arg);
PyObject *pyshms_quarantine(HandleObject *self, PyObject *args);
PyObject *pyshms_explain(HandleObject *self, PyObject *arg);
PyObject *pyshms_submit(HandleObject *self, PyObject *args);
PyObject *pyshms_submit_batch(HandleObject *self, PyObject *args);
PyObject *pyshms_cancel_batch(HandleObject *self, PyObject *arg);
PyObject *pyshms_wait_result(HandleObject *self, PyObject *args);
PyObject *pyshms_worker_open(HandleObject *self, PyObject *args);

#endif
