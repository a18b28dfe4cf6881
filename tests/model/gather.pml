/*
 * gather.pml -- multi-cell requests, checked with spin: the dispatcher gathering the cells of a
 * request of K cells (core/gather.c: shms__gather, shms__gather_bind, shms__gather_next and
 * shms__gather_drop; core/dispatch.c: grant, grant_lost), the waiter's accept, the release that
 * ends the lead and its companions (core/cell.c: shms__cell_release, companions_end), a cancel
 * at any moment (core/slot.c: shms__slot_settle, then shms__cell_return for a grant), and the
 * fast path of a client of one cell.
 *
 * Bounds: three cells; clients A and B each acquire a lease of two cells through the queue,
 * hold it and release it; client C takes one cell on the fast path (only with nothing queued)
 * ITERS_C times; the Canceller cancels A's request at any moment (queued, gathering or
 * granted). One Dispatcher process stands for every kick (the baton makes passes mutually
 * exclusive: baton.pml checks it); it runs a pass whenever there is work (a queued request and
 * a free cell, or a gathering whose request ended), which abstracts the wake-ups baton.pml and
 * grant.pml check.
 *
 * Each shared word changes in one atomic step where the code makes one atomic access; the
 * steps of a pass between them are separate steps.
 *
 * Checks (tests/model/CMakeLists.txt): safety (pan -DSAFETY):
 *  - all or nothing: a waiter that accepts holds exactly K cells (its lead and the companions
 *    bound to it);
 *  - no cell held twice: ghost holders, asserted whenever a lease is taken;
 *  - no deadlock: every process ends (A and B each waiting for the other's cells would leave an
 *    invalid end state);
 *  - the reservation ends with its request: at the end every cell is AVAILABLE and counted
 *    free, none RESERVED or BOUND, and nothing gathers;
 * cycles (pan -DNP -l): no cycle in the state graph, so everything ends.
 *
 * Variants:
 *  -DCRASH               the dispatcher may die once, at any step of a pass; the next pass
 *                        then starts as the recovery of its class does (core/repair.c, for a
 *                        class left mid-operation: the reserved cells and orphaned companions
 *                        go back, a GRANTED lead that no slot holds is returned, the free map
 *                        is recounted). The same checks must hold.
 *  -DNO_DROP             (must FAIL) a gathering whose request ended stops without giving
 *                        its reserved cells back: they stay reserved when everyone is done.
 */
#define N_CELLS 3
#define K       2
#ifndef ITERS_C
#define ITERS_C 1
#endif

/* Cell states (shm/layout.h). */
#define C_AVAILABLE 1
#define C_GRANTED   2
#define C_LEASED    3
#define C_RESERVED  6
#define C_BOUND     7
/* Slot states: one slot per client of the queue, never reused. */
#define S_NONE      0
#define S_QUEUED    2
#define S_GRANTED   3
#define S_OK        4 /* SETTLED(ok): accepted */
#define S_CANCELLED 5 /* SETTLED(cancelled) */
#define NONE        255

byte cell_st[N_CELLS], cell_gen[N_CELLS], cell_lead[N_CELLS], cell_lead_gen[N_CELLS];
byte cell_ncells[N_CELLS];
bool fbit[N_CELLS];  /* the fast word's map of free cells */
byte fast_queued;    /* the fast word's queued count */
byte slot_st[2];     /* 0: A's request, 1: B's */
byte slot_lead[2], slot_gen[2];
byte gather = NONE;  /* ctl->gather_slot - 1 */
byte holder[N_CELLS];/* ghost: who holds the cell's lease (0 none; 1 A, 2 B, 3 C) */
byte done;           /* processes that have ended */
bool crashed;
byte in_op;          /* clients inside an operation that a recovery waits for (core/quiesce.c) */

/* ---- core/cell.c ---------------------------------------------------------------------- */

/* A cell goes free: its word first, its bit after (shms__fast_put). */
inline free_cell(c) {
  d_step { cell_st[c] = C_AVAILABLE; cell_gen[c]++ }
  fbit[c] = true
}

