/*
 * The Prometheus text exposition (format 0.0.4) of segments' figures. Naming follows
 * Prometheus's rules: a shmsched_ prefix, counters end in _total, base units (seconds, bytes) in
 * the name, HELP and TYPE once per family and every sample of a family together. Labels:
 * segment, class, and what the family names (state, reason, tenant, le; a lease's cell, tenant,
 * uid and user: one series per held cell, so bounded by the cells). Everything is gathered
 * first (one observer attach per segment), then written family by family.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cli/cli.h"
#include "../cli/holder_state.h"
#include "metrics.h"
#include "shmsched.h"

enum { HOLDER_RUNNING, HOLDER_STOPPED, HOLDER_DEAD, HOLDER_UNKNOWN, HOLDER_STATES };
/* unknown: a live holder of a pid namespace whose processes /proc here does not show */
static const char *const holder_names[HOLDER_STATES] = {"running", "stopped", "dead", "unknown"};

struct seg {
  const char *name;
  int up;
  shms_segment_info info;
  shms_config cfg;
  shms_class_stats st[SHMS_CLASS_COUNT];
  uint32_t holders[SHMS_CLASS_COUNT][HOLDER_STATES]; /* granted or leased cells' holders */
  shms_cell_info *held[SHMS_CLASS_COUNT];            /* those cells: malloc'd */
  uint32_t nheld[SHMS_CLASS_COUNT];
  shms_tenant_stats *tenants[SHMS_CLASS_COUNT]; /* --tenants: malloc'd, sorted */
  uint32_t ntenants[SHMS_CLASS_COUNT];
  int named_other[SHMS_CLASS_COUNT]; /* a tenant is named "_other": it is last, summed in */
  shms_policy_row *table; /* --tenants: the tenant table, malloc'd; tenants by cell-time */
  uint32_t ntable;
  shms_quota_row quotas[SHMS_QUOTAS_MAX]; /* the quota table */
  uint32_t nquotas;
};

/* ---- gathering ------------------------------------------------------------ */

static uint64_t table_cell_ns(const shms_policy_row *r) {
  uint64_t sum = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    sum += r->cell_ns[c];
  return sum;
}

/* Teams first, then tenants by cell-time held, most first; `_other` (the folded records') last. */
static int by_cell_time(const void *a, const void *b) {
  const shms_policy_row *x = a, *y = b;
  int kx = x->flags & SHMS_POLICY_TEAM ? 0 : x->flags & SHMS_POLICY_OTHER ? 2 : 1;
  int ky = y->flags & SHMS_POLICY_TEAM ? 0 : y->flags & SHMS_POLICY_OTHER ? 2 : 1;
  if (kx != ky)
    return kx - ky;
  uint64_t cx = table_cell_ns(x), cy = table_cell_ns(y);
  return cx != cy ? (cx < cy ? 1 : -1) : strcmp(x->name, y->name);
}

static int gather_table(shms_t *h, struct seg *s) {
  uint32_t n = 0;
  int rc = shms_policy_list(h, NULL, 0, &n);
  if (rc != SHMS_OK)
    return rc;
  s->table = calloc(n ? n : 1, sizeof *s->table);
  if (s->table == NULL)
    return SHMS_ENOMEM;
  rc = shms_policy_list(h, s->table, n, &s->ntable);
  s->ntable = s->ntable < n ? s->ntable : n;
  qsort(s->table, s->ntable, sizeof *s->table, by_cell_time);
  return rc;
}

