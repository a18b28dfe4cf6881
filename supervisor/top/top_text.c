/* Drawing a top frame: as lines of text (terminal and batch alike), or as one JSON object. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../cli/holder_state.h"
#include "../cli/json_out.h"
#include "../cli/pid_name.h"
#include "top.h"

#define BAR 12

/* A duration for a person: "-", "850us", "12.3ms", "4.56s", "5m03s", "2h05m". */
static const char *dur(char *buf, size_t n, uint64_t ns) {
  if (ns == TOP_NONE)
    snprintf(buf, n, "-");
  else if (ns < 1000000)
    snprintf(buf, n, "%" PRIu64 "us", ns / 1000);
  else if (ns < 1000000000)
    snprintf(buf, n, "%.1fms", (double)ns / 1e6);
  else if (ns < 60000000000ull)
    snprintf(buf, n, "%.2fs", (double)ns / 1e9);
  else if (ns < 3600000000000ull)
    snprintf(buf, n, "%" PRIu64 "m%02" PRIu64 "s", ns / UINT64_C(60000000000),
             ns / 1000000000u % 60);
  else
    snprintf(buf, n, "%" PRIu64 "h%02" PRIu64 "m", ns / UINT64_C(3600000000000),
             ns / UINT64_C(60000000000) % 60);
  return buf;
}

/* The cells as a bar of BAR characters, each state's share of them (one at least if any). */
static void bar(char *out, const struct top_class *r) {
  const uint32_t counts[] = {r->leased,    r->granted,     r->reserved,
                             r->available, r->quarantined, r->offline};
  const char marks[] = {'#', '+', '~', '.', 'x', '_'};
  int at = 0;
  for (int k = 0; k < 6 && r->cells > 0; k++) {
    int w = (int)((counts[k] * BAR + r->cells / 2) / r->cells);
    if (w == 0 && counts[k] > 0)
      w = 1;
    for (int i = 0; i < w && at < BAR; i++)
      out[at++] = marks[k];
  }
  while (at < BAR)
    out[at++] = ' ';
  out[at] = '\0';
}

struct lines {
  void (*line)(void *ctx, const char *text, int kind);
  void *ctx;
  int width, left; /* columns; lines left on the screen */
};

