/*
 * keyed.pml -- the waiters word of a keyed job and its writers, checked with spin
 * (core/joined.c: shms__join, shms__share_close, shms__joiner_leave, drop_joiner,
 * shms__keyed_unwaited, shms__job_abandon, release_entry, shms__joins_recount;
 * core/owned.c: shms__owner_drop, shms__owned_leave; client/keyed.c: find_live, supersede,
 * shms__job_collect; client/cancel.c: leave_keyed, cancel_op; core/recover.c: settle_request;
 * worker/worker.c: start, complete; docs/protocol.md, "Keyed jobs").
 *
 * Bounds: one slot. Submitter S publishes keyed job 1 (slot sequence 1, waiters (1, OWNER));
 * joiners J1 and J2 each look for the key's live job, record their share and CAS the word.
 * Each waiter then either waits for the outcome and collects it (its share goes), or cancels:
 * the last share closes the job (CLOSED) and cancels it, an earlier one leaves. A worker runs
 * whatever is queued and completes it, dropping the result when nobody waits; a superseder
 * settles a queued job of the key once; once the slot is free, submitter R claims it again
 * for its own keyed job (sequence 2, another key): a slow joiner or leaver of job 1 must not
 * touch it. One of S, J1, J2 may die at any step (at most one death): a death outside an
 * operation is recovered in an operation (release_entry for a joiner, settle_request for the
 * submitter); a death inside one leaves the class torn, and the frozen recovery recounts
 * (shms__joins_recount) with every live process out of its operation, then releases what
 * is left as the clean recovery would.
 *
 * Each CAS loop whose test reads only the word it changes is one atomic step (a retry
 * re-reads the same word); loads of different words (the waiters word, the slot's word, its
 * sequence, a process's records) are separate steps. The slot's queue index and the
 * dispatcher's grant are left out: the worker takes a queued job directly, and a settled,
 * collected slot is free at once.
 *
 * Checks (safety): a join's CAS succeeds only on the job it looked up, never on the slot's
 * next job; the word is closed, and the job abandoned, only by the holder of the last share
 * of a live waiter; a slot is freed only when no live waiter still holds a share of it;
 * each waiter that collects reads the outcome of the job it joined, and the waiters of one
 * job read the same outcome; R's job is never ended by anything done for job 1; whenever no
 * process is inside an operation and no death is unrecovered, the word counts exactly the
 * live shares (OWNER for a live submitter's, the count for the joiners' records); every
 * process ends and the slot ends free (no job left that nobody waits for).
 *
 * Options: -DTWO_JOINERS runs J2 as well (without it J2 counts as done); -DNO_DEATH leaves the
 * Reaper out; -DNO_SUPERSEDE the superseder. The default suite runs one joiner with a death,
 * and two joiners without a death nor a supersede: both together are beyond a minute.
 *
 * Variants that must FAIL (each the code as it was; found by this model):
 *  -DCOLLECT_UNCHECKED  the collection after a settle sets COLLECTED whatever the word says:
 *                      the worker that settled a gone waiter's job and the last leaver (or a
 *                      recovery) that found it settled both collect it, and the slot is freed
 *                      twice.
 *  -DABANDON_SLOT_SEQ  a dead joiner's recovery abandons the job under the slot's current
 *                      sequence, read after its share's CAS, instead of the sequence its record
 *                      names: the worker completes the unwaited job and frees the slot, R
 *                      claims and queues job 2, and the recovery ends R's job owner-lost.
 *  -DUNWAITED_UNCLOSED the worker's "nobody waits" (a dead submitter, no joiner) leaves the word
 *                      open: a joiner's CAS, reading the dead submitter's OWNER as a waiter,
 *                      counts on a job the worker then ends and frees.
 */

/* slot states (shm/layout.h) */
#define FREE     0
#define CLAIMED  1
#define QUEUED   2
#define RUNNING  3
#define SETTLED  4
/* outcomes */
#define NONE       0
#define OK         1
#define CANCELLED  2
#define SUPERSEDED 3
#define OWNERLOST  4