static int gather_holders(shms_t *h, int c, struct seg *s) {
  uint32_t n = s->cfg.classes[c].cells;
  shms_cell_info *cells = calloc(n ? n : 1, sizeof *cells);
  if (cells == NULL)
    return SHMS_ENOMEM;
  uint32_t count = 0;
  int rc = shms_cells(h, (shms_class_t)c, cells, n, &count);
  for (uint32_t i = 0; rc == SHMS_OK && i < count && i < n; i++) {
    if (cells[i].state != SHMS_CELL_GRANTED && cells[i].state != SHMS_CELL_LEASED)
      continue;
    char code;
    const char *st = holder_state_ns(cells[i].pid, cells[i].pid_foreign, cells[i].alive, &code);
    int k = strcmp(st, "stopped") == 0   ? HOLDER_STOPPED
            : strcmp(st, "running") == 0 ? HOLDER_RUNNING
            : strcmp(st, "unknown") == 0 ? HOLDER_UNKNOWN
                                         : HOLDER_DEAD;
    s->holders[c][k]++;
    cells[s->nheld[c]++] = cells[i]; /* kept in place: the rows before i are read already */
  }
  s->held[c] = cells;
  return rc;
}

/* The busiest first (grants, then queued work), then by name: the series kept under the cap. */
static int by_weight(const void *a, const void *b) {
  const shms_tenant_stats *x = a, *y = b;
  if (x->granted != y->granted)
    return x->granted > y->granted ? -1 : 1;
  if (x->queued != y->queued)
    return x->queued > y->queued ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int gather_tenants(shms_t *h, int c, struct seg *s) {
  int rc = cli_tenants(h, c, &s->tenants[c], &s->ntenants[c]);
  if (rc != SHMS_OK)
    return rc;
  qsort(s->tenants[c], s->ntenants[c], sizeof *s->tenants[c], by_weight);
  /* A tenant may be named "_other" itself: it goes into the "_other" sum, never a series of its
   * own, so that no two series are the same. */
  for (uint32_t i = 0; i < s->ntenants[c]; i++)
    if (strcmp(s->tenants[c][i].name, "_other") == 0) {
      shms_tenant_stats keep = s->tenants[c][i];
      memmove(&s->tenants[c][i], &s->tenants[c][i + 1], (s->ntenants[c] - i - 1) * sizeof keep);
      s->tenants[c][s->ntenants[c] - 1] = keep;
      s->named_other[c] = 1;
      break;
    }
  return rc;
}

static int gather(const struct metrics_opts *o, struct seg *s) {
  shms_t *h;
  int rc = shms_attach(s->name, SHMS_ATTACH_OBSERVER, &h);
  if (rc != SHMS_OK)
    return rc;
  rc = shms_segment_info_get(h, &s->info);
  if (rc == SHMS_OK)
    rc = shms_get_config(h, &s->cfg);
  if (rc == SHMS_OK)
    rc = shms_quota_list(h, s->quotas, SHMS_QUOTAS_MAX, &s->nquotas);
  s->nquotas = s->nquotas < SHMS_QUOTAS_MAX ? s->nquotas : SHMS_QUOTAS_MAX;
  for (int c = 0; rc == SHMS_OK && c < SHMS_CLASS_COUNT; c++) {
    if (!s->cfg.classes[c].configured)
      continue;
    rc = shms_observe(h, (shms_class_t)c, &s->st[c]);
    if (rc == SHMS_OK)
      rc = gather_holders(h, c, s);
    if (rc == SHMS_OK && o->tenants)
      rc = gather_tenants(h, c, s);
  }
  if (rc == SHMS_OK && o->tenants)
    rc = gather_table(h, s);
  shms_detach(h);
  return rc;
}

/* ---- writing -------------------------------------------------------------- */

struct out {
  FILE *f;
  const struct seg *segs;
  int n;
};

static void family(const struct out *o, const char *name, const char *type, const char *help) {
  fprintf(o->f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value, escaped as the format wants: backslash, double quote and newline. */
static void label(FILE *f, const char *key, const char *value, int first) {
  fprintf(f, "%s%s=\"", first ? "" : ",", key);
  for (const char *p = value; *p != '\0'; p++) {
    if (*p == '\\' || *p == '"')
      fputc('\\', f), fputc(*p, f);
    else if (*p == '\n')
      fputs("\\n", f);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* name{segment="..."[,class="..."] then the caller's labels; end with close_u64 and friends. */
static void open_sample(FILE *f, const char *name, const struct seg *s, int c) {
  fprintf(f, "%s{", name);
  label(f, "segment", s->name, 1);
  if (c >= 0)
    label(f, "class", shms_class_name((shms_class_t)c), 0);
}

static void close_u64(FILE *f, uint64_t v) { fprintf(f, "} %" PRIu64 "\n", v); }

/* Nanoseconds as seconds, exactly. */
static void close_seconds(FILE *f, uint64_t ns) {
  fprintf(f, "} %" PRIu64 ".%09" PRIu64 "\n", ns / 1000000000u, ns % 1000000000u);
}

/* One sample per up segment: value of segment s. */
static void per_segment(const struct out *o, const char *name,
                        uint64_t (*value)(const struct seg *)) {
  for (int i = 0; i < o->n; i++)
    if (o->segs[i].up) {
      open_sample(o->f, name, &o->segs[i], -1);
      close_u64(o->f, value(&o->segs[i]));
    }
}

static uint64_t v_live(const struct seg *s) { return s->info.live_processes; }
static uint64_t v_max(const struct seg *s) { return s->info.max_processes; }
static uint64_t v_size(const struct seg *s) { return s->info.size; }
static uint64_t v_sup(const struct seg *s) { return s->info.supervisor_pid != 0; }
static uint64_t v_sup_stopped(const struct seg *s) {
  return strcmp(supervisor_state(s->info.supervisor_pid), "stopped") == 0;
}

static const char *state_name(uint32_t st) {
  return st == SHMS_SEG_ACTIVE       ? "active"
         : st == SHMS_SEG_DRAINING   ? "draining"
         : st == SHMS_SEG_DESTROYING ? "destroying"
                                     : "unknown";
}

static void write_segments(const struct out *o) {
  family(o, "shmsched_up", "gauge", "1 if the segment could be read, 0 if not.");
  for (int i = 0; i < o->n; i++) {
    open_sample(o->f, "shmsched_up", &o->segs[i], -1);
    close_u64(o->f, (uint64_t)o->segs[i].up);
  }
  family(o, "shmsched_segment_info", "gauge",
         "The segment's creation (incarnation), layout version and state, as labels; always 1.");
  for (int i = 0; i < o->n; i++) {
    const struct seg *s = &o->segs[i];
    if (!s->up)
      continue;
    char inc[24], ver[16];
    snprintf(inc, sizeof inc, "%016" PRIx64, s->info.incarnation);
    snprintf(ver, sizeof ver, "%" PRIu32, s->info.layout_version);
    open_sample(o->f, "shmsched_segment_info", s, -1);
    label(o->f, "incarnation", inc, 0);
    label(o->f, "layout_version", ver, 0);
    label(o->f, "state", state_name(s->info.state), 0);
    close_u64(o->f, 1);
  }
  family(o, "shmsched_segment_created_timestamp_seconds", "gauge",
         "When the segment was created (Unix time).");
  for (int i = 0; i < o->n; i++)
    if (o->segs[i].up) {
      open_sample(o->f, "shmsched_segment_created_timestamp_seconds", &o->segs[i], -1);
      close_seconds(o->f, o->segs[i].info.created_unix_ns);
    }
  family(o, "shmsched_segment_size_bytes", "gauge", "Bytes of the segment.");
  per_segment(o, "shmsched_segment_size_bytes", v_size);
  family(o, "shmsched_processes", "gauge", "Processes registered and alive (holding their lock).");
  per_segment(o, "shmsched_processes", v_live);
  family(o, "shmsched_processes_max", "gauge", "Size of the process table (max-processes).");
  per_segment(o, "shmsched_processes_max", v_max);
  family(o, "shmsched_supervisor_up", "gauge", "1 while a process holds the supervisor lock.");
  per_segment(o, "shmsched_supervisor_up", v_sup);
  family(o, "shmsched_supervisor_stopped", "gauge",
         "1 while the supervisor is stopped or traced (it recovers nothing until it runs).");
  per_segment(o, "shmsched_supervisor_stopped", v_sup_stopped);
}

/* Each quota of every up segment: its maximum, units held and waiting requests, by quota. */
static void write_quotas(const struct out *o) {
  static const char *const names[3] = {"shmsched_quota_max", "shmsched_quota_used",
                                       "shmsched_quota_waiters"};
  static const char *const help[3] = {
      "The quota's maximum: units its requests may hold at once, in every class together.",
      "Units of the quota held: by leases and jobs, and by quarantined cells until repaired.",
      "Queued requests and jobs naming the quota that wait for a quota to have a unit free."};
  for (int m = 0; m < 3; m++) {
    family(o, names[m], "gauge", help[m]);
    for (int i = 0; i < o->n; i++)
      for (uint32_t q = 0; o->segs[i].up && q < o->segs[i].nquotas; q++) {
        const shms_quota_row *r = &o->segs[i].quotas[q];
        open_sample(o->f, names[m], &o->segs[i], -1);
        label(o->f, "quota", r->name, 0);
        close_u64(o->f, m == 0 ? r->max : m == 1 ? r->used : r->waiters);
      }
  }
}

/* One sample per configured class of every up segment: value(stats) (or seconds). */
static void per_class(const struct out *o, const char *name, int seconds,
                      uint64_t (*value)(const shms_class_stats *)) {
  for (int i = 0; i < o->n; i++)
    for (int c = 0; o->segs[i].up && c < SHMS_CLASS_COUNT; c++)
      if (o->segs[i].cfg.classes[c].configured) {
        open_sample(o->f, name, &o->segs[i], c);
        if (seconds)
          close_seconds(o->f, value(&o->segs[i].st[c]));
        else
          close_u64(o->f, value(&o->segs[i].st[c]));
      }
}

static uint64_t v_depth(const shms_class_stats *st) { return st->queue_depth; }
static uint64_t v_capacity(const shms_class_stats *st) { return st->queue_capacity; }
static uint64_t v_qtenants(const shms_class_stats *st) { return st->queued_tenants; }
static uint64_t v_grants(const shms_class_stats *st) { return st->granted; }
static uint64_t v_cancelled(const shms_class_stats *st) { return st->cancelled; }
static uint64_t v_expired(const shms_class_stats *st) { return st->expired; }
static uint64_t v_revoked(const shms_class_stats *st) { return st->revoked; }
static uint64_t v_quarantines(const shms_class_stats *st) { return st->quarantines; }
static uint64_t v_recovered(const shms_class_stats *st) { return st->recovered; }
static uint64_t v_max_wait(const shms_class_stats *st) { return st->max_wait_ns; }
static uint64_t v_oldest_lease(const shms_class_stats *st) { return st->oldest_lease_age_ns; }
static uint64_t v_oldest_grant(const shms_class_stats *st) { return st->oldest_grant_age_ns; }

/* Keyed submits that joined a live job: one sample per worker class (a lease class has no jobs,
 * so no series). */
static void write_joins(const struct out *o) {
  family(o, "shmsched_jobs_joined_total", "counter",
         "Keyed submits that joined the queued or running job of their key instead of queueing "
         "one (worker classes).");
  for (int i = 0; i < o->n; i++)
    for (int c = 0; o->segs[i].up && c < SHMS_CLASS_COUNT; c++)
      if (o->segs[i].cfg.classes[c].configured &&
          o->segs[i].cfg.classes[c].mode == SHMS_MODE_WORKER) {
        open_sample(o->f, "shmsched_jobs_joined_total", &o->segs[i], c);
        close_u64(o->f, o->segs[i].st[c].joined);
      }
}

static void write_class_info(const struct out *o) {
  family(o, "shmsched_class_info", "gauge",
         "A configured class and its mode, as a label; always 1.");
  for (int i = 0; i < o->n; i++)
    for (int c = 0; o->segs[i].up && c < SHMS_CLASS_COUNT; c++)
      if (o->segs[i].cfg.classes[c].configured) {
        open_sample(o->f, "shmsched_class_info", &o->segs[i], c);
        label(o->f, "mode", o->segs[i].cfg.classes[c].mode == SHMS_MODE_WORKER ? "worker" : "lease",
              0);
        close_u64(o->f, 1);
      }
}

static void write_cells(const struct out *o) {
  static const char *const states[] = {"available",   "granted", "leased",
                                       "quarantined", "offline", "reserved"};
  family(o, "shmsched_cells", "gauge", "Cells by state.");
  for (int i = 0; i < o->n; i++)
    for (int c = 0; o->segs[i].up && c < SHMS_CLASS_COUNT; c++) {
      if (!o->segs[i].cfg.classes[c].configured)
        continue;
      const shms_class_stats *st = &o->segs[i].st[c];
      const uint32_t v[] = {st->available, st->granted_unaccepted,
                            st->leased,    st->quarantined,
                            st->offline,   st->reserved};
      for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        open_sample(o->f, "shmsched_cells", &o->segs[i], c);
        label(o->f, "state", states[k], 0);
        close_u64(o->f, v[k]);
      }
    }
  family(o, "shmsched_cell_holders", "gauge",
         "Granted or leased cells by their holder process's state (/proc): running, stopped "
         "(SIGSTOP, traced) or dead (not yet recovered).");
  for (int i = 0; i < o->n; i++)
    for (int c = 0; o->segs[i].up && c < SHMS_CLASS_COUNT; c++)
      for (int k = 0; o->segs[i].cfg.classes[c].configured && k < HOLDER_STATES; k++) {
        open_sample(o->f, "shmsched_cell_holders", &o->segs[i], c);
        label(o->f, "state", holder_names[k], 0);
        close_u64(o->f, o->segs[i].holders[c][k]);
      }
}

/*
 * Who each lease is for: one series per granted or leased cell, so the series are bounded by the
 * cells however many tenants and users come and go (an info-style gauge: join on it, or count
 * it by user).
 */
static void write_leases(const struct out *o) {
  family(o, "shmsched_lease_info", "gauge",
         "A granted or leased cell: its state and who the lease is for (tenant, the effective "
         "uid of the process that acquired or enqueued it, and that uid's login name); always "
         "1.");
  char uid[16], user[64], cell[16];
  for (int i = 0; i < o->n; i++)
    for (int c = 0; o->segs[i].up && c < SHMS_CLASS_COUNT; c++)
      for (uint32_t k = 0; k < o->segs[i].nheld[c]; k++) {
        const shms_cell_info *ci = &o->segs[i].held[c][k];
        snprintf(cell, sizeof cell, "%u", ci->cell);
        snprintf(uid, sizeof uid, "%u", ci->uid);
        open_sample(o->f, "shmsched_lease_info", &o->segs[i], c);
        label(o->f, "cell", cell, 0);
        label(o->f, "state", ci->state == SHMS_CELL_GRANTED ? "granted" : "leased", 0);
        label(o->f, "tenant", ci->tenant, 0);
        label(o->f, "uid", uid, 0);
        label(o->f, "user", cli_user_name(ci->uid, user, sizeof user), 0);
        close_u64(o->f, 1);
      }
}

static void write_rejections(const struct out *o) {
  static const int codes[SHMS_REJECT_REASONS] = SHMS_REJECT_REASON_CODES;
  family(o, "shmsched_rejections_total", "counter",
         "Requests refused or ended by the scheduler (neither cancelled nor expired), by reason.");
  for (int i = 0; i < o->n; i++)
    for (int c = 0; o->segs[i].up && c < SHMS_CLASS_COUNT; c++)
      for (int r = 0; o->segs[i].cfg.classes[c].configured && r < SHMS_REJECT_REASONS; r++) {
        open_sample(o->f, "shmsched_rejections_total", &o->segs[i], c);
        label(o->f, "reason", codes[r] != 0 ? shms_err_name(codes[r]) : "other", 0);
        close_u64(o->f, o->segs[i].st[c].rejected_by[r]);
      }
}

static void write_wait_histogram(const struct out *o) {
  static const uint64_t le[SHMS_WAIT_BUCKETS] = SHMS_WAIT_BUCKET_LE_NS;
  family(o, "shmsched_wait_seconds", "histogram",
         "How long requests granted from the queue waited (the fast path never waits).");
  for (int i = 0; i < o->n; i++)
    for (int c = 0; o->segs[i].up && c < SHMS_CLASS_COUNT; c++) {
      if (!o->segs[i].cfg.classes[c].configured)
        continue;
      const shms_class_stats *st = &o->segs[i].st[c];
      uint64_t cum = 0;
      for (int b = 0; b < SHMS_WAIT_BUCKETS; b++) {
        char bound[32];
        cum += st->wait_buckets[b];
        if (le[b] == UINT64_MAX)
          snprintf(bound, sizeof bound, "+Inf");
        else
          snprintf(bound, sizeof bound, "%g", (double)le[b] / 1e9);
        open_sample(o->f, "shmsched_wait_seconds_bucket", &o->segs[i], c);
        label(o->f, "le", bound, 0);
        close_u64(o->f, cum);
      }
      open_sample(o->f, "shmsched_wait_seconds_sum", &o->segs[i], c);
      close_seconds(o->f, st->total_wait_ns);
      open_sample(o->f, "shmsched_wait_seconds_count", &o->segs[i], c);
      close_u64(o->f, cum);
    }
}

static void write_classes(const struct out *o) {
  write_class_info(o);
  write_cells(o);
  write_leases(o);
  family(o, "shmsched_queue_depth", "gauge", "Requests queued.");
  per_class(o, "shmsched_queue_depth", 0, v_depth);
  family(o, "shmsched_queue_capacity", "gauge", "Request slots of the class (its queue bound).");
  per_class(o, "shmsched_queue_capacity", 0, v_capacity);
  family(o, "shmsched_queued_tenants", "gauge", "Tenants with queued requests.");
  per_class(o, "shmsched_queued_tenants", 0, v_qtenants);
  family(o, "shmsched_grants_total", "counter", "Leases handed out (fast path and queue).");
  per_class(o, "shmsched_grants_total", 0, v_grants);
  write_rejections(o);
  family(o, "shmsched_cancellations_total", "counter", "Requests cancelled before acceptance.");
  per_class(o, "shmsched_cancellations_total", 0, v_cancelled);
  family(o, "shmsched_expirations_total", "counter",
         "Requests whose deadline passed before acceptance.");
  per_class(o, "shmsched_expirations_total", 0, v_expired);
  family(o, "shmsched_revocations_total", "counter",
         "Grants not accepted within grant-timeout, given to the next request.");
  per_class(o, "shmsched_revocations_total", 0, v_revoked);
  family(o, "shmsched_quarantines_total", "counter", "Cells quarantined.");
  per_class(o, "shmsched_quarantines_total", 0, v_quarantines);
  family(o, "shmsched_recoveries_total", "counter",
         "What recoveries settled: dead processes' leases, grants, requests, jobs and batons, "
         "and classes recomputed.");
  per_class(o, "shmsched_recoveries_total", 0, v_recovered);
  write_joins(o);
  write_wait_histogram(o);
  family(o, "shmsched_wait_max_seconds", "gauge", "The longest wait of a grant from the queue.");
  per_class(o, "shmsched_wait_max_seconds", 1, v_max_wait);
  family(o, "shmsched_oldest_lease_age_seconds", "gauge",
         "Age of the oldest accepted lease (0 if none).");
  per_class(o, "shmsched_oldest_lease_age_seconds", 1, v_oldest_lease);
  family(o, "shmsched_oldest_grant_age_seconds", "gauge",
         "Age of the oldest grant not accepted yet (0 if none).");
  per_class(o, "shmsched_oldest_grant_age_seconds", 1, v_oldest_grant);
}

/* ---- per tenant, capped --------------------------------------------------- */

/* Tenant row t of class c, or with t == shown, the sum of the rest as "_other". */
static int tenant_row(const struct seg *s, int c, uint32_t cap, uint32_t t,
                      shms_tenant_stats *row) {
  uint32_t n = s->ntenants[c], named = n - (uint32_t)s->named_other[c];
  uint32_t shown = named < cap ? named : cap;
  if (t < shown) {
    *row = s->tenants[c][t];
    return 1;
  }
  if (t > shown || n <= shown)
    return 0;
  memset(row, 0, sizeof *row);
  snprintf(row->name, sizeof row->name, "_other");
  for (uint32_t i = shown; i < n; i++) {
    const shms_tenant_stats *x = &s->tenants[c][i];
    row->queued += x->queued;
    row->active += x->active;
    row->granted += x->granted;
    row->total_wait_ns += x->total_wait_ns;
    if (x->max_wait_ns > row->max_wait_ns)
      row->max_wait_ns = x->max_wait_ns;
  }
  return 1;
}

enum { T_QUEUED, T_ACTIVE, T_GRANTS, T_WAIT, T_MAX };

static void per_tenant(const struct out *o, uint32_t cap, const char *name, int what) {
  for (int i = 0; i < o->n; i++)
    for (int c = 0; o->segs[i].up && c < SHMS_CLASS_COUNT; c++) {
      shms_tenant_stats row;
      for (uint32_t t = 0;
           o->segs[i].cfg.classes[c].configured && tenant_row(&o->segs[i], c, cap, t, &row); t++) {
        open_sample(o->f, name, &o->segs[i], c);
        label(o->f, "tenant", row.name, 0);
        if (what == T_WAIT || what == T_MAX)
          close_seconds(o->f, what == T_WAIT ? row.total_wait_ns : row.max_wait_ns);
        else
          close_u64(o->f, what == T_QUEUED   ? row.queued
                          : what == T_ACTIVE ? row.active
                                             : row.granted);
      }
    }
}

static void write_tenants(const struct out *o, uint32_t cap) {
  family(o, "shmsched_tenant_queued", "gauge", "A tenant's queued requests.");
  per_tenant(o, cap, "shmsched_tenant_queued", T_QUEUED);
  family(o, "shmsched_tenant_active", "gauge",
         "A tenant's leases counted against tenant-max-active.");
  per_tenant(o, cap, "shmsched_tenant_active", T_ACTIVE);
  family(o, "shmsched_tenant_grants_total", "counter",
         "A tenant's grants in a class, from the queue and on the fast path, kept while it is "
         "idle (a full tenant table sums the least recently active into tenant=\"_other\").");
  per_tenant(o, cap, "shmsched_tenant_grants_total", T_GRANTS);
  family(o, "shmsched_tenant_wait_seconds_total", "counter",
         "How long a tenant's grants from the queue waited, summed.");
  per_tenant(o, cap, "shmsched_tenant_wait_seconds_total", T_WAIT);
  family(o, "shmsched_tenant_wait_max_seconds", "gauge",
         "The longest wait of a tenant's grant from the queue.");
  per_tenant(o, cap, "shmsched_tenant_wait_max_seconds", T_MAX);
}

/* ---- the tenant table: weights, teams and cell-time, capped ---------------- */

/*
 * The tenant table's records of segment s: its teams, then at most cap tenants by cell-time
 * (each with its own row), and the rest with the folded records summed as "_other". Calls
 * fn for each row to write, with other set for the sum.
 */
static void table_rows(const struct seg *s, uint32_t cap,
                       void (*fn)(const struct out *, const struct seg *, const shms_policy_row *,
                                  int),
                       const struct out *o) {
  shms_policy_row other = {.name = "_other", .weight = 1, .flags = SHMS_POLICY_OTHER};
  uint32_t shown = 0;
  int rest = 0;
  for (uint32_t i = 0; i < s->ntable; i++) {
    const shms_policy_row *r = &s->table[i];
    int tenant = !(r->flags & (SHMS_POLICY_TEAM | SHMS_POLICY_OTHER));
    if (!(r->flags & SHMS_POLICY_TEAM) &&
        (!tenant || shown++ >= cap || strcmp(r->name, "_other") == 0)) {
      for (int c = 0; c < SHMS_CLASS_COUNT; c++)
        other.cell_ns[c] += r->cell_ns[c];
      rest = 1;
      continue;
    }
    fn(o, s, r, 0);
  }
  if (rest)
    fn(o, s, &other, 1);
}

static void cell_seconds_row(const struct out *o, const struct seg *s, const shms_policy_row *r,
                             int other) {
  (void)other;
  if (r->flags & SHMS_POLICY_TEAM)
    return;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    if (!s->cfg.classes[c].configured ||
        shms_class_fairness(&s->cfg.classes[c]) != SHMS_FAIRNESS_TIME)
      continue;
    open_sample(o->f, "shmsched_tenant_cell_seconds_total", s, c);
    label(o->f, "tenant", r->name, 0);
    close_seconds(o->f, r->cell_ns[c]);
  }
}

/* The rest have weights of their own: no sum of them means anything, so "_other" has none. */
static void tenant_weight_row(const struct out *o, const struct seg *s, const shms_policy_row *r,
                              int other) {
  if (other || (r->flags & SHMS_POLICY_TEAM))
    return;
  open_sample(o->f, "shmsched_tenant_weight", s, -1);
  label(o->f, "tenant", r->name, 0);
  label(o->f, "team", r->team, 0);
  close_u64(o->f, r->weight);
}

static void team_weight_row(const struct out *o, const struct seg *s, const shms_policy_row *r,
                            int other) {
  if (other || !(r->flags & SHMS_POLICY_TEAM))
    return;
  open_sample(o->f, "shmsched_team_weight", s, -1);
  label(o->f, "team", r->name, 0);
  close_u64(o->f, r->weight);
}

static void write_table(const struct out *o, uint32_t cap) {
  family(o, "shmsched_tenant_cell_seconds_total", "counter",
         "Cell-time (cells x seconds) a tenant's leases held in a class fair by time, counted as "
         "each ends and kept while the tenant is idle; the tenants past --tenant-series and the "
         "records folded out of a full tenant table summed as tenant=\"_other\".");
  for (int i = 0; i < o->n; i++)
    if (o->segs[i].up)
      table_rows(&o->segs[i], cap, cell_seconds_row, o);
  family(o, "shmsched_tenant_weight", "gauge",
         "A tenant's weight in classes fair by time, and its team (\"\": none).");
  for (int i = 0; i < o->n; i++)
    if (o->segs[i].up)
      table_rows(&o->segs[i], cap, tenant_weight_row, o);
  family(o, "shmsched_team_weight", "gauge", "A team's weight in classes fair by time.");
  for (int i = 0; i < o->n; i++)
    if (o->segs[i].up)
      table_rows(&o->segs[i], cap, team_weight_row, o);
}

int metrics_render(const struct metrics_opts *o, char **out, size_t *len) {
  struct seg *segs = calloc((size_t)o->count, sizeof *segs);
  if (segs == NULL)
    return -1;
  int down = 0;
  for (int i = 0; i < o->count; i++) {
    segs[i].name = o->names[i];
    int rc = gather(o, &segs[i]);
    segs[i].up = rc == SHMS_OK;
    if (rc != SHMS_OK) {
      down++;
      if (o->report_errors) {
        const char *d = shms_last_error_detail();
        fprintf(stderr, "shmsched: %s: metrics: segment '%s': %s\n", shms_err_name(rc),
                segs[i].name, d[0] != '\0' ? d : shms_strerror(rc));
      }
    }
  }
  *out = NULL;
  *len = 0;
  FILE *f = open_memstream(out, len);
  if (f != NULL) {
    struct out w = {f, segs, o->count};
    write_segments(&w);
    write_classes(&w);
    write_quotas(&w);
    if (o->tenants) {
      write_tenants(&w, o->tenant_series);
      write_table(&w, o->tenant_series);
    }
    if (fclose(f) != 0) {
      free(*out);
      *out = NULL;
    }
  }
  for (int i = 0; i < o->count; i++) {
    for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
      free(segs[i].tenants[c]);
      free(segs[i].held[c]);
    }
    free(segs[i].table);
  }
  free(segs);
  return *out == NULL ? -1 : down;
}
