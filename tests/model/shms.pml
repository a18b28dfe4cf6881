/*
 * shms.pml -- the part of shmsched's scheduling protocol both models share:
 * the words in the segment and the code's operations on them, step by step.
 * baton.pml and grant.pml include it after choosing bounds and variants; see
 * their headers for what each checks, and docs/testing.md for how to run them.
 *
 * How the model corresponds to the code
 * -------------------------------------
 * One lease-mode class of N_CELLS cells and N_SLOTS request slots. Every word
 * the code shares between processes is a global here, changed in ONE atomic
 * step exactly where the code makes one atomic access (a load, a store, a
 * CAS, a fetch-and-add); what the code does between two such accesses is a
 * separate step, so spin interleaves the processes wherever the hardware
 * could. Memory is sequentially consistent: the model takes the barriers the
 * code names (kick's full fence before it looks at the baton, run's atomic
 * exchange that lets the baton go before the re-check, the store fences
 * before publication) as doing their job; baton.pml's RECHECK_BEFORE_RELEASE
 * variant shows what the exchange's full barrier is for.
 *
 *  model                     code (shm/layout.h names the fields)
 *  slot_w[i]                 shms__slot.word: state (low 4 bits), SLEEPING 16,
 *                            INDEXED 32, COLLECTED 64, reason (R_*), and the
 *                            occupant's sequence above bit 16 (the code's high
 *                            half). LOW(w) is the futex word (the low half).
 *  slot_seq/_cell/_gen[i]    shms__slot.seq, .cell, .generation
 *  cell_w[c]                 shms__cell.word: state, generation
 *  cell_slot[c]              shms__cell.slot (slot index + 1 while GRANTED)
 *  fbit[], fast_queued       the fast word (ctl->fast) of a class of at most 32
 *                            cells: its map of free cells and the queued count;
 *                            one CAS changes both (a larger class counts its
 *                            free cells and claims one with a CAS of its own:
 *                            not modelled)
 *  freebit[], used           the free-slot bitmap (sfree) and ctl->used
 *  sattn[]                   the slots' attention bitmap (hbm_take: lowest)
 *  baton                     ctl->baton: 0 free, else the holder's _pid + 1
 *  linked[], nlinked         the index, touched only by the baton holder;
 *                            nlinked > 0 stands for ctl->ring_len > 0
 *  infutex[i]                the kernel's futex queue on slot i's word
 *
 *  inline / proctype         code
 *  futex_wait, futex_wake    shm/futex.c (FUTEX_WAIT_BITSET, FUTEX_WAKE)
 *  raw_cas, slot_cas         ck_pr_cas_64_value; shms__slot_cas (core/slot.c)
 *  fast_queue, fast_put      shms__fast_queue, shms__fast_put (core/cell.c)
 *  cell_take, cell_store     shms__cell_take (its CAS; its store) + shms__cell_start
 *  cell_unaccepted           shms__cell_unaccepted
 *  slot_free/_collect/       shms__slot_free, shms__slot_collect,
 *   _unindexed               shms__slot_unindexed (core/slot.c)
 *  insert, attend            insert, shms__index_attend (core/index.c)
 *  grant, dpass              grant (+ grant_lost), pass (core/dispatch.c)
 *  work_pending, baton_try,  work_pending, baton_try, run, shms__kick
 *   run_baton, kick
 *  settle                    shms__slot_settle (core/slot.c)
 *  unlink_settled            shms__unlink_settled (core/dispatch.c)
 *  sleep_on                  shms__sleep_on (client/request.c)
 *  enqueue                   shms__enqueue_slot
 *  accept, wait_req          accept, shms_wait
 *  Client                    shms_acquire (fast path take_now, else enqueue +
 *                            wait), then shms_release (client/lease.c)
 *  Canceller                 shms_cancel (client/cancel.c)
 *
 * Simplifications, each one either widening what spin explores or beside the
 * properties:
 *  - the dispatcher grants ANY linked request and a claim takes ANY AVAILABLE
 *    cell (the code's ring turn, priority and age order, and its scan from
 *    the cell hint, are among the choices spin tries);
 *  - futex_wait compares and queues in one step, as the kernel does, and only
 *    a FUTEX_WAKE unblocks it: no timeouts, no spurious wake-ups and no 200 ms
 *    poll (shms__baton_check_holder), so every wake-up must come from the
 *    protocol itself -- a waiter left asleep is a lost wake-up, never masked;
 *  - a pass never exhausts its 64-candidate budget with N_SLOTS requests, so
 *    HELP and hand_off are not modelled;
 *  - the tenant attention bitmap and tenant records, activation ids and
 *    tenant-table refusals, deadlines, drain, quarantine, token exhaustion and
 *    crash recovery are not modelled (no process dies).
 *
 * Processes: client A (ITERS_A times: acquire one lease, release it; the
 * ticket of its first enqueued request goes to the Canceller), client B (if
 * HOLD_B > 0: acquire HOLD_B leases, nested, then release them), the
 * Canceller (cancels A's first request at any moment), and with
 * DISPATCHER_PROCESS a Dispatcher that stands for every process's kicks.
 *
 * Properties, the same in both models:
 *  - no lost wake-up: every process ends. A waiter asleep on a word nobody
 *    will wake again, or a published request with a free cell that no
 *    dispatcher grants, leaves an invalid end state (pan -DSAFETY reports it);
 *  - no double grant: a request is granted at most once and settled (accepted
 *    or ended) at most once: ghost counts asserted at the deciding CAS;
 *  - no cell granted twice: a cell has at most one lease holder, a held lease
 *    is on a LEASED cell, and a GRANTED slot's cell is GRANTED and bound to
 *    that slot (Monitor, in every state; and shms_release's lease check);
 *  - cell conservation: every cell is in exactly one state by construction;
 *    the fast word never counts more free cells than are AVAILABLE (Monitor);
 *    when everyone is done every cell is AVAILABLE and counted free, nothing
 *    is queued, every slot is FREE and the baton is free (Final).
 */