/* companions_end: every companion bound to lead c at generation g follows it. */
inline companions_end(c, g) {
  d = 0;
  do
  :: d < N_CELLS ->
     if
     :: atomic { cell_st[d] == C_BOUND && cell_lead[d] == c + 1 && cell_lead_gen[d] == g ->
          cell_st[d] = C_AVAILABLE; cell_gen[d]++ }
        fbit[d] = true
     :: else -> skip
     fi;
     d++
  :: else -> break
  od
}

/* shms__cell_return / shms__cell_release / shms__cell_reclaim: the exact CAS of the lead from
 * state st at generation g, then (its count read before the CAS: shms__lead_cells, valid while
 * the lead names itself at g) the companions, then its bit. */
inline lead_end(c, st, g, won) {
  if
  :: cell_lead[c] == c + 1 && cell_lead_gen[c] == g -> n = cell_ncells[c]
  :: else -> n = 1
  fi;
  atomic {
    if
    :: cell_st[c] == st && cell_gen[c] == g -> cell_st[c] = C_AVAILABLE; cell_gen[c]++; won = true
    :: else -> won = false
    fi
  }
  if
  :: won && n > 1 -> companions_end(c, g)
  :: else -> skip
  fi;
  if
  :: won -> fbit[c] = true
  :: else -> skip
  fi
}

/* shms__cells_settle_reserved: reserved cells, and companions whose lead ended, go back. */
inline settle_reserved() {
  e = 0;
  do
  :: e < N_CELLS ->
     if
     :: atomic { cell_st[e] == C_RESERVED -> cell_st[e] = C_AVAILABLE; cell_gen[e]++ }
        fbit[e] = true
     :: atomic { cell_st[e] == C_BOUND && !(cell_gen[cell_lead[e] - 1] == cell_lead_gen[e] &&
                 (cell_st[cell_lead[e] - 1] == C_RESERVED || cell_st[cell_lead[e] - 1] == C_GRANTED ||
                  cell_st[cell_lead[e] - 1] == C_LEASED)) ->
          cell_st[e] = C_AVAILABLE; cell_gen[e]++ }
        fbit[e] = true
     :: else -> skip
     fi;
     e++
  :: else -> break
  od
}

/* ---- the dispatcher ------------------------------------------------------------------- */

#ifdef CRASH
/* The holder dies here, once: the rest of its pass never happens. */
#define STEP if :: !crashed -> crashed = true; goto restart :: skip fi
#else
#define STEP skip
#endif

inline any_free(r) {
  r = fbit[0] || fbit[1] || fbit[2]
}

