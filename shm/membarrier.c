/* membarrier(2) for operation marks: registration once per process, and the freezer's barrier
 * (membarrier.h). */
#include "membarrier.h"

#include <ck_pr.h>
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "atomic.h"
#include "error.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t decided_pid; /* the process the decision below was taken in; 0: not yet */
static int plain;         /* the decision: 1 plain marks, 0 locked */
static int env_bad;       /* SHMSCHED_MEMBARRIER held something else than 0 or 1 */
static int force_no_register, force_fail;
static uint32_t calls; /* barriers asked for, failed or not (tests) */

static long sys_membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }

/* Whether this process may mark plainly: registered, and a barrier goes through. */
static int try_register(void) {
  long cmds = sys_membarrier(MEMBARRIER_CMD_QUERY);
  long need = MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED;
  if (cmds < 0 || (cmds & need) != need)
    return 0; /* an old kernel, or a filter that denies the call */
  if (sys_membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0)
    return 0;
  /* A filter could tell the commands apart: our own freezes must be able to issue the
   * barrier our marks rely on (a process that registered and then cannot would wait for its
   * own marks: docs/protocol.md). */
  return shms__membarrier_global() == 0;
}

/* The decision, taken under lock if it was not yet in this process (a forked child asks again:
 * registration belongs to the address space, and a child has a new one). */
static void decide(void) {
  pid_t me = getpid();
  if (decided_pid == me)
    return;
  const char *env = secure_getenv("SHMSCHED_MEMBARRIER"); /* ignored by a setgid program */
  int want = 1;
  env_bad = 0;
  if (env != NULL && strcmp(env, "0") == 0)
    want = 0;
  else if (env != NULL && *env != '\0' && strcmp(env, "1") != 0)
    want = 0, env_bad = 1;
  plain = want && !force_no_register && try_register();
  decided_pid = me;
}

int shms__membarrier_setup(void) {
  pthread_mutex_lock(&lock);
  decide();
  int bad = env_bad;
  pthread_mutex_unlock(&lock);
  if (bad)
    return shms__fail(SHMS_EINVAL,
                      "SHMSCHED_MEMBARRIER is '%s': 0 (mark operations with locked "
                      "instructions) or 1 (with plain stores where membarrier works, the default)",
                      secure_getenv("SHMSCHED_MEMBARRIER"));
  return SHMS_OK;
}

int shms__membarrier_plain(void) {
  pthread_mutex_lock(&lock);
  decide();
  int p = plain;
  pthread_mutex_unlock(&lock);
  return p;
}

int shms__membarrier_global(void) {
  ck_pr_inc_32(&calls);
  if (shms__load_32((uint32_t *)&force_fail))
    return EPERM;
  return sys_membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0 ? 0 : errno;
}

void shms__test_membarrier_force(int no_register, int fail_global) {
  pthread_mutex_lock(&lock);
  force_no_register = no_register;
  decided_pid = 0;
  pthread_mutex_unlock(&lock);
  shms__store_32((uint32_t *)&force_fail, (uint32_t)fail_global);
}

uint32_t shms__test_membarrier_calls(void) { return shms__load_32(&calls); }
