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
#define SHMS__LAYOUT_VERSION 16u
#define SHMS__LINE           64u

#define SHMS_MIN_DURATION_NS (1000ull * 1000)                    /* 1ms */
#define SHMS_MAX_DURATION_NS (24ull * 3600 * 1000 * 1000 * 1000) /* 24h */

#define SHMS__ALIGNED __attribute__((aligned(SHMS__LINE)))
/* A class fair by time files its tenants by charge quantum in this many buckets (core/fair.c); a
 * record's heap_pos with SHMS__FAIR_FILED set names its bucket. */
#define SHMS__FAIR_BUCKETS 64u
#define SHMS__FAIR_FILED   0x80000000u

/* A tenant name kept as words (a cell's record of its lease's tenant): NUL-padded. */
#define SHMS__NAME_WORDS ((SHMS_TENANT_MAX + 1) / 8)
/* Validate name as shms_tenant_check does and pack it into words; SHMS_OK or SHMS_EINVAL. */
int shms__tenant_pack(const char *name, uint64_t words[SHMS__NAME_WORDS]);
/* A name read from shared memory (SHMS_TENANT_MAX bytes, NUL-padded) into out (SHMS_TENANT_MAX
 * + 1 bytes), NUL-terminated, anything a name may not hold shown as '?'. shms__name_clean: the
 * same on a NUL-terminated name already copied out. */
void shms__name_copy(char *out, const char *name);
void shms__name_clean(char *name);

/* Where one configured class lives. All zero for an unconfigured class. */
struct shms__class_desc {
  uint64_t ctl_off;      /* struct shms__class_ctl */
  uint64_t cells_off;    /* cells_count x struct shms__cell */
  uint64_t slots_off;    /* slots_count x slot_size (struct shms__slot + payload) */
  uint64_t tenants_off;  /* tenants_count x struct shms__tenant */
  uint64_t tbuckets_off; /* tbuckets_count x uint32_t: tenant name hash chains */
  uint64_t abuckets_off; /* abuckets_count x uint32_t: activation id hash chains */
  uint64_t sfree_off;    /* hbm over slots: free slots */
  uint64_t sattn_off;    /* hbm over slots: slots that need the dispatcher's attention */
  uint64_t tattn_off;    /* hbm over tenants: tenants that need the dispatcher's attention */
  uint64_t theap_off;    /* tenants_count x struct shms__heap_place: a class fair by time */
  uint64_t aattn_off;    /* hbm over the tenant table: records with fast-path charges (fair.h) */
  uint64_t qheld_off;    /* cells_count x uint64_t: the quotas each cell's lease holds (quota.h) */
  uint32_t cells_count;
  uint32_t slots_count;
  uint32_t slot_size;
  uint32_t tenants_count;
  uint32_t tbuckets_count;
  uint32_t abuckets_count;
};

/*
 * One named quota (docs/protocol.md, "Quotas"), a line of its own. Its units in use are counted
 * per class in 12-bit fields of one word, so that a grant in any class checks the total and takes
 * a unit with one CAS, while each field is only ever changed by operations on its own class: a
 * recovery holding that class still recounts it from the class's cells and nobody else's.
 */
struct shms__quota {
  uint32_t state; /* SHMS__QUOTA_FREE, or _LIVE once the name is whole: stored last, never undone */
  uint32_t max;   /* atomic: 1..SHMS_QUOTA_UNITS_MAX; changed by policy, read at each grant */
  uint64_t used;  /* atomic: units held, class c's in bits 12c..12c+11 (SHMS__QUOTA_FIELD) */
  char name[SHMS_TENANT_MAX + 1];
  uint64_t reserved[2];
} SHMS__ALIGNED;
enum { SHMS__QUOTA_FREE = 0, SHMS__QUOTA_LIVE = 2 };
#define SHMS__QUOTA_BITS        12
#define SHMS__QUOTA_FIELD(u, c) ((uint32_t)((u) >> (SHMS__QUOTA_BITS * (c))) & 0xfffu)
#define SHMS__QUOTA_UNIT(c)     (1ull << (SHMS__QUOTA_BITS * (c)))
_Static_assert(SHMS__QUOTA_BITS *SHMS_CLASS_COUNT <= 64, "a quota's fields fit one word");
_Static_assert(SHMS_QUOTA_UNITS_MAX < (1u << SHMS__QUOTA_BITS), "a field holds any maximum");
/* What a cell's lease holds of the quota table (struct shms__cls.qheld): the quota bits, valid
 * only for the lease (or grant) made at the generation beside them, and while the cell is
 * QUARANTINED at the generation after it (its units are held until repair). */
#define SHMS__QHELD(gen, mask) (((uint64_t)(gen) << 32) | (uint32_t)(mask))
#define SHMS__QHELD_GEN(q)     ((uint32_t)((q) >> 32))
#define SHMS__QHELD_MASK(q)    ((uint32_t)(q))

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
  uint64_t events_off;   /* the event ring (shm/events.h): its head, then its records */
  uint32_t events_count; /* records; 0: no ring */
  uint32_t reserved1;
  uint64_t accounts_off;     /* the tenant table: its control line, buckets, then records */
  uint32_t accounts_count;   /* records */
  uint32_t accounts_buckets; /* hash chains by name, a power of two */
  struct shms__class_desc classes[SHMS_CLASS_COUNT];
  shms_config config; /* the validated configuration, copied verbatim */
  /* The quota table (core/quota.c): entry q is bit q of a request's and a lease's quotas. */
  struct shms__quota quotas[SHMS_QUOTAS_MAX] SHMS__ALIGNED;
};

