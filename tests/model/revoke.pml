/*
 * revoke.pml -- grant revocation against acceptance and cancellation, checked with spin
 * (core/revoke.c: revoke_cell, shms__revoke_due, shms__revoke_unpark; client/request.c:
 * accept_op, shms_wait; core/slot.c: shms__slot_settle; core/cell.c: shms__cell_return;
 * docs/protocol.md, "Revocation").
 *
 * Bounds: one cell of a lease class, two request slots. Request W (the late waiter) starts
 * granted the cell; its waiter accepts it at any moment, or finds it revoked (QUEUED+LATE),
 * unparks it and waits to be granted again. Request B queues behind it and is what a sweep
 * revokes for. A canceller cancels W at any moment. One Dispatcher process stands for every
 * baton holder: it indexes arrivals, grants the free cell to an indexed request, and sweeps (a
 * grant may be due at any moment: the clock is left to spin), at most MAX_REVOKE revocations
 * so that the search is bounded. Sequentially consistent; the code's fences taken as working.
 *
 * Checks: safety -- a GRANTED slot's cell is GRANTED to it at its generation; a request is
 * settled at most once; an acceptor that won its slot always finds its cell GRANTED at its
 * generation (else the code fails `invariant-violated` rather than hand out the lease); at
 * most one holder, on a LEASED cell; everyone ends, the cell AVAILABLE and counted once.
 * No cycle check: where the code's sweep leaves an acceptor between its two CASes until the
 * next due time, the model's dispatcher may sweep again at once, a loop the code does not have.
 *
 * Variants that must FAIL:
 *  -DRETURN_FIRST  the sweep returns the cell before it wins the slot: an acceptor that wins
 *                  the slot meanwhile finds its cell AVAILABLE (or granted to B).
 *  -DNO_EPOCH      a revoked request granted again gets the same slot word as its first
 *                  grant: a canceller that read the first grant's cell and generation, then
 *                  waited, settles the second grant with one CAS and returns the first's cell
 *                  (a no-op, the return being exact), so the second's cell stays GRANTED to a
 *                  settled request (found by this model: the reason byte now counts
 *                  revocations while a request waits).
 */
#define MAX_REVOKE 2

#define S_FREE    0
#define S_QUEUED  2
#define S_GRANTED 3
#define S_SETTLED 4
#define LATE      16
#define INDEXED   32
#define CANCELLED 64
#define EPOCH     384 /* the reason byte's revocation count: two bits suffice at these bounds */
#define EPOCH1    128
#define ST(w)     ((w) & 15)
#define SEQ(w)    ((w) >> 10)
#define WORD(s, f, st) (((s) << 10) | (f) | (st))

#define C_AVAILABLE 1
#define C_GRANTED   2
#define C_LEASED    3
#define CST(w)      ((w) & 15)
#define CGEN(w)     ((w) >> 4)
#define CWORD(g, st) (((g) << 4) | (st))

int  slot_w[2];
byte slot_gen[2];
bool sattn[2];
int  cell_w;
byte cell_slot;
byte fcount;
byte fast_queued;
byte baton;

/* Ghosts. */
byte holders;
byte settled_n[3];
byte revokes;
byte done;

#define BOUND(i) (ST(slot_w[i]) != S_GRANTED || \
                  (CST(cell_w) == C_GRANTED && cell_slot == (i) + 1 && CGEN(cell_w) == slot_gen[i]))
#define INVARIANT (BOUND(0) && BOUND(1) && holders <= 1 && (holders == 0 || CST(cell_w) == C_LEASED) \
                   && (fcount == 0 || CST(cell_w) == C_AVAILABLE) && fcount <= 1)

proctype Monitor() {
end:
  atomic { !(INVARIANT) -> assert(INVARIANT) }
}

