/*
 * share: tenants whose leases last differently, and who may be entitled to different shares,
 * on a few cells. Tenant t runs --procs processes (a number for every tenant, or P1:P2... one
 * each); each loops acquire -> sleep its hold ->
 * release (a lease held for I/O, a GPU, a licence: the CPU is free meanwhile). --holds gives
 * each tenant's hold in ms (a number, or pN for a Pareto law of mean N, shape 1.5, capped at
 * 50 means); --weights their weights (shmsched systems set them with shms_policy_tenant);
 * --teams each tenant's team, 0 for none (shms_policy_tenant_team; every team of weight 1).
 * After a warm-up, the cell-time each tenant holds in a window of --ms is measured (a lease is
 * counted for the part of it inside the window), sampled every 10 ms against the fluid
 * ideal (every tenant backlogged: the cells shared between teams by weight, a tenant in none a
 * team of its own weight, then within a team between its tenants by weight).
 *
 * Output rows `share,SYSTEM,...`: time_share_T (fraction of the window's cell-time), ideal_T,
 * worst_share_error (largest |share - ideal|), jain_index over the weight-normalised shares
 * (1: exactly by weight), max_lag_ms (the largest |held - ideal| seen at a sample, any
 * tenant, in ms of one cell), grants_T.
 * --widths gives the cells each tenant's leases hold at once (default 1 each; shmsched, posix-sem
 * and sysv-sem-undo: bench_locks.h); a lease of K cells counts K times its hold, and rows
 * max_wait_ms_T give the longest any acquire of tenant T waited in the window.
 * --label names the rows' bench (default "share"), so that several mixes can share one table.
 * Usage: bench_share --system NAME [--ms MS] [--warmup-ms MS] [--cells N] [--procs N|P1:P2...]
 *                    [--holds H1:H2[:H3[:H4]]] [--weights W1:W2...] [--teams T1:T2...] [--label
 * NAME]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_locks.h"
#include "bench_util.h"

#define MAX_TENANTS 4
#define MAX_PROCS   64

struct slot {
  uint64_t start __attribute__((aligned(64))); /* the lease it holds began; 0: none */
};

struct shared {
  uint32_t ready __attribute__((aligned(64)));
  uint32_t phase __attribute__((aligned(64))); /* 0 wait, 1 run, 2 stop */
  uint64_t window_start, window_end;
  uint64_t held[MAX_TENANTS][8];     /* ns inside the window, of leases ended */
  uint64_t grants[MAX_TENANTS][8];   /* leases begun inside the window */
  uint64_t max_wait[MAX_TENANTS][8]; /* the longest acquire (ns) that ended inside the window */
  struct slot running[MAX_PROCS];
  unsigned width[MAX_PROCS]; /* the cells each process's leases hold */
};

static const char *const names[MAX_TENANTS] = {"t0", "t1", "t2", "t3"};

static uint64_t rng = 88172645463325252ull;

static double uniform01(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}