/*
 * Per-class control block. Each line is written by a different set of
 * parties, so each gets its own cache line.
 */
struct shms__class_ctl {
  /* Line 0, written by every acquire and release: the fast-path word (free cells in the
   * low 32 bits, a map or a count; queued requests in the high 30; STRICT; FROZEN) and, for a
   * class that counts, a hint of a free cell. */
  uint64_t fast SHMS__ALIGNED;
  uint32_t cell_hint;
  /* Classes that overtake, written by the baton holder after each pass and read by every
   * release that finds requests queued (docs/protocol.md, "Bounded overtaking"), on this line,
   * which the release has in its cache already: the oldest indexed request (slot index + 1, 0
   * for none), whose waiter a release nudges, and when it will have waited the class's bound
   * (its enqueue time + overtake; 0 for none). The end is the first word of a 16-byte pair
   * whose second counts the enqueuers that published an end (core/overtake.c): a pass's
   * CMPXCHG16B over the pair then fails after any such arrival, even one whose end was no
   * earlier and so left the end as it was. */
  uint32_t oldest_slot;
  uint64_t overtake_end_ns __attribute__((aligned(16)));
  uint64_t overtake_arrivals;
  /* Line 1: the dispatcher baton: 0 free, else (1 << 32) | the holder's owner id. */
  uint64_t baton SHMS__ALIGNED;
  /* Line 2: the observation seqlock and the figures it keeps coherent. */
  uint32_t obs_seq SHMS__ALIGNED; /* a ck_sequence, written under the baton */
  uint32_t reserved1;
  uint64_t queue_granted; /* grants made from the queue (the fast path counts in the cells) */
  uint64_t total_wait_ns;
  uint64_t max_wait_ns;
  uint64_t rejected;  /* atomic: rejected at enqueue */
  uint64_t cancelled; /* atomic */
  uint64_t expired;   /* atomic */
  uint64_t revoked;   /* atomic: grants revoked, not accepted in time (core/revoke.c) */
  /* Line 3: the tenant index, written only under the baton. */
  uint32_t ring_head SHMS__ALIGNED; /* tenant index + 1, 0 for empty */
  uint32_t ring_tail;
  uint32_t ring_len;       /* tenants in the ring: queued work and under their limit */
  uint32_t tenant_free;    /* free-list head of tenant records, index + 1 */
  uint32_t tenants_used;   /* tenant records in use */
  uint32_t tenants_queued; /* tenants with indexed requests */
  uint64_t grant_due;      /* the earliest a grant may fall due for revocation, 0: none */
  /* Classes that overtake: every indexed request in enqueue-time order (oldest first), slot
   * index + 1, through the slots' all_prev/all_next (core/order.c). */
  uint32_t all_head;
  uint32_t all_tail;
  /* The quotas some request of the class is parked for (core/quota.c): a pass looks for room in
   * them and, when one has some, indexes those requests again. */
  uint32_t quota_parked;
  /* Line 4, written by enqueuers, quarantine and repair. */
  uint64_t request_seq SHMS__ALIGNED; /* the next request's sequence number; never wraps */
  uint32_t used;                      /* request slots in use */
  uint32_t quarantined;               /* cells quarantined */
  /* atomic: the requests `rejected` counts, by reason (SHMS_REJECT_REASON_CODES; the last is
   * every other reason). Rare, so they share the enqueuers' line. */
  uint64_t rejected_by[SHMS_REJECT_REASONS];
  /* Line 5, read-mostly. */
  uint64_t token_limit SHMS__ALIGNED; /* a token at or past this is exhausted (tests lower it) */
  uint32_t freezer;     /* owner id of the process that froze the class (fast word's FROZEN bit) */
  uint64_t quarantines; /* atomic: cells quarantined since creation (rare: a read-mostly line) */
  uint64_t recovered;   /* atomic: items recoveries settled in the class (core/report.c) */
  /* Lines 6-14: the queue-wait histogram, counts per bucket of SHMS_WAIT_BUCKET_LE_NS (the last
   * past every bound); written beside total_wait_ns inside obs_seq's write section, under the
   * baton, so observers read it coherent with the wait total. */
  uint64_t wait_buckets[SHMS_WAIT_BUCKETS] SHMS__ALIGNED;
  /* Line 15, a class fair by time (core/fair.c), written under the baton: the charge of the
   * last tenant granted before its grant, which a tenant that takes turns again starts from (no
   * credit banked while away); the count of turns taken, which orders the turns of tenants
   * charged alike; the tenants in the heap; what a lease of a tenant new to the class is
   * expected to hold (the last tenant's estimate whose leases ended). */
  uint64_t vtime SHMS__ALIGNED;
  uint64_t turns;
  uint32_t heap_len;
  /* A multi-cell request gathering its cells (core/gather.c), written under the baton: its slot
   * index + 1 (0: none) and its sequence. The cells reserved for it are the class's RESERVED
   * cells. */
  uint32_t gather_slot;
  uint64_t hold_est_ns;
  uint64_t rebases;    /* how many times every charge was moved back (fair.h) */
  uint64_t policy_gen; /* the tenant table's policy_gen when the weights were last read */
  uint64_t gather_seq;
  uint64_t joined; /* atomic: submits that joined a live job of the same key (core/joined.c) */
  /* Lines 16-20, a class fair by time (core/fair.c), written under the baton: the calendar of
   * its order of turns. Tenants and teams charged within SHMS__FAIR_BUCKETS quanta of cal_base
   * are filed by quantum in a bucket each (a circular list through their records, oldest turn
   * first: cal_head is the first, its cal_prev the last); cal_bits has a bit per bucket with
   * members. Those charged further ahead wait in the heap (theap, heap_len), which holds them
   * all while the calendar is empty. */
  uint64_t cal_base SHMS__ALIGNED; /* the quantum of the first bucket with members */
  uint64_t cal_bits;
  uint32_t cal_head[SHMS__FAIR_BUCKETS];
  uint32_t cal_behind; /* members filed under cal_base, charged less (SHMS__TENANT_BEHIND) */
};

