/* top's frames: samples of a segment read as an observer, and what their deltas say (top.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cli/cli.h"
#include "../cli/holder_state.h"
#include "../cli/pid_name.h"
#include "top.h"

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int top_sample_read(shms_t *h, struct top_sample *s) {
  memset(s, 0, sizeof *s);
  s->mono_ns = clock_ns(CLOCK_MONOTONIC);
  s->wall_ns = clock_ns(CLOCK_REALTIME);
  int rc = shms_segment_info_get(h, &s->info);
  if (rc == SHMS_OK)
    rc = shms_get_config(h, &s->cfg);
  if (rc == SHMS_OK)
    rc = shms_quota_list(h, s->quotas, SHMS_QUOTAS_MAX, &s->nquotas);
  s->nquotas = s->nquotas < SHMS_QUOTAS_MAX ? s->nquotas : SHMS_QUOTAS_MAX;
  for (int c = 0; rc == SHMS_OK && c < SHMS_CLASS_COUNT; c++) {
    if (!s->cfg.classes[c].configured)
      continue;
    rc = shms_observe(h, (shms_class_t)c, &s->st[c]);
    uint32_t n = 0;
    if (rc == SHMS_OK)
      rc = cli_tenants(h, c, &s->tenants[c], &s->ntenants[c]);
    uint32_t cells = s->cfg.classes[c].cells ? s->cfg.classes[c].cells : 1;
    n = 0;
    if (rc == SHMS_OK && (s->cells[c] = calloc(cells, sizeof *s->cells[c])) == NULL)
      rc = SHMS_ENOMEM;
    if (rc == SHMS_OK)
      rc = shms_cells(h, (shms_class_t)c, s->cells[c], cells, &n);
    s->ncells[c] = n < cells ? n : cells;
  }
  return rc;
}

void top_sample_free(struct top_sample *s) {
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    free(s->tenants[c]);
    free(s->cells[c]);
  }
  memset(s, 0, sizeof *s);
}

static uint64_t delta(uint64_t now, uint64_t before) { return now >= before ? now - before : now; }

static uint64_t bucket_sum(const uint64_t b[SHMS_WAIT_BUCKETS]) {
  uint64_t n = 0;
  for (int i = 0; i < SHMS_WAIT_BUCKETS; i++)
    n += b[i];
  return n;
}

/*
 * The longest wait in the interval: exact when the class's all-time longest moved (that is the
 * interval's), else the bound of the highest histogram bucket that grew (an upper bound).
 */
static void interval_max(const shms_class_stats *a, const shms_class_stats *b,
                         struct top_class *r) {
  static const uint64_t le[SHMS_WAIT_BUCKETS] = SHMS_WAIT_BUCKET_LE_NS;
  r->wait_max_ns = TOP_NONE;
  if (b->max_wait_ns > a->max_wait_ns) {
    r->wait_max_ns = b->max_wait_ns;
    return;
  }
  for (int i = SHMS_WAIT_BUCKETS - 1; i >= 0; i--)
    if (b->wait_buckets[i] > a->wait_buckets[i]) {
      r->wait_max_ns = le[i] < b->max_wait_ns ? le[i] : b->max_wait_ns;
      r->wait_max_bound = le[i] < b->max_wait_ns;
      return;
    }
}

static const shms_tenant_stats *find_tenant(const struct top_sample *s, int c, const char *name) {
  for (uint32_t i = 0; s != NULL && i < s->ntenants[c]; i++)
    if (strcmp(s->tenants[c][i].name, name) == 0)
      return &s->tenants[c][i];
  return NULL;
}

static enum top_sort sort_key;
static int sort_reverse;

static int by_sort(const void *a, const void *b) {
  const struct top_tenant *x = a, *y = b;
  int d = 0;
  if (sort_key == TOP_SORT_GRANTS)
    d = (x->grants_per_s < y->grants_per_s) - (x->grants_per_s > y->grants_per_s);
  else if (sort_key == TOP_SORT_QUEUED)
    d = (x->queued < y->queued) - (x->queued > y->queued);
  else if (sort_key == TOP_SORT_WAIT) {
    uint64_t wx = x->wait_mean_ns == TOP_NONE ? 0 : x->wait_mean_ns;
    uint64_t wy = y->wait_mean_ns == TOP_NONE ? 0 : y->wait_mean_ns;
    d = (wx < wy) - (wx > wy);
  }
  d = d != 0 ? d : strcmp(x->name, y->name);
  return sort_reverse ? -d : d;
}

