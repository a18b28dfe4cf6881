/*
 * shmsched explain: why a request waits (or how it ended), as "key: value"
 * lines or JSON. Both printers go through one walk (emit), so their keys agree.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"
#include "../cli/event_fmt.h"
#include "../cli/json_out.h"
#include "../cli/pid_name.h"

static const char help[] =
    "Usage: shmsched explain NAME TICKET [--json]\n"
    "\n"
    "Explain why the request TICKET names waits: its state, tenant and priority,\n"
    "how long it has waited and whether it has aged (waited starvation-after),\n"
    "its tenant's place in the ring of tenants taking turns, the requests of its\n"
    "own tenant that go before it, and what blocks it: no-cell (every cell busy or\n"
    "quarantined), tenant-limit (its tenant is at tenant-max-active), no-worker,\n"
    "draining, turn (other tenants' turns or its own tenant's earlier work).\n"
    "A job of a worker class that a worker runs shows state running; a request\n"
    "that has ended shows its outcome instead (accepted, or for a job completed,\n"
    "or the reason it ended). The ticket of an accepted lease shows state held\n"
    "while its lease is: the cell, the holder's pid, and since when. Once a\n"
    "request's slot is given back, the segment's event ring (see 'events') still\n"
    "tells how it ended, while it holds a record of it: the event, its time, cell\n"
    "and pid.\n"
    "\n"
    "Options:\n"
    "  -j, --json   print one JSON object instead of 'key: value' lines\n"
    "               (default: lines)\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 explained; 1 not (not-found: unknown, stale or retired\n"
    "ticket the event ring holds no record of, or no such segment); 2 usage error, e.g. a "
    "malformed TICKET.\n"
    "\n"
    "Examples:\n"
    "  shmsched explain jobs standard.17.1234.9f3a61c07e2d4b18\n"
    "  shmsched explain jobs \"$(head -n1 make.log)\" --json | jq .blocked_by\n";

/* Sinks, as in status_print.c: a key with a number, a string, a flag, or nothing (null). */
struct sink {
  void (*u64)(void *ctx, const char *key, uint64_t v);
  void (*i64)(void *ctx, const char *key, int64_t v);
  void (*str)(void *ctx, const char *key, const char *v);
  void (*flag)(void *ctx, const char *key, int v);
  void (*none)(void *ctx, const char *key, const char *text);
  void (*list)(void *ctx, const char *key, const char *const *items, int n);
  void *ctx;
};

static const char *const block_names[] = {"no-cell", "tenant-limit", "no-worker", "draining",
                                          "turn",    "gather",       "quota"};
enum { BLOCK_NAMES = sizeof block_names / sizeof block_names[0] };

static const char *state_name(uint32_t s) {
  return s == SHMS_REQ_QUEUED    ? "queued"
         : s == SHMS_REQ_GRANTED ? "granted"
         : s == SHMS_REQ_ENDED   ? "ended"
         : s == SHMS_REQ_RUNNING ? "running"
         : s == SHMS_REQ_HELD    ? "held"
                                 : "unknown";
}

/* A duration for people: "850us", "12.3ms", "4.02s". */
static void human_ns(char *buf, size_t n, uint64_t ns) {
  if (ns < 1000000)
    snprintf(buf, n, "%" PRIu64 "us", ns / 1000);
  else if (ns < 1000000000)
    snprintf(buf, n, "%.1fms", (double)ns / 1e6);
  else
    snprintf(buf, n, "%.2fs", (double)ns / 1e9);
}

/* Append to buf (n bytes, *o used so far), never past its end. */
static void append(char *buf, size_t n, size_t *o, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t n, size_t *o, const char *fmt, ...) {
  if (*o + 1 >= n)
    return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *o, n - *o, fmt, ap);
  va_end(ap);
  if (w > 0)
    *o = *o + (size_t)w < n ? *o + (size_t)w : n - 1;
}

/* Whether the request's class is fair by time (its turns go by charge, not round the ring): set
 * once from the configuration before anything is printed. */
static int class_timed;