/*
 * One cell of capacity, on cache lines of its own: acquirers of different cells
 * never write the same line.
 */
struct shms__cell {
  uint64_t word;  /* generation (high 32) | owner id (28) | state (low 4): see protocol.md */
  uint64_t token; /* the current or last lease's token; per cell, never wraps */
  uint64_t lease_start_ns;
  uint64_t leases;       /* leases handed out on this cell: observations sum these */
  uint32_t tenant;       /* tenant record index + 1 whose limit this lease counts in, or 0 */
  uint32_t slot;         /* while GRANTED: the slot index + 1 it is granted to */
  uint32_t reason;       /* why it was quarantined (shms_errno_t or a caller's code) */
  uint32_t worker_futex; /* a bound worker sleeps here: a counter (high 31) | sleeping (bit 0) */
  uint32_t worker;       /* worker classes: owner id of the bound worker, 0 if none */
  /* The ticket of the lease the cell carries, recorded by the waiter that accepted it (the slot
   * index is `slot` above, kept after acceptance): valid while the word is LEASED with this
   * generation. Lets explain and cancel answer for a request whose slot was given back. */
  uint32_t ticket_gen;
  uint64_t ticket_seq;
  /* Line 1: the tenant of the lease (or grant) the cell carries, its name NUL-padded in
   * words (shms__tenant_pack): the acquirer's on the fast path, the request's when the dispatcher
   * grants. Written with the lease's start (shms__cell_start) by plain stores; valid while the word
   * is GRANTED or LEASED at that start's generation, like the ticket above. Read by recovery's
   * reports (who a dead holder's lease was for) and observers. */
  uint64_t tenant_name[SHMS__NAME_WORDS] SHMS__ALIGNED;
  /* While QUARANTINED: when it was quarantined (CLOCK_REALTIME), written beside `reason` right
   * after the state word's CAS; for operators (shms_cells). */
  uint64_t quarantined_unix_ns;
  /* Who the lease (or grant) is for: the effective uid its acquirer or enqueuer registered with
   * (the request's, when the dispatcher grants). Written and valid as tenant_name is; kept
   * after the lease ends, like the name, for a quarantined cell's report. */
  uint32_t uid;
  /* A lease (or grant) of several cells: on its lead cell, how many it holds in all; valid while
   * `lead` names the cell itself at the lease's generation (`lead_gen`): a lease of one writes
   * none of them. Read when the lease ends, to end its companions (core/cell.c). */
  uint32_t ncells;
  /* A class fair by time: what the grant charged its tenant for this lease (ns), returned or
   * corrected to what it held when it ends (core/fair.c). Written with `tenant` at the grant. */
  uint64_t charged_ns;
  /* While BOUND: the lead cell (index + 1) whose lease this companion cell belongs to, and the
   * lead's generation then. The companion is the lease's while the lead is RESERVED, GRANTED or
   * LEASED at that generation, and an orphan once it is not (core/cell.c). On a lead: itself,
   * and its lease's generation (ncells above). */
  uint32_t lead;
  uint32_t lead_gen;
} SHMS__ALIGNED;

/*
 * One request slot: a request, its grant, and in worker mode its payload
 * (which follows the structure). The slot word's low half is the waiter's
 * futex word; its high half is the occupant's sequence, so a CAS made with a
 * stale ticket fails.
 */