#ifndef N_CELLS
#define N_CELLS 1
#endif
#ifndef N_SLOTS
#define N_SLOTS 2
#endif
#ifndef ITERS_A
#define ITERS_A 1
#endif
#ifndef HOLD_B
#define HOLD_B 1
#endif
#ifndef MAX_PASSES
#define MAX_PASSES 4 /* core/dispatch.c */
#endif
#define PASS_BUDGET 64
#define MAX_SEQ     8
#define NONE        255
#if HOLD_B > 0
#define NPROCS 3 /* A, B, Canceller */
#else
#define NPROCS 2 /* A, Canceller */
#endif

/* Slot word. */
#define S_FREE      0
#define S_CLAIMED   1
#define S_QUEUED    2
#define S_GRANTED   3
#define S_SETTLED   4
#define SLEEPING    16
#define INDEXED     32
#define COLLECTED   64
#define FLAGS       (SLEEPING | INDEXED | COLLECTED)
#define R_CANCELLED 4096
#define ST(w)       ((w) & 15)
#define LOW(w)      ((w) & 65535)
#define SEQ(w)      ((w) >> 16)
#define REASON(w)   ((w) & 61440)
#define WORD(s, r, f, st) (((s) << 16) | (r) | (f) | (st))

/* Cell word. */
#define C_AVAILABLE  1
#define C_GRANTED    2
#define C_LEASED     3
#define CST(w)       ((w) & 15)
#define CGEN(w)      ((w) >> 4)
#define CWORD(g, st) (((g) << 4) | (st))

int  slot_w[N_SLOTS];
byte slot_seq[N_SLOTS];
byte slot_cell[N_SLOTS];
byte slot_gen[N_SLOTS];
bool freebit[N_SLOTS];
bool sattn[N_SLOTS];
bool infutex[N_SLOTS];
byte used;
byte next_seq = 1;

int  cell_w[N_CELLS];
byte cell_slot[N_CELLS];
bool fbit[N_CELLS];
byte fast_queued;
byte baton;

bool linked[N_SLOTS];
byte nlinked;

/* The ticket of A's first request, for the Canceller: 0 not yet, 1 ready, 2 none. */
byte t_ready;
byte t_slot;
byte t_seq;