#define S  0
#define J1 1
#define J2 2
#define NP 3 /* the processes that may die */

/* the slot */
byte sseq;             /* slot.seq */
byte sst;              /* state of slot.word */
byte wdseq;            /* the sequence in slot.word */
byte reason;
bool coll;             /* COLLECTED */
byte skey;             /* 1: S's key; 2: R's */
/* slot.waiters */
byte wseq;
bool wown, wleft, wclosed;
byte wcnt;
/* proc entries' joins[]: the sequence recorded (0: free) and its LEFT bit */
byte rec[NP];
bool recleft[NP];

/* operations, deaths, recovery */
bool inop[NP];
bool frozen;
bool dead[NP];
bool torn[NP];
bool recovered[NP];
byte deaths;

/* ghosts: who truly holds a share of job 1, what each waiter read */
bool share[NP];
byte outcome[NP];
bool done[NP];
bool published;
byte r_outcome;
bool r_done;

#define ENTER(me) atomic { !frozen -> inop[me] = 1 }
#define LEAVE(me) atomic { inop[me] = 0; quiet_check() }

/* A live share other than me's of job q. */
#define OTHERS(me, q) ((me != S && share[S] && !dead[S] && q == 1) || \
                       (me != J1 && share[J1] && !dead[J1] && q == 1) || \
                       (me != J2 && share[J2] && !dead[J2] && q == 1))

inline quiet_check() {
  /* No operation under way and every death recovered: the word says who waits. */
  if
  :: !inop[S] && !inop[J1] && !inop[J2] && (!dead[S] || recovered[S]) &&
     (!dead[J1] || recovered[J1]) && (!dead[J2] || recovered[J2]) && sseq == 1 && wseq == 1 &&
     sst >= QUEUED && !(sst == SETTLED && coll) ->
    assert(wcnt == (rec[J1] == 1 && !recleft[J1] && !dead[J1]) +
                   (rec[J2] == 1 && !recleft[J2] && !dead[J2]));
    assert(wcnt == (share[J1] && !dead[J1]) + (share[J2] && !dead[J2]));
    assert(wown == (share[S] && !dead[S]))
  :: else
  fi
}

/* shms__slot_free */
inline slot_free() {
  assert(!OTHERS(NP, wdseq));
  sst = FREE
}

/* shms__slot_settle for queued jobs of sequence q (the CAS checks the word's sequence). */
inline settle_queued(q, why, ok) {
  atomic {
    if
    :: sst == QUEUED && wdseq == q -> sst = SETTLED; reason = why; ok = 1
    :: else -> ok = 0
    fi
  }
}

/* shms__slot_collect after a settle: the CAS sets COLLECTED only on the settled, uncollected
 * job of sequence q, and whoever sets it frees the slot (no index here). */
inline collect(q) {
#ifdef COLLECT_UNCHECKED
  atomic { assert(sst == SETTLED && wdseq == q && !coll); coll = 1; slot_free() }
#else
  atomic {
    if
    :: sst == SETTLED && wdseq == q && !coll -> coll = 1; slot_free()
    :: else
    fi
  }
#endif
}

/* shms__job_abandon(seq q): queued it ends; running, its worker drops the result; ended and
 * not collected, it is collected. */
inline job_abandon(q, why) {
  assert(q != 2); /* nothing done for job 1 reaches job 2 */
  settle_queued(q, why, ok);
  if
  :: ok -> collect(q)
  :: else ->
    atomic {
      if
      :: sst == RUNNING && wdseq == q -> coll = 1
      :: else
      fi
    };
    if
    :: atomic { sst == SETTLED && wdseq == q && !coll } -> collect(q)
    :: atomic { !(sst == SETTLED && wdseq == q && !coll) }
    fi
  fi
}