struct shms__slot {
  uint64_t word; /* seq low 32 | reason (8) | flags (8) | state (low 4): see protocol.md */
  uint64_t seq;  /* the occupant's request sequence (full) */
  uint64_t enqueue_ns;
  uint64_t deadline_ns; /* 0: none */
  uint64_t token;       /* the granted lease's token */
  int32_t priority;
  uint32_t owner;                 /* owner id of the enqueuing process */
  uint32_t tenant;                /* tenant record index + 1, once indexed */
  uint32_t cell;                  /* the granted cell */
  uint32_t generation;            /* the granted lease's generation */
  uint32_t prio_left, prio_right; /* the tenant's treap of (priority, deadline) groups */
  uint32_t age_prev, age_next;    /* the tenant's list in sequence order (aging) */
  uint32_t act_next;              /* activation hash chain, slot index + 1 */
  uint32_t payload_len;
  uint32_t result_len;
  int32_t result_status;
  uint32_t options; /* SHMS__OPT_* */
  char tenant_name[SHMS_TENANT_MAX + 1];
  char activation[SHMS_TENANT_MAX + 1]; /* "" for none */
  uint32_t grp_prev, grp_next; /* requests of one (priority, deadline) key, in sequence order */
  uint32_t grp_tail;           /* on a group's first request (the treap node): its last */
  /* The owner's record of its requests (core/owned.c): a list through its slots, every class
   * in one, as SHMS__OWNED_REF; written only by the owner's threads. */
  uint32_t own_prev, own_next;
  uint32_t uid;                /* the enqueuer's effective uid at registration: who may cancel it */
  uint32_t all_prev, all_next; /* the class's list by enqueue time (ctl->all_head) */
  /* Line 4: a keyed job (SHMS__OPT_KEYED, core/joined.c): its key, "" for none, written before
   * the job is published; and who waits for it, SHMS__WAITERS: the submitter and its joiners,
   * written by each of them with CAS (a frozen recovery recounts the joiners). */
  char key[SHMS_KEY_MAX + 1] SHMS__ALIGNED;
  uint64_t waiters;
  /* A lease-mode request's quotas, as bits of the quota table: the enqueuer's, before it
   * publishes; and SHMS__QUOTAS_PARKED, the baton holder's (docs/protocol.md, "Quotas"). */
  uint32_t quotas;
} SHMS__ALIGNED;

/* A place in the heap of a class fair by time (core/fair.c): a tenant's (or team's) record, and
 * the key it is ordered by, copied from the record as it is placed or sifted. A sift then reads
 * the heap's own lines, not the record of every tenant it passes: with thousands of tenants,
 * those records are cold. */
struct shms__heap_place {
  uint64_t vt;   /* the record's vt */
  uint64_t turn; /* the record's turn */
  uint32_t ref;  /* tenant record index + 1 */
  uint32_t reserved;
};

/* A tenant record: present while the tenant has queued work or limited leases. */
struct shms__tenant {
  char name[SHMS_TENANT_MAX + 1];
  uint32_t hash_next; /* bucket chain or free list, index + 1 */
  uint32_t ring_prev, ring_next;
  uint32_t queued;    /* indexed requests */
  uint32_t active;    /* leases counted against tenant-max-active (atomic) */
  uint32_t prio_root; /* the treap of groups, slot index + 1 */
  uint32_t flags;     /* SHMS__TENANT_* */
  uint64_t granted;
  uint64_t total_wait_ns;
  uint64_t max_wait_ns;
  uint32_t prio_first; /* the first group's first request (cached), slot index + 1 */
  uint32_t age_head;   /* the oldest request, slot index + 1 */
  uint32_t age_tail;   /* the newest request, slot index + 1 */
  /* A class fair by time (core/fair.c): written under the baton, but for the three figures of
   * ended leases, which their releasers add to (atomic) and the baton holder takes. */
  uint64_t vt;   /* cell-time charged, in SHMS__VT_PER_NS units per ns at weight 1 */
  uint64_t turn; /* the class's turn count when it last took a turn: ties go to the oldest */
  union {
    uint64_t est_ns; /* what its next lease is expected to hold (ns): charged at its grant */
    uint64_t mvtime; /* a team's record: the charge a member that takes turns again starts from */
  };
  uint64_t corr_ns; /* atomic: held minus charged, of leases ended since (two's complement) */
  uint64_t done_ns; /* atomic: what those leases held */
  uint32_t done_n;  /* atomic: how many they were */
  /* Its place in the class's order of turns (core/fair.c): 0 none; a place in the heap + 1; or
   * SHMS__FAIR_FILED | bucket, in the calendar (cal_prev, cal_next: its bucket's list). */
  uint32_t heap_pos;
  /* Its record in the tenant table (core/account.c), referenced while this one exists: the
   * weight it had there when the class last looked (what its leases held is counted there as
   * each ends; its charge is left there when this record goes). */
  uint32_t acct;
  uint32_t weight;
  uint32_t cal_prev, cal_next;
  /* Teams (core/fair.c): a member's record names its team's record (TEAM, in the same table,
   * under the team's name), which takes the member's turns in the class's heap and holds its
   * members with a turn in a pairing heap: mroot, and each member's child, next sibling and
   * previous (its parent when it is the first child). members: the records naming it. */
  uint32_t team;
  uint32_t ph_child, ph_next, ph_prev;
  uint32_t mroot;
  uint32_t members;
} SHMS__ALIGNED;

/* PENDING: kept through an index rebuild with its turn in the old ring, which it takes again
 * when the rebuild restores the ring (core/tenant.c); no record carries it between operations. */
/* TEAM: a team's record (never in the ring); MEMBER: a member in its team's pairing heap.
 * BEHIND: filed in the calendar under its base, charged for an earlier quantum (core/fair.c). */