/* One sentence: what the request waits for. */
static void why(char *buf, size_t n, const shms_explanation *x) {
  size_t o = 0;
  buf[0] = '\0';
  append(buf, n, &o, "%s", x->blocked_by ? "waiting:" : "waiting for the next dispatch");
  if (x->blocked_by & SHMS_BLOCK_DRAINING)
    append(buf, n, &o, " the segment is draining;");
  if (x->blocked_by & SHMS_BLOCK_NO_CELL)
    append(buf, n, &o, " no free cell;");
  if (x->blocked_by & SHMS_BLOCK_TENANT_LIMIT)
    append(buf, n, &o, " its tenant is at tenant-max-active;");
  if (x->blocked_by & SHMS_BLOCK_NO_WORKER)
    append(buf, n, &o, " no idle worker;");
  if (x->blocked_by & SHMS_BLOCK_QUOTA)
    append(buf, n, &o,
           " quota %s has no unit free (set aside until one comes back: other requests go "
           "first meanwhile);",
           x->quota);
  if (x->tenants_ahead != UINT32_MAX && x->tenants_ahead > 0 && class_timed)
    append(buf, n, &o,
           " %u of the %u tenants taking turns go first (fair by time: the least charged "
           "cell-time by weight, by team, first);",
           x->tenants_ahead, x->ring_length);
  else if (x->tenants_ahead != UINT32_MAX && x->tenants_ahead > 0)
    append(buf, n, &o, " %u of the %u tenants in the ring take their turn first;", x->tenants_ahead,
           x->ring_length);
  if (x->ahead_in_tenant > 0)
    append(buf, n, &o, " %u of its tenant's %u queued requests go first;", x->ahead_in_tenant,
           x->tenant_queued);
  if ((x->blocked_by & SHMS_BLOCK_GATHER) && x->gathered > 0)
    append(buf, n, &o,
           " gathering its %u cells: %u reserved for it, each cell freed is kept for it;", x->cells,
           x->gathered);
  else if (x->blocked_by & SHMS_BLOCK_GATHER)
    append(buf, n, &o,
           " a request of several cells gathers them first (nothing else is granted "
           "meanwhile);");
  if (o > 0 && buf[o - 1] == ';')
    buf[o - 1] = '\0';
}

static void emit_queued(const shms_explanation *x, const struct sink *s) {
  char buf[448];
  const char *blocks[BLOCK_NAMES];
  int nb = 0;
  s->flag(s->ctx, "aged", x->aged != 0);
  if (x->tenants_ahead == UINT32_MAX)
    s->none(s->ctx, "tenants_ahead", "(not in the ring yet)");
  else
    s->u64(s->ctx, "tenants_ahead", x->tenants_ahead);
  s->u64(s->ctx, "ring_length", x->ring_length);
  s->u64(s->ctx, "ahead_in_tenant", x->ahead_in_tenant);
  s->u64(s->ctx, "tenant_queued", x->tenant_queued);
  s->u64(s->ctx, "cells", x->cells);
  s->u64(s->ctx, "gathered", x->gathered);
  if (x->blocked_by & SHMS_BLOCK_QUOTA)
    s->str(s->ctx, "quota", x->quota);
  for (int i = 0; i < BLOCK_NAMES; i++)
    if (x->blocked_by & (1u << i))
      blocks[nb++] = block_names[i];
  s->list(s->ctx, "blocked_by", blocks, nb);
  why(buf, sizeof buf, x);
  s->str(s->ctx, "why", buf);
}

/* A held lease: where, by whom, since when (its slot, with tenant and priority, is gone). */
static void emit_held(const shms_explanation *x, const struct sink *s) {
  char buf[64];
  s->u64(s->ctx, "cell", x->cell);
  s->u64(s->ctx, "uid", x->uid);
  s->str(s->ctx, "user", cli_user_name(x->uid, buf, sizeof buf));
  char pid[PID_NAME_MAX];
  if (x->holder_pid > 0) {
    s->i64(s->ctx, "holder_pid", x->holder_pid);
  } else if (x->holder_foreign) {
    /* Of a pid namespace whose numbers are not ours: its own number there, never ours. */
    s->none(s->ctx, "holder_pid", "(of another pid namespace)");
    s->str(s->ctx, "holder_ns_pid",
           pid_name(pid, sizeof pid, 0, x->holder_ns_pid, 1, x->holder_pidns));
  } else {
    s->none(s->ctx, "holder_pid", "(unknown: its process entry was reused)");
  }
  s->flag(s->ctx, "holder_alive", x->holder_alive != 0);
  s->u64(s->ctx, "held_ns", x->held_ns);
  human_ns(buf, sizeof buf, x->held_ns);
  s->str(s->ctx, "held", buf);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t real = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
  event_time(buf, sizeof buf, real > x->held_ns ? real - x->held_ns : 0);
  s->str(s->ctx, "held_since", buf);
  s->str(s->ctx, "why",
         x->holder_alive ? "accepted: its lease is held, and a held lease cannot be cancelled; "
                           "to end it, stop the holder's command"
                         : "accepted: its lease is held by a dead process; recovery disposes "
                           "of it by the class's on-holder-death");
}