/* Ghosts: no code counterpart; they only state the properties. */
byte holders[N_CELLS];
byte granted_n[MAX_SEQ];
byte settled_n[MAX_SEQ];
byte done;

/* ---- what must hold in every state ---------------------------------------- */

#if N_CELLS == 1
/* A free bit only over an AVAILABLE cell: its taker alone writes that cell's word. */
#define MAP_OK     (!fbit[0] || CST(cell_w[0]) == C_AVAILABLE)
#define FREE_ANY   fbit[0]
#define FREE_ALL   fbit[0]
#define HELD_OK(c) (holders[c] <= 1 && (holders[c] == 0 || CST(cell_w[c]) == C_LEASED))
#define CELLS_OK   HELD_OK(0)
#define CELLS_FREE (CST(cell_w[0]) == C_AVAILABLE)
#elif N_CELLS == 2
#define MAP_OK     ((!fbit[0] || CST(cell_w[0]) == C_AVAILABLE) && (!fbit[1] || CST(cell_w[1]) == C_AVAILABLE))
#define FREE_ANY   (fbit[0] || fbit[1])
#define FREE_ALL   (fbit[0] && fbit[1])
#define HELD_OK(c) (holders[c] <= 1 && (holders[c] == 0 || CST(cell_w[c]) == C_LEASED))
#define CELLS_OK   (HELD_OK(0) && HELD_OK(1))
#define CELLS_FREE (CST(cell_w[0]) == C_AVAILABLE && CST(cell_w[1]) == C_AVAILABLE)
#else
#error "N_CELLS is 1 or 2"
#endif
/* A GRANTED slot's cell is GRANTED and bound to that slot. */
#define BOUND(i) (ST(slot_w[i]) != S_GRANTED || \
                  (CST(cell_w[slot_cell[i]]) == C_GRANTED && cell_slot[slot_cell[i]] == (i) + 1))
#if N_SLOTS == 1
#define SLOTS_OK   BOUND(0)
#define SLOTS_FREE (ST(slot_w[0]) == S_FREE)
#elif N_SLOTS == 2
#define SLOTS_OK   (BOUND(0) && BOUND(1))
#define SLOTS_FREE (ST(slot_w[0]) == S_FREE && ST(slot_w[1]) == S_FREE)
#else
#error "N_SLOTS is 1 or 2"
#endif
#define INVARIANT (CELLS_OK && SLOTS_OK && MAP_OK)

proctype Monitor() {
end:
  atomic { !(INVARIANT) -> assert(INVARIANT) }
}

/* ---- futex and slot words ----------------------------------------------------- */

/* FUTEX_WAIT: the kernel compares and queues in one step; only a wake unqueues. */
inline futex_wait(i, val) {
  atomic {
    if
    :: LOW(slot_w[i]) == val -> infutex[i] = true
    :: else -> skip /* EAGAIN: the word changed */
    fi
  }
  !infutex[i]
}

inline futex_wake(i) { infutex[i] = false }

/* ck_pr_cas_64_value on the slot word: on failure, exp becomes the current word. */
inline raw_cas(i, exp, want, ok) {
  atomic {
    if
    :: slot_w[i] == exp -> slot_w[i] = want; ok = true
    :: else -> exp = slot_w[i]; ok = false
    fi
  }
}

/*
 * The same CAS where it decides a request's grant (G_GRANT) or its outcome
 * (G_SETTLE): the ghost count of that request goes up in the same step and
 * must never pass 1.
 */
#define G_GRANT  1
#define G_SETTLE 2
inline ghost_cas(i, exp, want, ok, n) {
  atomic {
    if
    :: slot_w[i] == exp ->
       slot_w[i] = want;
       ok = true;
       if
       :: n == G_GRANT -> granted_n[SEQ(exp)]++; assert(granted_n[SEQ(exp)] == 1)
       :: else -> settled_n[SEQ(exp)]++; assert(settled_n[SEQ(exp)] == 1)
       fi
    :: else -> exp = slot_w[i]; ok = false
    fi
  }
}

