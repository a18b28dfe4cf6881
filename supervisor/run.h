/*
 * The moving parts of `shmsched run` (cmd_run.c parses its options): waiting
 * for a lease so that SIGINT/SIGTERM cancel the request, and running the
 * command as a child while forwarding those signals to it.
 *
 * Signals: run blocks SIGINT, SIGTERM and SIGCHLD for its whole life and
 * takes them synchronously (sigtimedwait, sigwaitinfo), so no handler ever
 * runs and every library call happens on the main path. The child gets the
 * original mask back before it execs.
 */
#ifndef SHMS_SUPERVISOR_RUN_H
#define SHMS_SUPERVISOR_RUN_H

#include <signal.h>
#include <sys/types.h>

#include "shmsched.h"

struct run_signals {
  sigset_t stop;  /* SIGINT and SIGTERM, less any we inherited as ignored */
  sigset_t taken; /* stop + SIGCHLD: what run takes synchronously */
  sigset_t old;   /* the mask run started with: restored in the child */
};

/* Block the signals run takes synchronously; SIGCHLD back to its default action. */
void run_signals_block(struct run_signals *s);

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
 * Fork and exec cmd (PATH search), then wait for it, forwarding stop signals
 * sent to run itself (not those the terminal sent to the whole process group,
 * which the child received too). Returns 0 with its wait status in *status,
 * or -1 with errno when it could not be started.
 */
int run_command(char *const cmd[], const struct run_signals *s, int *status);

#endif
