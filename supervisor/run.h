/*
 * The moving parts that `shmsched run`, `submit` and `worker` share (cmd_run.c,
 * cmd_submit.c and cmd_worker.c parse their options): waiting on the library
 * in slices so that SIGINT/SIGTERM are noticed, and running a command as a
 * child while forwarding those signals to it.
 *
 * Signals: these commands block SIGINT, SIGTERM and SIGCHLD for their whole
 * life and take them synchronously (sigtimedwait, sigwaitinfo, a signalfd),
 * so no handler ever runs and every library call happens on the main path
 * (shms_cancel is not async-signal-safe). A child gets the original mask back
 * before it execs.
 */
#ifndef SHMS_SUPERVISOR_RUN_H
#define SHMS_SUPERVISOR_RUN_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "shmsched.h"

/*
 * One wait slice. A stop signal is noticed within a slice. The library keeps
 * its poll interval (1 s) per handle across calls, so waiting in slices still
 * checks on a dead peer once a second.
 */
#define RUN_WAIT_SLICE_NS (250ull * 1000 * 1000)

struct run_signals {
  sigset_t stop;  /* SIGINT and SIGTERM, less any we inherited as ignored */
  sigset_t taken; /* stop + SIGCHLD: what we take synchronously */
  sigset_t old;   /* the mask we started with: restored in the child */
};

/* Block the signals taken synchronously; SIGCHLD back to its default action. */
void run_signals_block(struct run_signals *s);

/* A pending stop signal, taken (so it is not seen again), or 0. Never blocks. */
int run_stop_pending(const struct run_signals *s);

/*
 * Call wait(ctx, RUN_WAIT_SLICE_NS) until it returns anything but
 * SHMS_ETIMEDOUT, or until timeout_ns (UINT64_MAX: none; an absolute
 * CLOCK_MONOTONIC time otherwise) passes, looking for a stop signal before
 * each slice. Returns wait's result, or SHMS_ETIMEDOUT with *signo set to the
 * stop signal that came (0 if the time ran out).
 */
int run_wait_sliced(const struct run_signals *s, int (*wait)(void *ctx, uint64_t slice_ns),
                    void *ctx, uint64_t timeout_ns, int *signo);

/* CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t run_monotonic_ns(void);

/*
 * Get a lease for req. With fast, try shms_try_acquire first (never with
 * print_ticket: a ticket needs a queued request). Otherwise enqueue (printing
 * the ticket alone on a line of stderr if print_ticket) and wait in slices,
 * looking for a stop signal between them; a stop signal cancels the request.
 * Returns SHMS_OK with *lease, or the library's error; *signo is the stop
 * signal that cancelled the request, or 0.
 */
int run_get_lease(shms_t *h, const shms_request *req, int fast, int print_ticket,
                  const struct run_signals *s, shms_lease *lease, int *signo);

/*
 * In a forked child: restore the original signal mask and exec cmd (PATH
 * search). If that fails, print one error line naming who ("run", "worker")
 * and _exit 127 (not found) or 126.
 */
__attribute__((noreturn)) void run_exec_child(char *const cmd[], const struct run_signals *s,
                                              const char *who);

/*
 * Whether a stop signal sig that arrived with si_code code is to be forwarded
 * to a running child: not if the terminal sent it (SI_KERNEL) to the whole
 * foreground process group, which the child is in and received it too.
 */
int run_forwardable(int sig, int code);

/*
 * Fork and exec cmd (PATH search), then wait for it, forwarding stop signals
 * sent to us (not those the terminal sent to the whole process group, which
 * the child received too). Returns 0 with its wait status in *status, or -1
 * with errno when it could not be started.
 */
int run_command(char *const cmd[], const struct run_signals *s, int *status);

#endif
