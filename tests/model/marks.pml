/*
 * marks.pml -- an operation's mark against a freezer, on a CPU with store buffers, checked with
 * spin (core/quiesce.c: shms__op_enter, shms__freeze; shm/proc.c: claim; docs/protocol.md,
 * "Plain marks").
 *
 * Bounds: one thread T of a process that marks its operations (ROUNDS of them, the last its
 * detach's), then exits; one freezer F that freezes the class FREEZES times. T's stores go
 * through a store buffer of two entries (x86's is FIFO, and T's loads may pass its buffered
 * stores: the reordering a plain mark allows); a drainer moves the oldest entry to memory at
 * any moment. A locked instruction, a full fence, a context switch and the process's exit
 * drain it. F's own stores are locked (its CAS of FROZEN) and modelled as going straight to
 * memory. membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) is modelled as what the kernel promises:
 * every registered thread's buffer drained between F's call and its return.
 *
 * Checks: never T inside an operation while F holds the class still (assertions on both
 * sides), and no deadlock (every end state valid).
 *
 * Variants that must pass: the default (T registered, plain marks); -DLOCKED (T's marks are
 * locked exchanges, no PLAIN bit: F issues no barrier); -DBARRIER_FAILS (F cannot issue the
 * barrier: it lets the class go and tries again until T is gone).
 * Variants that must FAIL:
 *  -DNO_BARRIER     F reads plain marks without the barrier: T's mark still in its buffer
 *                   while T's look at FROZEN passed it (assertion violated).
 *  -DNO_CLAIM_FENCE T's PLAIN bit is not fenced at its claim: F reads it unset, skips the
 *                   barrier, and misses the mark behind it in the buffer (assertion violated).
 *  -DWAIT_FOR_GONE  with -DBARRIER_FAILS: F waits with the class held still until T is gone,
 *                   but T must run an operation (its detach's) to go (invalid end state).
 */
#ifndef ROUNDS
#define ROUNDS 2
#endif
#ifndef FREEZES
#define FREEZES 2
#endif

bit frozen;    /* the class's FROZEN bit */
bit plain;     /* T's entry's PLAIN bit */
bit mark;      /* T's mark for the class */
bit alive = 1; /* T's entry lock */
bit in_op;     /* ghost: T is inside an operation */
bit quiesced;  /* ghost: F holds the class still */

/* T's store buffer, oldest first: address (0 empty, 1 plain, 2 mark) and value. */
byte b0a, b0v, b1a, b1v;

/* Move the oldest buffered store to memory; only with one buffered. */
inline drain_one() {
  if
  :: b0a == 1 -> plain = b0v
  :: b0a == 2 -> mark = b0v
  fi;
  b0a = b1a;
  b0v = b1v;
  b1a = 0;
  b1v = 0
}

inline drain_all() {
  do
  :: b0a != 0 -> drain_one()
  :: else -> break
  od
}

/* A plain store: into the buffer (a full buffer first drains its oldest). */
inline store(a, v) {
  atomic {
    if
    :: b1a != 0 -> drain_one()
    :: else -> skip
    fi;
    if
    :: b0a == 0 -> b0a = a; b0v = v
    :: else -> b1a = a; b1v = v
    fi
  }
}

active proctype Drainer() {
end:
  do
  :: atomic { b0a != 0 -> drain_one() }
  od
}

active proctype T() {
  byte r = 0;
#ifndef LOCKED
  store(1, 1); /* claim: PLAIN with the rest of the entry */
#ifndef NO_CLAIM_FENCE
  atomic { drain_all() } /* then a full fence, before LIVE */
#endif
#endif
  do
  :: r < ROUNDS ->
enter:
#ifdef LOCKED
     atomic { drain_all(); mark = 1 } /* a locked exchange */
#else
     store(2, 1); /* a plain store, then (a compiler barrier) the look */
#endif
     if
     :: frozen ->
        store(2, 0);
        (frozen == 0); /* wait_unfrozen */
        goto enter
     :: else ->
        atomic { in_op = 1; assert(!quiesced) }
        in_op = 0; /* its own stores drain before the unmark: FIFO */
        store(2, 0);
        r++
     fi
  :: else -> break
  od;
  atomic { drain_all(); alive = 0 } /* exit: buffers drain, the lock drops */
}

active proctype F() {
  byte k = 0;
  do
  :: k < FREEZES ->
retry:
     frozen = 1; /* the CAS: locked */
     if
     :: plain ->
#if defined(NO_BARRIER)
        skip
#elif defined(BARRIER_FAILS)
        if
        :: alive ->
#ifdef WAIT_FOR_GONE
           (alive == 0)
#else
           frozen = 0; /* let the class go (an atomic and) and try again */
           goto retry
#endif
        :: else -> skip
        fi
#else
        atomic { drain_all() } /* membarrier */
#endif
     :: else -> skip
     fi;
     (mark == 0 || alive == 0); /* others_busy: a dead process's marks do not count */
     atomic { quiesced = 1; assert(!in_op) }
     quiesced = 0;
     frozen = 0;
     k++
  :: else -> break
  od
}
