/* The error map's functions and the per-thread failure detail. */
#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

/* initial-exec: reset at every call, so reaching it must cost nothing (see core/sched.h). */
static _Thread_local __attribute__((tls_model("initial-exec"))) char detail[256];

const char *shms_err_name(int err) {
  switch (err) {
  case SHMS_OK:
    return "ok";
#define SHMS__XX(code, word, msg)                                                                  \
  case SHMS_E##code:                                                                               \
    return word;
    SHMS_ERRNO_MAP(SHMS__XX)
#undef SHMS__XX
  default:
    return "unknown-error";
  }
}

const char *shms_strerror(int err) {
  switch (err) {
  case SHMS_OK:
    return "success";
#define SHMS__XX(code, word, msg)                                                                  \
  case SHMS_E##code:                                                                               \
    return msg;
    SHMS_ERRNO_MAP(SHMS__XX)
#undef SHMS__XX
  default:
    return "unknown error";
  }
}

const char *shms_last_error_detail(void) { return detail; }

void shms__clear_detail(void) { detail[0] = '\0'; }

void shms__detail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap); // NOLINT(clang-analyzer-valist.Uninitialized)
  va_end(ap);
}

int shms__from_errno(int e) {
  switch (e) {
  case EACCES:
  case EPERM:
  case EROFS:
    return SHMS_EPERM;
  case ENOENT:
    return SHMS_ENOTFOUND;
  case EEXIST:
    return SHMS_EEXISTS;
  case ENOSPC:
  case EFBIG:
    return SHMS_ENOSPACE;
  case ENOMEM:
    return SHMS_ENOMEM;
  case EINVAL:
  case ENAMETOOLONG:
    return SHMS_EINVAL;
  default:
    return SHMS_ESYSTEM;
  }
}
