/*
 * Running one command contained, for `shmsched run` and `worker`
 * (docs/operations.md, "Containment"):
 *
 * - the command leads a process group of its own, and runs in a cgroup of
 *   ours where a cgroup v2 hierarchy is writable (shms_command_cgroup);
 * - it starts only once that group (and cgroup) is recorded in our process
 *   entry (shms_command_set): if we are SIGKILLed, whoever disposes of what
 *   we left kills it; its leader also has PR_SET_PDEATHSIG(SIGKILL);
 * - we are a child subreaper, so every orphan of its tree becomes our child:
 *   the tree is gone exactly when we have no child left;
 * - when we lead the terminal's foreground job, the terminal is handed to the
 *   command's group (Ctrl-C, Ctrl-Z and isatty work as without us) and taken
 *   back when it stops or ends.
 *
 * When the leader exits, what is left of its tree gets SIGTERM, then SIGKILL
 * kill_after later; a stop signal forwarded to the command starts the same
 * kill_after clock (as timeout(1)'s -k does). The command has ended once the
 * whole tree is reaped. Not thread-safe; one command at a time.
 */
#ifndef SHMS_SUPERVISOR_CONTAIN_H
#define SHMS_SUPERVISOR_CONTAIN_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "shmsched.h"

#define CONTAIN_KILL_AFTER_NS (10ull * 1000 * 1000 * 1000) /* --kill-after's default */

struct contain {
  /* Set by contain_init. */
  shms_t *h;
  uint64_t kill_after_ns;
  int tty;    /* our controlling terminal, or -1 */
  int cgroup; /* cg is ours to put commands in */
  char cg[PATH_MAX];
  /* One command's state, reset by contain_start. */
  pid_t pid;       /* the leader, and the group's id */
  int in_cgroup;   /* it was put in cg */
  int gave_tty;    /* the terminal's foreground group is the command's */
  int leader_done; /* the leader was reaped; status is its wait status */
  int status;
  uint64_t kill_at;   /* CLOCK_MONOTONIC ns when what is left gets SIGKILL; 0: not due */
  int killed;         /* SIGKILL was sent to the tree */
  int mirror_stop;    /* we forwarded SIGTSTP: when the leader stops, stop too */
  uint64_t forwarded; /* bit per signal we sent the command (forwarded, or SIGTERM/SIGKILL) */
};

/*
 * Become a child subreaper, find our terminal if job_control (a worker's jobs
 * never take its terminal: a Ctrl-C is for the worker), and make our command
 * cgroup (without one, the process group alone contains commands). 0, or -1
 * with errno when we cannot be a subreaper.
 */
int contain_init(struct contain *c, shms_t *h, uint64_t kill_after_ns, int job_control);

/*
 * Fork; in the child, once recorded, call child(arg), which must exec or
 * _exit (with the signal mask it needs). Returns 0, or -1 with errno.
 */
int contain_start(struct contain *c, void (*child)(void *arg), void *arg);

/* Send sig to the command's group (a stop signal, or SIGCONT), and start the kill_after clock
 * for any signal but SIGCONT and SIGTSTP. */
void contain_forward(struct contain *c, int sig);

/* We were continued (SIGCONT): hand the terminal back if we are in the foreground again, and
 * continue the command. */
void contain_continued(struct contain *c);

/*
 * Reap whatever ended; when the leader ends, what is left of its tree gets
 * SIGTERM. Mirrors a stop of the leader that the terminal or our SIGTSTP
 * caused by stopping ourselves. Returns 1 once the leader and its whole tree
 * are gone (status is the leader's), else 0.
 */
int contain_reap(struct contain *c);

/* SIGKILL the tree if its time has come. Returns the milliseconds until it will, -1 if none. */
int contain_tick(struct contain *c);

/* The command is over: take the terminal back and forget the record. */
void contain_end(struct contain *c);

/* Whether wait status st is a crash: killed by a fault signal that we did not send it. */
int contain_crashed(const struct contain *c, int st);

#endif
