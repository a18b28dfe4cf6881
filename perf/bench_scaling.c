/*
 * scaling: the cost of one grant and of one cancel, with Q requests queued
 * over T tenants, for the sizes given. The queue is held at Q throughout:
 * each granted or cancelled request is replaced by a new one of its tenant.
 *
 * grant_ns: a release that hands the cell to the next request (the grant
 * happens inside the release's dispatch pass). cancel_ns: cancelling a queued
 * request of a random tenant (settle, then the dispatcher unlinks it): its
 * slot, tenant and neighbours are usually cold in the cache. cancelhot_ns: the
 * same, always of one tenant, whose data the previous cancel and enqueue just
 * touched: the operation's own cost, without the cache misses. All medians.
 *
 * Beside them, what one cache miss costs at that size: `scaling,memory,
 * load_ns_qQ_tT` is one load from a random line of a buffer as large as the
 * segment, each load's address depending on the one before (a pointer
 * chase), so misses cannot overlap; the mean over the chase. A cancel of a
 * cold request must at least read its slot: cancel_ns cannot be below
 * cancelhot_ns plus about one such load.
 *
 * Output: CSV rows `scaling,shmsched,grant_ns_qQ_tT,VALUE,ns` (and cancel_ns,
 * cancelhot_ns; and `scaling,memory,load_ns_qQ_tT`). With --events 0 the segment has no event
 * ring, and the system is `shmsched-noevents`: the recorder's cost on a grant and a cancel,
 * side by side (each records one event).
 *
 * --lines: instead, which of a cold cancel's lines cost what. After the same grants, the random
 * cancel five times over, each time with the victim's data first flushed out of every cache
 * (cold by construction, cancelcold_ns: cancel_ns is only as cold as the machine's other load
 * makes it), then with more of its lines read back just before the timer starts: its slot
 * (cancelwarmslot_ns); and its tenant record (cancelwarmtenant_ns); and the neighbours it
 * unlinks from (cancelwarmlinks_ns); and its tenant's treap root (cancelwarmroot_ns, all of
 * them: about cancelhot_ns). Each step down is what those lines cost the cancel
 * (design/scaling.md, "The cold cancel"). This reads the segment's internals (shm/handle.h),
 * as bench_events does; nothing else here does.
 * The class is fair by time (the default; --grants: fair by grants, rows `shmsched-grants`). Its
 * clock is one the benchmark advances itself by 1 us before each release: every lease then holds
 * the same, the tenants' charges stay equal and the grants follow the ring's order, which the
 * benchmark predicts (on the real clock, leases hold for different times, and the turns follow
 * what each held). The library reads that clock through a call instead of the vDSO: a few ns
 * less per grant than on the real clock. Each lease is also held for 1 us of real time before its
 * release is timed, as a lease is held for its work: the enqueue that replaced the granted
 * request runs just before, and among thousands of tenants it leaves misses in flight (the lines
 * of the tenant's newest and oldest requests it links the new one to, and the next candidate's
 * record and request that the pass warms) that a release timed at once would wait for
 * (design/fairness-cost.md, "What a grant timed at once paid for").
 * Usage: bench_scaling [--ops N] [--events N] [--lines] [--grants] [Q:T ...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ck_pr.h>

#include "core/tenant.h"
#include "shm/handle.h"
#include "shmsched.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* How long every lease holds, on the class's clock and for real (above). */
#define HOLD_NS 1000u

/* The class's clock (above): advanced by the benchmark only. */
static uint64_t bench_clock_ns = 1000000000ull;
static uint64_t bench_clock(void *ctx) {
  (void)ctx;
  return __atomic_load_n(&bench_clock_ns, __ATOMIC_RELAXED);
}

static uint32_t fairness = SHMS_FAIRNESS_DEFAULT;

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_u64);
  return v[n / 2];
}

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_scaling: %s: %s: %s\n", what, shms_err_name(rc), shms_last_error_detail());
  exit(1);
}

/* Busy until ns have passed since since: a lease held for its work, without a system call. */
static void hold(uint64_t since, uint64_t ns) {
  while (now_ns() - since < ns)
    ck_pr_stall();
}

/* Per tenant, its queued tickets in FIFO order (a ring of Q/T entries). */
struct tenant {
  char name[16];
  shms_ticket *ring;
  unsigned head, len, cap;
};

