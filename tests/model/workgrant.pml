/*
 * workgrant.pml -- a worker class's grant against its worker's look at the
 * cell, checked with spin: the dispatcher's grant (core/dispatch.c: grant,
 * grant_lost), the worker's take (worker/worker.c: shms_worker_take, start,
 * not_yet_granted, the undo of a torn grant), its completion (finish), a
 * cancel of a granted job (core/slot.c: shms__slot_settle) and the cell going
 * back (core/cell.c: shms__cell_return), with slot reuse: a client with two
 * jobs in flight collects one and submits the next into the same slot, as
 * perf/bench_worker.c does (docs/protocol.md, "Workers"; issue 12 point 9).
 *
 * Bounds: one worker cell, two request slots, three jobs submitted two deep
 * (submit 0, submit 1, wait 0, submit 2, wait 1, wait 2); the Canceller cancels
 * job 0 if it finds it granted. One Dispatcher process stands for every kick
 * (baton.pml checks the baton itself); the worker reads the baton as the code
 * does. That abstraction is sound only while its guard is the code's
 * work_pending (core/dispatch.c), the re-check a baton holder makes for the
 * kicks that found the baton held: attention bits, or a free cell with tenants
 * in the ring. It is, for a worker class: no overtaking (WOKEN, whose absence
 * from that re-check overtake.pml's NO_WOKEN_RECHECK shows was a lost wake-up,
 * never arises), and each maker of that work kicks (an enqueue, a worker's
 * bind, a finished job with requests queued, a returned grant, a dead worker's
 * cell gone offline with its job queued again). Nobody dies: a dispatcher is never dead here, so a worker that undoes a
 * grant must only ever undo one that is already dead (settled by a canceller
 * between its two steps), never a live one.
 *
 * Words as in shms.pml: slot_w (state, reason, the occupant's sequence), the
 * slot's granted generation (slot_gen); the cell word (state, generation) and
 * the cell's slot field (cell_slot, slot index + 1); the free count (fcount:
 * worker classes count idle workers); the baton. Sequentially consistent: the
 * code's fences are taken as doing their job.
 *
 * Checks (run_spin.sh): safety -- a GRANTED slot's cell is GRANTED to it at its
 * generation (Monitor); every job ends and is collected, so every process ends
 * (a client waiting for ever on a grant whose cell went back is an invalid end
 * state); at the end the cell is AVAILABLE and counted free once. cycles -- no
 * livelock.
 *
 * Variants that must FAIL (former versions of the code):
 *  -DSTALE_SLOT  not_yet_granted as it was: the cell's slot field read before
 *                the look at the baton, the undo a CAS from the word read then,
 *                to AVAILABLE at the same generation. The worker reads the cell
 *                GRANTED while the dispatcher is between marking it and naming
 *                the slot, so it reads the slot of the cell's previous job;
 *                the client has collected that job and submitted a new one into
 *                the same slot (QUEUED). The grant completes, the baton comes
 *                free, the cell word is still the one read: the worker "undoes"
 *                the completed grant. The job's slot stays GRANTED for ever,
 *                its client asleep on it, the worker idle (the hang seen once
 *                in bench_worker under heavy load).
 *  -DSAME_GEN    the fixed look at the slot, but a returned grant keeps its
 *                generation (as the code did): a grant cancelled, its cell
 *                granted again to a job of the same client, reads as the same
 *                word, so a worker that read the first grant undoes the second
 *                while it is in progress.
 */
#define N_SLOTS 2
#define N_JOBS  3

#define S_FREE    0
#define S_CLAIMED 1
#define S_QUEUED  2
#define S_GRANTED 3
#define S_SETTLED 4
#define S_RUNNING 5
#define CANCELLED 16
#define ST(w)     ((w) & 15)
#define SEQ(w)    ((w) >> 5)
#define WORD(s, r, st) (((s) << 5) | (r) | (st))

#define C_AVAILABLE 1
#define C_GRANTED   2
#define C_LEASED    3
#define CST(w)      ((w) & 15)
#define CGEN(w)     ((w) >> 4)
#define CWORD(g, st) (((g) << 4) | (st))

int  slot_w[N_SLOTS];
byte slot_gen[N_SLOTS];
bool sattn[N_SLOTS];
bool linked[N_SLOTS];
byte nlinked;
byte fast_queued;

int  cell_w;
byte cell_slot;
byte fcount;
byte baton;