/* drop_joiner(q): one CAS; last if nobody waits after it. */
inline drop_joiner(me, q, last) {
  atomic {
    if
    :: wseq == q && wcnt > 0 ->
      wcnt--; last = !wown && wcnt == 0;
      if
      :: me < NP -> share[me] = 0
      :: else
      fi;
      if
      :: last -> assert(!OTHERS(NP, q))
      :: else
      fi
    :: else -> last = 0
    fi
  }
}

/* shms__owner_drop(q, left) */
inline owner_drop(q, left, last) {
  atomic {
    if
    :: wseq != q -> last = 0
    :: wseq == q && !wown -> last = wcnt == 0
    :: else ->
      wown = 0; wleft = left; share[S] = 0; last = wcnt == 0;
      if
      :: last -> assert(!OTHERS(NP, q))
      :: else
      fi
    fi
  }
}

/* shms__share_close: the caller's share is the last: CLOSED, nobody joins any more. */
inline share_close(me, q, closed) {
  atomic {
    if
    :: wseq == q && ((me == S && wown && wcnt == 0) || (me != S && !wown && wcnt == 1)) ->
      assert(!OTHERS(me, q)); wclosed = 1; closed = 1
    :: else -> closed = 0
    fi
  }
}

/* cancel_op on a job that is not settled, by a waiter: leave, or close and cancel it. A
 * running job's cancel is a flag its worker reads: the worker may still complete it. */
inline cancel(me, q, last, closed, ok, left) {
  left = 0;
  if
  :: atomic { sst == SETTLED || wdseq != q } /* ended meanwhile: nothing to cancel */
  :: atomic { sst != SETTLED && wdseq == q } ->
    share_close(me, q, closed);
    if
    :: closed -> settle_queued(q, CANCELLED, ok)
    :: else ->
      left = 1;
      if
      :: me == S -> owner_drop(q, 1, last)
      :: else ->
        atomic { rec[me] == q && !recleft[me] -> recleft[me] = 1 }; /* shms__joiner_leave */
        drop_joiner(me, q, last)
      fi;
      if
      :: last -> job_abandon(q, CANCELLED)
      :: else
      fi
    fi
  fi
}

/* Wait for the outcome of job q, then collect it (shms__job_collect). */
inline wait_collect(me, q, last) {
  atomic { sst == SETTLED && wdseq == q -> assert(sseq == q); outcome[me] = reason };
  ENTER(me);
  if
  :: me == S -> owner_drop(q, 0, last)
  :: else -> atomic { rec[me] = 0 }; drop_joiner(me, q, last)
  fi;
  if
  :: last -> job_abandon(q, CANCELLED) /* ended: this collects it */
  :: else
  fi;
  LEAVE(me)
}

proctype Submitter() {
  bool last, closed, ok, left;
  {
    ENTER(S);
    atomic { sst == FREE -> sst = CLAIMED; sseq = 1 }; /* shms__slot_claim */
    atomic { skey = 1; wseq = 1; wown = 1; wleft = 0; wclosed = 0; wcnt = 0; share[S] = 1 };
    atomic { sst = QUEUED; wdseq = 1; reason = NONE; coll = 0; published = 1 }; /* publish */
    LEAVE(S);
    if
    :: wait_collect(S, 1, last)
    :: ENTER(S); cancel(S, 1, last, closed, ok, left); LEAVE(S);
      if
      :: !left -> wait_collect(S, 1, last) /* its share kept (the closer's too): it waits */
      :: else
      fi
    fi;
    done[S] = 1
  } unless { dead[S] }
}