proctype Dispatcher() {
  byte i, c, g, n, d, e, have, lead, r;
  bool won, free;
end_idle:
  do
  :: atomic { (gather != NONE && slot_st[gather] != S_QUEUED) ||
              ((slot_st[0] == S_QUEUED || slot_st[1] == S_QUEUED) && (fbit[0] || fbit[1] || fbit[2])) ->
       skip }
     /* shms__gather_next: a gathering whose request ended gives its cells back. */
     if
     :: gather != NONE && slot_st[gather] != S_QUEUED ->
#ifndef NO_DROP
        settle_reserved(); STEP;
#endif
        gather = NONE
     :: else -> skip
     fi;
     /* The request whose turn it is: the one gathering, else either queued one. */
     if
     :: gather != NONE -> i = gather
     :: gather == NONE && slot_st[0] == S_QUEUED -> i = 0
     :: gather == NONE && slot_st[1] == S_QUEUED -> i = 1
     :: else -> goto pass_end
     fi;
     if
     :: slot_st[i] != S_QUEUED -> goto pass_end
     :: else -> skip
     fi;
     /* shms__gather: reserve free cells until it holds K. */
     gather = i;
     have = 0;
     c = 0;
     do
     :: c < N_CELLS -> have = have + (cell_st[c] == C_RESERVED); c++
     :: else -> break
     od;
     do
     :: have < K ->
        any_free(free);
        if
        :: !free -> goto pass_end /* kept for it: the next cell freed comes here */
        :: else -> skip
        fi;
        /* take_mapped: one CAS takes a bit, then the cell (a store: the bit was the right). */
        atomic {
          if
          :: fbit[0] -> c = 0
          :: fbit[1] -> c = 1
          :: fbit[2] -> c = 2
          :: else -> c = NONE /* taken since we looked: the pass stops */
          fi;
          if
          :: c != NONE -> fbit[c] = false
          :: else -> skip
          fi
        }
        if
        :: c == NONE -> goto pass_end
        :: else -> skip
        fi;
        STEP;
        cell_st[c] = C_RESERVED;
        have++;
        STEP
     :: else -> break
     od;
     /* The lowest reserved cell is the lead: GRANTED (a store), then started. */
     lead = NONE;
     c = 0;
     do
     :: c < N_CELLS && cell_st[c] == C_RESERVED && lead == NONE -> lead = c; c++
     :: c < N_CELLS && !(cell_st[c] == C_RESERVED && lead == NONE) -> c++
     :: else -> break
     od;
     assert(lead != NONE);
     cell_st[lead] = C_GRANTED;
     STEP;
     g = cell_gen[lead];
     /* shms__gather_bind: the lead's count, valid once it names itself at g */
     cell_ncells[lead] = K;
     cell_lead_gen[lead] = g;
     STEP;
     cell_lead[lead] = lead + 1;
     STEP;
     c = 0;
     do
     :: c < N_CELLS ->
        if
        :: cell_st[c] == C_RESERVED ->
           cell_lead[c] = lead + 1; cell_lead_gen[c] = g;
           cell_st[c] = C_BOUND;
           STEP
        :: else -> skip
        fi;
        c++
     :: else -> break
     od;
     gather = NONE;
     STEP;
     slot_lead[i] = lead; slot_gen[i] = g;
     /* shms__slot_grant: QUEUED -> GRANTED, or the request went: grant_lost returns the lead. */
     atomic {
       if
       :: slot_st[i] == S_QUEUED -> slot_st[i] = S_GRANTED; fast_queued--; won = true
       :: else -> won = false
       fi
     }
     if
     :: !won -> lead_end(lead, C_GRANTED, g, won)
     :: else -> skip
     fi;
pass_end:
     skip
  :: atomic { done == 4 && gather == NONE && slot_st[0] != S_QUEUED && slot_st[1] != S_QUEUED -> break }
  od;
  goto finish;
restart:
  /* The recovery of the class the dead holder left mid-operation (core/repair.c), frozen once
   * every operation in flight has ended (core/quiesce.c): the gathering drops, the lead of a
   * grant its slot does not hold goes back, companions follow, the free map is recounted. */
  atomic {
  in_op == 0;
  settle_reserved();
  gather = NONE;
  c = 0;
  do
  :: c < N_CELLS ->
     if
     :: cell_st[c] == C_GRANTED && !((slot_st[0] == S_GRANTED && slot_lead[0] == c) ||
                                     (slot_st[1] == S_GRANTED && slot_lead[1] == c)) ->
        lead_end(c, C_GRANTED, cell_gen[c], won)
     :: else -> skip
     fi;
     c++
  :: else -> break
  od;
  settle_reserved(); /* companions orphaned by the returns above */
  /* The free map recounted from the cells: a bit taken by the dead holder over a cell it had
   * not written yet (core/repair.c, recover_frozen). */
  atomic {
    c = 0;
    do
    :: c < N_CELLS -> fbit[c] = (cell_st[c] == C_AVAILABLE); c++
    :: else -> break
    od
  }
  }
  goto end_idle;
finish:
  /* Everyone is done: nothing is held, reserved or bound; every cell is counted free. */
  c = 0;
  do
  :: c < N_CELLS ->
     assert(cell_st[c] == C_AVAILABLE && fbit[c] && holder[c] == 0);
     c++
  :: else -> break
  od;
  assert(fast_queued == 0 && gather == NONE)
}

/* ---- clients --------------------------------------------------------------------------- */