/* worker: the ticket names a job of a worker class, which ends "completed", not "accepted". */
static void emit(const char *ticket, const shms_ticket *t, const shms_explanation *x, int worker,
                 const struct sink *s) {
  char buf[64];
  s->str(s->ctx, "ticket", ticket);
  s->str(s->ctx, "class", shms_class_name((shms_class_t)t->cls));
  s->str(s->ctx, "state", state_name(x->state));
  if (x->state == SHMS_REQ_HELD) {
    emit_held(x, s);
    return;
  }
  if (x->state == SHMS_REQ_ENDED)
    s->str(s->ctx, "outcome",
           x->outcome != 0 ? shms_err_name(x->outcome)
           : worker        ? "completed"
                           : "accepted");
  s->str(s->ctx, "tenant", x->tenant);
  s->u64(s->ctx, "uid", x->uid);
  s->str(s->ctx, "user", cli_user_name(x->uid, buf, sizeof buf));
  s->i64(s->ctx, "priority", x->priority);
  if (x->state != SHMS_REQ_QUEUED)
    return;
  s->u64(s->ctx, "waited_ns", x->waited_ns);
  human_ns(buf, sizeof buf, x->waited_ns);
  s->str(s->ctx, "waited", buf);
  emit_queued(x, s);
}

/* How a record of the event ring says the request ended: the newest record of it is its end,
 * or for a grant, its acceptance (a grant later revoked or settled has a newer record). */
static const char *recorded_outcome(const shms_event_record *r, int worker) {
  if (r->event.kind == SHMS_EVENT_GRANTED)
    return worker ? "completed" : "accepted";
  if (r->event.kind == SHMS_EVENT_JOB_REQUEUED || r->event.kind == SHMS_EVENT_REVOKED)
    return "unknown"; /* queued again, then gone without a record: overwritten since */
  return r->event.reason < 0 ? shms_err_name(r->event.reason) : shms_event_name(r->event.kind);
}

/* A request its slot no longer knows, told from the newest record the event ring holds of it. */
static void emit_recorded(const char *ticket, const shms_ticket *t, const shms_event_record *r,
                          int worker, const struct sink *s) {
  char buf[64];
  s->str(s->ctx, "ticket", ticket);
  s->str(s->ctx, "class", shms_class_name((shms_class_t)t->cls));
  s->str(s->ctx, "state", "ended");
  s->str(s->ctx, "outcome", recorded_outcome(r, worker));
  s->str(s->ctx, "tenant", r->event.tenant);
  s->str(s->ctx, "event", shms_event_name(r->event.kind));
  s->str(s->ctx, "event_time", event_time(buf, sizeof buf, r->wall_ns));
  if (r->event.cell >= 0)
    s->u64(s->ctx, "cell", (uint64_t)r->event.cell);
  char pid[PID_NAME_MAX];
  if (r->event.pid != 0)
    s->i64(s->ctx, "pid", r->event.pid);
  else if (r->event.pid_foreign)
    s->str(s->ctx, "pid", pid_name(pid, sizeof pid, 0, r->event.ns_pid, 1, r->event.pidns));
  if (r->event.kind == SHMS_EVENT_GRANTED) {
    s->u64(s->ctx, "waited_ns", r->value);
    human_ns(buf, sizeof buf, r->value);
    s->str(s->ctx, "waited", buf);
  }
  s->str(s->ctx, "why", "ended: its slot was given back; the segment's event ring recorded how");
}

