/* Drawing a top frame: as lines of text (terminal and batch alike), or as one JSON object. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "json_out.h"
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

static void header(struct lines *l, const struct top_frame *f) {
  char sup[32], clock[16] = "";
  time_t secs = (time_t)(f->wall_ns / 1000000000u);
  struct tm tm;
  if (localtime_r(&secs, &tm) != NULL)
    strftime(clock, sizeof clock, "%H:%M:%S", &tm);
  if (f->supervisor_pid != 0)
    snprintf(sup, sizeof sup, "pid %d", (int)f->supervisor_pid);
  else
    snprintf(sup, sizeof sup, "none");
  put(l, 1,
      "shmsched top: %s  state %s  up %" PRIu64 "d %02" PRIu64 ":%02" PRIu64 ":%02" PRIu64
      "  processes %u  supervisor %s  interval %.1fs  %s",
      f->name, f->state, f->uptime_s / 86400, f->uptime_s / 3600 % 24, f->uptime_s / 60 % 60,
      f->uptime_s % 60, f->live_processes, sup, f->interval_s, clock);
}

static void classes(struct lines *l, const struct top_frame *f) {
  put(l, 1, "%-12s %-14s %4s %4s %4s %4s %4s %13s %8s %7s %7s %7s %8s %8s %8s", "CLASS", "CELLS",
      "LSD", "GRT", "AVL", "QRN", "OFF", "QUEUE", "GRANT/s", "REJ/s", "CANC/s", "EXP/s", "WAIT",
      "WAITMAX", "OLDEST");
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    const struct top_class *r = &f->classes[c];
    if (r->cls < 0)
      continue;
    char b[BAR + 1], q[32], w[16], m[16], o[16];
    bar(b, r);
    snprintf(q, sizeof q, "%u/%u", r->depth, r->capacity);
    dur(m + 1, sizeof m - 1, r->wait_max_ns);
    m[0] = r->wait_max_bound ? '<' : ' ';
    put(l, 0, "%-12s [%s] %4u %4u %4u %4u %4u %13s %8.1f %7.1f %7.1f %7.1f %8s %8s %8s",
        shms_class_name((shms_class_t)c), b, r->leased, r->granted, r->available, r->quarantined,
        r->offline, q, r->grants_per_s, r->rejections_per_s, r->cancellations_per_s,
        r->expirations_per_s, dur(w, sizeof w, r->wait_mean_ns), m[1] == '-' ? "-" : m,
        dur(o, sizeof o, r->oldest_lease_ns ? r->oldest_lease_ns : TOP_NONE));
  }
  put(l, 0, "cells: # leased  + granted  ~ reserved  . available  x quarantined  _ offline");
}

static void tenants(struct lines *l, const struct top_class *r, enum top_sort sort) {
  char fair[16] = "-";
  if (r->fair_share > 0)
    snprintf(fair, sizeof fair, "%.0f%%", r->fair_share * 100);
  put(l, 1,
      "TENANTS of %s: %u  (fair share %s)  sort: %s   keys: c/Tab class  s sort  l leases  q quit",
      shms_class_name((shms_class_t)r->cls), r->ntenants, fair, top_sort_name(sort));
  put(l, 1, "%-32s %7s %7s %8s %6s %8s %8s %4s %6s %6s  %s", "TENANT", "QUEUED", "ACTIVE",
      "GRANT/s", "SHARE", "WAIT", "WAITMAX", "W", "TIME", "ENTIT", "TEAM");
  for (uint32_t i = 0; i < r->ntenants; i++) {
    const struct top_tenant *t = &r->tenants[i];
    char share[16] = "-", time[16] = "-", ent[16] = "-", w[16], m[16];
    if (t->share >= 0)
      snprintf(share, sizeof share, "%.0f%%", t->share * 100);
    if (t->time_share >= 0)
      snprintf(time, sizeof time, "%.0f%%", t->time_share * 100);
    if (t->entitled > 0)
      snprintf(ent, sizeof ent, "%.0f%%", t->entitled * 100);
    put(l, 0, "%-32s %7u %7u %8.1f %6s %8s %8s %4u %6s %6s  %s", t->name, t->queued, t->active,
        t->grants_per_s, share, dur(w, sizeof w, t->wait_mean_ns), dur(m, sizeof m, t->wait_max_ns),
        t->weight, time, ent, t->team[0] != '\0' ? t->team : "-");
  }
}

/*
 * Whose each lease is, one row per cell that carries one (or a quarantined one's record): in 80
 * columns, the tenant last (cut at the screen's edge when long).
 */
static void leases(struct lines *l, const struct top_class *r) {
  put(l, 1, "LEASES of %s: %u  keys: c/Tab class  l tenants  q quit",
      shms_class_name((shms_class_t)r->cls), r->nleases);
  put(l, 1, "%5s %-11s %8s %7s %-7s %-12s %s", "CELL", "STATE", "AGE", "PID", "HOLDER", "USER",
      "TENANT");
  for (uint32_t i = 0; i < r->nleases; i++) {
    const struct top_lease *s = &r->leases[i];
    char age[16], pid[16] = "-";
    if (s->pid != 0)
      snprintf(pid, sizeof pid, "%d", (int)s->pid);
    put(l, 0, "%5u %-11s %8s %7s %-7s %-12.12s %s", s->cell, s->state,
        dur(age, sizeof age, s->age_ns), pid, s->holder_state[0] != '\0' ? s->holder_state : "-",
        s->user, s->tenant);
  }
}

void top_render(const struct top_frame *f, int sel, enum top_sort sort, enum top_panel panel,
                int width, int height, void (*line)(void *ctx, const char *text, int kind),
                void *ctx) {
  struct lines l = {line, ctx, width, height > 0 ? height : -1};
  header(&l, f);
  put(&l, 0, "%s", "");
  classes(&l, f);
  put(&l, 0, "%s", "");
  if (sel >= 0 && sel < SHMS_CLASS_COUNT && f->classes[sel].cls >= 0) {
    if (panel == TOP_PANEL_LEASES)
      leases(&l, &f->classes[sel]);
    else
      tenants(&l, &f->classes[sel], sort);
  }
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
    if (s->pid != 0) {
      json_i64(j, "pid", s->pid);
      json_str(j, "holder_state", s->holder_state);
    } else {
      json_null(j, "pid");
      json_null(j, "holder_state");
    }
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
  json_str(&j, "segment", f->name);
  json_str(&j, "state", f->state);
  json_u64(&j, "time_unix_ns", f->wall_ns);
  json_u64(&j, "uptime_s", f->uptime_s);
  json_double(&j, "interval_s", f->interval_s);
  json_u64(&j, "live_processes", f->live_processes);
  if (f->supervisor_pid != 0)
    json_i64(&j, "supervisor_pid", f->supervisor_pid);
  else
    json_null(&j, "supervisor_pid");
  json_begin_object(&j, "classes");
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (f->classes[c].cls >= 0)
      json_class(&j, &f->classes[c]);
  json_end(&j);
  json_close(&j);
}
