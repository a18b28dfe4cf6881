/*
 * The segment's layout: every structure that lives in shared memory, and the
 * function that computes where each one sits from a validated configuration.
 *
 * Rules (docs/architecture.md): offsets from the segment base, never pointers;
 * every structure that different processes write starts on its own cache
 * line; sizes are fixed by static asserts so the documented size formula holds.
 */
#ifndef SHMS_SHM_LAYOUT_H
#define SHMS_SHM_LAYOUT_H

#include <stdint.h>

#include "shmsched.h"

#define SHMS__MAGIC          0x44454843534d4853ull /* "SHMSCHED" little-endian */
#define SHMS__LAYOUT_VERSION 1u
#define SHMS__LINE           64u

#define SHMS_MIN_DURATION_NS (1000ull * 1000)                    /* 1ms */
#define SHMS_MAX_DURATION_NS (24ull * 3600 * 1000 * 1000 * 1000) /* 24h */

#define SHMS__ALIGNED __attribute__((aligned(SHMS__LINE)))

/* Where one configured class lives. All zero for an unconfigured class. */
struct shms__class_desc {
  uint64_t ctl_off;      /* struct shms__class_ctl */
  uint64_t cells_off;    /* cells_count x struct shms__cell */
  uint64_t slots_off;    /* slots_count x slot_size (struct shms__slot + payload) */
  uint64_t tenants_off;  /* tenants_count x struct shms__tenant */
  uint64_t tbuckets_off; /* tbuckets_count x uint32_t: tenant name hash chains */
  uint64_t abuckets_off; /* abuckets_count x uint32_t: activation id hash chains */
  uint32_t cells_count;
  uint32_t slots_count;
  uint32_t slot_size;
  uint32_t tenants_count;
  uint32_t tbuckets_count;
  uint32_t abuckets_count;
};

/* The segment header, at offset 0. */
struct shms__header {
  uint64_t magic; /* stored last at create: a half-made segment never attaches */
  uint32_t layout_version;
  uint32_t header_size;
  uint64_t total_size;
  uint64_t incarnation;     /* random; tells one creation of NAME from the next */
  uint64_t created_unix_ns; /* CLOCK_REALTIME */
  uint32_t state;           /* shms_segment_state_t; changed by CAS */
  uint32_t class_mask;      /* bit c set iff class c is configured */
  uint64_t procs_off;       /* procs_count x struct shms__proc */
  uint32_t procs_count;
  uint32_t reserved0;
  struct shms__class_desc classes[SHMS_CLASS_COUNT];
  shms_config config; /* the validated configuration, copied verbatim */
};

/*
 * Per-class control block. Each line is written by different parties, so
 * each gets its own cache line.
 */
struct shms__class_ctl {
  /* Line 0: the fast-path word, free cells (low 32 bits) | queued requests (high 32). */
  uint64_t fast SHMS__ALIGNED;
  /* Line 1: the dispatcher baton (0 free, else the holder's owner id). */
  uint64_t baton SHMS__ALIGNED;
  uint64_t dispatch_pending; /* set by whoever could not take the baton */
  /* Line 2: the observation seqlock and the counters it covers. */
  uint32_t obs_seq SHMS__ALIGNED; /* a ck_sequence */
  uint32_t reserved1;
  uint64_t granted;
  uint64_t rejected;
  uint64_t cancelled;
  uint64_t expired;
  uint64_t total_wait_ns;
  uint64_t max_wait_ns;
  /* Line 3: sequences and the tenant ring, written only under the baton. */
  uint64_t request_seq SHMS__ALIGNED; /* next request sequence; never wraps */
  uint64_t token_seq;                 /* next lease token; exhaustion fails closed */
  uint64_t token_limit;               /* tokens at or past this fail (tests lower it) */
  uint32_t ring_head;                 /* tenant index + 1, 0 for empty */
  uint32_t ring_tail;
  uint32_t ring_len;
  uint32_t tenant_free; /* free-list head of tenant records, index + 1 */
  uint32_t slot_free;   /* free-list head of request slots, index + 1 */
  uint32_t reserved2;
  /* Lines 4..7 are left for the scheduler's growth without a formula change. */
  uint8_t reserved3[4 * SHMS__LINE] SHMS__ALIGNED;
};