/* ---- text ----------------------------------------------------------------- */

static void text_u64(void *f, const char *key, uint64_t v) {
  fprintf(f, "%s: %" PRIu64 "\n", key, v);
}
static void text_i64(void *f, const char *key, int64_t v) {
  fprintf(f, "%s: %" PRId64 "\n", key, v);
}
/* The tenant name comes from the segment: quoted if it holds anything but printable ASCII. */
static void text_str(void *f, const char *key, const char *v) {
  char q[96];
  int plain = 1;
  for (const char *p = v; *p != '\0'; p++)
    plain &= *p >= 0x20 && *p < 0x7f && *p != '\\';
  fprintf(f, "%s: %s\n", key, plain ? v : cli_quote(q, sizeof q, v));
}
static void text_flag(void *f, const char *key, int v) {
  fprintf(f, "%s: %s\n", key, v ? "yes" : "no");
}
static void text_none(void *f, const char *key, const char *text) {
  fprintf(f, "%s: %s\n", key, text);
}
static void text_list(void *f, const char *key, const char *const *items, int n) {
  fprintf(f, "%s:", key);
  for (int i = 0; i < n; i++)
    fprintf(f, " %s", items[i]);
  fprintf(f, "%s\n", n == 0 ? " (nothing)" : "");
}

/* ---- JSON ----------------------------------------------------------------- */

static void js_u64(void *j, const char *key, uint64_t v) { json_u64(j, key, v); }
static void js_i64(void *j, const char *key, int64_t v) { json_i64(j, key, v); }
static void js_str(void *j, const char *key, const char *v) { json_str(j, key, v); }
static void js_flag(void *j, const char *key, int v) { json_bool(j, key, v); }
static void js_none(void *j, const char *key, const char *text) {
  (void)text;
  json_null(j, key);
}
static void js_list(void *j, const char *key, const char *const *items, int n) {
  json_begin_array(j, key);
  for (int i = 0; i < n; i++)
    json_str(j, NULL, items[i]);
  json_end(j);
}

int cmd_explain(int argc, char **argv) {
  static const struct option opts[] = {
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int json = 0, c;
  while ((c = getopt_long(argc, argv, ":jh", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(help);
    if (c != 'j')
      return cli_bad_option("explain", c, argv);
    json = 1;
  }
  const char *name, *text;
  shms_ticket t;
  int rc = cli_take_name_ticket("explain", argc, argv, &name, &t, &text);
  if (rc != 0)
    return rc;
  shms_t *h;
  if ((rc = cli_attach(name, 0, &h)) != 0)
    return rc;
  shms_explanation x;
  shms_event_record rec;
  shms_config cfg;
  rc = shms_explain(h, &t, &x);
  /* Gone from its slot: the event ring may still hold how it ended. */
  int recorded = rc == SHMS_ENOTFOUND && shms_events_find(h, &t, &rec) == SHMS_OK;
  if (recorded)
    rc = SHMS_OK;
  int known = rc == SHMS_OK && shms_get_config(h, &cfg) == SHMS_OK && t.cls < SHMS_CLASS_COUNT;
  int worker = known && cfg.classes[t.cls].mode == SHMS_MODE_WORKER;
  class_timed = known && shms_class_fairness(&cfg.classes[t.cls]) == SHMS_FAIRNESS_TIME;
  int code = rc == SHMS_OK ? CLI_EXIT_OK : cli_sched_fail(rc);
  shms_detach(h);
  if (code != CLI_EXIT_OK)
    return code == CLI_EXIT_SCHED ? CLI_EXIT_FAIL : code;
  struct json_out j;
  const struct sink js = {js_u64, js_i64, js_str, js_flag, js_none, js_list, &j};
  const struct sink ts = {text_u64, text_i64, text_str, text_flag, text_none, text_list, stdout};
  if (json)
    json_open(&j, stdout);
  if (recorded)
    emit_recorded(text, &t, &rec, worker, json ? &js : &ts);
  else
    emit(text, &t, &x, worker, json ? &js : &ts);
  if (json)
    json_close(&j);
  return CLI_EXIT_OK;
}
