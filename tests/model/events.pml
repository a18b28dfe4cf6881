/*
 * events.pml -- the event ring's writers and reader, checked with spin (shm/events.c:
 * shms__ev_put, claim, shms__ev_get; docs/protocol.md, "The event ring").
 *
 * Bounds: a ring of ONE record, so that every position laps the one before it; three writers,
 * each writing one record, each of which may die (SIGKILL) before any of its steps; one reader
 * that reads the ring's window twice while they run. A record's fields are two words, each
 * written with the writer's id, and the position it was written for; its checksum is modelled
 * as a third word, the writer's id and position (a perfect checksum: the real one is a weighted
 * sum that a mix of two records passes only if their differences cancel, see shms__ev_check).
 * Sequentially consistent; the code's store and load fences taken as working.
 *
 * Checks: a record the reader accepts is whole -- both fields by one writer, and that writer's
 * position the one read (never a mix of two records, never another lap's); and no writer waits
 * for another, dead or alive (every end state valid: writers end or die, the reader ends).
 *
 * Variants that must FAIL:
 *  -DNO_CHECK     readers trust the sequence word alone: a writer stopped between its claim and
 *                 its fields for a whole lap writes a field into the next lap's finished
 *                 record, which then reads as valid, mixed.
 *  -DNO_POSITION  the record does not carry its position (the first version): two writers a
 *                 lap apart both write every field, the older last, and the younger's CAS
 *                 marks valid a record that is whole but the older position's (found by this
 *                 model).
 */
#define WRITERS 3

byte pos;     /* positions claimed */
byte seq;     /* 0, 2p+1 (p being written), 2p+2 (p valid) */
byte f0, f1;  /* the fields: a writer's id (1..WRITERS) */
byte fp;      /* the position the writer wrote the record for */
byte chk;     /* the checksum, abstracted: id * 16 + position, as the writer computed it */
byte pos_of[WRITERS + 1]; /* which position each writer claimed */

proctype Writer(byte id) {
  byte p, s;
  if :: goto dead :: skip fi;
  d_step { p = pos; pos++; pos_of[id] = p }
  if :: goto dead :: skip fi;
  /* claim: from an older lap's value to 2p+1; a later lap's value: drop the record */
  s = seq;
claim:
  if
  :: s >= 2 * p + 1 -> goto dead
  :: else ->
     atomic {
       if
       :: seq == s -> seq = 2 * p + 1
       :: else -> s = seq; goto claim
       fi
     }
  fi;
  if :: goto dead :: skip fi;
  f0 = id;
  if :: goto dead :: skip fi;
  f1 = id;
  fp = p;
  chk = id * 16 + p;
  if :: goto dead :: skip fi;
  /* valid only if still ours */
  atomic { if :: seq == 2 * p + 1 -> seq = 2 * p + 2 :: else -> skip fi }
dead:
  skip
}

proctype Reader() {
  byte round, q, end, s1, s2, a, b, c, r;
  for (round : 1 .. 2) {
    end = pos;
    if
    :: end == 0 -> skip
    :: else ->
       q = end - 1; /* the window of a ring of one record */
       s1 = seq;
       if
       :: s1 == 2 * q + 2 ->
          a = f0; b = f1; r = fp; c = chk;
          s2 = seq;
          if
#if defined(NO_CHECK)
          :: s2 == s1 ->
#elif defined(NO_POSITION)
          :: s2 == s1 && a == c / 16 && b == c / 16 ->
#else
          :: s2 == s1 && a == c / 16 && b == c / 16 && r == c % 16 && r == q ->
#endif
             assert(a == b);             /* whole: one writer's */
             assert(a != 0 && pos_of[a] == q); /* and of the position read */
          :: else -> skip /* changed while copied, or torn: lost */
          fi
       :: else -> skip /* pending, or another lap's: not this position's */
       fi
    fi
  }
}

init {
  atomic {
    run Writer(1);
    run Writer(2);
    run Writer(3);
    run Reader()
  }
}