/* Job j's slot and sequence (j + 1), for the Canceller. */
byte job_slot[N_JOBS];
bool job_ready[N_JOBS];
byte done;
bool wbusy; /* ghost: the worker is between its look at the cell and its next idle */

/* ---- what must hold in every state ----------------------------------------- */

/* A GRANTED slot's cell is GRANTED to it at the generation the slot was given. */
#define BOUND(i) (ST(slot_w[i]) != S_GRANTED || \
                  (CST(cell_w) == C_GRANTED && cell_slot == (i) + 1 && CGEN(cell_w) == slot_gen[i]))
#define INVARIANT (BOUND(0) && BOUND(1) && (fcount == 0 || CST(cell_w) == C_AVAILABLE) && fcount <= 1)

proctype Monitor() {
end:
  atomic { !(INVARIANT) -> assert(INVARIANT) }
}

/* ---- the cell going back ------------------------------------------------------ */

/*
 * shms__cell_return: the grant whose cell word was exactly cw is dead; its cell is free again
 * at the next generation, and counted free. Exactly one of several returners wins the CAS.
 */
inline cell_return(cw, ok) {
  atomic {
    if
    :: cell_w == cw ->
#if defined(SAME_GEN) || defined(STALE_SLOT)
       cell_w = CWORD(CGEN(cw), C_AVAILABLE);
#else
       cell_w = CWORD(CGEN(cw) + 1, C_AVAILABLE);
#endif
       ok = true
    :: else -> ok = false
    fi
  }
  if
  :: ok -> d_step { fcount++ }
  :: else -> skip
  fi
}

/* ---- the dispatcher ------------------------------------------------------------ */