proctype Joiner(byte me) {
  byte q;
  bool last, closed, ok, left;
  {
    published || dead[S];
    ENTER(me);
    /* find_live: a queued or running job of the key, its sequence read after its word */
    if
    :: atomic { (sst == QUEUED || sst == RUNNING) && skey == 1 -> q = wdseq };
      if
      :: sseq == q -> skip
      :: else -> q = 0 /* reused while we looked */
      fi
    :: atomic { !((sst == QUEUED || sst == RUNNING) && skey == 1) } -> q = 0
    fi;
    if
    :: q == 0 -> LEAVE(me); done[me] = 1; goto out /* it would queue a job of its own */
    :: else
    fi;
    rec[me] = q; recleft[me] = 0; /* the record first */
    atomic {
      if
      :: wseq == q && !wclosed && (wown || wcnt > 0) ->
        assert(sseq == q && wdseq == q && sst != FREE && sst != CLAIMED);
        wcnt++; share[me] = 1
      :: else -> q = 0
      fi
    };
    if
    :: q == 0 -> rec[me] = 0; LEAVE(me); done[me] = 1; goto out
    :: else
    fi;
    LEAVE(me);
    if
    :: wait_collect(me, q, last)
    :: ENTER(me); cancel(me, q, last, closed, ok, left); LEAVE(me);
      if
      :: !left -> wait_collect(me, q, last)
      :: else -> rec[me] = 0 /* its wait reads the LEFT record and clears it */
      fi
    fi;
    done[me] = 1;
out:
    skip
  } unless { dead[me] }
}

/* shms__keyed_unwaited(q, owner_dead): nobody waits for job q (its submitter gone or dead, no
 * joiner); the word is closed in the same CAS, so that no join slips in after the decision. */
inline unwaited(q, odead, gone) {
  atomic {
    if
    :: wseq != q -> gone = odead
    :: else ->
      gone = wcnt == 0 && (!wown || odead);
#ifndef UNWAITED_UNCLOSED
      if
      :: gone -> wclosed = 1
      :: else
      fi
#endif
    fi
  }
}

proctype Worker() {
  byte q;
  bool gone, ok;
end:
  do
  :: atomic { sst == QUEUED -> q = wdseq }; /* start: granted, its word read */
    unwaited(q, (q == 1 && dead[S]), gone);
    if
    :: gone ->
      settle_queued(q, OWNERLOST, ok);
      if
      :: ok -> collect(q) /* nobody is left to take the outcome */
      :: else
      fi
    :: else ->
      atomic {
        if
        :: sst == QUEUED && wdseq == q -> sst = RUNNING /* shms__slot_run */
        :: else -> q = 0
        fi
      };
      if
      :: q != 0 ->
        unwaited(q, (q == 1 && dead[S]), gone); /* complete: decided before the CAS */
        atomic {
          assert(sst == RUNNING && wdseq == q); /* only its worker ends a running job here */
          sst = SETTLED; reason = OK; coll = coll || gone;
          if
          :: coll -> slot_free()
          :: else
          fi
        }
      :: else
      fi
    fi
  od
}

proctype Superseder() {
  byte q;
  bool ok;
  if
  :: atomic { published && sst >= QUEUED && sst != SETTLED -> q = wdseq }; /* its word */
    if
    :: skey == 1 && sseq == q -> settle_queued(q, SUPERSEDED, ok) /* has_key, then its seq */
    :: else
    fi
  :: skip /* it found no job of the key */
  fi
}

/* Claims the slot once it is free, for a keyed job of its own, and waits for its outcome. */
proctype Reuser() {
  bool last;
  atomic { (published || dead[S]) && sst == FREE -> sst = CLAIMED; sseq = 2 };
  atomic { skey = 2; wseq = 2; wown = 1; wleft = 0; wclosed = 0; wcnt = 0 };
  atomic { sst = QUEUED; wdseq = 2; reason = NONE; coll = 0 };
  atomic { sst == SETTLED && wdseq == 2 -> r_outcome = reason };
  owner_drop(2, 0, last); /* share[S] is not R's: no ghost of job 1 changes (wseq is 2) */
  atomic { assert(last); coll = 1; slot_free() };
  r_done = 1
}