enum {
  SHMS__TENANT_INUSE = 1u,
  SHMS__TENANT_INRING = 2u,
  SHMS__TENANT_PENDING = 4u,
  SHMS__TENANT_TEAM = 8u,
  SHMS__TENANT_MEMBER = 16u,
  SHMS__TENANT_BEHIND = 32u,
};

#define SHMS__MARKS 16 /* threads per process with a plain-store operation mark */
/* shms__proc.marks_used: bits 0..SHMS__MARKS-1 say which marks threads have claimed; PLAIN says
 * that the process sets them with plain stores, registered for membarrier (shm/membarrier.h),
 * so that a freezer must issue one before it reads them (docs/protocol.md, "Plain marks"). */
#define SHMS__MARKS_CLAIMED ((1u << SHMS__MARKS) - 1)
#define SHMS__MARKS_PLAIN   (1u << 31)
_Static_assert(SHMS__MARKS < 31, "the PLAIN bit lies above every mark's bit");

/* A process's count of leases taken on the fast path in one class for one tenant: written by
 * the process (the count atomically: its threads share it), rekeyed and folded into the tenant
 * table under the table's tally sequence (core/tally.c). */
struct shms__tally {
  uint64_t name[SHMS__NAME_WORDS]; /* the tenant, NUL-padded; all 0: unused */
  uint32_t cls;                    /* the class's id */
  uint32_t reserved;
  uint64_t grants; /* atomic */
  /* The charge of leases of the key this process released on the fast path, in a class fair by
   * time with requests queued, not yet added to the tenant's record: how many, and the
   * cell-time they held. Added there once it reaches SHMS__FAST_PENDING_NS (core/fair.c), and
   * when the tally moves. */
  uint64_t pending_n;  /* atomic */
  uint64_t pending_ns; /* atomic */
} SHMS__ALIGNED;
#define SHMS__TALLIES 4
#define SHMS__JOINS   16 /* keyed jobs a process may have joined at once (core/joined.c) */

/* One attached process. Byte `offset of this entry` of the file is its liveness lock. */
struct shms__proc {
  uint32_t state; /* SHMS__PROC_FREE / _CLAIMING / _LIVE */
  uint32_t gen;   /* bumped on every claim: owner ids name (index, gen) */
  int32_t pid;
  uint32_t role;
  uint64_t start_time; /* /proc/PID/stat starttime, ticks since boot */
  uint64_t attached_unix_ns;
  uint32_t ops[SHMS_CLASS_COUNT]; /* operations under way by threads without a mark (atomic) */
  uint32_t marks_used;            /* which of marks[] threads have claimed, | SHMS__MARKS_PLAIN */
  /* The record of the requests this process owns (core/owned.c): the head of a list through
   * their slots (SHMS__OWNED_REF, 0 empty), and nonzero while the process changes it (a
   * recovery that finds it so scans every slot instead). Written only by the owner. */
  uint32_t own_head;
  uint32_t own_dirty;
  /* Line 2: one word per thread of the process (the first SHMS__MARKS): bit c set while that
   * thread has an operation under way on class c. Written by its thread with plain stores. */
  uint32_t marks[SHMS__MARKS] SHMS__ALIGNED;
  /* Line 3: who the process is (its effective uid and gid at registration) and the command it
   * runs under its leases or jobs (shms_command_set), which must die with it: a process group,
   * named by its leader's pid and start time, and whether it has its own cgroup. Written by the
   * process itself; read, killed and cleared by whoever disposes of what it left once it is
   * dead (shms__proc_kill_command), under the entry's lock. Its pid, and the command's group,
   * are numbers of the pid namespace named by pidns (shm/pidns.h): another namespace's
   * process may be told by the same numbers. */
  uint32_t uid SHMS__ALIGNED;
  uint32_t gid;
  uint32_t cmd_flags; /* 0: no command; else SHMS__CMD_SET, | SHMS__CMD_CGROUP; stored last */
  int32_t cmd_pgid;
  uint64_t cmd_start_time; /* the group leader's start time (/proc/PID/stat field 22) */
  uint64_t pidns_ino;      /* the process's pid namespace (struct shms__pidns), set at claim */
  uint64_t pidns_init_start;
  /* The cgroup namespace the command's cgroup was made in (0: not known). Its path is the
   * recorder's view: another cgroup namespace (a container's) may not see it at all, and a path
   * missing there proves nothing (shm/cgroup.h). */
  uint64_t cgroupns_ino;
  /* A release the process asked for while the lease's class was held still (a check or a
   * recovery, slow or stopped), so that it need not wait to go on or exit: the lease as
   * SHMS__PENDING_WORD and its token (token stored first). Completed, exactly once, by whoever
   * next can: the freezer as it lets the class go, the process's detach, the recovery of its
   * death (core/pending.c). 0: none. */
  uint64_t pending_release;
  uint64_t pending_token;
  /* Lines 4..7: how many leases the process took on the fast path, per class and tenant
   * (core/tally.c). Kept after the process detaches or dies, until the entry's next owner
   * folds them into the tenant table: observers add them up from every entry. */
  struct shms__tally tally[SHMS__TALLIES];
  /* Lines 8-9: the keyed jobs the process joined (core/joined.c), each SHMS__JOIN_ENTRY, 0 for
   * none. Written by the process's own threads (under a lock of the process); read by a frozen
   * recovery's recount; released and cleared by whoever disposes of the process once it is
   * gone, or by the entry's next owner at attach. */
  uint64_t joins[SHMS__JOINS] SHMS__ALIGNED;
} SHMS__ALIGNED;

