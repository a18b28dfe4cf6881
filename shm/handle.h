/* The process-local handle to an attached segment. */
#ifndef SHMS_SHM_HANDLE_H
#define SHMS_SHM_HANDLE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "class.h"
#include "events.h"
#include "layout.h"

struct shms__file; /* this process's one registration per segment file (segment.c) */
struct shms;

/*
 * What an operation that finds class k frozen by a dead freezer (or held frozen by nobody) runs
 * to finish that recovery before it goes on (core/quiesce.c). The layer above supplies it at
 * attach (client/attach.c: core/repair.c's shms__recover_class), as it supplies at detach what a
 * leaving process settles: the segment and quiescence lie below the recovery they trigger.
 */
typedef void shms__finish_fn(struct shms *h, const struct shms__cls *k);

/* A thread of this process asleep in a wait of a handle (client/interrupt.c): the futex word it
 * sleeps on and the bit of it that says it sleeps. On the sleeper's stack. */
struct shms__sleeper {
  uint64_t *word64; /* a slot word (its low half is the futex), or NULL */
  uint32_t *word32; /* else a worker futex */
  uint64_t bit;     /* the sleeping bit */
  struct shms__sleeper *next;
};

/*
 * The adaptive spin of one kind of wait (client/spin.c): process-local, racy by design (the
 * threads of a process share it, so every access is atomic), never in shared memory.
 */
struct shms__spin {
  uint32_t fails; /* spins in a row that ended without the word changing (capped) */
  uint32_t skip;  /* waits left that sleep at once, backing off after fails */
};

struct shms {
  struct shms__file *file;
  char *base; /* the mapping; every offset in the header is < size */
  uint64_t size;
  struct shms__header *hdr;
  unsigned flags; /* SHMS_ATTACH_* and internal SHMS__ATTACH_* */
  pid_t pid;      /* the attaching process: handles do not survive fork */
  uint32_t self;  /* our process-table index if this handle registered, else UINT32_MAX */
  int fd;         /* a descriptor of the file, owned by file; never close it */
  uint32_t owner; /* our owner id (SHMS__OWNER), 0 for observers */
  uint64_t incarnation;
  shms_config config; /* the validated configuration: limits never come from shared memory */
  struct shms__layout layout; /* where everything lies, computed from config, never re-read */
  struct shms__cls cls[SHMS_CLASS_COUNT]; /* id -1 for classes not configured */
  struct shms__evlog events;              /* the event ring; count 0 for none */
  /* When this process's waiters next check on the class's dispatcher (real clock, ns): kept
   * per handle, not per call, so waits in short slices still get their checks. */
  uint64_t poll_due[SHMS_CLASS_COUNT];
  /* The dead owner whose process entry this handle's registration took over (the table was
   * full), until what it held is settled (client/attach.c); 0 for none. */
  uint32_t took_over;
  /* Where this handle's next look for dead holders starts, per class (core/recover_dead.c). */
  uint32_t holder_look[SHMS_CLASS_COUNT];
  struct shms__proc *proc; /* our process entry (operation marks and counts); NULL for observers */
  /* Our threads' marks are plain stores (the entry's SHMS__MARKS_PLAIN), kept beside proc, on
   * the line every operation reads. */
  uint32_t marks_plain;
  /* shms_interrupt: while set, this handle's waits return SHMS_ETIMEDOUT; the sleepers listed
   * are woken when it is set. */
  uint32_t interrupted;
  pthread_mutex_t sleepers_lock;
  struct shms__sleeper *sleepers;
  /* Spinning before sleeping (client/spin.c), per class: [0] a request waiting to be indexed,
   * [1] waiting for its grant or its job's result. Plus this handle's threads spinning now. */
  struct shms__spin spin[SHMS_CLASS_COUNT][2];
  uint32_t spinning;
  uint64_t spin_won, spin_lost; /* spins that saw the word change, spins that ran out */
  shms__finish_fn *finish;      /* NULL only for admin handles, which never enter an operation */
  /* Prepared requests (client/prepared.c): this handle's number in the process (never reused)
   * and the key of their check word, drawn at attach. */
  uint64_t prepared_id, prepared_key[2];
};

/* Internal attach flag: writable mapping without registering (destroy, repair tools). */
#define SHMS__ATTACH_ADMIN (1u << 16)

/* SHMS_EINVAL unless h is usable by the calling process. */
int shms__handle_check(const struct shms *h);

/*
 * This process's entry in h's table, UINT32_MAX if it holds none; pass it as
 * `self` to the liveness checks of proc.h.
 */
uint32_t shms__self_index(const struct shms *h);

/* shms_attach below the scheduler: the handle's operations finish a dead freezer's recovery with
 * finish (NULL for a handle that never enters an operation: observers, admin handles). */
int shms__segment_attach(const char *name, unsigned flags, shms__finish_fn *finish,
                         struct shms **out);

/*
 * What a process leaving the segment must settle of its own (the layer above supplies it: the
 * recovery of what owner held, core/recover.c); contained as shms__recover_owner's. 1 when all
 * is settled; 0 when some was left (a class held still too long): the process then leaves its
 * entry as a dead process's, for recovery to settle the rest.
 */
typedef int shms__leave_fn(struct shms *h, uint32_t owner, int contained);
/* shms_detach below the scheduler: when h is the process's last handle on its segment file,
 * leave(h, owner, contained) runs, unless NULL, before the process unregisters (or, if leave
 * left some behind, abandons its entry). Frees h. */
int shms__segment_detach(struct shms *h, shms__leave_fn *leave);

/* The class's descriptor, or NULL (with a detail) if the segment does not configure c. */
const struct shms__class_desc *shms__class_desc(const struct shms *h, int c);
/* The class view, or NULL (with an invalid-argument detail) if c is not configured. */
struct shms__cls *shms__class(struct shms *h, int c);
/* SHMS_EINVAL unless h may take part in scheduling (registered, not an observer). */
int shms__handle_check_member(const struct shms *h);

#endif