/* shms__cell_return: exact, from the grant made at gen, to the next generation; then counted. */
inline cell_return(gen, ok) {
  atomic {
    if
    :: cell_w == CWORD(gen, C_GRANTED) -> cell_w = CWORD(gen + 1, C_AVAILABLE); ok = true
    :: else -> ok = false
    fi
  }
  if
  :: ok -> d_step { fcount++ }
  :: else -> skip
  fi
}

/* A CAS that decides a request's outcome: counted, never twice. */
inline settle_cas(i, exp, want, ok) {
  atomic {
    if
    :: slot_w[i] == exp -> slot_w[i] = want; ok = true; settled_n[SEQ(exp)]++;
       assert(settled_n[SEQ(exp)] == 1)
    :: else -> exp = slot_w[i]; ok = false
    fi
  }
}

/* ---- the dispatcher: index, grant, sweep ------------------------------------------------ */

inline grant(i) {
  gw = slot_w[i];
  if
  :: ST(gw) != S_QUEUED || (gw & LATE) -> d_step { slot_w[i] = slot_w[i] & ~INDEXED } /* unlinked */
  :: else ->
     d_step { fcount-- }
     atomic { assert(CST(cell_w) == C_AVAILABLE); cell_w = CWORD(CGEN(cell_w), C_GRANTED); gcw = cell_w }
     cell_slot = i + 1;
     slot_gen[i] = CGEN(gcw);
     do
     :: ST(gw) != S_QUEUED -> cell_return(CGEN(gcw), gok); break /* grant_lost */
     :: else ->
        atomic {
          if
          :: slot_w[i] == gw -> slot_w[i] = WORD(SEQ(gw), gw & EPOCH, S_GRANTED); gok = true
          :: else -> gw = slot_w[i]; gok = false
          fi
        }
        if
        :: gok -> d_step { fast_queued-- }; break
        :: else -> skip
        fi
     od
  fi
}

/* revoke_cell, for the one cell while GRANTED and (spin decides) due. */
inline sweep() {
  scw = cell_w;
  if
  :: CST(scw) == C_GRANTED ->
     ref = cell_slot;
     ssw = slot_w[ref - 1];
     if
     :: ST(ssw) == S_GRANTED && slot_gen[ref - 1] == CGEN(scw) ->
#if defined(RETURN_FIRST)
        cell_return(CGEN(scw), sok);
#endif
        d_step { fast_queued++ }
        atomic {
          if
          :: slot_w[ref - 1] == ssw ->
#if defined(NO_EPOCH)
             slot_w[ref - 1] = WORD(SEQ(ssw), LATE, S_QUEUED);
#else
             slot_w[ref - 1] = WORD(SEQ(ssw), LATE | (((ssw & EPOCH) + EPOCH1) & EPOCH), S_QUEUED);
#endif
             sok = true; revokes++
          :: else -> sok = false
          fi
        }
        if
        :: sok ->
#if !defined(RETURN_FIRST)
           cell_return(CGEN(scw), sok)
#else
           skip
#endif
        :: else -> d_step { fast_queued-- }
        fi
     :: ST(ssw) == S_SETTLED && !(ssw & CANCELLED) && slot_gen[ref - 1] == CGEN(scw) ->
        skip /* an acceptor between its two CASes */
     :: else -> cell_return(CGEN(scw), sok) /* no slot holds it */
     fi
  :: else -> skip
  fi
}

proctype Dispatcher() {
  int gw, gcw, scw, ssw;
  bool gok, sok;
  byte ref, i;
end:
  do
  :: atomic { (sattn[0] || sattn[1] || (fcount > 0 && ((slot_w[0] & INDEXED) || (slot_w[1] & INDEXED)))
               || (fcount == 0 && CST(cell_w) == C_GRANTED && revokes < MAX_REVOKE &&
                   ((slot_w[0] & INDEXED) || (slot_w[1] & INDEXED)))) && baton == 0 -> baton = 1 }
     i = 0;
     do
     :: i < 2 ->
        if
        :: sattn[i] ->
           sattn[i] = false;
           atomic {
             if
             :: ST(slot_w[i]) == S_QUEUED && !(slot_w[i] & (INDEXED | LATE)) -> slot_w[i] = slot_w[i] | INDEXED
             :: else -> skip
             fi
           }
        :: else -> skip
        fi;
        i++
     :: else -> break
     od;
     if
     :: fcount > 0 && (slot_w[0] & INDEXED) -> grant(0)
     :: fcount > 0 && (slot_w[1] & INDEXED) -> grant(1)
     :: fcount == 0 && revokes < MAX_REVOKE && ((slot_w[0] & INDEXED) || (slot_w[1] & INDEXED)) -> sweep()
     :: else -> skip
     fi;
     baton = 0
  od
}

