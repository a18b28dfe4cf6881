/*
 * Spinning before sleeping: a waiter watches its word for a short window before it announces
 * that it sleeps (docs/protocol.md, "Waiting and waking"; design/waking.md, "Spinning
 * before sleeping"). A hand-off that lands inside the window costs the waiter no wake-up
 * (tens of microseconds on a virtual machine whose idle vCPU halts) and the waker no FUTEX_WAKE.
 *
 * The spin only reads: it changes nothing shared, so the sleep/wake handshake and every crash
 * point are as they were (a waiter killed while spinning has announced nothing). It is adaptive,
 * so that it does not burn a whole window where spinning cannot win:
 *   - backing off: a spin that ends with the word unchanged is a failure; after f failures in a
 *     row the next 2^f - 1 waits (at most 63) of that kind sleep at once, then one tries again.
 *     Holds longer than the window so cost about one window in 64 waits; one success resets;
 *   - room to spin: never with one online CPU; never more than online CPUs - 1 threads of a
 *     handle at once; not when the class's queued requests (its waiters, who may all spin) and
 *     its holders but one (the caller counts them: client/request.c) leave no CPU for a holder:
 *     spinners would take the CPU a holder needs to release. The machine's other load is not
 *     looked at: a spin gives it back within the window, and a holder that other work keeps
 *     off the CPU shows as failed spins, which the back-off answers.
 *
 * Before any of that, a blocking acquire that finds no cell it may take yields its CPU once and
 * looks again, while no more requests are queued than there are CPUs (shms__yield_before_queueing,
 * docs/protocol.md, "Yielding before queueing"). With more runnable processes than CPUs the cell
 * is most often held by a process the kernel descheduled mid-hold: the yield lets it run and
 * release, at the cost of a system call, where queueing costs a sleep, a grant, and a wake-up that
 * itself waits for a CPU while the granted cell idles. A longer queue is the class's backlog, which
 * its order serves: a second look there would only let the tenants with more processes overtake
 * it more often.
 */
#include <ck_pr.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "../shm/atomic.h"
#include "../shm/clock.h"
#include "../shm/error.h"
#include "client.h"

#define SPIN_DEFAULT_US 20u
#define SPIN_MAX_US     1000u
#define SPIN_MAX_FAILS  6u /* back off at most 2^6 - 1 = 63 waits */

/* Process-wide: the environment is the process's. Written by attach, read by every spin. */
static uint64_t window_ns = SPIN_DEFAULT_US * 1000ull;
static uint32_t online_cpus;

int shms__spin_setup(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  shms__store_32(&online_cpus, n > 0 ? (uint32_t)n : 1u);
  const char *env = secure_getenv("SHMSCHED_SPIN_US"); /* ignored by a setgid program */
  if (env == NULL || *env == '\0') {
    shms__store_64(&window_ns, SPIN_DEFAULT_US * 1000ull);
    return SHMS_OK;
  }
  char *end;
  errno = 0;
  unsigned long us = strtoul(env, &end, 10);
  if (errno != 0 || *end != '\0' || *env == '-' || us > SPIN_MAX_US)
    return shms__fail(SHMS_EINVAL,
                      "SHMSCHED_SPIN_US is '%s': the spin window in microseconds, 0 (never "
                      "spin) to %u",
                      env, SPIN_MAX_US);
  shms__store_64(&window_ns, (uint64_t)us * 1000u);
  return SHMS_OK;
}

void shms__spin_set_window_ns(uint64_t ns) { shms__store_64(&window_ns, ns); }

void shms__spin_set_cpus(uint32_t cpus) { shms__store_32(&online_cpus, cpus); }

uint64_t shms__spin_window_ns(void) { return shms__load_64(&window_ns); }

static void yield_cpu(void) { sched_yield(); }
static void (*yield_hook)(void) = yield_cpu;

void shms__test_on_yield(void (*hook)(void)) { yield_hook = hook != NULL ? hook : yield_cpu; }

int shms__yield_before_queueing(uint32_t queued) {
  if (queued > shms__load_32(&online_cpus))
    return 0;
  yield_hook();
  return 1;
}

/* Whether this wait may spin: not backing off, and room for one more spinner. */
static int may_spin(struct shms *h, struct shms__spin *st, uint32_t waiters) {
  uint32_t skip = shms__load_32(&st->skip), cpus = shms__load_32(&online_cpus);
  if (skip > 0) {
    shms__store_32(&st->skip, skip - 1);
    return 0;
  }
  if (cpus < 2 || shms__load_32(&h->spinning) + 1 >= cpus || waiters >= cpus)
    return 0;
  return 1;
}

/* A spin that ran its whole window: back off; one that won: spin again next time. */
static void learn(struct shms__spin *st, int won) {
  if (won) {
    if (shms__load_32(&st->fails) != 0)
      shms__store_32(&st->fails, 0);
    return;
  }
  uint32_t f = shms__load_32(&st->fails);
  f = f < SPIN_MAX_FAILS ? f + 1 : f;
  shms__store_32(&st->fails, f);
  shms__store_32(&st->skip, (1u << f) - 1);
}

enum shms__spun shms__spin(struct shms *h, struct shms__spin *st, const uint64_t *word, uint64_t w,
                           uint64_t until_real, uint32_t waiters) {
  uint64_t window = shms__load_64(&window_ns);
  if (shms__load_64(word) != w)
    return SHMS__SPUN_CHANGED;
  if (window == 0 || !may_spin(h, st, waiters))
    return SHMS__SPUN_NOT;
  int whole = 1; /* a window cut short by the caller's limit teaches nothing */
  if (until_real != 0) {
    uint64_t real = shms__real_now_ns();
    if (real >= until_real)
      return SHMS__SPUN_NOT;
    if (until_real - real < window) {
      window = until_real - real;
      whole = 0;
    }
  }
  ck_pr_inc_32(&h->spinning);
  enum shms__spun r = SHMS__SPUN_NOT;
  /* The window is CPU spent, so it is real time: a test clock held still must not spin for ever. */
  uint64_t start = shms__real_now_ns();
  for (unsigned n = 1;; n++) {
    if (shms__load_64(word) != w) {
      r = SHMS__SPUN_CHANGED;
      break;
    }
    if (shms__interrupted(h)) {
      r = SHMS__SPUN_INTERRUPTED;
      break;
    }
    ck_pr_stall(); /* PAUSE: leave the sibling hyperthread and the bus alone */
    /* The clock (a vDSO call, ~20 ns) every 16 turns: the window ends within ~1 us of its due. */
    if (n % 16 == 0 && shms__real_now_ns() - start >= window)
      break;
  }
  ck_pr_dec_32(&h->spinning);
  if (r == SHMS__SPUN_CHANGED)
    ck_pr_inc_64(&h->spin_won);
  else if (r == SHMS__SPUN_NOT)
    ck_pr_inc_64(&h->spin_lost);
  if (r != SHMS__SPUN_INTERRUPTED && (r == SHMS__SPUN_CHANGED || whole))
    learn(st, r == SHMS__SPUN_CHANGED);
  return r;
}