/* shms__slot_cas's second half: a change that takes SLEEPING away wakes the sleeper. */
inline wake_if(i, exp, want, ok) {
  if
  :: ok && (exp & SLEEPING) && !(want & SLEEPING) -> futex_wake(i)
  :: else -> skip
  fi
}

inline slot_cas(i, exp, want, ok) {
  raw_cas(i, exp, want, ok);
  wake_if(i, exp, want, ok)
}

/* ---- the fast word and the cells -------------------------------------------- */

inline fast_queue(dq) {
  d_step { fast_queued = fast_queued + dq }
}

/* shms__fast_put: cell c just became AVAILABLE; its bit goes back. */
inline fast_put(c) {
  fbit[c] = true
}

/*
 * shms__cell_take's CAS: take the bit of some free cell (spin picks any; the
 * code the lowest), only while nobody queues if unqueued_only. The cell is
 * the taker's from here.
 */
inline cell_take(unqueued_only, ok, c) {
  atomic {
    if
    :: fbit[0] && (!unqueued_only || fast_queued == 0) -> c = 0; fbit[0] = false; ok = true
#if N_CELLS == 2
    :: fbit[1] && (!unqueued_only || fast_queued == 0) -> c = 1; fbit[1] = false; ok = true
#endif
    :: else -> ok = false
    fi
  }
}

/*
 * shms__cell_take's store: nobody else writes the cell meanwhile, so a plain
 * store does. A lease counts its holder in the same step.
 */
inline cell_store(st, c) {
  atomic {
    assert(CST(cell_w[c]) == C_AVAILABLE);
    cell_w[c] = CWORD(CGEN(cell_w[c]), st);
    if
    :: st == C_LEASED -> holders[c]++
    :: else -> skip
    fi
  }
}

/* shms__cell_unaccepted without its kick: GRANTED -> AVAILABLE, then free+1. ok: it did. */
inline cell_unaccepted_core(c, cw, ok) {
  cw = cell_w[c];
  do
  :: CST(cw) == C_GRANTED ->
     atomic {
       if
       :: cell_w[c] == cw -> cell_w[c] = CWORD(CGEN(cw), C_AVAILABLE); ok = true
       :: else -> cw = cell_w[c]; ok = false
       fi
     }
     if
     :: ok -> fast_put(c); break
     :: else -> skip
     fi
  :: else -> ok = false; break
  od
}

/* ---- slots -------------------------------------------------------------------- */

/* shms__slot_free: store FREE (the sequence stays), then the free bit, then used-1. */
inline slot_free(i, fw) {
  fw = slot_w[i];
  slot_w[i] = WORD(SEQ(fw), 0, 0, S_FREE);
  freebit[i] = true;
  d_step { used-- }
}

/* shms__slot_unindexed: clear INDEXED; free the slot if its waiter already collected. */
inline slot_unindexed(i, uw, ok) {
  uw = slot_w[i];
  do
  :: raw_cas(i, uw, uw & ~INDEXED, ok);
     if
     :: ok -> break
     :: else -> skip
     fi
  od;
  if
  :: uw & COLLECTED -> slot_free(i, uw)
  :: else -> skip
  fi
}

/* shms__slot_collect: set COLLECTED; free the slot unless the index still holds it. */
inline slot_collect(i, kw, ok) {
  kw = slot_w[i];
  do
  :: raw_cas(i, kw, kw | COLLECTED, ok);
     if
     :: ok -> break
     :: else -> skip
     fi
  od;
  if
  :: !(kw & INDEXED) -> slot_free(i, kw)
  :: else -> skip
  fi
}

/* ---- the index (baton holder only) ------------------------------------------ */

inline index_unlink(i) {
  d_step { linked[i] = false; nlinked-- }
}

/* insert: CAS INDEXED in (SLEEPING out, waking the enqueuer), then link it. */
inline insert(i, w, ok) {
  iseq = SEQ(w);
  do
  :: ST(w) == S_QUEUED && !(w & INDEXED) && SEQ(w) == iseq ->
     slot_cas(i, w, (w | INDEXED) & ~SLEEPING, ok);
     if
     :: ok -> break
     :: else -> skip
     fi
  :: else -> break
  od;
  if
  :: ST(w) == S_QUEUED && SEQ(w) == iseq -> d_step { linked[i] = true; nlinked++ }
  :: else -> skip
  fi
}