/* ---- waiters ------------------------------------------------------------------------- */

/* accept_op, then shms_release: res 1 done, 0 lost the slot (look again). */
inline accept(i, w, res) {
  g = slot_gen[i];
  settle_cas(i, w, WORD(SEQ(w), 0, S_SETTLED), ok);
  if
  :: !ok -> res = 0
  :: else ->
     atomic {
       assert(CST(cell_w) == C_GRANTED && CGEN(cell_w) == g); /* never a lease on another cell */
       cell_w = CWORD(g, C_LEASED); holders++
     }
     slot_w[i] = WORD(SEQ(w), 0, S_FREE);
     atomic { cell_w = CWORD(g + 1, C_AVAILABLE); holders-- }
     d_step { fcount++ }
     res = 1
  fi
}

/* shms_wait until accepted or ended. */
inline wait_req(i) {
  do
  :: w = slot_w[i];
     if
     :: ST(w) == S_SETTLED -> slot_w[i] = WORD(SEQ(w), 0, S_FREE); break /* collected */
     :: ST(w) == S_GRANTED ->
        accept(i, w, res);
        if
        :: res -> break
        :: else -> skip
        fi
     :: ST(w) == S_QUEUED && (w & LATE) -> /* shms__revoke_unpark */
        atomic {
          if
          :: slot_w[i] == w -> slot_w[i] = w & ~LATE; ok = true
          :: else -> ok = false
          fi
        }
        if
        :: ok -> sattn[i] = true
        :: else -> skip
        fi
     :: else -> slot_w[i] != w /* sleep until the word changes */
     fi
  od
}

proctype Waiter(byte i) {
  int w;
  bool ok;
  byte g, res;
  wait_req(i);
  atomic { done++ }
}

/* shms_cancel of W: settle from QUEUED or GRANTED (the cell's generation read before the CAS). */
proctype Canceller() {
  int w;
  bool ok;
  byte g;
  w = slot_w[0];
  do
  :: ST(w) != S_QUEUED && ST(w) != S_GRANTED -> break
  :: else ->
     g = slot_gen[0];
     settle_cas(0, w, WORD(SEQ(w), CANCELLED, S_SETTLED), ok);
     if
     :: ok ->
        if
        :: ST(w) == S_GRANTED -> cell_return(g, ok)
        :: else -> d_step { fast_queued-- }
        fi;
        break
     :: else -> skip
     fi
  od;
  atomic { done++ }
}

proctype Final() {
  atomic { done == 3 && baton == 0 && !sattn[0] && !sattn[1] };
  assert(CST(cell_w) == C_AVAILABLE && fcount == 1 && fast_queued == 0 && holders == 0);
  assert(ST(slot_w[0]) == S_FREE && ST(slot_w[1]) == S_FREE)
}

init {
  atomic {
    /* W (slot 0, sequence 1) granted the cell at generation 1; B (slot 1, sequence 2) queued. */
    cell_w = CWORD(1, C_GRANTED);
    cell_slot = 1;
    slot_gen[0] = 1;
    slot_w[0] = WORD(1, 0, S_GRANTED);
    slot_w[1] = WORD(2, 0, S_QUEUED);
    sattn[1] = true;
    fast_queued = 1;
    run Monitor();
    run Dispatcher();
    run Waiter(0);
    run Waiter(1);
    run Canceller();
    run Final()
  }
}
