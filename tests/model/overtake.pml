/*
 * overtake.pml -- bounded overtaking (docs/protocol.md, "Bounded overtaking"), checked with
 * spin: the fast path's take (core/cell.c: take_mapped, shms__fast_may_take), the release's
 * put (core/cell.c: shms__cell_release, put_released) and its kick or nudge (client/lease.c,
 * core/overtake.c: shms__overtake_nudge), the pass (core/dispatch.c: grant; core/overtake.c:
 * shms__overtake_update), and a queued waiter answering HELP (client/request.c: answer_flags).
 *
 * Time is one boolean: `aged` says that the queued request W has waited the class's bound. A
 * Clock process may set it at any moment while W is queued (or never), and it stays set: the
 * clock is monotonic. A release judges the bound (reads `aged` and the oldest request the
 * dispatcher published) in one step, then frees its cell in a later one, as the code reads
 * the clock before its CAS.
 *
 * Bounds: N_CELLS cells, all held at the start by the holders H; each holder releases and
 * takes a cell again on the fast path ROUNDS times (a take that finds none gives up: the
 * holder then leaves the class), then releases for good. W enqueues at the start and waits.
 * An older request R is queued and indexed from the start, its end (no later than W's) in the
 * class's word: the pass grants it first, and its waiter takes the cell and keeps it (its
 * release would be one more holder's).
 *
 * (-DNO_OLDER leaves R out, for the larger bounds.) The end of overtaking is a value: none,
 * R's, or W's (R's the earlier). It is one word of a
 * pair with a count of arrivals; an arrival moves the end earlier if its own is, and counts
 * itself either way; the pass replaces the pair by CAS over the pair it read.
 * One Dispatcher process stands for everyone's kicks and holds the baton while it passes: a kick
 * while it does is left to its re-check, as in the code (baton.pml checks that protocol).
 *
 * Checks (tests/model/CMakeLists.txt):
 *  - no lost wake-up: W is granted whatever the interleaving (an invalid end state otherwise:
 *    W asleep with a cell free and nobody left to hand it over);
 *  - the bound: once a release has found the bound passed and made the queue strict, no
 *    acquire takes a cell before W is granted (assertion);
 *  - the bound counts from publication: whenever W is queued and has published itself
 *    (shms__overtake_arrived), the class's end of overtaking is no later than W's, whatever the
 *    passes do meanwhile, so a release can judge W's bound before any pass has indexed W or
 *    finished (assertion);
 *  - conservation: cells free + held + granted = N_CELLS (assertion);
 *  - cycles (pan -DNP -l): every execution ends.
 *
 * Variants that must FAIL:
 *  -DNO_NUDGE         a release within the bound neither kicks nor nudges: W sleeps for ever
 *                     with a free cell once the holders leave (invalid end state). A nudge
 *                     that finds W not asleep (or already asked) kicks instead.
 *  -DSTRICT_AFTER_PUT the release frees its cell with one CAS and sets STRICT with another:
 *                     an acquire takes the cell in between, past the bound (assertion).
 *  -DNO_RECHECK       the pass's holder lets go without re-checking: a release within the
 *                     bound that frees a cell while a pass decides (no cell yet) and before it
 *                     publishes W as the oldest nudges nobody, and the pass then clears WOKEN:
 *                     W sleeps with a free cell (invalid end state). Spin found this against a
 *                     first version of this model that left the re-check out.
 *  -DEND_AT_PASS      only the pass publishes the end (the design before): a release between
 *                     W's publication and the end of the pass that indexes it cannot judge W's
 *                     bound (assertion). A baton holder descheduled in that pass let acquires
 *                     overtake W for a whole time slice (docs/performance.md).
 *  -DSEEN_AT_END      the pass reads the end it may replace after taking the attention bits,
 *                     not before: a request published, and its end brought forward, in
 *                     between is neither indexed by the pass nor seen by its CAS (assertion).
 *  -DNO_CAS           the pass stores its end with a plain store: an end brought forward
 *                     during the pass is lost (assertion).
 *  -DNO_WOKEN_RECHECK the holder's re-check does not count WOKEN as work: a release sets WOKEN
 *                     and nudges (or kicks into the busy holder), an acquire takes the cell it
 *                     freed before the re-check, which then finds no cell free, and the
 *                     acquire's own release finds WOKEN set and does nothing: W sleeps with a
 *                     free cell (invalid end state). Seen in the contended benchmark as a
 *                     request left to its 1 s poll (docs/performance.md).
 *  -DNO_COUNT         an arrival whose end is no earlier than the word's leaves the pair as it
 *                     is (the design before): W arrives behind R's end during the pass that
 *                     grants R, the pass's CAS succeeds and publishes no end, and W waits
 *                     unbounded until the next pass (assertion). Traced on the machine: the
 *                     baton holder descheduled before its re-check let acquires overtake a
 *                     published request for a whole time slice (docs/performance.md).
 */