/* shms__index_attend: index an arrival, or unlink a settled request. */
inline attend(i, aw, ok) {
  aw = slot_w[i];
  if
  :: ST(aw) == S_QUEUED && !(aw & INDEXED) -> insert(i, aw, ok)
  :: ST(aw) == S_SETTLED && (aw & INDEXED) ->
     index_unlink(i);
     slot_unindexed(i, aw, ok)
  :: else -> skip
  fi
}

/* Every process's locals (inlines share the names). */
#define LOCALS                                                                   \
  bool got, wp, gok, ok, sok;                                                    \
  byte passes, budget, ai, pick, gr, gc, i, seq, res, c, g, aseq, iseq, q, scell;      \
  int gw, gcw, w, cw, sw, scw

/* ---- the dispatcher ------------------------------------------------------------ */

/*
 * grant: reserve a cell, claim it, bind it, unlink the request, then one CAS
 * QUEUED -> GRANTED decides against any settler. gr: 0 no free cell, 1 done.
 */
inline grant(i, gr) {
  gw = slot_w[i];
  if
  :: ST(gw) != S_QUEUED -> attend(i, gw, gok); gr = 1 /* settled meanwhile: unlink it */
  :: else ->
     cell_take(0, gok, gc);
     if
     :: !gok -> gr = 0
     :: else ->
        cell_store(C_GRANTED, gc);
        d_step { cell_slot[gc] = i + 1; slot_gen[i] = CGEN(cell_w[gc]) } /* shms__cell_start */
        slot_cell[i] = gc;
        index_unlink(i);
        gr = 1;
        do
        :: ST(gw) != S_QUEUED ->
           /* grant_lost. Its kick cannot take the baton: we hold it. */
           cell_unaccepted_core(gc, gcw, gok);
           slot_unindexed(i, gw, gok);
           gr = 2;
           break
        :: else ->
           ghost_cas(i, gw, WORD(SEQ(gw), 0, gw & FLAGS & ~(INDEXED | SLEEPING), S_GRANTED), gok,
                     G_GRANT);
           wake_if(i, gw, 0, gok);
           if
           :: gok -> break
           :: else -> skip
           fi
        od;
        if
        :: gr == 1 -> fast_queue(-1)
        :: else -> gr = 1
        fi
     fi
  fi
}

/* The request the ring head's tenant would be granted: any linked one. */
inline select_linked(pick) {
#if N_SLOTS == 1
  pick = 0
#else
  if
  :: linked[0] -> pick = 0
  :: linked[1] -> pick = 1
  fi
#endif
}

/* pass: attend the attention bits (lowest first), then grant while cells and requests last. */
inline dpass() {
  budget = PASS_BUDGET;
  do
  :: d_step {
       ai = 0;
       do
       :: ai < N_SLOTS && !sattn[ai] -> ai++
       :: else -> break
       od;
       if
       :: ai < N_SLOTS -> sattn[ai] = false
       :: else -> ai = NONE
       fi
     }
     if
     :: ai == NONE -> break
     :: else -> attend(ai, gw, gok); budget--
     fi
  od;
  do
  :: budget > 0 && nlinked > 0 ->
     select_linked(pick);
     grant(pick, gr);
     if
     :: gr == 0 -> break
     :: else -> budget--
     fi
  :: else -> break
  od
}

/* work_pending: attention bits, or a free cell with tenants in the ring. */
inline work_pending() {
  d_step {
    wp = false;
    ai = 0;
    do
    :: ai < N_SLOTS -> wp = wp || sattn[ai]; ai++
    :: else -> break
    od
  }
  if
  :: !wp && FREE_ANY -> wp = nlinked > 0
  :: else -> skip
  fi
}

/* baton_try: one non-blocking CAS 0 -> me. */
inline baton_try() {
  atomic {
    if
    :: baton == 0 -> baton = _pid + 1; got = true
    :: else -> got = false
    fi
  }
}