enum { SHMS__PROC_FREE = 0, SHMS__PROC_CLAIMING = 1, SHMS__PROC_LIVE = 2 };
/* shms__proc.pending_release: which lease, by class, lead cell and generation. */
#define SHMS__PENDING_WORD(cls, cell, gen)                                                         \
  ((1ull << 63) | ((uint64_t)(cls)&0xffu) << 48 | ((uint64_t)(cell)&0xffffu) << 32 |               \
   (uint32_t)(gen))
#define SHMS__PENDING_CLASS(w) ((int)(((w) >> 48) & 0xffu))
#define SHMS__PENDING_CELL(w)  ((uint32_t)((w) >> 32) & 0xffffu)
#define SHMS__PENDING_GEN(w)   ((uint32_t)(w))
/* shms__proc.cmd_flags. */
enum { SHMS__CMD_SET = 1u, SHMS__CMD_CGROUP = 2u };

/*
 * The tenant table (core/account.c): one record per tenant with a weight set or whose requests
 * were queued, kept while it is idle: its weight and, per class, what fairness by time charged it.
 * Bounded (the configuration's tenant_table); when full, the least recently active records with
 * no policy are folded into one record, `_other`.
 */
struct shms__accounts_ctl {
  /* 0 free, else (1 << 32) | the holder's owner id: taken to add, fold and set policy (never
   * to look up). A dead holder's is taken over, and the chains built again from the records. */
  uint64_t lock SHMS__ALIGNED;
  uint64_t policy_gen; /* atomic: bumped by every change of policy; class records refresh */
  uint32_t used;       /* LIVE records */
  uint32_t free_head;  /* the free list, record ref (index + 1) */
  uint32_t other;      /* the `_other` record's ref; 0 until a fold makes it */
  uint32_t reserved0;
  uint64_t folded; /* records folded into `_other` since creation */
  /* Odd while a process's tally moves into the table (core/tally.c): an observer adding up
   * tallies and records reads both between two even looks. */
  uint64_t tally_seq;
  /* How many records without a policy may be folded, without a search (core/account.c): unrefs
   * counts (atomic) such a record left without references, or made without one; rerefs, such a
   * record referenced again when it had none. idle_base, under the lock, is set by each search
   * so that unrefs - rerefs - idle_base is what it left to fold (never fewer): while that is not
   * positive, no search is made. */
  uint32_t unrefs;
  uint32_t rerefs;
  uint32_t idle_base;
};

/* What one class has charged an account (fairness by time), kept while the tenant is idle. */
struct shms__account_class {
  uint64_t vt;      /* its charge (fair.h's units), as of the class's rebase count below */
  uint64_t est_ns;  /* what its next lease is expected to hold */
  uint64_t rebases; /* the class's rebases when vt was written (fair.h) */
  uint64_t cell_ns; /* cell-time its leases held, as fairness by time charges, at each end */
  /* Atomic: what leases taken on the fast path held, added as each ends while requests are
   * queued, until the baton's holder takes it into the charge (fair.h). */
  uint64_t fast_ns;
  uint32_t fast_n;
  uint32_t reserved;
  /* What the tenant was granted in the class, kept while it is idle: grants from the queue and
   * their waits (written by the class's baton holder, inside its observation sequence), and
   * leases taken on the fast path, moved here from process tallies (atomic adds). */
  uint64_t grants;
  uint64_t wait_ns;
  uint64_t max_wait_ns;
  uint64_t fast_grants;
};

struct shms__account {
  char name[SHMS_TENANT_MAX + 1];
  uint32_t state;     /* SHMS__ACCT_FREE / _LIVE */
  uint32_t flags;     /* SHMS__ACCT_* */
  uint32_t hash_next; /* bucket chain, or the free list: ref */
  uint32_t weight;    /* 1..SHMS_WEIGHT_MAX */
  uint32_t team;      /* ref of its team's record; 0: none */
  uint32_t refs;      /* atomic: class records that use it; | FOLDING while being folded */
  uint64_t active_ns; /* when a class last took it up: the least recent are folded first */
  struct shms__account_class cls[SHMS_CLASS_COUNT] SHMS__ALIGNED;
} SHMS__ALIGNED;

enum { SHMS__ACCT_FREE = 0, SHMS__ACCT_LIVE = 2 };
enum {
  SHMS__ACCT_POLICY = 1u, /* set by policy: never folded */
  SHMS__ACCT_TEAM = 2u,   /* a team's record (its own name space) */
  SHMS__ACCT_OTHER = 4u,  /* `_other`: the folded records' usage */
};
#define SHMS__ACCT_FOLDING (1u << 31)

