/*
 * The moving parts that `shmsched run`, `submit` and `worker` share (cmd_run.c,
 * cmd_submit.c and cmd_worker.c parse their options): waiting on the library
 * so that a stop signal is noticed, and running a command contained
 * (contain.h) while forwarding stop signals to it.
 *
 * Signals: these commands block the stop signals (SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGUSR1, SIGUSR2: all alike) and SIGCHLD for their whole life and
 * take them synchronously (sigtimedwait, a signalfd, a thread waiting for
 * them), so no handler ever runs (shms_cancel is not async-signal-safe). A
 * child gets the original mask back before it execs.
 */
#ifndef SHMS_SUPERVISOR_RUN_H
#define SHMS_SUPERVISOR_RUN_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "contain.h"
#include "shmsched.h"

/*
 * One wait slice. A stop signal is noticed within a slice. The library keeps
 * its poll interval (1 s) per handle across calls, so waiting in slices still
 * checks on a dead peer once a second.
 */
#define RUN_WAIT_SLICE_NS (250ull * 1000 * 1000)

struct run_signals {
  sigset_t stop;  /* the six stop signals, less any we inherited as ignored */
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

/*
 * A thread that takes the stop signals (through a signalfd) while the main thread waits in the
 * library without slices: for each one it calls on_signal(ctx, signo, nth) (nth counts from 1),
 * which makes the wait return (shms_cancel of the request, shms_interrupt of the handle). Idle
 * means idle: nothing wakes either thread but what concerns it.
 */
struct run_watch {
  int sigfd, donefd;
  pthread_t thread;
  void (*on_signal)(void *ctx, int signo, int nth);
  void *ctx;
  int count;       /* stop signals taken (atomic) */
  int first, last; /* the first and the latest of them, 0 if none */
};

/* Start watching; 0, or -1 (no thread: the caller waits in slices, run_wait_sliced). */
int run_watch_start(struct run_watch *w, const struct run_signals *s,
                    void (*on_signal)(void *ctx, int signo, int nth), void *ctx);
/* Stop watching and join the thread; then w->count, first and last say what came. */
void run_watch_stop(struct run_watch *w);

/* CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t run_monotonic_ns(void);

/*
 * Get a lease for req. With fast, try shms_try_acquire first (never with
 * print_ticket: a ticket needs a queued request). Otherwise enqueue (printing
 * the ticket alone on a line of stderr if print_ticket) and wait without a
 * time limit, while a thread waits for a stop signal: one cancels the request
 * (shms_cancel wakes the waiter), so nothing wakes us but what concerns us.
 * Returns SHMS_OK with *lease (and *ticket, *queued = 1 if it was queued), or
 * the library's error; *signo is the stop signal that cancelled it, or 0.
 */
int run_get_lease(shms_t *h, const shms_request *req, int fast, int print_ticket,
                  const struct run_signals *s, shms_lease *lease, shms_ticket *ticket, int *queued,
                  int *signo);

/*
 * In a forked child: restore the original signal mask and exec cmd (PATH
 * search). If that fails, print one error line naming who ("run", "worker")
 * and _exit 127 (not found) or 126.
 */
__attribute__((noreturn)) void run_exec_child(char *const cmd[], const struct run_signals *s,
                                              const char *who);

/*
 * Run cmd (PATH search) contained by c (contain.h), with env ("KEY=VALUE"
 * strings, NULL-ended) added to its environment, and wait until it and its
 * whole tree are gone. Every stop signal sent to us is forwarded to its
 * group (the command has a group of its own: nothing we receive reached it),
 * and SIGTSTP/SIGCONT keep job control working. Returns 0 with the leader's
 * wait status in *status, or -1 with errno when it could not be started.
 */
int run_command(char *const cmd[], char *const env[], const struct run_signals *s,
                struct contain *c, int *status);

#endif