static int make_tenants(const struct top_sample *prev, const struct top_sample *now, int c,
                        double dt, enum top_sort sort, int reverse, struct top_class *r) {
  uint32_t n = now->ntenants[c];
  r->tenants = calloc(n ? n : 1, sizeof *r->tenants);
  if (r->tenants == NULL)
    return SHMS_ENOMEM;
  uint64_t total = 0, cell_total = 0;
  uint32_t wanting = 0;
  for (uint32_t i = 0; i < n; i++) {
    const shms_tenant_stats *t = &now->tenants[c][i];
    const shms_tenant_stats *p = prev->mono_ns ? find_tenant(prev, c, t->name) : NULL;
    struct top_tenant *o = &r->tenants[i];
    memcpy(o->name, t->name, sizeof o->name);
    o->queued = t->queued;
    o->active = t->active;
    /* A record freed and taken again starts from 0: a count below the last one is all new. */
    int fresh = p == NULL || t->granted < p->granted;
    o->interval_grants = prev->mono_ns == 0 ? 0 : fresh ? t->granted : t->granted - p->granted;
    uint64_t waited = prev->mono_ns == 0 ? 0
                      : fresh            ? t->total_wait_ns
                                         : t->total_wait_ns - p->total_wait_ns;
    o->grants_per_s = dt > 0 ? (double)o->interval_grants / dt : 0;
    o->wait_mean_ns = o->interval_grants ? waited / o->interval_grants : TOP_NONE;
    o->wait_max_ns = t->granted ? t->max_wait_ns : TOP_NONE;
    total += o->interval_grants;
    wanting += o->queued > 0 || o->interval_grants > 0;
    o->weight = t->weight;
    memcpy(o->team, t->team, sizeof o->team);
    o->entitled = t->entitled_share;
    /* The table's counter outlives the record: a tenant seen first now has no interval. */
    o->interval_cell_ns = p != NULL && t->cell_ns >= p->cell_ns ? t->cell_ns - p->cell_ns : 0;
    cell_total += o->interval_cell_ns;
  }
  for (uint32_t i = 0; i < n; i++) {
    struct top_tenant *o = &r->tenants[i];
    o->share = total ? (double)o->interval_grants / (double)total : -1;
    o->time_share = cell_total ? (double)o->interval_cell_ns / (double)cell_total : -1;
  }
  r->ntenants = n;
  r->fair_share = wanting ? 1.0 / wanting : 0;
  sort_key = sort;
  sort_reverse = reverse;
  qsort(r->tenants, n, sizeof *r->tenants, by_sort);
  return SHMS_OK;
}

/* The cells of class c that carry a lease or a quarantined one's record, in cell order. */
static int make_leases(const struct top_sample *now, int c, struct top_class *r) {
  uint32_t n = now->ncells[c];
  r->leases = calloc(n ? n : 1, sizeof *r->leases);
  if (r->leases == NULL)
    return SHMS_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    const shms_cell_info *ci = &now->cells[c][i];
    if (ci->state != SHMS_CELL_GRANTED && ci->state != SHMS_CELL_LEASED &&
        ci->state != SHMS_CELL_QUARANTINED && ci->state != SHMS_CELL_RESERVED)
      continue;
    struct top_lease *o = &r->leases[r->nleases++];
    char code;
    o->cell = ci->cell;
    o->state = ci->state == SHMS_CELL_GRANTED    ? "granted"
               : ci->state == SHMS_CELL_LEASED   ? "leased"
               : ci->state == SHMS_CELL_RESERVED ? "reserved"
                                                 : "quarantined";
    o->pid = ci->pid;
    o->ns_pid = ci->ns_pid;
    o->pidns = ci->pidns;
    pid_name(o->pid_name, sizeof o->pid_name, ci->pid, ci->ns_pid, ci->pid_foreign, ci->pidns);
    o->holder_state = holder_state_ns(ci->pid, ci->pid_foreign, ci->alive, &code);
    o->uid = ci->uid;
    cli_user_name(ci->uid, o->user, sizeof o->user);
    memcpy(o->tenant, ci->tenant, sizeof o->tenant);
    o->tenant[SHMS_TENANT_MAX] = '\0';
    /* shms_cells' since_ns is CLOCK_MONOTONIC, as the sample's clock */
    o->age_ns =
        ci->state != SHMS_CELL_QUARANTINED && ci->since_ns != 0 && now->mono_ns > ci->since_ns
            ? now->mono_ns - ci->since_ns
            : TOP_NONE;
  }
  return SHMS_OK;
}

