/* Crash points for the crash tests (crashpoint.h, SHMS__STEP), and the debug assertion (debug.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "crashpoint.h"
#include "debug.h"

uint32_t shms__crash_at;
static uint32_t reached;
static void (*step_check)(void);

void shms__crash_step(void) {
  if (step_check != NULL)
    step_check();
  if (++reached == shms__crash_at)
    kill(getpid(), SIGKILL); /* dies here, at this instruction, like a real crash */
}

void shms__crash_step_plain(void) {
  if (++reached == shms__crash_at)
    kill(getpid(), SIGKILL);
}

void shms__test_crash_at(uint32_t n) {
  reached = 0;
  shms__crash_at = n;
}

void shms__test_step_check(void (*check)(void)) {
  step_check = check;
  shms__test_crash_at(check != NULL ? UINT32_MAX : 0); /* every point, never a kill */
}

#ifdef SHMS_DEBUG
_Noreturn void shms__assert_fail(const char *cond, const char *file, int line, const char *func) {
  fprintf(stderr, "shmsched: %s:%d: %s: precondition failed: %s\n", file, line, func, cond);
  abort();
}
#endif