/* ms: a fixed hold; negative: Pareto of mean -ms. */
static uint64_t hold_ns(double ms) {
  if (ms >= 0)
    return (uint64_t)(ms * 1e6);
  double mean = -ms * 1e6, xm = mean * (1.5 - 1) / 1.5, x = xm / pow(uniform01(), 1 / 1.5);
  return (uint64_t)(x > 50 * mean ? 50 * mean : x);
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

static uint64_t clip(uint64_t a, uint64_t b, const struct shared *s) {
  uint64_t lo = a > s->window_start ? a : s->window_start,
           hi = b < s->window_end ? b : s->window_end;
  return hi > lo ? hi - lo : 0;
}

static void member(bl_shared *sh, struct shared *s, int t, int slot, double ms) {
  bl_proc p;
  bl_open(&p, sh, names[t]);
  p.width = s->width[slot];
  uint64_t width = p.width > 1 ? p.width : 1;
  rng ^= (uint64_t)(slot + 1) * 0x9e3779b97f4a7c15ull;
  __atomic_add_fetch(&s->ready, 1, __ATOMIC_SEQ_CST);
  while (bu_load32(&s->phase) == 0)
    usleep(1000);
  while (bu_load32(&s->phase) == 1) {
    uint64_t asked = bu_now_ns();
    bl_acquire(&p);
    uint64_t start = bu_now_ns();
    uint64_t waited = start - asked, most = __atomic_load_n(&s->max_wait[t][0], __ATOMIC_RELAXED);
    while (start >= s->window_start && start < s->window_end && waited > most &&
           !__atomic_compare_exchange_n(&s->max_wait[t][0], &most, waited, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
      ;
    __atomic_store_n(&s->running[slot].start, start, __ATOMIC_RELEASE);
    sleep_ns(hold_ns(ms));
    uint64_t end = bu_now_ns();
    __atomic_store_n(&s->running[slot].start, 0, __ATOMIC_RELEASE);
    bl_release(&p);
    if (start >= s->window_start && start < s->window_end)
      __atomic_add_fetch(&s->grants[t][0], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->held[t][0], width * clip(start, end, s), __ATOMIC_RELAXED);
  }
  bl_close(&p);
  _exit(0);
}

static int parse_list(const char *spec, double *out, int pareto_ok, int zero_ok) {
  int n = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *save = NULL, *tok = strtok_r(buf, ":", &save); tok && n < MAX_TENANTS;
       tok = strtok_r(NULL, ":", &save)) {
    int pareto = pareto_ok && tok[0] == 'p';
    char *end;
    double v = strtod(tok + pareto, &end);
    if (*end != '\0' || v < 0 || (v == 0 && !zero_ok))
      bu_die("bad list entry '%s'", tok);
    out[n++] = pareto ? -v : v;
  }
  return n;
}

int main(int argc, char **argv) {
  bu_args_init(argc, argv,
               "--system NAME [--ms MS] [--warmup-ms MS] [--cells N] [--procs N|P1:P2...] "
               "[--holds H1:H2...] [--weights W1:W2...] [--teams T1:T2...] [--widths K1:K2...] "
               "[--label NAME]");
  const char *name = bu_arg_str("system", "shmsched");
  long ms = bu_arg_long("ms", 4000), warmup = bu_arg_long("warmup-ms", 500);
  long cells = bu_arg_long("cells", 2);
  const char *procs_spec = bu_arg_str("procs", "4");
  const char *holds_spec = bu_arg_str("holds", "40:2"), *weights_spec = bu_arg_str("weights", "");
  const char *teams_spec = bu_arg_str("teams", ""), *widths_spec = bu_arg_str("widths", "");
  const char *label = bu_arg_str("label", "share");
  bu_args_done();
  const struct bl_system *sys = bl_find(name);
  if (!sys)
    bu_die("unknown system '%s' (one of: %s)", name, bl_names());
  double holds[MAX_TENANTS], weights[MAX_TENANTS] = {1, 1, 1, 1};
  int n = parse_list(holds_spec, holds, 1, 0);
  double teams[MAX_TENANTS] = {0, 0, 0, 0}, widths[MAX_TENANTS] = {1, 1, 1, 1};
  if (n < 2 || (weights_spec[0] != '\0' && parse_list(weights_spec, weights, 0, 0) != n) ||
      (teams_spec[0] != '\0' && parse_list(teams_spec, teams, 0, 1) != n) ||
      (widths_spec[0] != '\0' && parse_list(widths_spec, widths, 0, 0) != n))
    bu_die("--holds wants 2..4 tenants, --weights, --teams and --widths as many");
  if (widths_spec[0] != '\0' && !bl_takes_width(sys))
    bu_die("--widths: system '%s' takes one unit at a time", name);
  /* Each tenant's part of the cells when all are backlogged: its team's (a team of weight 1, or
   * itself alone), then its own within the team. */
  double frac[MAX_TENANTS], groups = 0;
  for (int t = 0; t < n; t++) {
    int first = 1;
    for (int u = 0; u < t; u++)
      first &= teams[t] == 0 || teams[u] != teams[t];
    groups += teams[t] == 0 ? weights[t] : first ? 1 : 0;
  }
  for (int t = 0; t < n; t++) {
    double in_team = 0;
    for (int u = 0; u < n; u++)
      in_team += teams[t] != 0 && teams[u] == teams[t] ? weights[u] : 0;
    frac[t] = teams[t] == 0 ? weights[t] / groups : weights[t] / in_team / groups;
  }
  double procs[MAX_TENANTS];
  int np_given = parse_list(procs_spec, procs, 0, 0), total_procs = 0, first_proc[MAX_TENANTS];
  for (int t = np_given; t < n; t++)
    procs[t] = procs[0]; /* one number: every tenant */
  for (int t = 0; t < n; t++) {
    first_proc[t] = total_procs;
    total_procs += (int)procs[t];
  }
  if (cells < 1 || (np_given != 1 && np_given != n) || total_procs > MAX_PROCS)
    bu_die("--cells at least 1, --procs one number or one per tenant, %d processes at most",
           MAX_PROCS);

  struct shared *s = bu_shared(sizeof *s);
  bl_shared *sh = bl_create(sys, (unsigned)cells);
  if (strncmp(name, "shmsched", 8) == 0 && (weights_spec[0] != '\0' || teams_spec[0] != '\0'))
    bl_set_policy(sh, names, weights, teams, n);
  s->window_start = UINT64_MAX;
  s->window_end = UINT64_MAX;
  pid_t pids[MAX_PROCS];
  int np = 0;
  for (int t = 0; t < n; t++)
    for (long i = 0; i < (long)procs[t]; i++, np++) {
      s->width[np] = (unsigned)widths[t];
      if (widths[t] > (double)cells)
        bu_die("--widths: %g cells of %ld", widths[t], cells);
      if ((pids[np] = fork()) < 0)
        bu_die("fork failed");
      if (pids[np] == 0)
        member(sh, s, t, np, holds[t]);
    }
  while (bu_load32(&s->ready) < (uint32_t)np)
    usleep(1000);
  bu_store32(&s->phase, 1);
  usleep((useconds_t)warmup * 1000);
  uint64_t t0 = bu_now_ns();
  __atomic_store_n(&s->window_end, t0 + (uint64_t)ms * 1000000, __ATOMIC_SEQ_CST);
  __atomic_store_n(&s->window_start, t0, __ATOMIC_SEQ_CST);
  double max_lag = 0;
  /* Sample: what each tenant has held so far (ended leases, plus the running ones' part). */
  for (uint64_t now = bu_now_ns(); now < s->window_end; now = bu_now_ns()) {
    usleep(10000);
    now = bu_now_ns();
    if (now > s->window_end)
      break;
    for (int t = 0; t < n; t++) {
      double held = (double)__atomic_load_n(&s->held[t][0], __ATOMIC_ACQUIRE);
      for (long i = 0; i < (long)procs[t]; i++) {
        uint64_t st = __atomic_load_n(&s->running[first_proc[t] + i].start, __ATOMIC_ACQUIRE);
        if (st != 0 && now > st)
          held += widths[t] * (double)clip(st, now, s);
      }
      double ideal = (double)(now - t0) * (double)cells * frac[t];
      if (fabs(held - ideal) > max_lag)
        max_lag = fabs(held - ideal);
    }
  }
  bu_store32(&s->phase, 2);
  int failed = 0;
  for (int i = 0; i < np; i++) {
    int status;
    waitpid(pids[i], &status, 0);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  bl_destroy(sh);
  if (failed)
    bu_die("a tenant process failed");
  double total = 0, x[MAX_TENANTS], sum = 0, sumsq = 0, worst = 0;
  for (int t = 0; t < n; t++)
    total += (double)s->held[t][0];
  if (total == 0)
    bu_die("no lease in the window");
  for (int t = 0; t < n; t++) {
    char metric[32];
    double share = (double)s->held[t][0] / total, ideal = frac[t];
    snprintf(metric, sizeof metric, "time_share_%s", names[t]);
    bu_row(label, name, metric, share, "fraction");
    snprintf(metric, sizeof metric, "ideal_%s", names[t]);
    bu_row(label, name, metric, ideal, "fraction");
    snprintf(metric, sizeof metric, "grants_%s", names[t]);
    bu_row(label, name, metric, (double)s->grants[t][0], "grants");
    if (widths_spec[0] != '\0') {
      snprintf(metric, sizeof metric, "max_wait_ms_%s", names[t]);
      bu_row(label, name, metric, (double)s->max_wait[t][0] / 1e6, "ms");
    }
    worst = fabs(share - ideal) > worst ? fabs(share - ideal) : worst;
    x[t] = share / frac[t];
    sum += x[t];
    sumsq += x[t] * x[t];
  }
  bu_row(label, name, "worst_share_error", worst, "fraction");
  bu_row(label, name, "jain_index", sum * sum / (n * sumsq), "index");
  bu_row(label, name, "max_lag_ms", max_lag / 1e6, "ms");
  return 0;
}