/* run: pass, let go, re-check for work published meanwhile, after every pass (core/dispatch.c;
 * its stops after IDLE_LIMIT idle passes in a row or RUN_LIMIT passes in all, guards against a
 * torn or corrupt segment, are beyond these bounds and not modelled; nor is hand_off). Variants, each a former version of the code: -DSTOP_AFTER_MAX_PASSES stopped after
 * MAX_PASSES passes of any kind without the re-check; -DSTOP_ON_IDLE_PASS stopped, without the
 * re-check, on a pass past MAX_PASSES that did nothing. */
inline run_baton() {
  passes = 1;
  do
  :: dpass();
#if defined(RECHECK_BEFORE_RELEASE)
     work_pending(); /* the re-check's loads pass the release store */
#endif
     baton = 0;
#if defined(NO_RECHECK)
     break
#else
     if
#if defined(STOP_AFTER_MAX_PASSES)
     :: passes >= MAX_PASSES -> break
#elif defined(STOP_ON_IDLE_PASS)
     :: budget == PASS_BUDGET && passes >= MAX_PASSES -> break /* an idle pass past the limit */
#endif
     :: else -> skip
     fi;
#if !defined(RECHECK_BEFORE_RELEASE)
     work_pending();
#endif
     if
     :: !wp -> break
     :: else -> skip
     fi;
     baton_try();
     if
     :: !got -> break
#if defined(STOP_AFTER_MAX_PASSES) || defined(STOP_ON_IDLE_PASS)
     :: got && passes < MAX_PASSES -> passes++ /* saturates: no new states past the limit */
#endif
     :: else -> skip
     fi
#endif
  od
}

#if defined(DISPATCHER_PROCESS)
/*
 * One process stands for the dispatching every process does under the baton:
 * it runs a pass whenever there is work a kick would have found. A kick is
 * then nothing. This widens the interleavings (the passes need no client to
 * be between its own steps) and leaves the baton's protocol to baton.pml.
 * A settler may still take the baton to unlink its request at once
 * (unlink_settled); the Dispatcher then waits for it to let go.
 */
#define DISPATCH_WORK (sattn[0] || sattn[N_SLOTS - 1] || (FREE_ANY && nlinked > 0))
inline kick() { skip }

proctype Dispatcher() {
  LOCALS;
end:
  do
  :: atomic { DISPATCH_WORK && baton == 0 -> baton = _pid + 1 } /* a canceller may hold it */
     dpass();
     baton = 0
  od
}
#else
/* shms__kick: take the baton with one non-blocking CAS and run, or leave it to the holder. */
inline kick() {
  baton_try();
  if
  :: got -> run_baton()
  :: else -> skip
  fi
}
#endif

/* shms__unlink_settled: unlink at once under a free baton, or leave the bit to its holder. */
inline unlink_settled(i) {
  baton_try();
  if
  :: got ->
     attend(i, scw, sok);
#if defined(DISPATCHER_PROCESS)
     baton = 0 /* the Dispatcher process stands for the run that follows in the code */
#else
     run_baton()
#endif
  :: else -> sattn[i] = true; kick()
  fi
}

/* ---- what clients and cancellers call ------------------------------------------ */

/* shms__slot_settle from QUEUED, or (mask 3) from GRANTED too. res: 1 if this call settled it. */
inline settle(i, seq, mask, reason, res) {
  sw = slot_w[i];
  res = 0;
  do
  :: SEQ(sw) != seq || !(ST(sw) == S_QUEUED || (ST(sw) == S_GRANTED && mask == 3)) -> break
  :: else ->
#if !defined(SETTLE_CELL_AFTER_CAS)
     scell = slot_cell[i]; /* read while the word still names this occupant GRANTED */
#endif
     ghost_cas(i, sw, WORD(seq, reason, sw & FLAGS & ~SLEEPING, S_SETTLED), sok, G_SETTLE);
     wake_if(i, sw, 0, sok);
     if
     :: sok -> res = 1; break
     :: else -> skip
     fi
  od;
  if
  :: res == 1 ->
     if
     :: ST(sw) == S_QUEUED ->
        fast_queue(-1);
        if
        :: sw & INDEXED -> unlink_settled(i)
        :: else -> kick()
        fi
     :: else ->
#if defined(SETTLE_CELL_AFTER_CAS)
        scell = slot_cell[i]; /* as core/slot.c reads it: after the CAS */
#endif
        cell_unaccepted_core(scell, scw, sok);
        if
        :: sok -> kick()
        :: else -> skip
        fi;
        kick()
     fi
  :: else -> skip
  fi
}