static void put(struct lines *l, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void put(struct lines *l, int kind, const char *fmt, ...) {
  if (l->left == 0)
    return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (l->width > 0 && l->width < (int)sizeof buf)
    buf[l->width] = '\0';
  l->line(l->ctx, buf, kind);
  l->left--;
}

static void header(struct lines *l, const struct top_frame *f, const struct top_view *v) {
  char sup[32], clock[16] = "";
  time_t secs = (time_t)(f->wall_ns / 1000000000u);
  struct tm tm;
  if (localtime_r(&secs, &tm) != NULL)
    strftime(clock, sizeof clock, "%H:%M:%S", &tm);
  /* paused comes first: on a narrow terminal the end of the line is cut */
  const char *paused = v->paused ? "  paused" : "";
  if (f->gone) {
    put(l, 1, "shmsched top: %s%s  state gone  %s", f->name, paused, clock);
    return;
  }
  if (strcmp(supervisor_state(f->supervisor_pid), "stopped") == 0)
    snprintf(sup, sizeof sup, "pid %d STOPPED", (int)f->supervisor_pid);
  else if (f->supervisor_pid != 0)
    snprintf(sup, sizeof sup, "pid %d", (int)f->supervisor_pid);
  else
    snprintf(sup, sizeof sup, "none");
  put(l, 1,
      "shmsched top: %s%s  state %s  up %" PRIu64 "d %02" PRIu64 ":%02" PRIu64 ":%02" PRIu64
      "  processes %u  supervisor %s  interval %.1fs  %s",
      f->name, paused, f->state, f->uptime_s / 86400, f->uptime_s / 3600 % 24,
      f->uptime_s / 60 % 60, f->uptime_s % 60, f->live_processes, sup, f->interval_s, clock);
}

/* A table's heading and rows, the columns that fit the width (top_cols_fit). */
struct table {
  const struct top_col *cols;
  int n;
  unsigned char keep[16];
};

static void table_fit(struct table *t, const struct lines *l, const struct top_col *cols, int n,
                      const int *drop, int ndrop) {
  t->cols = cols;
  t->n = n < (int)sizeof t->keep ? n : (int)sizeof t->keep;
  top_cols_fit(cols, t->n, drop, ndrop, l->width, t->keep);
}

static void table_row(struct lines *l, const struct table *t, int kind, const char *const *fields) {
  char buf[512];
  put(l, kind, "%s", top_cols_join(buf, sizeof buf, t->cols, t->n, t->keep, fields));
}

enum {
  C_CLASS,
  C_CELLS,
  C_LSD,
  C_GRT,
  C_AVL,
  C_QRN,
  C_OFF,
  C_QUEUE,
  C_GRANTS,
  C_REJ,
  C_CANC,
  C_EXP,
  C_WAIT,
  C_WAITMAX,
  C_OLDEST,
  C_COUNT
};

static const struct top_col class_cols[C_COUNT] = {
    [C_CLASS] = {"CLASS", 12, 1}, [C_CELLS] = {"CELLS", BAR + 2, 1}, [C_LSD] = {"LSD", 4, 0},
    [C_GRT] = {"GRT", 4, 0},      [C_AVL] = {"AVL", 4, 0},           [C_QRN] = {"QRN", 4, 0},
    [C_OFF] = {"OFF", 4, 0},      [C_QUEUE] = {"QUEUE", 13, 0},      [C_GRANTS] = {"GRANT/s", 8, 0},
    [C_REJ] = {"REJ/s", 7, 0},    [C_CANC] = {"CANC/s", 7, 0},       [C_EXP] = {"EXP/s", 7, 0},
    [C_WAIT] = {"WAIT", 8, 0},    [C_WAITMAX] = {"WAITMAX", 8, 0},   [C_OLDEST] = {"OLDEST", 8, 0},
};

/*
 * The order the class table's columns go in on a narrow terminal (docs/cli.md says it): the
 * rarer events first, then the per-state counts the bar already shows, then the rest; the
 * waits, what the queued pay, last. The class's name always stays.
 */
static const int class_drop[] = {C_EXP, C_CANC,   C_OFF,   C_QRN,    C_GRT,   C_AVL,     C_LSD,
                                 C_REJ, C_OLDEST, C_CELLS, C_GRANTS, C_QUEUE, C_WAITMAX, C_WAIT};

/* Classes in configuration order, as status lists them. */
static void classes(struct lines *l, const struct top_frame *f) {
  struct table t;
  table_fit(&t, l, class_cols, C_COUNT, class_drop, sizeof class_drop / sizeof *class_drop);
  table_row(l, &t, 1, NULL);
  for (int i = 0; i < f->norder; i++) {
    const struct top_class *r = &f->classes[f->order[i]];
    if (r->cls < 0)
      continue;
    char b[BAR + 1], cells[BAR + 3], q[32], w[16], m[16], o[16];
    char n[C_COUNT][16];
    bar(b, r);
    snprintf(cells, sizeof cells, "[%s]", b);
    snprintf(q, sizeof q, "%u/%u", r->depth, r->capacity);
    dur(m + 1, sizeof m - 1, r->wait_max_ns);
    m[0] = r->wait_max_bound ? '<' : ' ';
    const uint32_t counts[] = {r->leased, r->granted, r->available, r->quarantined, r->offline};
    for (int k = 0; k < 5; k++)
      snprintf(n[C_LSD + k], sizeof n[0], "%u", counts[k]);
    const double rates[] = {r->grants_per_s, r->rejections_per_s, r->cancellations_per_s,
                            r->expirations_per_s};
    for (int k = 0; k < 4; k++)
      snprintf(n[C_GRANTS + k], sizeof n[0], "%.1f", rates[k]);
    const char *fields[C_COUNT] = {
        [C_CLASS] = shms_class_name((shms_class_t)r->cls),
        [C_CELLS] = cells,
        [C_QUEUE] = q,
        [C_WAIT] = dur(w, sizeof w, r->wait_mean_ns),
        [C_WAITMAX] = m[1] == '-'   ? "-"
                      : m[0] == ' ' ? m + 1
                                    : m,
        [C_OLDEST] = dur(o, sizeof o, r->oldest_lease_ns ? r->oldest_lease_ns : TOP_NONE),
    };
    for (int k = C_LSD; k <= C_OFF; k++)
      fields[k] = n[k];
    for (int k = C_GRANTS; k <= C_EXP; k++)
      fields[k] = n[k];
    table_row(l, &t, 0, fields);
  }
  put(l, 0, "cells: # leased  + granted  ~ reserved  . available  x quarantined  _ offline");
}

/* On a terminal, a title ends with where the keys are; batch output has no keys. */
static const char *keys_hint(const struct top_view *v) {
  return v->keys ? "   keys: ? help  q quit" : "";
}

enum {
  T_NAME,
  T_QUEUED,
  T_ACTIVE,
  T_GRANTS,
  T_SHARE,
  T_WAIT,
  T_WAITMAX,
  T_W,
  T_TIME,
  T_ENTIT,
  T_TEAM,
  T_COUNT
};

static const struct top_col tenant_cols[T_COUNT] = {
    [T_NAME] = {"TENANT", SHMS_TENANT_MAX + 1, 1},
    [T_QUEUED] = {"QUEUED", 7, 0},
    [T_ACTIVE] = {"ACTIVE", 7, 0},
    [T_GRANTS] = {"GRANT/s", 8, 0},
    [T_SHARE] = {"SHARE", 6, 0},
    [T_WAIT] = {"WAIT", 8, 0},
    [T_WAITMAX] = {"WAITMAX", 8, 0},
    [T_W] = {"W", 4, 0},
    [T_TIME] = {"TIME", 6, 0},
    [T_ENTIT] = {"ENTIT", 6, 0},
    [T_TEAM] = {"TEAM", 4, 1}, /* last: a long team is cut at the edge */
};

/*
 * The order the tenant table's columns go in on a narrow terminal (docs/cli.md): what the
 * policy set and the counts first; the tenant's share of the grants and its waits, what says
 * whether it is served fairly, last. The tenant's name always stays.
 */
static const int tenant_drop[] = {T_TEAM, T_W,      T_ACTIVE,  T_ENTIT, T_GRANTS,
                                  T_TIME, T_QUEUED, T_WAITMAX, T_SHARE, T_WAIT};

static void tenants(struct lines *l, const struct top_class *r, const struct top_view *v) {
  char fair[16] = "-";
  if (r->fair_share > 0)
    snprintf(fair, sizeof fair, "%.0f%%", r->fair_share * 100);
  put(l, 1, "TENANTS of %s: %u  (fair share %s)  sort: %s%s%s",
      shms_class_name((shms_class_t)r->cls), r->ntenants, fair, top_sort_name(v->sort),
      v->reverse ? " reversed" : "", keys_hint(v));
  struct table t;
  table_fit(&t, l, tenant_cols, T_COUNT, tenant_drop, sizeof tenant_drop / sizeof *tenant_drop);
  table_row(l, &t, 1, NULL);
  for (uint32_t i = 0; i < r->ntenants; i++) {
    const struct top_tenant *s = &r->tenants[i];
    char queued[16], active[16], grants[24], share[16] = "-", w[16], m[16], weight[16],
                                             time[16] = "-", ent[16] = "-";
    snprintf(queued, sizeof queued, "%u", s->queued);
    snprintf(active, sizeof active, "%u", s->active);
    snprintf(grants, sizeof grants, "%.1f", s->grants_per_s);
    snprintf(weight, sizeof weight, "%u", s->weight);
    if (s->share >= 0)
      snprintf(share, sizeof share, "%.0f%%", s->share * 100);
    if (s->time_share >= 0)
      snprintf(time, sizeof time, "%.0f%%", s->time_share * 100);
    if (s->entitled > 0)
      snprintf(ent, sizeof ent, "%.0f%%", s->entitled * 100);
    const char *fields[T_COUNT] = {
        [T_NAME] = s->name,
        [T_QUEUED] = queued,
        [T_ACTIVE] = active,
        [T_GRANTS] = grants,
        [T_SHARE] = share,
        [T_WAIT] = dur(w, sizeof w, s->wait_mean_ns),
        [T_WAITMAX] = dur(m, sizeof m, s->wait_max_ns),
        [T_W] = weight,
        [T_TIME] = time,
        [T_ENTIT] = ent,
        [T_TEAM] = s->team[0] != '\0' ? s->team : "-",
    };
    table_row(l, &t, 0, fields);
  }
}

/*
 * Whose each lease is, one row per cell that carries one (or a quarantined one's record): in 80
 * columns, the tenant last (cut at the screen's edge when long).
 */
static void leases(struct lines *l, const struct top_class *r, const struct top_view *v) {
  put(l, 1, "LEASES of %s: %u%s", shms_class_name((shms_class_t)r->cls), r->nleases, keys_hint(v));
  put(l, 1, "%5s %-11s %8s %7s %-7s %-12s %s", "CELL", "STATE", "AGE", "PID", "HOLDER", "USER",
      "TENANT");
  for (uint32_t i = 0; i < r->nleases; i++) {
    const struct top_lease *s = &r->leases[i];
    char age[16];
    put(l, 0, "%5u %-11s %8s %7s %-7s %-12.12s %s", s->cell, s->state,
        dur(age, sizeof age, s->age_ns), s->pid_name[0] != '\0' ? s->pid_name : "-",
        s->holder_state[0] != '\0' ? s->holder_state : "-", s->user, s->tenant);
  }
}

static void gone(struct lines *l, const struct top_frame *f) {
  put(l, 0, "segment '%s' (incarnation %016" PRIx64 ") was destroyed", f->name, f->incarnation);
  if (f->gone_rc == SHMS_ENOTFOUND)
    put(l, 0, "waiting for a new segment '%s': top attaches it once it is created", f->name);
  else /* one is there, but not for us (its mode, or half made): say so, and keep trying */
    put(l, 0, "a segment '%s' is there, but top cannot attach it (%s): trying again", f->name,
        shms_err_name(f->gone_rc));
}

/* The segment's quotas on one line, "quotas  gpu 2/2 (3 waiting)  licence 0/4", if it has any. */
static void quotas(struct lines *l, const struct top_frame *f) {
  char buf[1024];
  size_t o = 0;
  if (f->nquotas == 0)
    return;
  o += (size_t)snprintf(buf, sizeof buf, "quotas");
  for (uint32_t i = 0; i < f->nquotas && o < sizeof buf; i++) {
    const shms_quota_row *q = &f->quotas[i];
    o += (size_t)snprintf(buf + o, sizeof buf - o, "  %s %u/%u", q->name, q->used, q->max);
    if (q->waiters != 0 && o < sizeof buf)
      o += (size_t)snprintf(buf + o, sizeof buf - o, " (%u waiting)", q->waiters);
  }
  put(l, 0, "%s", buf);
}

void top_render(const struct top_frame *f, const struct top_view *v,
                void (*line)(void *ctx, const char *text, int kind), void *ctx) {
  struct lines l = {line, ctx, v->width, v->height > 0 ? v->height : -1};
  header(&l, f, v);
  put(&l, 0, "%s", "");
  if (f->gone) {
    gone(&l, f);
    return;
  }
  classes(&l, f);
  quotas(&l, f);
  put(&l, 0, "%s", "");
  if (v->sel >= 0 && v->sel < SHMS_CLASS_COUNT && f->classes[v->sel].cls >= 0) {
    if (v->panel == TOP_PANEL_LEASES)
      leases(&l, &f->classes[v->sel], v);
    else
      tenants(&l, &f->classes[v->sel], v);
  }
}

void top_render_help(const struct top_view *v, void (*line)(void *ctx, const char *text, int kind),
                     void *ctx) {
  static const char *const keys[][2] = {
      {"c, Tab, Right", "the next class"},
      {"C, Shift-Tab, Left", "the previous class"},
      {"s", "the next sort order: grants/s, queued, wait, name"},
      {"r", "reverse the sort order"},
      {"l", "the class's leases instead of its tenants, and back"},
      {"Space, p", "pause: freeze the display; again to resume"},
      {"?, h", "this help"},
      {"q", "quit"},
  };
  struct lines l = {line, ctx, v->width, v->height > 0 ? v->height : -1};
  put(&l, 1, "shmsched top: keys");
  put(&l, 0, "%s", "");
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    put(&l, 0, "  %-20s %s", keys[i][0], keys[i][1]);
  put(&l, 0, "%s", "");
  put(&l, 0, "Any key returns to the view.");
}

static void json_wait(struct json_out *j, const char *key, uint64_t ns) {
  if (ns == TOP_NONE)
    json_null(j, key);
  else
    json_u64(j, key, ns);
}

static void json_class(struct json_out *j, const struct top_class *r) {
  json_begin_object(j, shms_class_name((shms_class_t)r->cls));
  json_str(j, "mode", r->worker ? "worker" : "lease");
  json_u64(j, "cells", r->cells);
  json_u64(j, "cells_leased", r->leased);
  json_u64(j, "cells_granted", r->granted);
  json_u64(j, "cells_available", r->available);
  json_u64(j, "cells_quarantined", r->quarantined);
  json_u64(j, "cells_offline", r->offline);
  json_u64(j, "cells_reserved", r->reserved);
  json_u64(j, "queue_depth", r->depth);
  json_u64(j, "queue_capacity", r->capacity);
  json_u64(j, "queued_tenants", r->queued_tenants);
  json_double(j, "grants_per_s", r->grants_per_s);
  json_double(j, "rejections_per_s", r->rejections_per_s);
  json_double(j, "cancellations_per_s", r->cancellations_per_s);
  json_double(j, "expirations_per_s", r->expirations_per_s);
  json_double(j, "joins_per_s", r->joins_per_s);
  json_wait(j, "wait_mean_ns", r->wait_mean_ns);
  json_wait(j, "wait_max_ns", r->wait_max_ns);
  json_bool(j, "wait_max_is_bound", r->wait_max_bound);
  json_u64(j, "oldest_lease_age_ns", r->oldest_lease_ns);
  json_double(j, "fair_share", r->fair_share);
  json_begin_array(j, "tenants");
  for (uint32_t i = 0; i < r->ntenants; i++) {
    const struct top_tenant *t = &r->tenants[i];
    json_begin_object(j, NULL);
    json_str(j, "name", t->name);
    json_u64(j, "queued", t->queued);
    json_u64(j, "active", t->active);
    json_double(j, "grants_per_s", t->grants_per_s);
    if (t->share >= 0)
      json_double(j, "share", t->share);
    else
      json_null(j, "share");
    json_u64(j, "weight", t->weight);
    if (t->team[0] != '\0')
      json_str(j, "team", t->team);
    else
      json_null(j, "team");
    if (t->time_share >= 0)
      json_double(j, "time_share", t->time_share);
    else
      json_null(j, "time_share");
    json_double(j, "entitled_share", t->entitled);
    json_wait(j, "wait_mean_ns", t->wait_mean_ns);
    json_wait(j, "wait_max_ns", t->wait_max_ns);
    json_end(j);
  }
  json_end(j);
  json_begin_array(j, "leases");
  for (uint32_t i = 0; i < r->nleases; i++) {
    const struct top_lease *s = &r->leases[i];
    json_begin_object(j, NULL);
    json_u64(j, "cell", s->cell);
    json_str(j, "state", s->state);
    pid_json(j, s->pid_name[0] != '\0', s->pid, s->ns_pid, s->pidns, s->holder_state);
    json_u64(j, "uid", s->uid);
    json_str(j, "user", s->user);
    json_str(j, "tenant", s->tenant);
    json_wait(j, "age_ns", s->age_ns);
    json_end(j);
  }
  json_end(j);
  json_end(j);
}

void top_json(FILE *out, const struct top_frame *f) {
  struct json_out j;
  json_open_compact(&j, out);
  char inc[24];
  snprintf(inc, sizeof inc, "%016" PRIx64, f->incarnation);
  json_str(&j, "segment", f->name);
  json_str(&j, "incarnation", inc);
  json_str(&j, "state", f->state);
  if (f->gone) { /* no figures: the segment is no more */
    json_u64(&j, "time_unix_ns", f->wall_ns);
    json_begin_object(&j, "classes");
    json_end(&j);
    json_close(&j);
    return;
  }
  json_u64(&j, "time_unix_ns", f->wall_ns);
  json_u64(&j, "uptime_s", f->uptime_s);
  json_double(&j, "interval_s", f->interval_s);
  json_u64(&j, "live_processes", f->live_processes);
  if (f->supervisor_pid != 0)
    json_i64(&j, "supervisor_pid", f->supervisor_pid);
  else
    json_null(&j, "supervisor_pid");
  json_begin_array(&j, "quotas");
  for (uint32_t i = 0; i < f->nquotas; i++) {
    json_begin_object(&j, NULL);
    json_str(&j, "name", f->quotas[i].name);
    json_u64(&j, "max", f->quotas[i].max);
    json_u64(&j, "used", f->quotas[i].used);
    json_u64(&j, "waiters", f->quotas[i].waiters);
    json_end(&j);
  }
  json_end(&j);
  json_begin_object(&j, "classes");
  for (int i = 0; i < f->norder; i++)
    if (f->classes[f->order[i]].cls >= 0)
      json_class(&j, &f->classes[f->order[i]]);
  json_end(&j);
  json_close(&j);
}