static shms_ticket push(shms_t *h, struct tenant *t) {
  shms_request r = {.cls = SHMS_CLASS_STANDARD, .tenant = t->name};
  shms_ticket tk;
  int rc = shms_enqueue(h, &r, &tk);
  if (rc != SHMS_OK)
    die("enqueue", rc);
  t->ring[(t->head + t->len++) % t->cap] = tk;
  return tk;
}

static shms_ticket pop(struct tenant *t) {
  shms_ticket tk = t->ring[t->head];
  t->head = (t->head + 1) % t->cap;
  t->len--;
  return tk;
}

static int lines; /* --lines */

/* --lines: how much of a victim's data to bring into the cache before its cancel is timed. */
enum warm { WARM_NONE, WARM_SLOT, WARM_TENANT, WARM_LINKS, WARM_ROOT, WARM_STEPS };
static const char *const warm_name[WARM_STEPS] = {
    "cancelcold", "cancelwarmslot", "cancelwarmtenant", "cancelwarmlinks", "cancelwarmroot"};

static uint64_t touch_sum; /* the touched bytes are used: their loads cannot be dropped */

static void touch(const void *p) { touch_sum += *(const volatile unsigned char *)p; }

static void touch_link(const struct shms__cls *k, uint32_t ref, size_t off) {
  if (ref >= 1 && ref <= k->nslots)
    touch((const char *)shms__slot_at(k, ref - 1) + off);
}

/* Out of every cache, each line of size bytes at p. */
static void flush(const void *p, size_t size) {
#if defined(__x86_64__)
  for (size_t o = 0; o < size; o += 64)
    __builtin_ia32_clflush((const char *)p + o);
  __builtin_ia32_mfence(); /* flushed before the loads that follow */
#else
  (void)p; /* elsewhere the victim is only as cold as the cancels in between left it */
  (void)size;
#endif
}

static void flush_slot(const struct shms__cls *k, uint32_t ref) {
  if (ref >= 1 && ref <= k->nslots)
    flush(shms__slot_at(k, ref - 1), sizeof(struct shms__slot));
}

/*
 * Make the victim's data cold by construction, whatever else runs on the machine: flush its
 * slot, tenant record, neighbours and treap root out of every cache (with 100,000 queued the
 * segment is a little smaller than this machine's last-level cache, which on a quiet machine
 * kept most of it); then read back the lines a cancel touches, up to step w. This process is
 * alone on the segment: nothing changes them meanwhile.
 */
static void warm_victim(shms_t *h, const shms_ticket *tk, enum warm w) {
  const struct shms__cls *k = &h->cls[tk->cls];
  const struct shms__slot *s = shms__slot_at(k, tk->slot);
  if (s->tenant >= 1 && s->tenant <= k->ntenants) {
    const struct shms__tenant *t = shms__tenant_at(k, s->tenant);
    flush_slot(k, t->prio_root);
    flush(t, sizeof *t);
  }
  flush_slot(k, s->age_prev);
  flush_slot(k, s->grp_prev);
  flush_slot(k, s->all_prev);
  flush_slot(k, s->all_next);
  flush(s, sizeof *s);
  if (w >= WARM_SLOT) {
    touch(&s->word);
    touch(&s->age_next);
    touch(&s->grp_prev);
  }
  if (s->tenant < 1 || s->tenant > k->ntenants)
    return;
  const struct shms__tenant *t = shms__tenant_at(k, s->tenant);
  if (w >= WARM_TENANT) {
    touch(&t->prio_root);
    touch(&t->age_tail);
  }
  if (w >= WARM_LINKS) {
    touch_link(k, s->age_prev, offsetof(struct shms__slot, age_next));
    touch_link(k, s->grp_prev, offsetof(struct shms__slot, grp_next));
    touch_link(k, s->all_prev, offsetof(struct shms__slot, all_next));
    touch_link(k, s->all_next, offsetof(struct shms__slot, all_prev));
  }
  if (w >= WARM_ROOT) {
    touch_link(k, t->prio_root, offsetof(struct shms__slot, prio_left));
    touch_link(k, t->prio_root, offsetof(struct shms__slot, grp_tail));
  }
}