/* A lease of K cells through the queue: enqueue, wait, accept, hold, release. */
proctype Pair(byte me) {
  byte lead, g, c, d, n, got;
  bool won;
  byte i = me - 1;
  /* shms__enqueue_slot: counted queued, then published. */
  fast_queued++;
  slot_st[i] = S_QUEUED;
  /* shms_wait: until granted or ended. */
  if
  :: slot_st[i] == S_GRANTED -> skip
  :: slot_st[i] == S_CANCELLED -> goto out
  fi;
  /* accept: one CAS decides against the canceller. */
  atomic {
    in_op++;
    if
    :: slot_st[i] == S_GRANTED -> slot_st[i] = S_OK; won = true
    :: else -> won = false; in_op--
    fi
  }
  if
  :: !won -> goto out /* cancelled: the canceller returns the cells */
  :: else -> skip
  fi;
  lead = slot_lead[i];
  g = slot_gen[i];
  /* shms__cell_accept: GRANTED -> LEASED. */
  atomic {
    assert(cell_st[lead] == C_GRANTED && cell_gen[lead] == g);
    cell_st[lead] = C_LEASED;
    in_op--
  }
  /* All or nothing, and nobody else's: the lead and its bound companions are K cells. */
  atomic {
    got = 0;
    c = 0;
    do
    :: c < N_CELLS ->
       if
       :: c == lead || (cell_st[c] == C_BOUND && cell_lead[c] == lead + 1 && cell_lead_gen[c] == g) ->
          assert(holder[c] == 0);
          holder[c] = me;
          got++
       :: else -> skip
       fi;
       c++
    :: else -> break
    od;
    assert(got == K)
  }
  /* Hold, then release: ghosts first, then shms__cell_release. */
  atomic {
    c = 0;
    do
    :: c < N_CELLS -> if :: holder[c] == me -> holder[c] = 0 :: else -> skip fi; c++
    :: else -> break
    od;
    in_op++
  }
  lead_end(lead, C_LEASED, g, won);
  in_op--;
  assert(won);
out:
  done++
}

/* Client C: the fast path only, while nothing is queued (take_mapped, SHMS__TAKE_UNQUEUED). */
proctype Single() {
  byte c, k = 0;
  do
  :: k < ITERS_C ->
     atomic {
       (fast_queued == 0 && (fbit[0] || fbit[1] || fbit[2])) ->
       in_op++;
       if
       :: fbit[0] -> c = 0
       :: fbit[1] -> c = 1
       :: fbit[2] -> c = 2
       fi;
       fbit[c] = false
     }
     atomic { assert(cell_st[c] == C_AVAILABLE && holder[c] == 0); cell_st[c] = C_LEASED;
              holder[c] = 3; in_op-- }
     atomic { holder[c] = 0; in_op++ }
     free_cell(c);
     in_op--;
     k++
  :: k < ITERS_C -> k++ /* or it gives up (try_acquire's would-block) */
  :: else -> break
  od;
  done++
}

/* shms_cancel of A's request, at any moment: QUEUED -> SETTLED, or GRANTED -> SETTLED and its
 * lead (and with it its companions) returned. */
proctype Canceller() {
  byte lead, g, n, d;
  bool won, granted;
  atomic {
    in_op++;
    if
    :: slot_st[0] == S_QUEUED -> slot_st[0] = S_CANCELLED; fast_queued--; granted = false
    :: slot_st[0] == S_GRANTED -> slot_st[0] = S_CANCELLED; granted = true;
       lead = slot_lead[0]; g = slot_gen[0]
    :: slot_st[0] == S_NONE || slot_st[0] == S_OK -> granted = false /* nothing to cancel */
    fi
  }
  if
  :: granted -> lead_end(lead, C_GRANTED, g, won)
  :: else -> skip
  fi;
  in_op--;
  done++
}

init {
  byte c;
  atomic {
    c = 0;
    do
    :: c < N_CELLS -> cell_st[c] = C_AVAILABLE; fbit[c] = true; c++
    :: else -> break
    od;
    run Dispatcher();
    run Pair(1);
    run Pair(2);
    run Single();
    run Canceller()
  }
}
