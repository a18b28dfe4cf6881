/*
 * Crash points (tests only) and the library's thread-local storage class: the lowest layer's,
 * since every layer above marks its steps.
 */
#ifndef SHMS_SHM_CRASHPOINT_H
#define SHMS_SHM_CRASHPOINT_H

#include <stdint.h>

/*
 * SHMS__STEP() marks a point between two changes to shared memory in the
 * operations crash tests kill at: enqueue, dispatch and grant, accept,
 * release, cancel, worker take and complete. When a test armed step n with
 * shms__test_crash_at(n), the n-th point this process reaches SIGKILLs it.
 * Unarmed, a point costs one predictable branch.
 */
extern uint32_t shms__crash_at;
void shms__crash_step(void);
/*
 * Thread-local state of the library: initial-exec, so that reaching it is one
 * instruction, not a call into the dynamic linker (the library is built
 * position-independent). A few dozen bytes of static TLS.
 */
#define SHMS__TLS _Thread_local __attribute__((tls_model("initial-exec")))

#define SHMS__STEP()                                                                               \
  do {                                                                                             \
    if (__builtin_expect(shms__crash_at != 0, 0))                                                  \
      shms__crash_step();                                                                          \
  } while (0)
/*
 * A crash point in a write that belongs to no class's state (the event ring's records, which
 * any thread writes, inside an operation or not): counted and killed at like SHMS__STEP, but
 * not shown to the step check (which asks whether class state changes are marked).
 */
void shms__crash_step_plain(void);
#define SHMS__STEP_PLAIN()                                                                         \
  do {                                                                                             \
    if (__builtin_expect(shms__crash_at != 0, 0))                                                  \
      shms__crash_step_plain();                                                                    \
  } while (0)
/* Test only: SIGKILL this process at its n-th crash point from now (0: never). */
void shms__test_crash_at(uint32_t n);
/* Test only: call check at every crash point this process reaches (NULL: stop). */
void shms__test_step_check(void (*check)(void));
#endif
