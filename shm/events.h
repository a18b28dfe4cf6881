/*
 * The segment's event ring: a flight recorder of recent events (docs/protocol.md, "The event
 * ring"). Below the scheduler: core/ decides what to record (core/report.c); this file only
 * stores and reads records.
 *
 * Concurrency contract. Any number of writers, in any processes, and any number of readers,
 * which may map the segment read-only. A writer is wait-free apart from a bounded retry: it
 * claims a position with one fetch-and-add on the ring's head, then writes the record under a
 * per-record sequence word (a seqlock of one record, as ck_sequence but never waited on): odd
 * while written, even and naming the position once valid. A writer killed at any step leaves
 * a record whose word is odd or names another position: readers skip it, and the next writer
 * to reach that slot takes it over. Nobody waits for anybody, so a dead writer stops nobody.
 * A writer overtaken by a whole lap of the ring while it writes (stopped that long) loses its
 * record; the checksum keeps a record two such writers mixed from being read as valid.
 */
#ifndef SHMS_SHM_EVENTS_H
#define SHMS_SHM_EVENTS_H

#include <stdint.h>

#include "layout.h"

/* The ring's head: one line, written by every writer's fetch-and-add. */
struct shms__ev_head {
  uint64_t pos SHMS__ALIGNED; /* positions claimed so far: the next record's position */
  uint32_t count;             /* records in the ring (a power of two), as laid out */
  uint32_t reserved;
};

/*
 * One record, two lines. seq is 0 (never written), 2p+1 (position p being written) or 2p+2
 * (position p, valid). Every other word is written between the two and covered by check.
 */
struct shms__ev_rec {
  uint64_t seq SHMS__ALIGNED;
  uint64_t mono_ns;
  uint64_t wall_ns;
  uint64_t ticket_seq; /* the request's sequence, 0 for none */
  uint64_t what;       /* kind (8) | class + 1 (8) | reserved (16) | reason (32, as int32) */
  uint64_t where;      /* cell + 1 (32) | pid (32) */
  uint64_t slot;       /* the request's slot index + 1 (32) | the pid's namespace (32) */
  uint64_t value;      /* per kind (shms_event_record.value) */
  uint64_t tenant[SHMS__NAME_WORDS];
  uint64_t writer; /* the pid of the process that wrote it (32) | reserved (32) */
  /* The position it was written for, under the checksum: two writers a lap apart, both past
   * their claim, may each write all the fields, and the one that lost the slot last; the
   * record is then whole but another position's (found by tests/model/events.pml). */
  uint64_t position;
  uint64_t uid;   /* the request's or lease's owner's uid + 1 (32), 0: none | reserved (32) */
  uint64_t check; /* shms__ev_check over the words above, from mono_ns on */
};

_Static_assert(sizeof(struct shms__ev_head) == SHMS__LINE, "event head is one line");
_Static_assert(sizeof(struct shms__ev_rec) == 2 * (size_t)SHMS__LINE, "an event is two lines");

#define SHMS__EV_WORDS (sizeof(struct shms__ev_rec) / sizeof(uint64_t))

/* A record's contents as its writer gives them (seq and check are the ring's). */
struct shms__ev {
  uint32_t kind; /* shms_event_kind_t */
  int32_t cls;   /* -1: none */
  int32_t cell;  /* -1: none */
  int32_t pid;   /* 0: unknown */
  /* The pid namespace pid is a number of (its nsfs inode, which the kernel keeps below 2^32); 0:
   * the writer's own when pid is the writer's, else unknown. */
  uint32_t pidns;
  int32_t reason;
  uint32_t slot_ref; /* slot index + 1, 0: no request */
  uint32_t uid_ref;  /* the request's or lease's owner's effective uid + 1, 0: none */
  uint64_t ticket_seq;
  uint64_t value;
  uint64_t tenant[SHMS__NAME_WORDS]; /* NUL-padded name, all 0 for none */
};

/* A process's view of the ring: set at attach from the validated layout. count 0: no ring. */
struct shms__evlog {
  struct shms__ev_head *head;
  struct shms__ev_rec *recs;
  uint32_t count;
  int32_t pid;    /* this process's, recorded as each record's writer */
  uint32_t pidns; /* its pid namespace (struct shms__ev.pidns) */
};

/* Fill log from the validated layout of the segment at base (no ring: count 0). */
void shms__evlog_init(struct shms__evlog *log, char *base, const struct shms__layout *l);

/*
 * Record e, timed now to the kernel's tick (CLOCK_MONOTONIC_COARSE, and the wall time from it:
 * a record's position orders events exactly, its times are for people, and the precise clock
 * would double a record's cost). Never waits; a no-op when the segment has no ring. Safe from
 * any thread of any process that maps the segment writable.
 */
void shms__ev_put(const struct shms__evlog *log, const struct shms__ev *e);

/* What shms__ev_get found at a position. */
enum shms__ev_got {
  SHMS__EV_VALID = 0,   /* out holds the record */
  SHMS__EV_PENDING = 1, /* being written now (or its writer died writing it) */
  SHMS__EV_LOST = 2,    /* overwritten by a later lap, never written, or torn */
};
/* Copy the record at position pos into out (seq and check included) if it is valid there. */
enum shms__ev_got shms__ev_get(const struct shms__evlog *log, uint64_t pos,
                               struct shms__ev_rec *out);
/* The next position to be claimed (every earlier one was claimed). */
uint64_t shms__ev_end(const struct shms__evlog *log);
/* The checksum of a record's words (from mono_ns to the word before check). */
uint64_t shms__ev_check(const struct shms__ev_rec *r);

#endif