#ifndef N_CELLS
#define N_CELLS 2
#endif
#ifndef ROUNDS
#define ROUNDS 2
#endif

#define QUEUED  1
#define GRANTED 2
#define DONE    3

/* Ends of overtaking, earliest first after NONE. */
#define NONE  0
#define R_END 1
#define W_END 2
#define earlier(a, b) ((a) == NONE -> (b) : ((b) == NONE -> (a) : ((a) < (b) -> (a) : (b))))

/* The fast word. */
byte free = 0;  /* free cells */
#ifdef NO_OLDER
byte queued = 0;
#else
byte queued = 1; /* R */
#endif
bit strict = 0; /* SHMS__FAST_STRICT */
bit woken = 0;  /* SHMS__FAST_WOKEN */

/* W's slot word, and what the dispatcher publishes about the oldest request. */
byte w_state = 0;
bit w_help = 0;
bit w_sleeping = 0; /* SHMS__SLOT_SLEEPING: W asleep on its word; whoever changes it clears it */
bit w_indexed = 0;
bit published = 0; /* ctl->oldest_slot names W */
#ifdef NO_OLDER
byte endv = NONE; /* ctl->overtake_end_ns */
#else
byte endv = R_END; /* ctl->overtake_end_ns: R's from the start */
#endif
byte arrivals = 0; /* ctl->overtake_arrivals */
#define end_w (endv != NONE && endv <= W_END) /* the end is no later than W's */
bit w_attn = 0;    /* W's attention bit: published, not yet indexed */
bit w_arrived = 0; /* W has brought the end forward (or, -DEND_AT_PASS, would have) */
bit aged = 0;      /* W has waited the bound (the clock); R, older, has too by then */

/* R: queued and indexed at the start. */
#ifdef NO_OLDER
byte r_state = 0;
bit r_indexed = 0;
#else
byte r_state = QUEUED;
bit r_indexed = 1;
#endif

byte held = N_CELLS; /* leases out: the holders' */
byte granted = 0;    /* cells granted to W, not yet accepted */
byte kicks = 0;      /* passes owed */
bit busy = 0;        /* the Dispatcher holds the baton: a kick now is left to its re-check */
bit owed = 0;        /* a release made the queue strict for W: no take until W is granted */

inline conserve() { assert(free + held + granted == N_CELLS) }

/* shms__kick: a kick that finds the baton held does nothing: the holder's re-check after it lets
 * go is what must see the kicker's work (the two are ordered by full barriers: the kicker's
 * change before its look at the baton, the holder's release of the baton before its look). */
inline kick() { atomic { if :: !busy -> kicks++ :: else -> skip fi } }

/* A pass (core/dispatch.c: pass; grant; then shms__overtake_update). */
inline pass() {
#ifndef SEEN_AT_END
  /* shms__overtake_seen, before the attention bits are taken. Two loads in the code: a pair torn
   * by an arrival between them only makes the CAS below fail, so one step here. */
  atomic { cur = endv; cur_arrivals = arrivals };
#endif
  atomic {
    /* shms__index_attend: W's attention bit taken, W indexed if still queued. */
    if
    :: w_attn -> w_attn = 0; if :: w_state == QUEUED && !w_indexed -> w_indexed = 1 :: else -> skip fi
    :: else -> skip
    fi;
    /* grant: the oldest indexed request first. */
    if
    :: r_state == QUEUED && r_indexed && free > 0 ->
       free--; held++; r_state = DONE; r_indexed = 0; queued--; /* granted, and accepted */
       if :: queued == 0 -> strict = 0; woken = 0 :: else -> skip fi
    :: else ->
       if
       :: w_state == QUEUED && w_indexed && free > 0 ->
          free--; granted++; w_state = GRANTED; w_help = 0; w_sleeping = 0; queued--; owed = 0;
          if :: queued == 0 -> strict = 0; woken = 0 :: else -> skip fi
       :: else -> skip
       fi
    fi;
    conserve()
  }
  /* shms__overtake_update: CAS the end of the oldest indexed request in over the end seen
   * before the bits were taken, retrying with the earlier of its own and the word's while the
   * CAS fails. (The pass here takes every bit: its budget never runs out.) */
#ifdef SEEN_AT_END
  atomic { cur = endv; cur_arrivals = arrivals };
#endif
  atomic {
    if
    :: r_state == QUEUED && r_indexed -> computed = R_END
    :: else -> if :: w_state == QUEUED && w_indexed -> computed = W_END :: else -> computed = NONE fi
    fi;
#ifdef NO_CAS
    endv = computed;
#elif defined(NO_COUNT)
    if :: endv == cur -> endv = computed :: else -> endv = earlier(endv, computed) fi;
#else
    if
    :: endv == cur && arrivals == cur_arrivals -> endv = computed
    :: else -> endv = earlier(endv, computed)
    fi;
#endif
    published = (w_state == QUEUED && w_indexed);
    woken = 0;
    if :: !(endv != NONE && aged) -> strict = 0 :: else -> skip fi
  }
}