/* ops cancels, each of the newest request of a random tenant (or always of the first one), which
 * is then replaced: the queue stays at its size. */
static void cancel_phase(shms_t *h, struct tenant *ts, unsigned nt, int ops, int same,
                         enum warm warm, uint64_t *cancel) {
  for (int n = 0; n < ops; n++) {
    struct tenant *t = &ts[same ? 0 : (unsigned)rand() % nt];
    /* The newest request of a tenant: cancelling it leaves the others' order alone. */
    shms_ticket victim = t->ring[(t->head + t->len - 1) % t->cap];
    if (lines)
      warm_victim(h, &victim, warm);
    uint64_t t0 = now_ns();
    int rc = shms_cancel(h, &victim);
    cancel[n] = now_ns() - t0;
    if (rc != 1)
      die("cancel", rc);
    t->len--;
    shms_lease unused;
    shms_wait(h, &victim, 0, &unused); /* collect the outcome: the slot comes free */
    push(h, t);
  }
}

/* Mean ns of one dependent load from a random cache line of a buffer of size bytes. */
static double chase_ns(size_t size, int loads) {
  size_t n = size / 64 < 2 ? 2 : size / 64;
  size_t *line = aligned_alloc(64, n * 64), *perm = malloc(n * sizeof *perm);
  if (line == NULL || perm == NULL) {
    fprintf(stderr, "bench_scaling: no memory for a %zu-byte chase buffer\n", n * 64);
    exit(1);
  }
  for (size_t i = 0; i < n; i++)
    perm[i] = i;
  for (size_t i = n - 1; i > 0; i--) { /* a random cycle through every line: Sattolo */
    size_t j = (size_t)rand() % i, t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (size_t i = 0; i < n; i++)
    line[perm[i] * 8] = perm[(i + 1) % n] * 8;
  size_t at = perm[0] * 8;
  for (size_t i = 0; i < n; i++) /* once round: in the TLB and caches as far as they reach */
    at = line[at];
  uint64_t t0 = now_ns();
  for (int i = 0; i < loads; i++)
    at = line[at];
  double ns = (double)(now_ns() - t0) / loads;
  __asm__ volatile("" : : "r"(at)); /* the chase's result is used: it cannot be dropped */
  free(line);
  free(perm);
  return ns;
}

static uint32_t events = SHMS_DEFAULT_EVENTS;
static const char *sys = "shmsched";

/* The rows of an ordinary run, after its grants: the random cancel, the same-tenant one, and what
 * one miss costs at the segment's size. */
static void report_costs(shms_t *h, struct tenant *ts, unsigned q, unsigned nt, int ops,
                         uint64_t *grant, uint64_t *cancel, const char *name) {
  cancel_phase(h, ts, nt, ops, 0, WARM_NONE, cancel);
  printf("scaling,%s,grant_ns_q%u_t%u,%llu,ns\n", sys, q, nt,
         (unsigned long long)median(grant, ops));
  printf("scaling,%s,cancel_ns_q%u_t%u,%llu,ns\n", sys, q, nt,
         (unsigned long long)median(cancel, ops));
  cancel_phase(h, ts, nt, ops, 1, WARM_NONE, cancel);
  printf("scaling,%s,cancelhot_ns_q%u_t%u,%llu,ns\n", sys, q, nt,
         (unsigned long long)median(cancel, ops));
  char path[96];
  struct stat st;
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  if (stat(path, &st) == 0)
    printf("scaling,memory,load_ns_q%u_t%u,%.1f,ns\n", q, nt, chase_ns((size_t)st.st_size, ops));
}

static void run(unsigned q, unsigned nt, int ops) {
  char name[64];
  snprintf(name, sizeof name, "shms-bench-scaling-%d", (int)getpid());
  shms_config cfg;
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_STANDARD] =
      (shms_class_config){.configured = 1, .cells = 1, .queue = q + 2, .fairness = fairness};
  shms_set_clock(bench_clock, NULL);
  cfg.max_tenants = nt + 2;
  cfg.events = events;
  int rc = shms_create(name, &cfg);
  shms_t *h;
  if (rc != SHMS_OK || (rc = shms_attach(name, 0, &h)) != SHMS_OK)
    die("create/attach", rc);
  struct tenant *ts = calloc(nt, sizeof *ts);
  unsigned per = q / nt;
  for (unsigned i = 0; i < nt; i++) {
    snprintf(ts[i].name, sizeof ts[i].name, "t%u", i);
    ts[i].cap = per + 2;
    ts[i].ring = calloc(ts[i].cap, sizeof(shms_ticket));
  }
  shms_lease lease;
  shms_request holder = {.cls = SHMS_CLASS_STANDARD, .tenant = "holder"};
  if ((rc = shms_acquire(h, &holder, &lease)) != SHMS_OK)
    die("acquire", rc);
  /* Fill round-robin so the ring order is t0, t1, ...: grants then follow it exactly. */
  for (unsigned k = 0; k < per; k++)
    for (unsigned i = 0; i < nt; i++)
      push(h, &ts[i]);
  uint64_t *grant = malloc(sizeof(uint64_t) * (size_t)ops),
           *cancel = malloc(sizeof(uint64_t) * (size_t)ops);
  unsigned turn = 0;
  uint64_t granted_ns = now_ns();
  for (int n = 0; n < ops; n++) {
    struct tenant *t = &ts[turn];
    turn = (turn + 1) % nt;
    shms_ticket next = pop(t);
    __atomic_add_fetch(&bench_clock_ns, HOLD_NS, __ATOMIC_RELAXED);
    hold(granted_ns, HOLD_NS);
    uint64_t t0 = now_ns();
    rc = shms_release(h, &lease); /* grants `next` inside */
    grant[n] = now_ns() - t0;
    if (rc != SHMS_OK)
      die("release", rc);
    if ((rc = shms_wait(h, &next, 0, &lease)) != SHMS_OK)
      die("wait on the predicted grant", rc);
    granted_ns = now_ns();
    push(h, t); /* back to Q queued; t rotated to the ring's tail and keeps its place */
  }
  if (lines)
    for (enum warm w = WARM_NONE; w < WARM_STEPS; w++) {
      cancel_phase(h, ts, nt, ops, 0, w, cancel);
      printf("scaling,%s,%s_ns_q%u_t%u,%llu,ns\n", sys, warm_name[w], q, nt,
             (unsigned long long)median(cancel, ops));
    }
  else
    report_costs(h, ts, q, nt, ops, grant, cancel, name);
  fflush(stdout);
  shms_release(h, &lease);
  shms_detach(h);
  shms_destroy(name, SHMS_DESTROY_FORCE);
  for (unsigned i = 0; i < nt; i++)
    free(ts[i].ring);
  free(ts);
  free(grant);
  free(cancel);
}