static const char *state_name(uint32_t st) {
  return st == SHMS_SEG_ACTIVE       ? "active"
         : st == SHMS_SEG_DRAINING   ? "draining"
         : st == SHMS_SEG_DESTROYING ? "destroying"
                                     : "unknown";
}

int top_frame_make(const char *name, const struct top_sample *prev, const struct top_sample *now,
                   enum top_sort sort, int reverse, struct top_frame *f) {
  /* Counters of another segment say nothing of this one's interval. */
  static const struct top_sample none;
  if (prev->info.incarnation != now->info.incarnation)
    prev = &none;
  memset(f, 0, sizeof *f);
  f->name = name;
  f->incarnation = now->info.incarnation;
  f->state = state_name(now->info.state);
  f->wall_ns = now->wall_ns;
  f->uptime_s = now->wall_ns > now->info.created_unix_ns
                    ? (now->wall_ns - now->info.created_unix_ns) / 1000000000u
                    : 0;
  f->live_processes = now->info.live_processes;
  f->supervisor_pid = now->info.supervisor_pid;
  memcpy(f->quotas, now->quotas, sizeof f->quotas);
  f->nquotas = now->nquotas;
  double dt = prev->mono_ns ? (double)(now->mono_ns - prev->mono_ns) / 1e9 : 0;
  f->interval_s = dt;
  f->norder = shms_class_order(&now->cfg, f->order);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    struct top_class *r = &f->classes[c];
    r->cls = now->cfg.classes[c].configured ? c : -1;
    if (r->cls < 0)
      continue;
    const shms_class_stats *b = &now->st[c], *a = prev->mono_ns ? &prev->st[c] : b;
    r->worker = now->cfg.classes[c].mode == SHMS_MODE_WORKER;
    r->cells = b->cells;
    r->available = b->available;
    r->granted = b->granted_unaccepted;
    r->leased = b->leased;
    r->quarantined = b->quarantined;
    r->offline = b->offline;
    r->reserved = b->reserved;
    r->depth = b->queue_depth;
    r->capacity = b->queue_capacity;
    r->queued_tenants = b->queued_tenants;
    r->oldest_lease_ns = b->oldest_lease_age_ns;
    if (dt > 0) {
      r->grants_per_s = (double)delta(b->granted, a->granted) / dt;
      r->rejections_per_s = (double)delta(b->rejected, a->rejected) / dt;
      r->cancellations_per_s = (double)delta(b->cancelled, a->cancelled) / dt;
      r->expirations_per_s = (double)delta(b->expired, a->expired) / dt;
      r->joins_per_s = (double)delta(b->joined, a->joined) / dt;
    }
    uint64_t waits = delta(bucket_sum(b->wait_buckets), bucket_sum(a->wait_buckets));
    r->wait_mean_ns = waits ? delta(b->total_wait_ns, a->total_wait_ns) / waits : TOP_NONE;
    if (waits)
      interval_max(a, b, r);
    else
      r->wait_max_ns = TOP_NONE;
    int rc = make_tenants(prev, now, c, dt, sort, reverse, r);
    if (rc == SHMS_OK)
      rc = make_leases(now, c, r);
    if (rc != SHMS_OK)
      return rc;
  }
  return SHMS_OK;
}

void top_frame_gone(const char *name, const struct top_source *src, uint64_t wall_ns,
                    struct top_frame *f) {
  memset(f, 0, sizeof *f);
  f->name = name;
  f->state = "gone";
  f->gone = 1;
  f->incarnation = src->incarnation;
  f->gone_rc = src->attach_rc;
  f->wall_ns = wall_ns;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    f->classes[c].cls = -1;
  f->norder = 0;
}

void top_frame_free(struct top_frame *f) {
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    free(f->classes[c].tenants);
    free(f->classes[c].leases);
  }
}

const char *top_sort_name(enum top_sort s) {
  static const char *const names[] = {"grants/s", "queued", "wait", "name"};
  return (unsigned)s < TOP_SORTS ? names[s] : "?";
}