/* Cell states (the low 4 bits of shms__cell.word). */
enum {
  SHMS__CELL_AVAILABLE = 1,   /* free; counted (or mapped) free in the fast word */
  SHMS__CELL_GRANTED = 2,     /* bound to a request slot, not yet accepted: never exposed */
  SHMS__CELL_LEASED = 3,      /* an accepted lease */
  SHMS__CELL_QUARANTINED = 4, /* out of service until repaired */
  SHMS__CELL_OFFLINE = 5,     /* worker class: no worker bound */
  SHMS__CELL_RESERVED = 6,    /* held for the class's multi-cell request that gathers its cells */
  SHMS__CELL_BOUND = 7,       /* a companion of a multi-cell lease: follows its lead cell */
};
#define SHMS__CELL_STATE(w) ((uint32_t)((w)&0xfu))
#define SHMS__CELL_OWNER(w) ((uint32_t)(((w) >> 4) & 0xfffffffu))
#define SHMS__CELL_GEN(w)   ((uint32_t)((w) >> 32))
#define SHMS__CELL_WORD(gen, owner, state)                                                         \
  (((uint64_t)(gen) << 32) | ((uint64_t)((owner)&0xfffffffu) << 4) | (uint64_t)(state))

/* Slot states (the low 4 bits of shms__slot.word). */
enum {
  SHMS__SLOT_FREE = 0,
  SHMS__SLOT_CLAIMED = 1, /* the enqueuer is filling it */
  SHMS__SLOT_QUEUED = 2,  /* waiting for a grant */
  SHMS__SLOT_GRANTED = 3, /* bound to a cell; the waiter may accept */
  SHMS__SLOT_SETTLED = 4, /* ended; the reason byte says why (0: accepted, or completed) */
  SHMS__SLOT_RUNNING = 5, /* worker classes: a worker took the job and runs it */
};
/* Slot flags (bits 4..11). */
#define SHMS__SLOT_SLEEPING  (1u << 4) /* a waiter sleeps on the futex: wake it */
#define SHMS__SLOT_INDEXED   (1u << 5) /* linked into the tenant index (baton holder's) */
#define SHMS__SLOT_COLLECTED (1u << 6) /* the waiter took the outcome */
#define SHMS__SLOT_HELP      (1u << 7) /* the dispatcher asks the waiter to dispatch */
#define SHMS__SLOT_CANCEL    (1u << 8) /* a running job's client asked to cancel it */
#define SHMS__SLOT_WRITING   (1u << 9) /* the worker is writing the result over the payload */
#define SHMS__SLOT_LATE                                                                            \
  (1u << 10) /* QUEUED: its grant was revoked; parked until its waiter returns */
/* The client sleeps until its job starts (shms_wait_started): the worker's take clears it with
 * SLEEPING and wakes the client, which a take otherwise leaves asleep until the job ends. */
#define SHMS__SLOT_STARTWAKE (1u << 11)

/* Request options (shms__slot.options). */
enum {
  SHMS__OPT_RETRY_ONCE = 1u,
  SHMS__OPT_RETRIED = 2u,
  SHMS__OPT_KEYED = 4u,     /* a job with a key: single-flight (core/joined.c) */
  SHMS__OPT_SUPERSEDE = 8u, /* queued by a supersede: a running job of its key is no conflict */
};
/* The cells a lease-mode request asks for, in bits 16..28 of its options (0 reads as 1). */
#define SHMS__OPT_CELLS_SHIFT  16
#define SHMS__OPT_CELLS_RAW(o) (((o) >> SHMS__OPT_CELLS_SHIFT) & 0x1fffu)
#define SHMS__OPT_CELLS(o)     (SHMS__OPT_CELLS_RAW(o) ? SHMS__OPT_CELLS_RAW(o) : 1u)
_Static_assert(SHMS_CELLS_MAX <= 0x1fff, "a request's cells fit their field of the options");
/* A slot's quotas word: the quotas it names (bits of the quota table), and PARKED while the baton
 * holder keeps the request out of its tenant's order because one of them is full (core/index.c,
 * docs/protocol.md "Quotas"). PARKED is the word's only bit that changes after publication, by
 * the baton holder alone: the options word stays as its enqueuer wrote it. */
#define SHMS__QUOTAS_PARKED   (1u << 31)
#define SHMS__QUOTAS_NAMED(q) ((q)&0xffffu)
_Static_assert(SHMS_QUOTAS_MAX <= 32, "a request's quotas fit their word of the slot");
/* While a request is QUEUED or GRANTED its reason byte counts the revocations of its grants
 * (core/revoke.c), so that two grants of one request never read as the same word: a settler
 * that read the first grant's cell must not settle the second with one CAS (the spin model,
 * tests/model/revoke.pml, found it). A settlement writes the reason over it. */
#define SHMS__SLOT_EPOCH     (0xffull << 12)
#define SHMS__SLOT_STATE(w)  ((uint32_t)((w)&0xfu))
#define SHMS__SLOT_REASON(w) ((int)-(int)(((w) >> 12) & 0xffu))
#define SHMS__SLOT_SEQ(w)    ((uint32_t)((w) >> 32))
#define SHMS__SLOT_WORD(seq, reason_err, flags, state)                                             \
  (((uint64_t)(uint32_t)(seq) << 32) | ((uint64_t)((-(reason_err)) & 0xff) << 12) |                \
   (uint64_t)(flags) | (uint64_t)(state))