int main(int argc, char **argv) {
  int ops = 20000, i = 1;
  for (; i < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
    if (strcmp(argv[i], "--lines") == 0) {
      lines = 1;
      i--; /* a flag: no value */
    } else if (strcmp(argv[i], "--grants") == 0) {
      fairness = SHMS_FAIRNESS_GRANTS;
      sys = events == 0 ? "shmsched-grants-noevents" : "shmsched-grants";
      i--;
    } else if (i + 1 >= argc) {
      fprintf(stderr, "bench_scaling: option '%s' wants a value\n", argv[i]);
      return 2;
    } else if (strcmp(argv[i], "--ops") == 0) {
      ops = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--events") == 0) {
      events = (uint32_t)strtoul(argv[i + 1], NULL, 10);
      sys = fairness == SHMS_FAIRNESS_GRANTS
                ? (events == 0 ? "shmsched-grants-noevents" : "shmsched-grants")
            : events == 0 ? "shmsched-noevents"
                          : "shmsched";
    } else {
      fprintf(stderr, "bench_scaling: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  static const char *defaults[] = {"10:1",       "1000:1",      "100000:1",    "1000:100",
                                   "100000:100", "10000:10000", "100000:10000"};
  int n = argc > i ? argc - i : (int)(sizeof defaults / sizeof defaults[0]);
  for (int k = 0; k < n; k++) {
    const char *spec = argc > i ? argv[i + k] : defaults[k];
    unsigned q, t;
    if (sscanf(spec, "%u:%u", &q, &t) != 2 || t == 0 || q < t) {
      fprintf(stderr, "bench_scaling: bad size '%s' (want Q:T with Q >= T >= 1)\n", spec);
      return 2;
    }
    run(q, t, ops);
  }
  return 0;
}