/* shms__sleep_on: announce SLEEPING with a CAS, then FUTEX_WAIT on that value. */
inline sleep_on(i, w) {
  if
  :: !(w & SLEEPING) ->
     raw_cas(i, w, w | SLEEPING, ok);
     if
     :: ok -> w = w | SLEEPING
     :: else -> skip /* it changed: look again */
     fi
  :: else -> ok = true
  fi;
  if
  :: ok -> futex_wait(i, LOW(w))
  :: else -> skip
  fi
}

/*
 * shms__enqueue_slot: claim a slot, fill it, count it queued, publish it,
 * raise its bit, kick; then wait until it is indexed (or past the queue).
 * res: 1 enqueued (i, seq), 0 queue-full.
 */
inline enqueue(i, seq, res) {
  atomic {
    if
    :: used >= N_SLOTS -> res = 0
    :: else -> used++; res = 1
    fi
  }
  if
  :: res == 1 ->
     do
     :: atomic {
#if N_SLOTS == 1
          freebit[0] -> i = 0;
#else
          if
          :: freebit[0] -> i = 0
          :: freebit[1] -> i = 1
          fi;
#endif
          freebit[i] = false
        }
        w = slot_w[i];
        if
        :: ST(w) != S_FREE -> skip /* a stale bit: drop it */
        :: else ->
           d_step { seq = next_seq; next_seq++ } /* ck_pr_faa_64(&ctl->request_seq) */
           raw_cas(i, w, WORD(seq, 0, 0, S_CLAIMED), ok);
           if
           :: ok -> break
           :: else -> skip
           fi
        fi
     od;
     atomic { slot_seq[i] = seq; slot_cell[i] = 0 } /* s->seq, then fill() */
     fast_queue(1);
     slot_w[i] = WORD(seq, 0, 0, S_QUEUED);
     sattn[i] = true;
     kick();
     do
     :: w = slot_w[i];
        if
        :: (ST(w) == S_QUEUED && (w & INDEXED)) || ST(w) == S_GRANTED ||
           (ST(w) == S_SETTLED && REASON(w) == 0) -> break
        :: ST(w) == S_SETTLED -> assert(false) /* refusals are not modelled */
        :: else ->
           sleep_on(i, w);
           kick() /* woken before its poll fell due */
        fi
     od
  :: else -> skip
  fi
}

/* accept: one CAS wins the slot against any canceller, then the cell becomes ours. res 1: done. */
inline accept(i, w, res) {
  aseq = slot_seq[i];
  d_step { c = slot_cell[i]; g = slot_gen[i] } /* after the load fence */
  ghost_cas(i, w, WORD(aseq, 0, COLLECTED, S_SETTLED), ok, G_SETTLE);
  if
  :: !ok -> res = 0
  :: else ->
     cw = cell_w[c];
     do
     :: CST(cw) == C_GRANTED ->
        atomic {
          if
          :: cell_w[c] == cw -> cell_w[c] = CWORD(g, C_LEASED); holders[c]++; ok = true
          :: else -> cw = cell_w[c]; ok = false
          fi
        }
        if
        :: ok -> break
        :: else -> skip
        fi
     :: else -> d_step { holders[c]++ }; break /* the code hands the lease out all the same */
     od;
     slot_free(i, w); /* a lease-mode request gives its slot back */
     res = 1
  fi
}

/* shms_wait until the request is accepted (res 1) or has ended (res 0). */
inline wait_req(i, seq, res) {
  do
  :: w = slot_w[i];
     assert(SEQ(w) == seq && slot_seq[i] == seq && ST(w) >= S_QUEUED && !(w & COLLECTED));
     if
     :: ST(w) == S_SETTLED -> slot_collect(i, w, ok); res = 0; break
     :: ST(w) == S_GRANTED ->
        accept(i, w, res);
        if
        :: res == 1 -> break
        :: else -> skip
        fi
     :: else -> sleep_on(i, w) /* wait_queued */
     fi
  od
}