/* One death at any step of S, J1 or J2; its recovery. */
proctype Reaper() {
  byte v, j, q, n;
  bool last, ok;
  if
  :: atomic { deaths == 0 && !done[S] -> dead[S] = 1; torn[S] = inop[S]; inop[S] = 0; v = S; deaths++ }
  :: atomic { deaths == 0 && !done[J1] -> dead[J1] = 1; torn[J1] = inop[J1]; inop[J1] = 0; v = J1; deaths++ }
  :: atomic { deaths == 0 && !done[J2] -> dead[J2] = 1; torn[J2] = inop[J2]; inop[J2] = 0; v = J2; deaths++ }
  :: atomic { done[S] && done[J1] && done[J2] } -> goto out
  fi;
  if
  :: torn[v] ->
    /* recover_frozen: every live process out of its operation, none let in */
    atomic { !inop[S] && !inop[J1] && !inop[J2] -> frozen = 1 };
    d_step { /* shms__joins_recount */
      rec[v] = 0; /* drop_dead_records */
      if
      :: sst == CLAIMED -> sst = FREE /* a torn enqueue (repair_slot), freed */
      :: else
      fi;
      if
      :: sst >= QUEUED && !(sst == SETTLED && coll) && sseq == 1 ->
        n = (rec[J1] == 1 && !recleft[J1]) + (rec[J2] == 1 && !recleft[J2]);
        if
        :: wseq != sseq -> wown = 0; wleft = 0; wclosed = 0
        :: else
        fi;
        if
        :: wown && dead[S] -> wown = 0
        :: else
        fi;
        wseq = sseq; wcnt = n;
        if
        :: !wown && n == 0 ->
          assert(!OTHERS(NP, 1));
          if
          :: sst == QUEUED -> sst = SETTLED; reason = OWNERLOST; coll = 1; slot_free()
          :: sst == SETTLED -> coll = 1; slot_free() /* the slot rebuild frees it */
          :: sst == RUNNING -> coll = 1
          fi
        :: else
        fi
      :: else
      fi
    };
    frozen = 0
  :: else
  fi;
  /* shms__recover_owner, in an operation */
  atomic { !frozen -> skip };
  if
  :: v == S && published ->
    if /* settle_request: only if the word still names job 1 */
    :: atomic { sst >= QUEUED && wdseq == 1 } ->
      owner_drop(1, 0, last);
      if
      :: last -> job_abandon(1, OWNERLOST)
      :: else
      fi
    :: else
    fi
  :: v != S && rec[v] != 0 -> /* release_entry */
    q = rec[v]; ok = recleft[v];
#ifdef ABANDON_SLOT_SEQ
    rec[v] = 0;
    if
    :: !ok ->
      drop_joiner(NP, q, last);
      if
      :: last -> n = sseq; job_abandon(n, OWNERLOST)
      :: else
      fi
    :: else
    fi;
#else
    n = sseq; /* the slot's sequence, read before the share's CAS */
    rec[v] = 0;
    if
    :: !ok ->
      drop_joiner(NP, q, last);
      if
      :: last && n == q -> job_abandon(q, OWNERLOST)
      :: else
      fi
    :: else
    fi;
#endif
  :: else
  fi;
  atomic { recovered[v] = 1; quiet_check() };
out:
  skip
}

init {
  atomic {
    run Submitter();
    run Joiner(J1);
#ifdef TWO_JOINERS
    run Joiner(J2);
#else
    done[J2] = 1;
#endif
    run Worker();
#ifndef NO_SUPERSEDE
    run Superseder();
#endif
    run Reuser();
#ifndef NO_DEATH
    run Reaper()
#endif
  };
  /* everyone ends */
  (done[S] || dead[S]) && (done[J1] || dead[J1]) && (done[J2] || dead[J2]) &&
  (deaths == 0 || recovered[S] || recovered[J1] || recovered[J2]) && r_done;
  assert(r_outcome == OK);
  assert(sst == FREE);
  assert(!(done[S] && done[J1] && outcome[S] != NONE && outcome[J1] != NONE) ||
         outcome[S] == outcome[J1]);
  assert(!(done[S] && done[J2] && outcome[S] != NONE && outcome[J2] != NONE) ||
         outcome[S] == outcome[J2]);
  assert(!(done[J1] && done[J2] && outcome[J1] != NONE && outcome[J2] != NONE) ||
         outcome[J1] == outcome[J2])
}