/* grant: reserve the idle worker, mark the cell, name the slot, unlink, then one CAS on the slot. */
inline grant(i) {
  gw = slot_w[i];
  if
  :: ST(gw) != S_QUEUED -> d_step { linked[i] = false; nlinked-- }
  :: else ->
     d_step { fcount-- }
     atomic { assert(CST(cell_w) == C_AVAILABLE); cell_w = CWORD(CGEN(cell_w), C_GRANTED); gcw = cell_w }
     cell_slot = i + 1;                    /* shms__cell_start */
     slot_gen[i] = CGEN(gcw);              /* s->generation (s->cell is the one cell) */
     d_step { linked[i] = false; nlinked-- } /* shms__index_unlink */
     do
     :: ST(gw) != S_QUEUED -> cell_return(gcw, gok); break /* grant_lost */
     :: else ->
        atomic {
          if
          :: slot_w[i] == gw -> slot_w[i] = WORD(SEQ(gw), 0, S_GRANTED); gok = true
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

proctype Dispatcher() {
  int gw, gcw;
  bool gok;
  byte i;
end:
  do
  :: atomic { (sattn[0] || sattn[1] || (fcount > 0 && nlinked > 0)) && baton == 0 -> baton = 1 }
     /* attend: index the arrivals */
     i = 0;
     do
     :: i < N_SLOTS ->
        if
        :: sattn[i] ->
           sattn[i] = false;
           if
           :: ST(slot_w[i]) == S_QUEUED && !linked[i] -> d_step { linked[i] = true; nlinked++ }
           :: else -> skip
           fi
        :: else -> skip
        fi;
        i++
     :: else -> break
     od;
     /* grants, to any indexed request */
     do
     :: nlinked > 0 && fcount > 0 ->
        if
        :: linked[0] -> grant(0)
        :: linked[1] -> grant(1)
        fi
     :: else -> break
     od;
     baton = 0
  od
}

/* ---- the worker -------------------------------------------------------------- */

/* shms__slot_settle from GRANTED (the cell and generation read before the CAS), then the return. */
inline cancel_granted(i, seq) {
  sw = slot_w[i];
  do
  :: ST(sw) != S_GRANTED || SEQ(sw) != seq -> break
  :: else ->
     sgen = slot_gen[i];
     atomic {
       if
       :: slot_w[i] == sw -> slot_w[i] = WORD(seq, CANCELLED, S_SETTLED); sok = true
       :: else -> sw = slot_w[i]; sok = false
       fi
     }
     if
     :: sok ->
#if defined(SAME_GEN) || defined(STALE_SLOT)
        /* as the code was: back from any GRANTED word */
        atomic {
          if
          :: CST(cell_w) == C_GRANTED -> scw = cell_w
          :: else -> scw = 0
          fi
        }
        if
        :: scw != 0 -> cell_return(scw, sok)
        :: else -> skip
        fi;
#else
        cell_return(CWORD(sgen, C_GRANTED), sok);
#endif
        break
     :: else -> skip
     fi
  od
}

/*
 * not_yet_granted: the cell reads GRANTED (word cw) but the slot it names is not granted to it.
 * Only a grant no live dispatcher is making may be undone: look at the baton, then (the fix)
 * at the slot the cell names now, and undo only a grant that no slot holds.
 */
inline not_yet_granted(cw, ri) {
  if
  :: baton != 0 ->
     /* A grant in progress: the code yields and looks again; nothing it reads differs until
      * the baton comes free or the cell changes, so the model waits for that (no busy loop). */
     (baton == 0 || cell_w != cw)
  :: else ->
#if defined(STALE_SLOT)
     if
     :: ST(slot_w[ri]) == S_QUEUED && cell_w == cw -> cell_return(cw, wok)
     :: else -> skip
     fi
#else
     ref = cell_slot;
     if
     :: ref >= 1 && ST(slot_w[ref - 1]) == S_GRANTED && slot_gen[ref - 1] == CGEN(cw) ->
        skip /* a live grant: start it */
     :: else -> cell_return(cw, wok)
     fi
#endif
  fi
}

proctype Worker() {
  int cw, sw, lw;
  byte ref, ri;
  bool wok;
end:
  do
  :: atomic { CST(cell_w) == C_GRANTED -> cw = cell_w; wbusy = true } /* idle() until a grant */
     ref = cell_slot;
     if
     :: ref == 0 -> cell_slot != 0 /* not named yet: the code looks again until it is */
     :: else ->
        ri = ref - 1;
        sw = slot_w[ri];
        if
        :: ST(sw) == S_GRANTED -> /* start: one CAS on the slot, then the cell */
           atomic {
             if
             :: slot_w[ri] == sw -> slot_w[ri] = WORD(SEQ(sw), 0, S_RUNNING); wok = true
             :: else -> wok = false
             fi
           }
           if
           :: wok ->
              atomic { assert(CST(cell_w) == C_GRANTED); cell_w = CWORD(CGEN(cell_w), C_LEASED) }
              /* finish: the result, then the slot, then the cell (generation + 1) and its count */
              slot_w[ri] = WORD(SEQ(sw), 0, S_SETTLED);
              atomic { assert(CST(cell_w) == C_LEASED); cell_w = CWORD(CGEN(cell_w) + 1, C_AVAILABLE) }
              d_step { fcount++ }
           :: else -> skip
           fi
        :: else -> not_yet_granted(cw, ri)
        fi
     fi;
     wbusy = false
  od
}

/* ---- the client and the canceller ------------------------------------------- */

inline submit(j) {
  atomic {
    if
    :: ST(slot_w[0]) == S_FREE -> i = 0
    :: ST(slot_w[1]) == S_FREE -> i = 1
    fi;
    slot_w[i] = WORD(j + 1, 0, S_CLAIMED)
  }
  d_step { fast_queued++ }
  slot_w[i] = WORD(j + 1, 0, S_QUEUED);
  sattn[i] = true;
  d_step { job_slot[j] = i; job_ready[j] = true }
}

/* shms_wait_result: until the job ends, then collect it (a granted slot is not indexed: freed). */
inline wait_job(j) {
  i = job_slot[j];
  ST(slot_w[i]) == S_SETTLED;
  slot_w[i] = WORD(SEQ(slot_w[i]), 0, S_FREE)
}

proctype Client() {
  byte i;
  submit(0);
  submit(1);
  wait_job(0);
  submit(2);
  wait_job(1);
  wait_job(2);
  atomic { done++ }
}

/* shms_cancel of job 0 if it is granted when the canceller looks (otherwise it does nothing). */
proctype Canceller() {
  int sw, scw;
  byte sgen;
  bool sok;
#if !defined(NO_CANCEL)
  job_ready[0];
  cancel_granted(job_slot[0], 1);
#endif
  atomic { done++ }
}

proctype Final() {
  atomic { done == 2 && baton == 0 && !wbusy && !sattn[0] && !sattn[1] };
  assert(CST(cell_w) == C_AVAILABLE && fcount == 1 && fast_queued == 0 && nlinked == 0);
  assert(ST(slot_w[0]) == S_FREE && ST(slot_w[1]) == S_FREE)
}

init {
  atomic {
    cell_w = CWORD(1, C_AVAILABLE);
    fcount = 1;
    run Monitor();
    run Dispatcher();
    run Worker();
    run Client();
    run Canceller();
    run Final()
  }
}