/* shms_release: present the exact lease; generation+1; its free bit; kick if requests queue. */
inline release(c, g) {
  cw = cell_w[c];
  assert(CST(cw) == C_LEASED && CGEN(cw) == g); /* else lease-mismatch: the lease we hold */
  atomic {
    assert(cell_w[c] == cw);
    cell_w[c] = CWORD(g + 1, C_AVAILABLE);
    holders[c]--
  }
  d_step { fbit[c] = true; q = fast_queued }
  if
  :: q != 0 -> kick()
  :: else -> skip
  fi
}

/* iters times: shms_acquire hold leases (nested), then release them. pub: A, the cancelled one. */
proctype Client(byte iters; byte hold; bool pub) {
  LOCALS;
  byte it, h, nheld;
  byte lc[2];
  byte lg[2];
  do
  :: it < iters ->
     h = 0;
     do
     :: h < hold ->
#if defined(NO_FAST_PATH)
        ok = false; /* a class with tenant-max-active: acquire always enqueues */
#else
        cell_take(1, ok, c);
#endif
        if
        :: ok -> /* take_now */
           cell_store(C_LEASED, c);
           g = CGEN(cell_w[c]);
           res = 1
        :: else ->
           enqueue(i, seq, res);
           if
           :: pub && t_ready == 0 ->
              d_step {
                if
                :: res == 1 -> t_slot = i; t_seq = seq; t_ready = 1
                :: else -> t_ready = 2
                fi
              }
           :: else -> skip
           fi;
           if
           :: res == 1 -> wait_req(i, seq, res)
           :: else -> skip
           fi
        fi;
        if
        :: pub && t_ready == 0 -> t_ready = 2 /* the fast path: no ticket to cancel */
        :: else -> skip
        fi;
        if
        :: res == 1 -> d_step { lc[nheld] = c; lg[nheld] = g; nheld++ }
        :: else -> skip
        fi;
        h++
     :: else -> break
     od;
     do
     :: nheld > 0 -> nheld--; release(lc[nheld], lg[nheld])
     :: else -> break
     od;
     it++
  :: else -> break
  od;
  atomic { done++ }
}

/* shms_cancel of A's first request, from another process, at any moment. */
proctype Canceller() {
  LOCALS;
  t_ready != 0;
  if
  :: t_ready == 1 ->
     do
     :: w = slot_w[t_slot];
        if
        :: SEQ(w) != t_seq || slot_seq[t_slot] != t_seq || ST(w) < S_QUEUED -> break /* not-found */
        :: ST(w) == S_SETTLED -> break /* already ended */
        :: else ->
           settle(t_slot, t_seq, 3, R_CANCELLED, res);
           if
           :: res == 1 -> break
           :: else -> skip
           fi
        fi
     od
  :: else -> skip
  fi;
  atomic { done++ }
}

/* Everyone is done: everything is back where it started. */
proctype Final() {
#if defined(DISPATCHER_PROCESS)
  atomic { done == NPROCS && baton == 0 && !(DISPATCH_WORK) };
#else
  done == NPROCS;
#endif
  assert(CELLS_FREE && FREE_ALL && fast_queued == 0 && used == 0);
  assert(SLOTS_FREE && nlinked == 0 && baton == 0)
}

init {
  byte k;
  atomic {
    do
    :: k < N_SLOTS -> freebit[k] = true; k++
    :: else -> break
    od;
    k = 0;
    do
    :: k < N_CELLS -> cell_w[k] = CWORD(1, C_AVAILABLE); fbit[k] = true; k++
    :: else -> break
    od;
    run Monitor();
    run Client(ITERS_A, 1, true);
#if HOLD_B > 0
    run Client(1, HOLD_B, false);
#endif
    run Canceller();
#if defined(DISPATCHER_PROCESS)
    run Dispatcher();
#endif
    run Final()
  }
}