/* An owner id: process-table index (16 bits) and the entry's generation (12 bits). */
#define SHMS__OWNER(index, gen) ((((uint32_t)(index)&0xffffu) << 12) | ((uint32_t)(gen)&0xfffu))
#define SHMS__OWNER_INDEX(o)    ((uint32_t)(o) >> 12)

/* A reference to slot index i of class c in the owned-request lists: never 0. */
#define SHMS__OWNED_REF(c, i)  (((uint32_t)(c) << 24) | ((uint32_t)(i) + 1))
#define SHMS__OWNED_CLASS(ref) ((uint32_t)(ref) >> 24)
#define SHMS__OWNED_INDEX(ref) (((uint32_t)(ref)&0xffffffu) - 1)
_Static_assert(SHMS_QUEUE_MAX < 0xffffffu, "a slot reference holds index + 1 in 24 bits");

/* shms__slot.waiters: the job's sequence (high 32 bits) | OWNER: its submitter waits | LEFT: its
 * submitter left it (shms_cancel) | CLOSED: its last waiter cancels it, nobody may join | the
 * joiners that wait (low 29 bits). 0 for a job without a key. */
#define SHMS__WAIT_OWNER        (1u << 31)
#define SHMS__WAIT_LEFT         (1u << 30)
#define SHMS__WAIT_CLOSED       (1u << 29)
#define SHMS__WAIT_COUNT_MAX    0x1fffffffu
#define SHMS__WAIT_COUNT(w)     ((uint32_t)(w)&SHMS__WAIT_COUNT_MAX)
#define SHMS__WAIT_SEQ(w)       ((uint32_t)((w) >> 32))
#define SHMS__WAITERS(seq, low) (((uint64_t)(uint32_t)(seq) << 32) | (uint32_t)(low))
/* shms__proc.joins[]: (SHMS__OWNED_REF of the slot, | LEFT once the joiner left) << 32 | the
 * job's sequence (low 32 bits). The class of a reference fits in 7 bits, so bit 31 is free. */
#define SHMS__JOIN_LEFT            (1u << 31)
#define SHMS__JOIN_ENTRY(ref, seq) (((uint64_t)(ref) << 32) | (uint32_t)(seq))
#define SHMS__JOIN_REF(e)          ((uint32_t)((e) >> 32) & ~SHMS__JOIN_LEFT)

/* The file byte that marks the supervisor as running (inside the header, never an entry). */
#define SHMS__LOCK_SUPERVISOR 1

/* Owner id o's own lock byte is SHMS__LOCK_OWNERS + o: past the end of any segment (POSIX
 * locks may lie beyond the end of a file), one per owner id (shm/proc.h). */
#define SHMS__LOCK_OWNERS ((uint64_t)1 << 40)

_Static_assert(sizeof(struct shms__class_ctl) == 21 * (size_t)SHMS__LINE, "class ctl is 21 lines");
_Static_assert(sizeof(struct shms__cell) == 2 * (size_t)SHMS__LINE, "cell is two lines");
_Static_assert(sizeof(struct shms__slot) == 4 * (size_t)SHMS__LINE, "slot is four lines");
_Static_assert(sizeof(struct shms__tenant) == 3 * (size_t)SHMS__LINE, "tenant is three lines");
_Static_assert(sizeof(struct shms__proc) == 9 * (size_t)SHMS__LINE, "proc entry is nine lines");
_Static_assert(sizeof(struct shms__tally) == (size_t)SHMS__LINE, "a tally is a line");
_Static_assert(sizeof(struct shms__account) == 8 * (size_t)SHMS__LINE, "account is eight lines");
_Static_assert(sizeof(struct shms__accounts_ctl) == (size_t)SHMS__LINE, "accounts ctl is a line");

/* Whether a class's fast word holds a map of its free cells (a lease class of at most 32
 * cells) rather than a count (core/sched.h, "The fast word"). */
static inline int shms__fast_maps(uint32_t cells, uint32_t mode) {
  return cells <= 32 && mode == SHMS_MODE_LEASE;
}

/* The layout computed from a configuration. */
struct shms__layout {
  uint64_t header_size; /* sizeof(header) rounded up to a line */
  uint64_t total_size;
  uint64_t procs_off;
  uint32_t procs_count;
  uint32_t class_mask;
  uint64_t accounts_off; /* the tenant table, after the classes */
  uint32_t accounts_count, accounts_buckets;
  uint64_t events_off; /* the event ring, after the process table */
  uint32_t events_count;
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

/* The tenant table's parts: its control line, its buckets, its records (in that order). */
static inline struct shms__accounts_ctl *shms__accounts_ctl_at(char *base,
                                                               const struct shms__layout *l) {
  return SHMS__AT(base, l->accounts_off, struct shms__accounts_ctl);
}
static inline uint32_t *shms__accounts_buckets_at(char *base, const struct shms__layout *l) {
  return SHMS__AT(base, l->accounts_off + sizeof(struct shms__accounts_ctl), uint32_t);
}
static inline struct shms__account *shms__accounts_at(char *base, const struct shms__layout *l) {
  return SHMS__AT(base,
                  l->accounts_off + sizeof(struct shms__accounts_ctl) +
                      (((uint64_t)l->accounts_buckets * 4 + SHMS__LINE - 1) & ~(SHMS__LINE - 1ull)),
                  struct shms__account);
}

#endif
