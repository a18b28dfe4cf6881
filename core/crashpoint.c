/* Crash points for the crash tests (sched.h, SHMS__STEP). */
#include <signal.h>
#include <unistd.h>

#include "sched.h"

uint32_t shms__crash_at;
static uint32_t reached;

void shms__crash_step(void) {
  if (++reached == shms__crash_at)
    kill(getpid(), SIGKILL); /* dies here, at this instruction, like a real crash */
}

void shms__test_crash_at(uint32_t n) {
  reached = 0;
  shms__crash_at = n;
}