/* Every kick runs a pass, and the holder then lets the baton go and re-checks (core/dispatch.c:
 * run, work_pending): a free cell while the ring holds work means another pass. A release within
 * the bound does not kick; the re-check is what grants a cell it freed while a pass was deciding
 * and publishing (before the nudge could name W), as spin shows without it (-DNO_RECHECK). */
active proctype Dispatcher() {
  byte cur, cur_arrivals, computed;
end:
  do
  :: atomic { kicks > 0 -> kicks = 0; busy = 1 };
     pass();
     busy = 0;
#ifndef NO_RECHECK
     /* work_pending: attention bits, a free cell for the ring, or a nudge in flight (WOKEN). */
     atomic {
       if
       :: (free > 0 && ((w_indexed && w_state == QUEUED) || (r_indexed && r_state == QUEUED))) || w_attn -> kicks++
#ifndef NO_WOKEN_RECHECK
       :: woken -> kicks++
#endif
       :: else -> skip
       fi
     }
#endif
  od
}

active proctype Clock() {
  if
  :: atomic { w_state == QUEUED -> aged = 1 }
  :: true
  fi
}

/* A release (core/cell.c: shms__cell_release in a class that overtakes). */
inline release(judged, nudge) {
  /* The end and the clock, read before the CAS. A queued W that has published itself has its
   * end published: the bound holds from then, not from the pass that indexes W. */
  atomic {
    assert(!(w_state == QUEUED && w_arrived) || end_w);
    judged = queued > 0 && end_w && aged
  }
  atomic {
    held--; free++;
    nudge = 0;
    /* The property: a cell freed by a release that found W's bound passed is the queue's. (A
     * release that judged by R's end before W published its own made the queue R's only: once R
     * is granted, acquires may overtake until W's end is known.) */
    if :: judged && w_state == QUEUED && (w_arrived || w_indexed) -> owed = 1 :: else -> skip fi;
    if
    :: queued > 0 ->
#ifndef STRICT_AFTER_PUT
       if :: judged -> strict = 1 :: else -> skip fi;
#endif
       if :: !strict && !woken -> woken = 1; nudge = 1 :: else -> skip fi
    :: else -> skip
    fi;
    conserve()
  }
#ifdef STRICT_AFTER_PUT
  atomic { if :: judged && queued > 0 -> strict = 1 :: else -> skip fi }
#endif
  if
  :: queued > 0 && strict -> kick()
#ifndef NO_NUDGE
  :: nudge -> /* shms__overtake_nudge: HELP on the oldest request if its waiter sleeps (waking
              * it), else the release kicks */
     atomic {
       if
       :: published && w_state == QUEUED && w_sleeping && !w_help -> w_help = 1; w_sleeping = 0; nudge = 0
       :: else -> skip
       fi
     }
     if :: nudge -> kick() :: else -> skip fi
#endif
  :: else -> skip
  fi
}

/* The fast path's take (shms__fast_may_take): 1 if it took a cell. */
inline take(ok) {
  atomic {
    if
    :: free > 0 && (queued == 0 || !strict) ->
       assert(!owed); /* past the bound, a release handed its cell to the queue */
       free--; held++; ok = 1
    :: else -> ok = 0
    fi;
    conserve()
  }
}

proctype Holder() {
  byte r = 0;
  bit judged, nudge, ok;
  do
  :: r < ROUNDS ->
     release(judged, nudge);
     take(ok);
     if :: !ok -> goto gone :: else -> r++ fi
  :: else -> break
  od;
  release(judged, nudge);
gone:
  skip
}

active proctype Waiter() {
  /* shms_enqueue: counted queued (shms__fast_queue), then published with its attention bit. */
  queued++;
  atomic { w_state = QUEUED; w_attn = 1 };
  /* shms__overtake_arrived: bring the end forward to W's (a CAS that only moves it earlier),
   * counting the arrival in the pair whether or not it moved. */
#ifdef END_AT_PASS
  w_arrived = 1;
#elif defined(NO_COUNT)
  atomic { endv = earlier(endv, W_END); w_arrived = 1 };
#else
  atomic { endv = earlier(endv, W_END); arrivals++; w_arrived = 1 };
#endif
  kick();
  do
  :: atomic { w_state == GRANTED -> granted--; held++; w_state = DONE; conserve() }; break
  :: atomic { w_state == QUEUED && w_help -> w_help = 0 }; kick() /* answer HELP */
  :: atomic { w_state == QUEUED && !w_help && !w_sleeping -> w_sleeping = 1 };
     !w_sleeping /* the futex: until a waker clears the bit */
  od;
  /* The lease, then its release. */
  bit judged, nudge;
  release(judged, nudge)
}

init {
  byte i = 0;
  atomic {
    do
    :: i < N_CELLS -> run Holder(); i++
    :: else -> break
    od
  }
}