/* One cell of capacity. Own cache line: acquirers on different cells must not collide. */
struct shms__cell {
  uint64_t word;       /* authoritative state word (docs/protocol.md, cells) */
  uint64_t generation; /* bumped on every release */
  uint64_t token;      /* the current lease's token */
  uint64_t lease_start_ns;
  uint32_t holder;       /* owner id of the lease holder or bound worker */
  uint32_t reason;       /* quarantine reason code */
  uint32_t worker_futex; /* a bound worker sleeps here */
  uint32_t job_slot;     /* worker mode: slot index + 1 of the running job */
  uint8_t reserved[16];
} SHMS__ALIGNED;

/* One request slot: a queued request, its grant, and in worker mode its payload. */
struct shms__slot {
  uint32_t state; /* authoritative state word and the waiter's futex word */
  uint32_t flags;
  uint64_t seq; /* request sequence: tells this occupant from earlier ones */
  uint64_t enqueue_ns;
  uint64_t deadline_ns; /* 0: none */
  int32_t priority;
  uint32_t owner;                              /* owner id of the enqueuing process */
  uint32_t tenant;                             /* tenant record index */
  uint32_t cell;                               /* granted cell */
  uint32_t heap_parent, heap_left, heap_right; /* per-tenant order */
  uint32_t arr_prev, arr_next;                 /* per-tenant arrival list */
  uint32_t act_next;                           /* activation hash chain */
  uint32_t payload_len;
  uint32_t result_len;
  int32_t result_status;
  uint32_t reserved0;
  char activation[32];
  uint8_t reserved[8];
} SHMS__ALIGNED;

/* A tenant record: present while the tenant has queued work or active leases. */
struct shms__tenant {
  char name[SHMS_TENANT_MAX + 1];
  uint32_t hash_next; /* bucket chain, index + 1 */
  uint32_t ring_prev, ring_next;
  uint32_t queued;
  uint32_t active;
  uint32_t heap_root;
  uint32_t arr_head, arr_tail;
  uint64_t granted;
  uint64_t total_wait_ns;
  uint64_t max_wait_ns;
  uint8_t reserved[40];
} SHMS__ALIGNED;

/* One attached process. Byte `offset of this entry` of the file is its liveness lock. */
struct shms__proc {
  uint32_t state; /* SHMS__PROC_FREE / _CLAIMING / _LIVE */
  uint32_t gen;   /* bumped on every claim: owner ids name (index, gen) */
  int32_t pid;
  uint32_t role;
  uint64_t start_time; /* /proc/PID/stat starttime, ticks since boot */
  uint64_t attached_unix_ns;
  uint8_t reserved[32];
} SHMS__ALIGNED;

enum { SHMS__PROC_FREE = 0, SHMS__PROC_CLAIMING = 1, SHMS__PROC_LIVE = 2 };

/* Cell states (the low 4 bits of shms__cell.word). */
enum {
  SHMS__CELL_AVAILABLE = 1,
  SHMS__CELL_LEASED = 2,
  SHMS__CELL_QUARANTINED = 3,
  SHMS__CELL_OFFLINE = 4,
};
#define SHMS__CELL_STATE(w) ((uint32_t)((w)&0xfu))

/* The file byte that marks the supervisor as running (inside the header, never an entry). */
#define SHMS__LOCK_SUPERVISOR 1

_Static_assert(sizeof(struct shms__class_ctl) == 8 * SHMS__LINE, "class ctl is 8 lines");
_Static_assert(sizeof(struct shms__cell) == SHMS__LINE, "cell is one line");
_Static_assert(sizeof(struct shms__slot) == 2 * SHMS__LINE, "slot header is two lines");
_Static_assert(sizeof(struct shms__tenant) == 2 * SHMS__LINE, "tenant is two lines");
_Static_assert(sizeof(struct shms__proc) == SHMS__LINE, "proc entry is one line");

/* The layout computed from a configuration. */
struct shms__layout {
  uint64_t header_size; /* sizeof(header) rounded up to a line */
  uint64_t total_size;
  uint64_t procs_off;
  uint32_t procs_count;
  uint32_t class_mask;
  struct shms__class_desc classes[SHMS_CLASS_COUNT];
};

/* Fill out from cfg (fields are assumed in range); returns total size, 0 on overflow. */
uint64_t shms__layout_compute(const shms_config *cfg, struct shms__layout *out);
/* Total bytes of cfg's segment, 0 on overflow. */
uint64_t shms__layout_size(const shms_config *cfg);
/* The smallest power of two >= n (n >= 1). */
uint32_t shms__pow2_at_least(uint32_t n);

/* Typed access to the segment at base; callers have bounds-checked the indexes. */
#define SHMS__AT(base, off, type) ((type *)((char *)(base) + (off)))

#endif
