/*
 * SHMS__ASSERT(cond): a function's precondition, checked in debug builds only (SHMS_DEBUG, which
 * CMAKE_BUILD_TYPE=Debug defines: the sanitizer builds are Debug, so the suites run with every
 * assertion on). Compiled out of Release and RelWithDebInfo: cond is then not evaluated.
 */
#ifndef SHMS_SHM_DEBUG_H
#define SHMS_SHM_DEBUG_H

#ifdef SHMS_DEBUG
/* Print what failed where, then abort: a broken precondition is a bug, never an error code. */
_Noreturn void shms__assert_fail(const char *cond, const char *file, int line, const char *func);
#define SHMS__ASSERT(cond)                                                                         \
  ((cond) ? (void)0 : shms__assert_fail(#cond, __FILE__, __LINE__, __func__))
#else
#define SHMS__ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif
