/*
 * shmsched — a fair, crash-safe scheduler for co-located processes.
 *
 * This is the one public header. Every function returns 0 (or a non-negative
 * value where documented) on success and a negative SHMS_E* code on failure.
 * Promise: if a call fails, it changed nothing — no slot was consumed, no
 * segment was created, nothing needs undoing. The class's figures may count
 * the refusal (rejected), and the calls below say where a failure is an
 * outcome (shms_wait's cancelled, deadline-exceeded, ...: the request ended)
 * or leaves something else (a cell quarantined on token exhaustion, a
 * recovery cut short by out-of-memory, a handle freed by a failed detach).
 *
 * A handle (shms_t) belongs to the process that attached it: POSIX record
 * locks, which prove a process alive, are not inherited across fork(), so a
 * handle used in a forked child fails with SHMS_EINVAL. Attach again in the
 * child instead.
 *
 * Each call says whether it blocks, and on what; docs/api.md ("Threads") has
 * the same as one table. Two waits are common to many calls and not repeated:
 *  - an operation on a class waits (yielding the CPU, without a time limit)
 *    while a recovery or an audit holds that class still (shms_recover,
 *    shms_recover_dead, shms_check): a live one finishes in a bounded time,
 *    a dead one's work is finished by the waiter;
 *  - an operation that frees or queues work may run the class's dispatcher
 *    (a bounded pass, no sleep) when no other process is running it.
 * "Never blocks" means neither: no sleep, no wait on another process.
 *
 * Threads: every call on one handle may run concurrently with any other call
 * on it, from any thread of the process that attached it, except where said
 * (shms_detach; the worker calls; the command calls; waits on one ticket).
 * Several handles of one process share its registration in the segment;
 * shms_attach, shms_detach and shms_destroy take a lock of the process
 * while they change it. A call that takes no handle is safe from any thread.
 * The failure detail (shms_last_error_detail) is each thread's own.
 */
#ifndef SHMSCHED_H
#define SHMSCHED_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SHMS_EXTERN __attribute__((visibility("default")))
#else
#define SHMS_EXTERN
#endif

#define SHMS_VERSION_MAJOR  0
#define SHMS_VERSION_MINOR  1
#define SHMS_VERSION_PATCH  0
#define SHMS_VERSION_STRING "0.1.0"

/*
 * The error map: code suffix, reason word (stable, part of the contract), and
 * a human message. Append only: a code's number is its position in this list.
 */
#define SHMS_ERRNO_MAP(XX)                                                                         \
  XX(INVAL, "invalid-argument", "invalid argument")                                                \
  XX(QUEUEFULL, "queue-full", "class queue is at its bound")                                       \
  XX(DENIED, "class-denied", "class denied to this tenant")                                        \
  XX(DUPACT, "duplicate-activation", "activation id is already live")                              \
  XX(CANCELLED, "cancelled", "request was cancelled")                                              \
  XX(DEADLINE, "deadline-exceeded", "deadline passed before acceptance")                           \
  XX(QUARANTINED, "all-cells-quarantined", "every cell of the class is quarantined")               \
  XX(SHUTDOWN, "shutdown", "segment is draining or shut down")                                     \
  XX(SEQEXHAUSTED, "sequence-exhausted", "sequence space exhausted")                               \
  XX(LEASE, "lease-mismatch", "lease is stale, forged or already returned")                        \
  XX(NOTFOUND, "not-found", "no such ticket or segment")                                           \
  XX(OWNERLOST, "owner-lost", "the request's owner process died")                                  \
  XX(WORKERLOST, "worker-lost", "the worker died mid-job")                                         \
  XX(INCOMPAT, "incompatible-segment", "segment of another version, size or magic")                \
  XX(PERM, "permission-denied", "segment permissions do not allow this")                           \
  XX(EXISTS, "already-exists", "a segment of that name already exists")                            \
  XX(BUSY, "busy", "live processes are attached")                                                  \
  XX(NOMEM, "out-of-memory", "out of memory")                                                      \
  XX(NOSPACE, "no-space", "no space left for the segment")                                         \
  XX(TIMEDOUT, "timed-out", "wait timed out")                                                      \
  XX(SYSTEM, "system-error", "unexpected operating system error")                                  \
  XX(WOULDBLOCK, "would-block", "no cell is free right now")                                       \
  XX(VIOLATION, "invariant-violated", "an invariant of the segment does not hold")                 \
  XX(STALE, "stale-prepared", "prepared request is stale, foreign or corrupt: prepare it again")   \
  XX(SUPERSEDED, "superseded", "a newer job of the same key replaced it before it started")

enum shms__err_index {
  SHMS__ERR_NONE = 0,
#define SHMS__XX(code, word, msg) SHMS__ERRIDX_##code,
  SHMS_ERRNO_MAP(SHMS__XX)
#undef SHMS__XX
};

typedef enum {
  SHMS_OK = 0,
#define SHMS__XX(code, word, msg) SHMS_E##code = -SHMS__ERRIDX_##code,
  SHMS_ERRNO_MAP(SHMS__XX)
#undef SHMS__XX
} shms_errno_t;

/* The reason word of err ("queue-full"), or "unknown-error". Never blocks; any thread. */
SHMS_EXTERN const char *shms_err_name(int err);
/* A one-line human message for err. Never blocks; any thread. */
SHMS_EXTERN const char *shms_strerror(int err);
/*
 * Detail of the calling thread's most recent failure, naming what failed and
 * where ("class standard: cells: must be 1..4096, got 0"). Valid until the
 * thread's next shmsched call; "" when the last call gave none.
 */
SHMS_EXTERN const char *shms_last_error_detail(void);

/* ---- Configuration ------------------------------------------------------ */

typedef enum {
  SHMS_CLASS_TINY,
  SHMS_CLASS_SMALL,
  SHMS_CLASS_STANDARD,
  SHMS_CLASS_LARGE,
  SHMS_CLASS_EXTRA_LARGE,
  SHMS_CLASS_COUNT
} shms_class_t;

typedef enum { SHMS_MODE_LEASE, SHMS_MODE_WORKER } shms_class_mode_t;
typedef enum { SHMS_ON_DEATH_QUARANTINE, SHMS_ON_DEATH_RELEASE } shms_on_death_t;
/*
 * What `shmsched run` and `worker` do with a cell whose command crashed (was killed by a fault
 * signal nobody sent it: SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP). The zero
 * value is the default: release (the command's whole process tree is gone by then).
 */
typedef enum { SHMS_ON_CRASH_RELEASE, SHMS_ON_CRASH_QUARANTINE } shms_on_crash_t;
/*
 * Whom a class's tenant names belong to (docs/security.md, "Identities"): any caller may use any
 * tenant name (the default); the tenant must be the caller's login name (its effective uid's); the
 * caller must be a member of the group the tenant names. A request that breaks it fails
 * SHMS_EPERM. Checked with the caller's credentials from the kernel: a rule among processes
 * that trust each other, enforced for untrusting users only by a setgid front end.
 */
typedef enum { SHMS_TENANT_ANY, SHMS_TENANT_USER, SHMS_TENANT_GROUP } shms_tenant_bind_t;
/*
 * What a class divides fairly between tenants with queued work (docs/contract.md, "Fairness").
 * GRANTS: turns, one grant each, whatever a lease costs. TIME: cell-time (cells x seconds
 * held): a tenant whose leases last longer is granted less often. The zero value is the default:
 * TIME for a lease class, GRANTS for a worker class (shms_class_fairness).
 */
typedef enum { SHMS_FAIRNESS_DEFAULT, SHMS_FAIRNESS_GRANTS, SHMS_FAIRNESS_TIME } shms_fairness_t;

#define SHMS_TENANT_MAX         31           /* bytes in a tenant name */
#define SHMS_KEY_MAX            31           /* bytes in a job's key (shms_submit_key) */
#define SHMS_ALLOW_MAX          16           /* tenants in one class's allow list */
#define SHMS_CELLS_MAX          4096         /* cells in one class */
#define SHMS_QUEUE_MAX          1048576u     /* request slots in one class */
#define SHMS_PAYLOAD_MAX        1048576u     /* payload bytes of a worker class */
#define SHMS_TENANTS_MAX        65536u       /* --max-tenants */
#define SHMS_PROCS_MAX          65536u       /* --max-processes */
#define SHMS_SEGMENT_MAX        (4ull << 30) /* total segment bytes */
#define SHMS_NAME_MAX           200          /* bytes in a segment name */
#define SHMS_QUOTAS_MAX         16           /* quotas in a segment's table */
#define SHMS_REQUEST_QUOTAS_MAX 8            /* quotas one request may name */
#define SHMS_QUOTA_UNITS_MAX    4095u        /* a quota's maximum */

typedef struct {
  uint32_t configured;        /* 0: the class does not exist in the segment */
  uint32_t cells;             /* 1..SHMS_CELLS_MAX */
  uint32_t queue;             /* 0..SHMS_QUEUE_MAX; 0 denies the class */
  uint32_t mode;              /* shms_class_mode_t */
  uint32_t payload;           /* worker mode: max payload/result bytes */
  uint32_t tenant_max_active; /* 0: unlimited */
  uint32_t on_holder_death;   /* shms_on_death_t */
  uint32_t on_command_crash;  /* shms_on_crash_t; 0 (release) by default */
  uint32_t tenant_bind;       /* shms_tenant_bind_t; 0 (any) by default */
  uint32_t allow_count;       /* 0: any tenant (extra-large: none) */
  /* Each entry a tenant name, or "@GROUP" (callers in that group) or "~USER" (that user), names
   * or numeric ids. Tenant entries bound the tenant, identity entries the caller; a request
   * must pass each kind the list holds (docs/config.md, "allow"). */
  char allow[SHMS_ALLOW_MAX][SHMS_TENANT_MAX + 1];
  /* Lease classes: a grant its waiter has not accepted after this long goes to the next
   * request; the late request waits for its waiter again, in its place (docs/protocol.md,
   * "Revocation"). 0: SHMS_DEFAULT_GRANT_TIMEOUT_NS; else 1ms..24h. Worker classes: 0. */
  uint64_t grant_timeout_ns;
  /* Lease classes without tenant-max-active: an acquire may take a free cell ahead of queued
   * requests while none of them has waited this long; once one has, every release hands its
   * cell to the queue until it is granted (docs/protocol.md, "Bounded overtaking").
   * 0: SHMS_DEFAULT_OVERTAKE_NS; SHMS_OVERTAKE_STRICT: never (strict hand-off); else
   * 1us..1s. Worker classes and classes with tenant-max-active: 0 (they never overtake). */
  uint64_t overtake_ns;
  /* shms_fairness_t; 0: the default (shms_class_fairness). TIME is for lease classes. */
  uint32_t fairness;
  /* Where the class comes in the configuration: the order `create`'s --class options or the
   * configuration file's sections gave, which views list classes in (shms_class_order). 0 for
   * every class: the class order, tiny .. extra-large; else distinct, 1..SHMS_CLASS_COUNT. */
  uint32_t position;
} shms_class_config;

typedef struct {
  shms_class_config classes[SHMS_CLASS_COUNT];
  uint64_t starvation_after_ns; /* aging threshold, > 0 */
  uint32_t max_tenants;         /* distinct tenants with live requests, per class */
  uint32_t max_processes;       /* size of the attached-process table */
  uint32_t file_mode;           /* permission bits of the segment, e.g. 0600 */
  int64_t group;                /* gid to own the segment, -1 to leave as is */
  /* Members of this group (with the segment file's owner and root) may drain, resume, repair,
   * recover, destroy and cancel others' requests (docs/security.md); -1: none. */
  int64_t admin_group;
  /* Records in the segment's event ring (the flight recorder, shms_events_read): 0 turns it
   * off, else a power of two SHMS_EVENTS_MIN..SHMS_EVENTS_MAX. */
  uint32_t events;
  /* Records of the tenant table (docs/config.md): one per tenant with a weight set or whose
   * requests were queued, kept while idle; 0: SHMS_DEFAULT_TENANT_TABLE, else
   * SHMS_TENANT_TABLE_MIN..SHMS_TENANTS_MAX. */
  uint32_t tenant_table;
  /* Named quotas (docs/config.md, "quota"): the first quota_count entries, each a name (as a
   * tenant name: 1..31 graphic ASCII bytes, unique) and its maximum, 1..SHMS_QUOTA_UNITS_MAX. A
   * request naming quotas is granted a cell only while each has a unit free, and holds one unit
   * of each until its lease ends (docs/contract.md, "Quotas"). More may be added, and every
   * maximum changed, at runtime (shms_quota_set). */
  uint32_t quota_count;
  struct {
    char name[SHMS_TENANT_MAX + 1];
    uint32_t max;
  } quotas[SHMS_QUOTAS_MAX];
} shms_config;

#define SHMS_DEFAULT_STARVATION_NS    (5ull * 1000 * 1000 * 1000)
#define SHMS_DEFAULT_MAX_TENANTS      1024u
#define SHMS_DEFAULT_MAX_PROCESSES    1024u
#define SHMS_DEFAULT_FILE_MODE        0600u
#define SHMS_DEFAULT_PAYLOAD          4096u
#define SHMS_DEFAULT_GRANT_TIMEOUT_NS (2ull * 1000 * 1000 * 1000)
#define SHMS_DEFAULT_EVENTS           1024u
#define SHMS_EVENTS_MIN               16u
#define SHMS_EVENTS_MAX               1048576u
#define SHMS_DEFAULT_OVERTAKE_NS      (300ull * 1000)
#define SHMS_DEFAULT_TENANT_TABLE     4096u
#define SHMS_TENANT_TABLE_MIN         16u
#define SHMS_WEIGHT_MAX               1000u      /* a tenant's weight: 1..1000 */
#define SHMS_OVERTAKE_STRICT          UINT64_MAX /* overtake: never (strict hand-off) */
#define SHMS_OVERTAKE_MIN_NS          1000ull
#define SHMS_OVERTAKE_MAX_NS          (1000ull * 1000 * 1000)

/*
 * The calls of this section take no handle and touch nothing shared: they
 * never block and are safe from any thread (each with its own cfg).
 */
/* Fill cfg with defaults and no configured class. */
SHMS_EXTERN void shms_config_init(shms_config *cfg);
/* Check every field; SHMS_EINVAL with a detail naming the field (a NULL cfg too). */
SHMS_EXTERN int shms_config_validate(const shms_config *cfg);
/* The class's name ("extra-large"), or NULL for an out-of-range value. */
SHMS_EXTERN const char *shms_class_name(shms_class_t c);
/* The class named name, or -1. */
SHMS_EXTERN int shms_class_from_name(const char *name);
/* 0 if name is a valid tenant name (1..31 bytes, graphic ASCII), else SHMS_EINVAL. */
SHMS_EXTERN int shms_tenant_check(const char *name);
/* 0 if name is a valid segment name (1..SHMS_NAME_MAX bytes, graphic ASCII; with a '/' it is a
 * path, which may not end in '/', '.' or '..': see "Segment names" below), else SHMS_EINVAL. Only
 * the name: whether its file exists, or SHMSCHED_DIR is usable, is create's and attach's to say. */
SHMS_EXTERN int shms_name_check(const char *name);
/* Bytes a segment laid out from cfg occupies, or 0 when cfg is NULL or invalid (the thread's
 * detail then says why, as shms_config_validate's). */
SHMS_EXTERN uint64_t shms_segment_size(const shms_config *cfg);
/* The fairness a class configured as k divides by: its own, or the default for its mode. */
SHMS_EXTERN shms_fairness_t shms_class_fairness(const shms_class_config *k);
/* The classes cfg configures, in configuration order (by position, then class order), into out;
 * returns how many. */
SHMS_EXTERN int shms_class_order(const shms_config *cfg, shms_class_t out[SHMS_CLASS_COUNT]);

/* ---- Segments ----------------------------------------------------------- */

typedef struct shms shms_t;

/*
 * Segment names. A plain name (no '/') is the file /dev/shm/NAME, or
 * $SHMSCHED_DIR/NAME when that variable is set and not empty (it must be an
 * absolute path: SHMS_EINVAL naming it otherwise; ignored in a set-id program).
 * A name with a '/' is the path of the segment file, on any local filesystem
 * that supports shared mappings; a relative one resolves against the working
 * directory, so processes that share a segment should use an absolute path.
 * Either is at most SHMS_NAME_MAX bytes of printable ASCII without spaces; a
 * path that ends in '/', '.' or '..' is SHMS_EINVAL. Only a regular file is a
 * segment: a directory, FIFO, device, socket or symbolic link (never followed)
 * is SHMS_EINCOMPAT, judged before anything is opened; a missing file or
 * directory is SHMS_ENOTFOUND, naming the directory; a directory anyone may
 * write that is not sticky is SHMS_EPERM (anyone could replace the file).
 * Each refusal changes nothing.
 */

/*
 * Create the segment NAME laid out from cfg (its file: above). Fails with
 * SHMS_EEXISTS (whatever exists there untouched), SHMS_EINVAL (bad name or
 * config), SHMS_ENOTFOUND (no such directory: none is made), SHMS_EPERM,
 * SHMS_ENOSPACE or SHMS_ESYSTEM. The segment is never
 * attachable half-made: its magic is published last. Blocks on the kernel
 * only: every page is reserved up front (a large segment takes a while; a
 * full filesystem is SHMS_ENOSPACE then, not a SIGBUS later). On failure no
 * segment is left (the file it made is removed, if NAME still names it). Any
 * thread; of two creates of one name, one wins.
 */
SHMS_EXTERN int shms_create(const char *name, const shms_config *cfg);

enum {
  /* Map read-only and do not register: for observers (status, metrics). */
  SHMS_ATTACH_OBSERVER = 1u << 0,
};

/*
 * Attach to NAME (a plain name or a path: "Segment names" above): validate it (SHMS_EINCOMPAT, with
 * a detail naming the failed check), map it and register this process in its process table.
 * SHMS_ENOTFOUND if there is no such segment, SHMS_EPERM if it may not be
 * opened, SHMS_EBUSY if the process table is full (an entry of a dead process
 * is taken over once the command it recorded is killed: see "Commands"),
 * SHMS_ESHUTDOWN while the segment is being destroyed, SHMS_EINVAL for a bad
 * name or a NULL out. Blocks only to take over a dead process's entry, when
 * no entry is free: killing its command waits up to 2 s for the command's
 * process group and cgroup to be gone. On failure nothing is registered and
 * *out is untouched. Any thread (the process's attaches and detaches take
 * turns on a lock of the process).
 */
SHMS_EXTERN int shms_attach(const char *name, unsigned flags, shms_t **out);
/*
 * Unregister and unmap. The last handle of the process to detach settles what
 * the process still holds, as recovery would after its death: its queued and
 * granted requests end SHMS_EOWNERLOST, its leases are released or
 * quarantined per the class's on-holder-death, a worker's cells go offline,
 * and its recorded command (shms_command_set) is killed first (waiting up to
 * 2 s for it to be gone). No other call on h may be under way or follow: the
 * handle is freed even on error (SHMS_EINVAL: h NULL, or attached by another
 * process: after fork the child's detach leaves the parent's registration
 * alone).
 */
SHMS_EXTERN int shms_detach(shms_t *h);

enum { SHMS_DESTROY_FORCE = 1u << 0 };
/*
 * Unlink NAME's file (a plain name or a path: "Segment names" above), only
 * while NAME still names the file that was checked. Refuses with SHMS_EBUSY while other live
 * processes are attached, unless SHMS_DESTROY_FORCE; the segment's supervisor does not count (it
 * holds nothing, and leaves once the segment is removed: shms_segment_removed). Attached processes
 * keep their mappings; new attaches fail. The commands recorded by processes that died attached
 * (shms_command_set) are killed, and their cgroups removed, since nobody
 * could dispose of them once the segment is gone. A segment that fails validation
 * (SHMS_EINCOMPAT: corrupt, of another layout version, or half-made) is
 * removed only with SHMS_DESTROY_FORCE; a file that is not a shmsched
 * segment (its first 8 bytes are not the magic, and it is not a half-made
 * segment of this build) never is: SHMS_EINCOMPAT, nothing changed.
 * Blocks while it kills the dead processes' commands (up to 2 s each). On
 * failure nothing changed (SHMS_EBUSY restores the segment's state). A
 * refusal that SHMS_DESTROY_FORCE would overcome names it in the detail
 * ("...; SHMS_DESTROY_FORCE removes it anyway"), for a front end to put its
 * own spelling in its place (the CLI's --force). Any thread.
 */
SHMS_EXTERN int shms_destroy(const char *name, unsigned flags);

/*
 * 1 once the segment h is attached to has been removed (destroyed: its name
 * unlinked, whether or not NAME was created again since), 0 while it is not,
 * negative on error. Never blocks; an observer handle will do.
 */
SHMS_EXTERN int shms_segment_removed(const shms_t *h);

/* The configuration the segment was created with (as attach validated it). Never blocks; an
 * observer handle will do; SHMS_EINVAL for a NULL out. */
SHMS_EXTERN int shms_get_config(const shms_t *h, shms_config *out);

typedef struct {
  uint64_t incarnation;     /* random id of this segment's creation */
  uint64_t created_unix_ns; /* CLOCK_REALTIME at creation */
  uint64_t size;            /* bytes */
  uint32_t layout_version;
  uint32_t state;          /* shms_segment_state_t */
  uint32_t live_processes; /* registered and proven alive by their lock */
  uint32_t max_processes;
  uint32_t file_mode;     /* the segment file's permission bits now (fstat) */
  uint32_t file_gid;      /* the segment file's group now (fstat) */
  uint32_t file_uid;      /* the segment file's owner now (fstat): one of its admins */
  int32_t supervisor_pid; /* the process holding the supervisor lock now, 0 if none */
  /* The segment file's size now (fstat): not size when someone grew or truncated it since,
   * which processes attaching from then on refuse (SHMS_EINCOMPAT). */
  uint64_t file_size;
} shms_segment_info;

typedef enum {
  SHMS_SEG_ACTIVE = 1,
  SHMS_SEG_DRAINING = 2,
  SHMS_SEG_DESTROYING = 3
} shms_segment_state_t;

/* The segment's facts, its live processes counted by their locks (never blocks: the kernel is
 * asked, F_GETLK). An observer handle will do; SHMS_EINVAL for a NULL out. */
SHMS_EXTERN int shms_segment_info_get(const shms_t *h, shms_segment_info *out);

/*
 * The queue-wait histogram's buckets: bucket i counts the grants from the queue whose wait was
 * at most SHMS_WAIT_BUCKET_LE_NS[i] ns (and more than the bound before it); the last bucket,
 * UINT64_MAX, counts the rest. Fixed, log-spaced by the R10 series (1, 1.25, 1.6, 2, 2.5, 3.15,
 * 4, 5, 6.3, 8 per decade: each bound at most 1.28 times the one before), 10 us .. 100 s, so that
 * a quantile interpolated within a bucket (Prometheus's histogram_quantile) is within 25% of the
 * true one; kept in the segment: every process that grants adds to the same counts.
 */
#define SHMS_WAIT_BUCKETS 72
#define SHMS_WAIT_BUCKET_LE_NS                                                                     \
  {                                                                                                \
    10000ull, 12500ull, 16000ull, 20000ull, 25000ull, 31500ull, 40000ull, 50000ull, 63000ull,      \
        80000ull, 100000ull, 125000ull, 160000ull, 200000ull, 250000ull, 315000ull, 400000ull,     \
        500000ull, 630000ull, 800000ull, 1000000ull, 1250000ull, 1600000ull, 2000000ull,           \
        2500000ull, 3150000ull, 4000000ull, 5000000ull, 6300000ull, 8000000ull, 10000000ull,       \
        12500000ull, 16000000ull, 20000000ull, 25000000ull, 31500000ull, 40000000ull, 50000000ull, \
        63000000ull, 80000000ull, 100000000ull, 125000000ull, 160000000ull, 200000000ull,          \
        250000000ull, 315000000ull, 400000000ull, 500000000ull, 630000000ull, 800000000ull,        \
        1000000000ull, 1250000000ull, 1600000000ull, 2000000000ull, 2500000000ull, 3150000000ull,  \
        4000000000ull, 5000000000ull, 6300000000ull, 8000000000ull, 10000000000ull,                \
        12500000000ull, 16000000000ull, 20000000000ull, 25000000000ull, 31500000000ull,            \
        40000000000ull, 50000000000ull, 63000000000ull, 80000000000ull, 100000000000ull,           \
        UINT64_MAX                                                                                 \
  }

/*
 * Rejections by reason (shms_class_stats.rejected_by): entry i counts the requests ended with
 * SHMS_REJECT_REASON_CODES[i]; the last entry (code 0) counts every other reason.
 */
#define SHMS_REJECT_REASONS 6
#define SHMS_REJECT_REASON_CODES                                                                   \
  { SHMS_EQUEUEFULL, SHMS_EDENIED, SHMS_EDUPACT, SHMS_ESHUTDOWN, SHMS_EQUARANTINED, 0 }

/* Live figures of one class, read as one coherent snapshot. */
typedef struct {
  uint32_t cells;
  uint32_t available;
  uint32_t leased; /* accepted leases (worker classes: jobs a worker runs) */
  uint32_t quarantined;
  uint32_t offline;
  uint32_t queue_capacity;
  uint32_t queue_depth;
  uint32_t queued_tenants;
  uint64_t granted;
  uint64_t rejected;
  uint64_t cancelled;
  uint64_t expired;
  uint64_t total_wait_ns;
  uint64_t max_wait_ns;
  uint64_t oldest_lease_age_ns; /* of the accepted leases */
  /* Cells granted to a request whose waiter has not accepted yet (for a job: its worker has not
   * taken it), and the oldest such grant's age: a waiter that is stopped or dead shows here. */
  uint32_t granted_unaccepted;
  uint64_t oldest_grant_age_ns;
  uint64_t revoked; /* grants not accepted within grant-timeout, given to the next request */
  /* Grants from the queue by how long they waited (SHMS_WAIT_BUCKET_LE_NS): the fast path, which
   * never waits, is not counted. Their sum is the number of waits total_wait_ns adds up. */
  uint64_t wait_buckets[SHMS_WAIT_BUCKETS];
  uint64_t rejected_by[SHMS_REJECT_REASONS]; /* `rejected` by reason: SHMS_REJECT_REASON_CODES */
  uint64_t quarantines; /* cells quarantined since creation (a lease's holder, recovery, ...) */
  uint64_t recovered;   /* what recoveries settled in the class for the dead: one per lease,
                           grant, request, job, worker or baton (not the recompute itself, nor
                           counts fixed and slots freed): 0 while nobody died */
  uint32_t reserved;    /* cells held for a multi-cell request gathering its cells */
  uint64_t joined;      /* submits that joined a live job of the same key (shms_submit_key) */
} shms_class_stats;

/* Names one request. A stale ticket (its slot reused) is told apart by seq. */
typedef struct {
  uint32_t cls;
  uint32_t slot;
  uint64_t seq;
  uint64_t incarnation; /* the segment's: a ticket of another segment is not-found */
} shms_ticket;

/* A cell's state, as shms_cells reports it (the values of the cell word's state). */
typedef enum {
  SHMS_CELL_AVAILABLE = 1,   /* free */
  SHMS_CELL_GRANTED = 2,     /* granted to a request whose waiter has not accepted it yet */
  SHMS_CELL_LEASED = 3,      /* an accepted lease (a worker class: a job its worker runs) */
  SHMS_CELL_QUARANTINED = 4, /* out of service until repaired */
  SHMS_CELL_OFFLINE = 5,     /* worker class: no worker bound */
  SHMS_CELL_RESERVED = 6,    /* held for a multi-cell request gathering its cells */
} shms_cell_state_t;

/* One cell: who holds it and since when. */
typedef struct {
  uint32_t cell;
  uint32_t state;      /* shms_cell_state_t */
  uint32_t generation; /* moves on at every release, quarantine and repair */
  int32_t pid;         /* the holder (granted, leased; quarantined: the last one) or, in a
                          worker class, the bound worker, by its pid in the caller's pid
                          namespace; 0 if none, its entry was reused, or pid_foreign */
  int alive;           /* that process still holds its lock */
  char tenant[SHMS_TENANT_MAX + 1]; /* granted, leased (quarantined: the last lease's) tenant */
  uint64_t since_ns; /* granted, leased (quarantined: the last lease's): CLOCK_MONOTONIC time of
                        the grant; 0 while not known (a prepared acquire's lease, until the
                        next shms_upkeep or waiter's poll stamps it) */
  int reason;        /* quarantined: why (a reason code, or the holder's own) */
  uint64_t leases;   /* leases handed out on this cell since creation */
  /* Leased (lease classes): the ticket of the request that took the lease; seq 0 when there is
   * none (a lease taken on the fast path has no request, and no ticket). */
  shms_ticket ticket;
  uint64_t quarantined_unix_ns; /* quarantined: when (CLOCK_REALTIME), 0 if not known */
  uint32_t uid; /* granted, leased (quarantined: the last lease's): the effective uid of the
                   process that enqueued or acquired it */
  /* Granted, leased: the lead cell of the lease this cell belongs to (the cell itself for a
   * lease of one cell) and how many cells that lease holds. A cell held with others reports its
   * lease's state, holder, tenant and start. */
  uint32_t lead;
  uint32_t lease_cells;
  /* That process as its own pid namespace numbers it, and that namespace's inode (nsfs); 0 if
   * none. pid_foreign 1: its namespace's numbers cannot be translated to the caller's (a
   * namespace above or beside it, or the caller's /proc is not its own namespace's): pid is 0,
   * and only ns_pid in pidns names it (docs/api.md, "Pids across pid namespaces"). */
  int32_t ns_pid;
  uint32_t pid_foreign;
  uint64_t pidns;
} shms_cell_info;

/*
 * Every cell of class c, read without taking part in scheduling (an observer
 * handle will do; never blocks, never registers): up to max rows into out,
 * *count = the class's cells. Each row is one cell at one instant; the rows
 * are not one instant together. SHMS_EINVAL for a class the segment does not
 * configure.
 */
SHMS_EXTERN int shms_cells(shms_t *h, shms_class_t c, shms_cell_info *out, uint32_t max,
                           uint32_t *count);

/*
 * The class's live figures. Never blocks, never registers (an observer handle
 * will do): counters are read inside the class's sequence lock, retried a
 * bounded number of times (a writer that died inside it leaves them readable,
 * if torn). SHMS_EINVAL for a class the segment does not configure, or a NULL
 * out.
 */
SHMS_EXTERN int shms_observe(shms_t *h, shms_class_t c, shms_class_stats *out);

/* ---- Scheduling: requests, tickets, leases ------------------------------ */

/* What one request asks for. */
typedef struct {
  shms_class_t cls;
  const char *tenant;     /* 1..31 graphic ASCII bytes */
  int32_t priority;       /* higher runs first, within the tenant's turn */
  uint64_t deadline_ns;   /* absolute CLOCK_MONOTONIC; 0 = none */
  const char *activation; /* optional id, 1..31 graphic bytes; live ids are unique per class */
  /* Cells held at once, all or nothing: 0 or 1 for one; up to the class's cells (lease classes
   * without tenant-max-active; docs/contract.md, "Multi-cell requests"). */
  uint32_t cells;
  /* Quotas the request names, each a name of the segment's table (shms_quota_set), at most
   * SHMS_REQUEST_QUOTAS_MAX, none twice; NULL/0 for none. One cell, not prepared. Granted a
   * cell only while every one has a unit free; the lease (or the job, on a worker class: from
   * its grant until it ends, however it ends) holds one unit of each until it ends
   * (docs/contract.md, "Quotas"). A request naming none never waits for one, nor for a request
   * that does. */
  const char *const *quotas;
  uint32_t nquotas;
} shms_request;

/* The right to run on one cell, or on several at once. Release or quarantine must present it
 * exactly. A lease of several cells names its lead cell (cell, generation and token are the
 * lead's); shms_lease_cells lists them all, and releasing or quarantining the lease ends all. */
typedef struct {
  uint32_t cls;
  uint32_t cell;
  uint32_t generation;
  uint32_t cells; /* cells the lease holds: 1 (0 in a lease made by hand reads as 1) */
  uint64_t token;
  uint64_t incarnation;
} shms_lease;

/* Bytes of the text form of a ticket, "standard.17.1234.9f3a...", with its NUL. */
#define SHMS_TICKET_STRLEN 64
/* Write t's text form into buf (at least SHMS_TICKET_STRLEN bytes). Never blocks; any thread. */
SHMS_EXTERN void shms_ticket_format(const shms_ticket *t, char *buf);
/* Parse a ticket's text form; SHMS_EINVAL with a detail when malformed (*out untouched). Never
 * blocks; any thread. */
SHMS_EXTERN int shms_ticket_parse(const char *text, shms_ticket *out);

/*
 * Queue a request; on success *ticket names it. Returns once the request is
 * in its tenant's queue (or refused): it may sleep (a futex wait, without
 * limit) until a dispatcher has indexed the request, helping the dispatcher
 * or becoming it meanwhile; shms_interrupt does not cut it short. Any thread.
 * Errors: SHMS_EINVAL, SHMS_EDENIED (queue=0, or the tenant not allowed),
 * SHMS_EQUEUEFULL (every slot taken, or the tenant table full),
 * SHMS_EDUPACT, SHMS_EDEADLINE (already past), SHMS_ESHUTDOWN,
 * SHMS_EQUARANTINED. On error nothing was queued.
 */
SHMS_EXTERN int shms_enqueue(shms_t *h, const shms_request *req, shms_ticket *ticket);

/*
 * Wait for the request's outcome until timeout_ns from now (UINT64_MAX: no
 * limit; 0: just look). On a grant, accept it and fill *lease. Errors:
 * SHMS_ETIMEDOUT (still queued: call again or cancel), SHMS_ECANCELLED,
 * SHMS_EDEADLINE, SHMS_ESHUTDOWN, SHMS_EQUARANTINED, SHMS_ESEQEXHAUSTED,
 * SHMS_EOWNERLOST, SHMS_ENOTFOUND (unknown or stale ticket), SHMS_EINVAL
 * (the request was queued by another process: only its owner may wait for it).
 * Every outcome but SHMS_ETIMEDOUT retires the ticket. Blocks: sleeps on the
 * request's word (a futex) until it is granted or ends, timeout_ns passes, or
 * shms_interrupt(h, 1) (SHMS_ETIMEDOUT), waking once a second to check that
 * nothing dead holds the class up; it may do the dispatcher's work meanwhile,
 * and recover a dead holder it finds (its command killed first: up to 2 s).
 * SHMS_ETIMEDOUT and the argument errors leave the request as it was. One
 * thread at a time per ticket (another may wait for other tickets meanwhile).
 */
SHMS_EXTERN int shms_wait(shms_t *h, const shms_ticket *ticket, uint64_t timeout_ns,
                          shms_lease *lease);

/*
 * Enqueue and wait without a time limit (the request's deadline still applies);
 * with a cell free, in a class without tenant-max-active, take it at once
 * without a request slot (the fast path of shms_try_acquire): when nobody is
 * queued, or while the class's overtake bound allows taking a cell ahead of
 * the queue (shms_class_config.overtake_ns).
 * Blocks as shms_enqueue and shms_wait do. Errors as theirs, and as
 * shms_try_acquire's fast path (SHMS_ESEQEXHAUSTED: the cell whose tokens ran
 * out is quarantined). An acquire interrupted by shms_interrupt fails
 * SHMS_ETIMEDOUT and withdraws its request (counted as cancelled): the caller
 * has no ticket to wait again with. No other failure leaves a request behind.
 */
SHMS_EXTERN int shms_acquire(shms_t *h, const shms_request *req, shms_lease *lease);

/*
 * Take a free cell now or fail with SHMS_EWOULDBLOCK; never waits for a cell,
 * and overtakes queued work only within the class's overtake bound (none
 * with overtake_ns = SHMS_OVERTAKE_STRICT). With free cells and an empty queue this is
 * one compare-and-swap on the class's fast word and one on the cell: no system
 * call. A cell whose lease tokens are used up is quarantined on the way and the
 * call fails SHMS_ESEQEXHAUSTED. In a class with tenant-max-active the call
 * queues a request (a slot, like shms_enqueue: it may sleep until the request
 * is indexed), looks once and withdraws it; it can then also fail as
 * shms_enqueue does (SHMS_EQUEUEFULL, SHMS_EDUPACT, SHMS_EDEADLINE, ...).
 * Any thread. A failure leaves no request and no lease (a quarantined cell
 * on token exhaustion excepted).
 */
SHMS_EXTERN int shms_try_acquire(shms_t *h, const shms_request *req, shms_lease *lease);

/*
 * A prepared request: a request's class, tenant and priority validated once
 * (shms_request_prepare) for many acquires by the handle that prepared it. It
 * lives in the caller's memory and is read, never written, by the calls that
 * take it: any number of threads of the process may use one at once. Opaque:
 * the library checks that it is whole (a keyed check word) and is the
 * handle's (segment incarnation and handle), and refuses anything else with
 * SHMS_ESTALE, as it refuses a forged lease; a copy made with memcpy is as
 * good as the original. Nothing to free.
 */
typedef struct {
  uint64_t opaque[9];
} shms_prepared;

/*
 * Validate req as shms_acquire would (class, lease mode, queue, tenant name,
 * allow list, the tenant= binding and identities against the caller's
 * credentials now, segment state) and fill *out. req->deadline_ns and
 * req->activation must be 0 and NULL (each belongs to one request: use
 * shms_acquire for them), else SHMS_EINVAL. Never blocks; any thread. On
 * failure *out is untouched. The prepared request is valid for h only, until
 * h is detached: another handle (even of the same segment) or a segment
 * created again under the same name refuses it with SHMS_ESTALE.
 *
 * Credentials: a class whose rules name users or groups (tenant=user,
 * tenant=group, '~USER'/'@GROUP' allow entries) checks the caller's
 * credentials again on every acquire, as shms_acquire does (a process may
 * change its euid or groups after preparing); only such classes pay those
 * system calls. Every other check that can change (segment drained, every
 * cell quarantined) is made on every call too.
 */
SHMS_EXTERN int shms_request_prepare(shms_t *h, const shms_request *req, shms_prepared *out);

/*
 * shms_acquire and shms_try_acquire for a prepared request: the same
 * outcomes, blocking and failures, without validating the class and tenant
 * again. SHMS_ESTALE (nothing changed) for a prepared request of another
 * handle, segment or incarnation, or one whose bytes are not as
 * shms_request_prepare left them; SHMS_EINVAL for a NULL argument. With a
 * cell free and nobody queued (or overtaking allowed), in a class without
 * tenant-max-active and without identity rules: one compare-and-swap on the
 * class's fast word, no system call, no name validation.
 */
SHMS_EXTERN int shms_acquire_prepared(shms_t *h, const shms_prepared *p, shms_lease *lease);
SHMS_EXTERN int shms_try_acquire_prepared(shms_t *h, const shms_prepared *p, shms_lease *lease);

/*
 * Cancel a request from any attached process. Returns 1 when this call
 * installed the cancellation; 0 when the request had already been cancelled
 * or had already ended, including one whose lease is held (a lease is never
 * revoked: the detail says which; nothing changed); SHMS_ENOTFOUND for an
 * unknown or stale ticket. Never blocks (a cancelled request's waiter is
 * woken); any thread; the request's waiter may be waiting meanwhile.
 */
SHMS_EXTERN int shms_cancel(shms_t *h, const shms_ticket *ticket);

/*
 * Return the lease's cell to service. SHMS_ELEASE if the lease is not exactly
 * current (nothing changed). Any thread, and any process that presents the
 * lease exactly (its token is the right to it). Waits only while the class is
 * held still (a check or recovery at work): after 250 ms the release is
 * recorded, returns SHMS_OK, and is done for the caller as soon as the class
 * goes again (docs/protocol.md, "Held still"); a process has one such record,
 * and a second release meanwhile waits for the class.
 */
SHMS_EXTERN int shms_release(shms_t *h, const shms_lease *lease);
/*
 * Take the lease's cell out of service (its cleanup could not be proven);
 * reason is recorded for operators. SHMS_ELEASE if the lease is not current
 * (nothing changed). Never blocks; as shms_release. The class's last cell
 * quarantined ends its queued requests SHMS_EQUARANTINED.
 */
SHMS_EXTERN int shms_quarantine(shms_t *h, const shms_lease *lease, int reason);
/*
 * The cells the lease holds, in ascending order: up to max into out; returns how many it holds
 * (1 for a lease of one cell), or SHMS_ELEASE if the lease is not exactly current, SHMS_EINVAL
 * for a NULL out with max > 0. Never blocks; any thread. Reads the class's cells: O(cells) for
 * a lease of several.
 */
SHMS_EXTERN int shms_lease_cells(shms_t *h, const shms_lease *lease, uint32_t *out, uint32_t max);

/*
 * Return quarantined cells of class c to service: one cell, or every one with
 * cell = -1; returns how many. A worker class's cells come back offline, for
 * a new worker. SHMS_EINVAL for a cell the class does not have (or a negative
 * one but -1), or a named cell that is not quarantined: nothing changed.
 * Never blocks; any thread.
 */
SHMS_EXTERN int shms_repair(shms_t *h, shms_class_t c, int cell);

/*
 * Stop taking work: new requests fail with SHMS_ESHUTDOWN, queued and
 * granted-but-unaccepted requests are settled with SHMS_ESHUTDOWN, accepted
 * leases keep their cells until released (running jobs run on). Draining
 * again is no error; SHMS_ESHUTDOWN when the segment is being destroyed.
 * For the segment's admins only (docs/security.md): SHMS_EPERM for others.
 * Never blocks (it visits every request slot of every class); any thread.
 */
SHMS_EXTERN int shms_drain(shms_t *h);
/*
 * Lift a drain: DRAINING -> ACTIVE (docs/protocol.md, "Segment states"). New requests are taken
 * again; requests the drain settled stay settled. Returns 1 if the segment was draining, 0 if it
 * was already active; SHMS_ESHUTDOWN while it is being destroyed; SHMS_EPERM for non-admins.
 * Never blocks (one CAS; the admin check may read the group database); any thread; a failure
 * changes nothing.
 */
SHMS_EXTERN int shms_resume(shms_t *h);

/* Why a request waits. */
typedef enum {
  SHMS_REQ_QUEUED = 1,
  SHMS_REQ_GRANTED = 2, /* granted, not yet accepted */
  SHMS_REQ_ENDED = 3,   /* settled; outcome says how (0: accepted, or completed) */
  SHMS_REQ_RUNNING = 4, /* worker classes: a worker runs the job */
  SHMS_REQ_HELD = 5     /* lease classes: accepted, and its lease is held (cell, holder, held_ns) */
} shms_request_state_t;

enum {
  SHMS_BLOCK_NO_CELL = 1u << 0,      /* every cell is leased, granted or quarantined */
  SHMS_BLOCK_TENANT_LIMIT = 1u << 1, /* its tenant is at tenant-max-active */
  SHMS_BLOCK_NO_WORKER = 1u << 2,    /* worker class: no idle worker */
  SHMS_BLOCK_DRAINING = 1u << 3,     /* the segment is draining */
  SHMS_BLOCK_TURN = 1u << 4,         /* other tenants' turns or its own tenant's earlier work */
  SHMS_BLOCK_GATHER = 1u << 5,       /* a request of several cells gathers them: nothing else is
                                        granted until it holds them all (it, or another) */
  SHMS_BLOCK_QUOTA = 1u << 6,        /* a quota it names has no unit free (quota names one) */
};

typedef struct {
  uint32_t state; /* shms_request_state_t */
  int outcome;    /* for SHMS_REQ_ENDED: 0 accepted, else the error */
  char tenant[SHMS_TENANT_MAX + 1];
  int32_t priority;
  uint64_t waited_ns;       /* since enqueue */
  uint32_t aged;            /* waited at least starvation-after */
  uint32_t tenants_ahead;   /* tenants whose turn comes first; UINT32_MAX if not in the ring */
  uint32_t ring_length;     /* tenants taking turns */
  uint32_t ahead_in_tenant; /* its tenant's requests that go before it */
  uint32_t tenant_queued;   /* its tenant's queued requests */
  uint32_t blocked_by;      /* SHMS_BLOCK_* */
  /* SHMS_REQ_HELD only (its slot was given back at acceptance: tenant and priority are gone): */
  uint32_t cell;         /* the cell its lease holds */
  int32_t holder_pid;    /* the process holding the lease, by its pid in the caller's pid
                            namespace; 0 if its process entry is gone, or holder_foreign */
  uint32_t holder_alive; /* that process is alive (its liveness lock is held) */
  uint64_t held_ns;      /* how long ago the lease was granted */
  uint32_t uid;          /* the effective uid of the process that enqueued it */
  /* SHMS_REQ_QUEUED: the cells it asks for (1 for most), and how many are reserved for it now
   * (while it gathers them: SHMS_BLOCK_GATHER). */
  uint32_t cells;
  uint32_t gathered;
  /* SHMS_REQ_HELD: the holder as its own pid namespace numbers it, that namespace's inode, and
   * whether its number cannot be translated to the caller's namespace (then holder_pid is 0):
   * as shms_cell_info's ns_pid, pidns and pid_foreign. */
  int32_t holder_ns_pid;
  uint32_t holder_foreign;
  uint64_t holder_pidns;
  /* SHMS_REQ_QUEUED with SHMS_BLOCK_QUOTA: the first quota it names that has no unit free. */
  char quota[SHMS_TENANT_MAX + 1];
} shms_explanation;

/*
 * Explain why ticket's request waits (or how it ended, or, for a lease class,
 * where its lease is held while it is). SHMS_ENOTFOUND for a stale ticket, or
 * a request whose lease has ended and whose outcome was collected. Reads the
 * index under the class's dispatcher baton: blocks (yielding the CPU) until a
 * live dispatcher lets it go, at most a second, then fails SHMS_ETIMEDOUT
 * (nothing changed); a dead holder's baton is taken over. Any thread, any
 * process.
 */
SHMS_EXTERN int shms_explain(shms_t *h, const shms_ticket *ticket, shms_explanation *out);

/* One tenant's figures in one class. */
typedef struct {
  char name[SHMS_TENANT_MAX + 1];
  uint32_t queued;
  uint32_t active; /* leases counted against tenant-max-active (0 when unlimited) */
  uint32_t in_ring;
  /* Leases granted to it in the class, from the queue and on the fast path; the waits of those
   * from the queue (a lease taken at once waits 0). Kept while it is idle. */
  uint64_t granted;
  uint64_t total_wait_ns;
  uint64_t max_wait_ns;
  /* Fair share (shmsched policy): its weight, its team ("" for none) and the team's weight, and
   * the cell-time its leases held in the class (fair by time; ns, counted as each ends). */
  uint32_t weight;
  uint32_t team_weight;
  char team[SHMS_TENANT_MAX + 1];
  uint64_t cell_ns;
  /* Its part of the class now by the fairness rule, among the tenants with a turn (in_ring;
   * 0 without one): of cell-time by weight and team in a class fair by time, of grants (equal
   * turns) in one fair by grants. Computed over the rows returned. */
  double entitled_share;
} shms_tenant_stats;

/*
 * The tenants of class c: those with queued work or counted leases now, and every tenant the
 * class granted a lease (from the queue or on the fast path), whose figures the tenant table
 * keeps while it is idle (a full table sums the least recently active into a row `_other`). Up
 * to max into out, the number present into *count (which may exceed max, and may grow between
 * two calls). Blocks as shms_explain does (SHMS_ETIMEDOUT after a second of a busy dispatcher,
 * *count untouched); SHMS_ENOMEM when it cannot allocate its working rows. Any thread.
 */
SHMS_EXTERN int shms_tenants(shms_t *h, shms_class_t c, shms_tenant_stats *out, uint32_t max,
                             uint32_t *count);

/*
 * The same rows for an observer: read-only, never registers, never takes the dispatcher's baton
 * and never waits for anyone (an observer handle will do: SHMS_ATTACH_OBSERVER). It writes
 * nothing, so it cannot slow the hot path but by sharing its cache lines for a moment.
 * Consistency, per row: a row is one tenant record seen whole (in use and of the same name
 * before and after it was read; a record that kept changing over 64 tries is left out);
 * granted, total_wait_ns and max_wait_ns are one instant (read inside the class's observation
 * seqlock, as shms_observe reads its counters); queued, active and in_ring are each read once
 * and may be a grant apart from them. Rows are not one instant together. A tenant's figures
 * only grow from one call to the next (until its record is folded into `_other`). Tenants with
 * a record in the class come first, in table order. SHMS_EINVAL for a class the segment does
 * not configure; SHMS_ENOMEM as shms_tenants. Any thread; a failure leaves nothing.
 */
SHMS_EXTERN int shms_tenants_snapshot(shms_t *h, shms_class_t c, shms_tenant_stats *out,
                                      uint32_t max, uint32_t *count);

/* ---- Worker mode: jobs with payloads ------------------------------------ */

/*
 * A class created with mode=worker schedules jobs onto worker processes: each
 * cell is bound to one worker (a cell with no worker is offline). Clients
 * submit a payload and wait for the result; workers take jobs, run them and
 * complete them. Fairness is that of lease mode; a grant needs a queued job
 * and an idle worker. A job's slot carries its payload and then its result,
 * so size the class's queue for waiting plus running jobs.
 */

enum {
  /* If the worker dies mid-job, queue the job once more instead of ending it worker-lost. */
  SHMS_SUBMIT_RETRY_ONCE = 1u << 0,
};

/*
 * Queue a job: payload (len bytes, at most the class's payload size, else
 * SHMS_EINVAL) is copied into the job's slot. Errors, blocking and threads as
 * shms_enqueue; also SHMS_EINVAL for unknown flags or a NULL payload with
 * len > 0.
 */
SHMS_EXTERN int shms_submit(shms_t *h, const shms_request *req, const void *payload, size_t len,
                            unsigned flags, shms_ticket *ticket);

enum {
  /* shms_submit_key: end the key's queued jobs superseded (SHMS_ESUPERSEDED) and queue anew. */
  SHMS_SUBMIT_SUPERSEDE = 1u << 1,
  /* With SHMS_SUBMIT_SUPERSEDE: ask the worker of the key's running job to stop it too (as
   * shms_cancel asks). Without it, a running job of the key runs to its end. */
  SHMS_SUBMIT_SUPERSEDE_RUNNING = 1u << 2,
};

/*
 * Single-flight by key: as shms_submit, for a job carrying key (1..SHMS_KEY_MAX graphic ASCII
 * bytes) in worker class req->cls. While a job with the same key is queued or running in the
 * class, the submit joins it instead of queueing another: *ticket names that job (the same
 * ticket its submitter holds), *joined (if not NULL) is set to 1, and payload, flags' retry and
 * req's priority and deadline are not used (the job runs once, as first submitted). Each waiter
 * (the submitter and every joiner) holds a share: shms_wait_result gives every one of them the
 * same status and result bytes, and shms_cancel by one of them only takes its share back (its
 * wait then ends SHMS_ECANCELLED): the job itself is cancelled when its last waiter leaves. A
 * process whose share is gone (it left, it took the result) cannot wait on the ticket again.
 * With SHMS_SUBMIT_SUPERSEDE the key's queued jobs end SHMS_ESUPERSEDED for all their waiters
 * and a new job is queued (*joined 0); SHMS_SUBMIT_SUPERSEDE_RUNNING stops a running one too.
 * Errors as shms_submit; SHMS_EINVAL for a bad key, a lease class, an activation id with a key
 * or supersede flags without SHMS_SUBMIT_SUPERSEDE; SHMS_EBUSY when the process already waits
 * on SHMS_KEY_JOINS_MAX joined jobs. Never blocks beyond shms_submit; any thread.
 */
#define SHMS_KEY_JOINS_MAX 16
SHMS_EXTERN int shms_submit_key(shms_t *h, const shms_request *req, const char *key,
                                const void *payload, size_t len, unsigned flags,
                                shms_ticket *ticket, int *joined);

/* One job of a batch (shms_submit_batch): what shms_submit takes, less the class (the
 * batch's) and the activation id (a batch's jobs have none), and the key shms_submit_key
 * takes. */
typedef struct {
  const char *tenant;   /* 1..31 graphic ASCII bytes */
  int32_t priority;     /* higher runs first, within the tenant's turn */
  uint64_t deadline_ns; /* absolute CLOCK_MONOTONIC; 0 = none */
  const void *payload;  /* len bytes, copied into the job's slot */
  size_t len;
  /* Quotas of the segment the job holds a unit of while it runs, as shms_request's (0..8). */
  const char *const *quotas;
  uint32_t nquotas;
  const char *key; /* single-flight (as shms_submit_key, without supersede); NULL: none */
} shms_batch_job;

/* The most jobs one batch may hold (a class's queue holds at most SHMS_QUEUE_MAX anyway). */
#define SHMS_BATCH_MAX 4096u

/*
 * Queue n jobs (1..SHMS_BATCH_MAX) on worker class c, all or none: either
 * every job is queued, each with its ticket in tickets[0..n-1] in input
 * order, or none is and nothing in the segment changed. No observer (a
 * dispatcher, a worker, shms_observe, another client) ever sees part of a
 * batch queued: the jobs are published and indexed while this call holds the
 * class's dispatcher, which then grants them in one pass (one wake-up).
 * flags as shms_submit's, for every job. A dead caller half-way leaves
 * nothing: recovery ends what it had claimed or queued (owner-lost), and a
 * job the call had not finished queuing never ran.
 * A job with a key is submitted as shms_submit_key would (without supersede):
 * it joins the live job of its key, or queues one that the batch's later jobs
 * of the key join; each such job holds its own share, and its ticket is the
 * job's. A refusal gives back every join the call made (the jobs joined run on
 * for their other waiters). Each join takes one of the process's
 * SHMS_KEY_JOINS_MAX join records: a batch needing more than are free is
 * refused (SHMS_EINVAL when its repeated keys alone need more than
 * SHMS_KEY_JOINS_MAX, else SHMS_EBUSY), naming the first job that does not fit.
 * A refusal names the job that caused it in *failed (its index), or n when
 * the batch as a whole was refused: SHMS_EINVAL (a bad job: tenant, payload
 * size, NULL payload, key; n = 0 or over SHMS_BATCH_MAX; unknown flags, or
 * SHMS_SUBMIT_SUPERSEDE; a lease class), SHMS_EDENIED (a tenant the class does not allow),
 * SHMS_EDEADLINE (a deadline already passed), SHMS_EQUEUEFULL (the n jobs do not all fit in the
 * queue's free slots, or a tenant new to the class finds its tenant table full), SHMS_ESHUTDOWN,
 * SHMS_EQUARANTINED, SHMS_EBUSY (the class's dispatcher stayed busy for a whole second; nothing was
 * queued), SHMS_ETIMEDOUT (the class was held still by a recovery past the earliest deadline),
 * SHMS_EBUSY also when another job of a key always went first (100 tries). failed may be NULL. Wait
 * for each job with shms_wait_result and its ticket; the jobs are the caller's, as shms_submit's.
 * Blocks only as shms_enqueue; any thread.
 */
SHMS_EXTERN int shms_submit_batch(shms_t *h, shms_class_t c, const shms_batch_job *jobs, size_t n,
                                  unsigned flags, shms_ticket *tickets, size_t *failed);

/*
 * Cancel the jobs of a batch (its tickets, n of them) that have not started:
 * a queued job ends SHMS_ECANCELLED; a running or ended one is left as it
 * is (a running one is not even asked to stop: shms_cancel does that for one
 * job). *cancelled (may be NULL) counts the jobs this call cancelled.
 * SHMS_OK, or the first error shms_cancel would give for a ticket (the others
 * are still cancelled); a retired ticket (a job that ended and was collected)
 * is skipped. A keyed job's ticket gives back the caller's share of it, as
 * shms_cancel does: the job is cancelled (if not started) only when that share
 * was its last. Any process allowed to cancel them; never blocks
 * beyond an operation.
 */
SHMS_EXTERN int shms_cancel_batch(shms_t *h, const shms_ticket *tickets, size_t n,
                                  size_t *cancelled);

typedef struct {
  int status;        /* the worker's status for the job */
  size_t result_len; /* bytes of result (set even when buf was too small) */
} shms_result;

/*
 * Wait up to timeout_ns (UINT64_MAX: no limit; 0: just look) for the job to
 * end. SHMS_OK: it completed; *out has the worker's status and the result is
 * copied into buf. A result longer than cap fails with SHMS_EINVAL and
 * out->result_len set, and nothing is consumed: call again with a larger
 * buffer. Errors: SHMS_ETIMEDOUT (still queued or running), SHMS_ECANCELLED,
 * SHMS_EDEADLINE (it never started before its deadline), SHMS_EWORKERLOST,
 * SHMS_ESHUTDOWN, SHMS_EOWNERLOST, SHMS_EQUARANTINED, SHMS_ENOTFOUND,
 * SHMS_EINVAL (another process's job: only the process that submitted it may
 * wait for it). Every outcome but SHMS_ETIMEDOUT (and a too-small buffer)
 * retires the ticket.
 * Cancelling a queued job ends it SHMS_ECANCELLED; cancelling a running job
 * only raises a flag its worker can read (shms_worker_cancelled): the worker
 * decides, and the job still ends the way the worker ends it.
 * Blocks as shms_wait: sleeps on the job's word (the worker's completion
 * wakes it) until timeout_ns or shms_interrupt (SHMS_ETIMEDOUT). *out is
 * zeroed once the arguments pass. One thread at a time per ticket.
 */
SHMS_EXTERN int shms_wait_result(shms_t *h, const shms_ticket *ticket, uint64_t timeout_ns,
                                 void *buf, size_t cap, shms_result *out);

/*
 * Wait up to timeout_ns (UINT64_MAX: no limit; 0: just look) until a worker
 * has started the job (or it has completed). Sleeps on the job's word: the
 * worker's take wakes it, nothing else does but the 1 s safety poll. SHMS_OK:
 * it runs or has completed; the job's outcome otherwise (SHMS_ECANCELLED,
 * SHMS_EDEADLINE, ...), SHMS_ETIMEDOUT, SHMS_ENOTFOUND, SHMS_EINVAL (another
 * process's job, or a lease class's ticket). Retires nothing: shms_wait_result
 * still collects the job. shms_interrupt cuts it short (SHMS_ETIMEDOUT).
 */
SHMS_EXTERN int shms_wait_started(shms_t *h, const shms_ticket *ticket, uint64_t timeout_ns);

/*
 * Interrupt the waits of h, for a program that also waits for something else (a signal, a pipe)
 * on a thread of its own. With on != 0, every shms_wait, shms_wait_result, shms_wait_started
 * and shms_worker_take on h returns SHMS_ETIMEDOUT at once, as if its time had run out, those
 * asleep now included (they are woken), until shms_interrupt(h, 0): the request, job or worker
 * stays as it was. shms_acquire, which has no ticket to give back, withdraws its request
 * instead. shms_enqueue and shms_submit are not cut short. Never blocks (a lock of the handle,
 * held briefly); an observer handle will do. From any thread of the process, not from a
 * signal handler. What `shmsched submit --wait` and `shmsched worker` use to sleep until
 * something concerns them, stop signals included.
 */
SHMS_EXTERN int shms_interrupt(shms_t *h, int on);

typedef struct shms_worker shms_worker_t;

/* One job, as a worker holds it. */
typedef struct {
  shms_ticket ticket;
  shms_lease lease;
  const void *payload; /* in the segment: read it before writing the result */
  size_t payload_len;
  char tenant[SHMS_TENANT_MAX + 1];
  int32_t priority;
} shms_job;

/*
 * Bind this process to an offline cell of worker class c.
 * SHMS_EBUSY if every cell already has a worker; SHMS_EINVAL for a lease class.
 * Never blocks; any thread. On failure nothing is bound and *out untouched.
 * A worker is one thread's at a time: its calls below must not overlap.
 */
SHMS_EXTERN int shms_worker_open(shms_t *h, shms_class_t c, shms_worker_t **out);
/* The cell the worker is bound to. Never blocks. */
SHMS_EXTERN uint32_t shms_worker_cell(const shms_worker_t *w);
/*
 * Sleep until a job is granted to the worker's cell, or timeout_ns
 * (SHMS_ETIMEDOUT); then start it and fill *job. SHMS_EQUARANTINED if the
 * worker's cell was quarantined, SHMS_ENOTFOUND if it was repaired away from
 * this worker (close and open again), SHMS_EINVAL while the worker still holds
 * a job (complete it first). Blocks: sleeps on the cell's word until a grant,
 * timeout_ns or shms_interrupt (SHMS_ETIMEDOUT), waking once a second to keep
 * the class moving. A job granted to it whose client died, or whose deadline
 * passed, is never started (the client gets SHMS_EOWNERLOST/SHMS_EDEADLINE),
 * and a grant a dead dispatcher left unfinished is given back: the take goes
 * on waiting.
 */
SHMS_EXTERN int shms_worker_take(shms_worker_t *w, uint64_t timeout_ns, shms_job *job);
/* 1 if the job's client asked to cancel it, else 0; SHMS_ELEASE if job is not the one the
 * worker runs now. Never blocks. */
SHMS_EXTERN int shms_worker_cancelled(shms_worker_t *w, const shms_job *job);
/*
 * End the job with status and result (len bytes, at most the class's payload
 * size: a larger result is refused with SHMS_EINVAL and nothing changes),
 * wake its client, and make the worker idle again. result may point into the
 * job's payload. SHMS_ELEASE if job is not the one the worker runs now (the
 * job was taken from a worker judged dead): the call completes nothing.
 * Never blocks.
 */
SHMS_EXTERN int shms_worker_complete(shms_worker_t *w, const shms_job *job, int status,
                                     const void *result, size_t len);
/*
 * End the job with status reason and no result, and take the worker's cell
 * out of service (its cleanup could not be proven): shmsched repair returns
 * it, offline, for a new worker. SHMS_ELEASE as shms_worker_complete. Never
 * blocks.
 */
SHMS_EXTERN int shms_worker_quarantine(shms_worker_t *w, const shms_job *job, int reason);
/*
 * Unbind: an idle cell goes offline. A job still held ends as if the worker
 * had died (worker-lost, or queued again once), its cell quarantined. Never
 * blocks. No other call on w may be under way or follow: w is freed even on
 * error (SHMS_EINVAL: w NULL, or its handle attached by another process).
 */
SHMS_EXTERN int shms_worker_close(shms_worker_t *w);

/* ---- Commands: what must die with a process ------------------------------ */

/*
 * A process that runs commands under its leases or jobs (as `shmsched run` and `worker` do)
 * records each command's process group, and may put the command in a cgroup of its own, so
 * that the command's whole tree dies with the process: whoever disposes of what a dead
 * process left (recovery, a client that finds its worker dead, a process taking over its
 * process-table entry) first SIGKILLs the cgroup and the recorded group (the group only when
 * its leader is the recorded process, by start time, or is gone) and waits until none of it
 * is alive. A cell is never handed on while its previous holder's command runs; when that
 * cannot be proven (another user's processes, a process that does not die, a group of a pid
 * namespace that cannot be seen from the disposing process), a dead holder's
 * lease is quarantined whatever the class's on-holder-death says. shms_detach ends the
 * recorded command and the cgroup the same way. Without a cgroup, a descendant that left the
 * process group (setsid) escapes this.
 *
 * The record is the process's, shared by its handles of the segment: the three calls below
 * must not run concurrently with each other (from two threads) in one process. None blocks.
 */

/*
 * Make this process's command cgroup and write its path into path (cap bytes): put a
 * command's processes in it (write a pid to PATH/cgroup.procs). One per registration, kept
 * until detach. The hierarchy is $SHMSCHED_CGROUP (an absolute directory in a cgroup v2
 * hierarchy; "off": none) or "shmsched" under the first cgroup2 mount; every process of the
 * segment must see the same. SHMS_ENOTFOUND when there is none, SHMS_EPERM when it is not
 * writable, SHMS_EINVAL when path is NULL or cap too small for it: nothing recorded.
 */
SHMS_EXTERN int shms_command_cgroup(shms_t *h, char *path, size_t cap);
/*
 * Record process group pgid (its leader has pid pgid and must be alive: its start time is
 * read now) as the command this process runs. Replaces an earlier record. SHMS_EINVAL for a
 * pgid <= 1, SHMS_ENOTFOUND when no process pgid exists, SHMS_EPERM when the /proc mounted
 * here is not this process's pid namespace's (its numbers could not be proven): the earlier
 * record stays. The group is recorded with the process's pid namespace: a process of another
 * namespace kills it only once it has proven which group that is there, and leaves it alone
 * (its lease quarantined) when it cannot.
 */
SHMS_EXTERN int shms_command_set(shms_t *h, pid_t pgid);
/* Forget the recorded command: call it once the command's whole tree is gone. */
SHMS_EXTERN int shms_command_clear(shms_t *h);

/* ---- Fair share: weights ----------------------------------------------- */

/*
 * A class fair by time (shms_class_config.fairness) divides cell-time between tenants by weight
 * (docs/contract.md, "Fairness"). Weights are the segment's, one per tenant in every class,
 * kept in its tenant table (shms_config.tenant_table records) with what each class charged the
 * tenant while it was idle. A tenant with no policy has weight 1.
 */

/* One row of the tenant table (shms_policy_list): a tenant's, or a team's (SHMS_POLICY_TEAM). */
typedef struct {
  char name[SHMS_TENANT_MAX + 1];
  uint32_t weight;                /* 1..SHMS_WEIGHT_MAX */
  uint32_t flags;                 /* SHMS_POLICY_* */
  char team[SHMS_TENANT_MAX + 1]; /* a tenant's team, "" for none (and in a team's row) */
  /* Cell-time its leases held in each class fair by time, as charged (ns), counted as each
   * ends (a team's: its members'); `_other` holds the folded records'. */
  uint64_t cell_ns[SHMS_CLASS_COUNT];
} shms_policy_row;

enum {
  SHMS_POLICY_SET = 1u,   /* set by policy: kept in the table for good */
  SHMS_POLICY_OTHER = 4u, /* `_other`: what records folded out of a full table used */
  SHMS_POLICY_TEAM = 8u,  /* a team's row: its weight, and the cell-time its members held */
};

/*
 * Set tenant's weight (1..SHMS_WEIGHT_MAX). Takes effect at each class's next grant; queued
 * requests keep their places. For the segment's owner, root and its admin group (SHMS_EPERM
 * otherwise); recorded in the event ring. SHMS_EINVAL for a bad name or weight,
 * SHMS_EQUEUEFULL when the table has no room left (every record has a policy or is in use),
 * SHMS_ETIMEDOUT when another process holds the table's lock past a second: nothing changed
 * then. Blocks only for that lock.
 */
SHMS_EXTERN int shms_policy_tenant(shms_t *h, const char *tenant, uint32_t weight);
/* The table's rows: up to max into out, their number into *count (which may exceed max). Never
 * blocks (rows being changed meanwhile may read as either); an observer handle will do. */
/*
 * Put tenant in team (1..31 graphic ASCII bytes, a name space of its own; made with weight 1 if
 * new), or in none (team NULL or ""). A class fair by time divides its cell-time between teams
 * by their weights, then within a team between its tenants by theirs; a tenant in no team is a
 * team of its own. Rights, errors and event as shms_policy_tenant.
 */
SHMS_EXTERN int shms_policy_tenant_team(shms_t *h, const char *tenant, const char *team);
/* Set team's weight (1..SHMS_WEIGHT_MAX), making the team if new. As shms_policy_tenant. */
SHMS_EXTERN int shms_policy_team(shms_t *h, const char *team, uint32_t weight);
SHMS_EXTERN int shms_policy_list(shms_t *h, shms_policy_row *out, uint32_t max, uint32_t *count);

/* ---- Quotas ------------------------------------------------------------- */

/* One quota of the segment's table (shms_quota_list). */
typedef struct {
  char name[SHMS_TENANT_MAX + 1];
  uint32_t max;  /* its maximum now */
  uint32_t used; /* units held: by leases and jobs, and by quarantined cells until repaired */
  /* Requests and jobs queued that name it and wait for a quota (set aside until one of
   * theirs has a unit free: docs/contract.md, "Quotas"). */
  uint32_t waiters;
} shms_quota_row;

/*
 * Set quota's maximum (1..SHMS_QUOTA_UNITS_MAX), adding it to the segment's table if new.
 * Takes effect at the next grant: a lower maximum revokes nothing (leases holding units keep
 * them; no more are granted until the units in use fall below it). For the segment's owner, root
 * and its admin group (SHMS_EPERM otherwise); recorded in the event ring. SHMS_EINVAL for a bad
 * name or maximum, SHMS_EQUEUEFULL when the table (SHMS_QUOTAS_MAX) is full, SHMS_ETIMEDOUT when
 * another process holds the tenant table's lock past a second: nothing changed then.
 */
SHMS_EXTERN int shms_policy_quota(shms_t *h, const char *quota, uint32_t max);
/* The quota table: up to max rows into out, their number into *count. Never blocks; an observer
 * handle will do. Each row's figures are read at one instant, the rows at different ones. */
SHMS_EXTERN int shms_quota_list(shms_t *h, shms_quota_row *out, uint32_t max, uint32_t *count);

/* ---- Recovery and audit ------------------------------------------------- */

/* What one recovery found and did. */
typedef struct {
  uint32_t dead_processes;      /* process entries of dead processes, recovered and freed */
  uint32_t requests_owner_lost; /* queued or granted requests of dead owners, ended owner-lost */
  uint32_t grants_returned;     /* unaccepted grants whose cells came back */
  uint32_t leases_released;     /* leases of dead holders, released (on-holder-death=release) */
  uint32_t leases_quarantined;  /* leases of dead holders, quarantined */
  uint32_t jobs_requeued;       /* jobs of dead workers, queued once more */
  uint32_t jobs_lost;           /* jobs of dead workers, ended worker-lost */
  uint32_t workers_unbound;     /* cells of dead idle workers, now offline */
  uint32_t slots_freed;         /* slots torn mid-enqueue or holding outcomes nobody will take */
  uint32_t batons_recovered;    /* dispatcher batons held by dead processes */
  uint32_t counts_fixed;        /* counts found off and recomputed */
} shms_recovery;

/*
 * Recover everything dead processes left behind, in every class: the class is
 * briefly held still (operations wait at their start), then its state words
 * are settled and every count and index recomputed from them (the tenant ring
 * keeps its order). What `shmsched check --repair` does. The same as
 * shms_recover_dead(h, SHMS_RECOVER_FULL, NULL, NULL, out): blocks and fails
 * as it does.
 */
SHMS_EXTERN int shms_recover(shms_t *h, shms_recovery *out);

/*
 * One item a recovery dealt with: what happened to which object. The record
 * names the class, cell, request and process where they apply (an event ring
 * in the segment is to carry the same records).
 */
typedef enum {
  SHMS_EVENT_PROCESS_DIED = 1,   /* a process died attached (pid); its entry is freed */
  SHMS_EVENT_REQUEST_OWNER_LOST, /* its queued or granted request ended owner-lost (ticket) */
  SHMS_EVENT_GRANT_RETURNED,     /* a grant nobody will accept: its cell back in service */
  SHMS_EVENT_LEASE_RELEASED,     /* a dead holder's lease released (on-holder-death=release) */
  SHMS_EVENT_LEASE_QUARANTINED,  /* a dead holder's lease quarantined (reason owner-lost) */
  SHMS_EVENT_JOB_REQUEUED,       /* a dead worker's job queued once more (ticket) */
  SHMS_EVENT_JOB_LOST,           /* a dead worker's job ended worker-lost, its cell quarantined */
  SHMS_EVENT_WORKER_OFFLINE,     /* a dead worker's cell offline (it was idle or never started) */
  SHMS_EVENT_SLOT_FREED,         /* a slot torn mid-enqueue, or an outcome nobody will collect */
  SHMS_EVENT_BATON_RECOVERED,    /* a class's dispatcher baton taken back from a dead holder */
  SHMS_EVENT_COUNT_FIXED,        /* a count of the class found off and recomputed */
  SHMS_EVENT_CLASS_RECOMPUTED,   /* the class was held still and its indexes recomputed */
  SHMS_EVENT_CELL_REPAIRED,      /* a dead worker's quarantined cell back offline, for a new one
                                  * (in the ring also: any cell shms_repair returned to service) */
  /* Recorded in the event ring only (shms_events_read), never by a recovery's report: */
  SHMS_EVENT_GRANTED,          /* a queued request granted a cell (value: its wait, ns) */
  SHMS_EVENT_REJECTED,         /* a request refused at enqueue (reason) */
  SHMS_EVENT_CANCELLED,        /* a queued or granted request cancelled */
  SHMS_EVENT_EXPIRED,          /* a request's deadline passed before acceptance */
  SHMS_EVENT_REVOKED,          /* a grant not accepted within grant-timeout, given to the next */
  SHMS_EVENT_CELL_QUARANTINED, /* a holder quarantined its lease's cell (reason: its code) */
  SHMS_EVENT_DRAINED,          /* the segment started draining (pid: who drained it) */
  /* A freezer's membarrier failed (pid: the freezer; reason: why; value: its errno): its
   * freezes wait until the processes that mark operations with plain stores are gone
   * (docs/protocol.md, "Plain marks"). Once per process. */
  SHMS_EVENT_MEMBARRIER_FAILED,
  /* Policy set (pid: who set it). reason SHMS_POLICY_EVENT_WEIGHT: tenant's weight is value;
   * _TEAM_WEIGHT: team's weight is value (tenant ""); _TEAM: tenant was put in team ("": none);
   * _QUOTA: the quota named in tenant has the maximum value. */
  SHMS_EVENT_POLICY_CHANGED,
  SHMS_EVENT_RESUMED, /* a drain was lifted: the segment takes requests again (pid: who) */
  /* A command began under a lease (shms_lease_event: `run`, a worker's job): class, cell,
   * tenant, ticket (a lease granted from the queue, a job), pid (who runs it). */
  SHMS_EVENT_LEASE_STARTED,
  /* That command ended (value: SHMS_LEASE_EXITED(code) or SHMS_LEASE_SIGNALLED(signal)); the
   * lease is released or quarantined next (a quarantine is recorded as cell-quarantined). */
  SHMS_EVENT_LEASE_ENDED,
  /* A submit joined a live job of the same key instead of queueing one (shms_submit_key):
   * class, tenant (the joiner's), ticket (the job's), pid (the joiner). */
  SHMS_EVENT_JOB_JOINED,
  /* A queued job ended superseded by a newer one of its key (ticket: the ended job's). */
  SHMS_EVENT_SUPERSEDED,
} shms_event_kind_t;

/* shms_event.uid when none applies: (uid_t)-1, which is nobody's uid (POSIX keeps it for
 * "no change" in chown). */
#define SHMS_UID_NONE UINT32_MAX

typedef struct {
  uint32_t kind; /* shms_event_kind_t */
  int32_t cls;   /* shms_class_t, -1 when none applies */
  int32_t cell;  /* -1 when none applies */
  int32_t pid;   /* the (dead) process the item belonged to, by its pid in the reader's pid
                    namespace; 0 when unknown or pid_foreign */
  int reason;    /* the outcome given (SHMS_EOWNERLOST, SHMS_EWORKERLOST), else 0 */
  /* The effective uid of the request's or lease's owner (its enqueuer's or acquirer's, as its
   * slot or cell recorded it); SHMS_UID_NONE when the event concerns no request or lease. */
  uint32_t uid;
  shms_ticket ticket;               /* the request concerned; seq 0 when none */
  char tenant[SHMS_TENANT_MAX + 1]; /* its tenant, "" when unknown */
  /* The process as its own pid namespace numbers it and that namespace's inode (0: not
   * recorded); pid_foreign 1 when that number cannot be translated to the reader's namespace
   * (pid 0): as shms_cell_info's. A process of a namespace below the reader's is translated
   * only while it lives (or was seen living by the reading process). */
  int32_t ns_pid;
  uint32_t pid_foreign;
  uint64_t pidns;
} shms_event;

/* The event kind's name ("lease-quarantined"), or "unknown". */
SHMS_EXTERN const char *shms_event_name(uint32_t kind);
/* The kind named name, or 0. */
SHMS_EXTERN uint32_t shms_event_kind(const char *name);

/*
 * ---- The flight recorder: the segment's event ring (docs/operations.md, "Events") ----
 *
 * A bounded ring of the segment's recent events (config.events records): grants from the queue,
 * rejections, cancellations, expirations, revocations, quarantines, repairs, drains, and every
 * item a recovery of a dead process settled. Fast-path acquisitions and releases are not
 * recorded (docs/protocol.md, "The event ring"). Writers never wait: a record whose writer died
 * or was overtaken is skipped by readers, never shown torn.
 */
/* shms_event.reason of SHMS_EVENT_POLICY_CHANGED. */
enum {
  SHMS_POLICY_EVENT_WEIGHT = 0,
  SHMS_POLICY_EVENT_TEAM_WEIGHT = 1,
  SHMS_POLICY_EVENT_TEAM = 2,
  SHMS_POLICY_EVENT_QUOTA = 3, /* quota (in tenant) has the maximum value, added if new */
};

typedef struct {
  uint64_t position; /* its place in the ring's history: increasing, with gaps where lost */
  uint64_t mono_ns;  /* CLOCK_MONOTONIC when recorded, to the kernel's tick (1-4 ms) */
  uint64_t wall_ns;  /* CLOCK_REALTIME when recorded, as precise */
  uint64_t value;    /* per kind: a grant's wait (ns); a repair's 1 in service, 2 offline */
  int32_t writer;    /* the pid of the process that recorded it (event.pid: whom it concerns) */
  uint32_t reserved; /* 0 */
  shms_event event;  /* kind, class, cell, pid, reason, ticket, tenant */
  char team[SHMS_TENANT_MAX + 1]; /* a policy event's team (SHMS_POLICY_EVENT_TEAM*), else "" */
} shms_event_record;

enum {
  /* Skip a record still being written rather than stop before it (a writer that died
   * mid-record never finishes it). Without it, reading stops there and *cursor names it. */
  SHMS_EVENTS_SKIP_PENDING = 1u << 0,
};

/*
 * Read the ring's records from position *cursor on (0: the oldest still held) into out, at
 * most cap, oldest first; *count gets how many. With cap 0, *cursor is set to the ring's end:
 * reading on from there sees only what is recorded from now on. *cursor advances past what was
 * read, so the next call continues from there. *lost (may be NULL) gets how many positions in that
 * range held no readable record (overwritten before they were read, or their writer died). Works
 * with an observer handle (reads only). A segment created with events = 0 has no ring: every
 * read returns 0 records.
 */
SHMS_EXTERN int shms_events_read(shms_t *h, uint64_t *cursor, unsigned flags,
                                 shms_event_record *out, size_t cap, size_t *count, uint64_t *lost);
/*
 * The newest record the ring holds of ticket's request (how it ended, once shms_explain no
 * longer knows it): SHMS_OK with *out, or SHMS_ENOTFOUND if the ring holds none (never
 * recorded, or overwritten since). Works with an observer handle.
 */
SHMS_EXTERN int shms_events_find(shms_t *h, const shms_ticket *ticket, shms_event_record *out);

/* shms_event_record.value of SHMS_EVENT_LEASE_ENDED: how the command ended (0: not said). */
#define SHMS_LEASE_EXITED(code)   ((uint64_t)1 << 32 | (uint32_t)(code))
#define SHMS_LEASE_SIGNALLED(sig) ((uint64_t)2 << 32 | (uint32_t)(sig))
#define SHMS_LEASE_HOW(value)     ((uint32_t)((value) >> 32)) /* 1 exited, 2 signalled, 0 neither */
#define SHMS_LEASE_CODE(value)    ((uint32_t)(value))         /* the exit code or the signal */

/*
 * Record in the event ring that a command started (SHMS_EVENT_LEASE_STARTED, value 0) or ended
 * (SHMS_EVENT_LEASE_ENDED, value SHMS_LEASE_EXITED/SIGNALLED) under lease, which must be current
 * (call the end before releasing it). ticket names the request it was granted for (NULL or seq
 * 0: the cell's own record of it, none for a lease taken at once). For holders that run
 * commands (`shmsched run`, `worker`): the library's own acquire and release record nothing, so
 * their fast path pays nothing (docs/operations.md, "Events"). SHMS_ELEASE for a lease not
 * current, SHMS_EINVAL for another kind; SHMS_OK on a segment without a ring. Never blocks.
 */
SHMS_EXTERN int shms_lease_event(shms_t *h, const shms_lease *lease, const shms_ticket *ticket,
                                 uint32_t kind, uint64_t value);

/* Called once per item, on the calling thread, before the recovery returns. It must not call
 * shmsched functions on the same handle. */
typedef void (*shms_event_fn)(const shms_event *event, void *ctx);

enum {
  /* Hold every class still and recompute every count and index (shms_recover). */
  SHMS_RECOVER_FULL = 1u << 0,
  /* Then return dead workers' quarantined cells to service, offline (shms_repair_lost_workers),
   * each reported as SHMS_EVENT_CELL_REPAIRED. */
  SHMS_RECOVER_REPAIR_LOST_WORKERS = 1u << 1,
};

/*
 * Recover what dead processes left, reporting each item to on_event (may be
 * NULL) and the totals to out (may be NULL). Without SHMS_RECOVER_FULL it
 * touches only what the dead left: each process entry whose owner died
 * without detaching is settled as its own detach would have been (requests
 * owner-lost, unaccepted grants returned, leases by on-holder-death, a
 * worker's cells) and freed, with the ordinary transitions: no class is held
 * still and no index rebuilt. Only a class on which the dead process was
 * inside an operation, or whose dispatcher baton or freeze it held, is
 * recovered as shms_recover does it. A process that detached left nothing
 * and costs nothing here. What the supervisor runs at each death.
 * Blocks: holding a class still waits (yielding) until the live processes'
 * operations on it are done, and operations on it wait meanwhile; a dead
 * process's recorded command is killed first (up to 2 s to be gone).
 * SHMS_EINVAL for unknown flags. SHMS_ENOMEM (out of memory) may leave part
 * of the work done, never half a transition: the next recovery finishes it;
 * the items done are still told to on_event, *out is not written. Any thread
 * (two recoveries take turns on each class).
 */
SHMS_EXTERN int shms_recover_dead(shms_t *h, unsigned flags, shms_event_fn on_event, void *ctx,
                                  shms_recovery *out);

/*
 * The periodic upkeep that the supervisor runs at every tick (any member may):
 * stamps the start time of every lease taken by shms_acquire_prepared's fast
 * path, which leaves it unstamped to spare the clock read (shms_cell_info's
 * since_ns reads 0 until then). Returns the number of leases stamped, or an
 * error (SHMS_EINVAL: not a member handle). Never blocks; any thread.
 */
SHMS_EXTERN int shms_upkeep(shms_t *h);

/*
 * Audit every invariant (cell conservation, each request in one state,
 * indexes and counts consistent with the state words, no leftovers of dead
 * processes), holding each class still while it is read. Writes one line per
 * violation into report (cap bytes, NUL-terminated) and their number into
 * *violations. Returns SHMS_OK whether or not it found violations.
 * Recovery (shms_recover) repairs every violation but one kind: a state word
 * that holds no valid state (corrupt memory). Its line ends with
 * SHMS_CHECK_UNREPAIRABLE, then ": a corrupt state word)".
 * Blocks as shms_recover holds classes still, one class at a time; changes
 * nothing. SHMS_EINVAL for a NULL report or violations, or cap 0. Any thread.
 */
#define SHMS_CHECK_UNREPAIRABLE "(cannot be repaired"
SHMS_EXTERN int shms_check(shms_t *h, char *report, size_t cap, uint32_t *violations);

/* One registered process, as the process table names it. */
typedef struct {
  uint32_t index;            /* its entry in the process table */
  int32_t pid;               /* its pid in the caller's pid namespace; 0 if pid_foreign */
  uint64_t start_time;       /* field 22 of /proc/PID/stat: tells a reused pid apart */
  uint64_t attached_unix_ns; /* CLOCK_REALTIME of its attach */
  uint32_t alive;            /* 1 while it holds its entry's lock */
  uint32_t uid, gid;         /* its effective uid and gid at registration */
  /* Its pid as its own pid namespace numbers it (as it saw itself), that namespace's inode, and
   * whether that number cannot be translated to the caller's namespace: as shms_cell_info's. */
  int32_t ns_pid;
  uint32_t pid_foreign;
  uint64_t pidns;
} shms_process_info;

/* The registered processes (up to max into out, the number into *count, which may exceed max).
 * Never blocks (liveness from the kernel's lock table); an observer handle will do. */
SHMS_EXTERN int shms_processes(shms_t *h, shms_process_info *out, uint32_t max, uint32_t *count);

/*
 * Become the segment's one supervisor: a lock that the kernel drops when this
 * process dies. SHMS_EBUSY (naming its pid) if another process holds it.
 * shms_destroy does not count the supervisor as keeping the segment in use.
 * Never blocks (a lock tried, not waited for); claiming again from the
 * process that holds it succeeds.
 */
SHMS_EXTERN int shms_supervisor_claim(shms_t *h);

/*
 * Return to service the worker cells quarantined because their worker died
 * (reason worker-lost), once that worker is gone and its job settled: they
 * go offline, for a new worker. Returns how many. Never blocks; any thread.
 */
SHMS_EXTERN int shms_repair_lost_workers(shms_t *h);

/* ---- Testing ------------------------------------------------------------ */

/* A monotonic clock in nanoseconds; ctx is what was passed to shms_set_clock. */
typedef uint64_t (*shms_clock_fn)(void *ctx);
/*
 * Replace this process's monotonic clock (enqueue times, deadlines, aging,
 * wait figures) with fn, or restore CLOCK_MONOTONIC with NULL. For
 * deterministic tests; futex sleeps still time out on the real clock.
 * Process-wide, for every handle: set it before other threads use the
 * library (fn and ctx are not published together). fn may be called from any
 * thread that calls the library.
 */
SHMS_EXTERN void shms_set_clock(shms_clock_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* SHMSCHED_H */
