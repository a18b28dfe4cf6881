/*
 * Printing a status_view. One walk (emit) visits every figure in order and
 * hands it to a sink; the text sink writes "key: value" lines under
 * "# Section" headers, the JSON sink nests them as
 * {"segment": {...}, "classes": {"NAME": {...}}}.
 */
#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_config.h"
#include "event_fmt.h"
#include "holder_state.h"
#include "json_out.h"
#include "pid_name.h"
#include "status.h"

/* One cell as --leases shows it: its shms_cell_info with the names and ages worked out. */
struct lease_row {
  const shms_cell_info *c;
  const char *state;        /* "available", "granted", "leased", "quarantined", "offline" */
  const char *holder_state; /* holder_state_ns(): "running", "stopped", "dead", "unknown", "" */
  char holder_code;         /* /proc's letter, '-' for none */
  char pid[PID_NAME_MAX];   /* the holder as we see it (pid_name), "" for none */
  char ticket[SHMS_TICKET_STRLEN]; /* "" for none */
  char user[64];   /* granted, leased, quarantined: the lease's uid's login name, else "" */
  uint64_t age_ns; /* granted, leased: since the grant; else 0 */
  int aged; /* age_ns is known: granted or leased, and its start stamped (a prepared acquire's
               lease reads no start until the supervisor's next tick: docs/protocol.md) */
  const char *reason;      /* quarantined: the reason word, else "" */
  char quarantined_at[40]; /* quarantined: ISO time, "" when unknown */
};

struct sink {
  void (*section)(void *ctx, const char *name); /* a class, or NULL for the segment */
  void (*u64)(void *ctx, const char *key, uint64_t v);
  void (*i64)(void *ctx, const char *key, int64_t v);
  void (*str)(void *ctx, const char *key, const char *v);
  /* The allow list; any: every tenant is allowed (and k->allow is empty). */
  void (*allow)(void *ctx, const shms_class_config *k, int any);
  /* --tenants: the class's tenant rows (n of them) */
  void (*tenants)(void *ctx, const shms_tenant_stats *t, uint32_t n);
  /* --leases: one cell's row (lease.* fields below), n_cells before the first */
  void (*cells_begin)(void *ctx, uint32_t n);
  void (*cell)(void *ctx, const struct lease_row *row);
  void (*cells_end)(void *ctx);
  void *ctx;
};

static const char *state_name(uint32_t s) {
  switch (s) {
  case SHMS_SEG_ACTIVE:
    return "active";
  case SHMS_SEG_DRAINING:
    return "draining";
  case SHMS_SEG_DESTROYING:
    return "destroying";
  default:
    return "unknown";
  }
}

/* The name of group gid, or its number when it has none. */
static const char *group_name(char *buf, size_t n, uint32_t gid) {
  struct group g, *found = NULL;
  char scratch[4096];
  if (getgrgid_r((gid_t)gid, &g, scratch, sizeof scratch, &found) == 0 && found != NULL)
    snprintf(buf, n, "%s", g.gr_name);
  else
    snprintf(buf, n, "%" PRIu32, gid);
  return buf;
}

static void emit_segment(const struct status_view *v, const struct sink *s) {
  char buf[64];
  s->section(s->ctx, NULL);
  s->str(s->ctx, "name", v->name);
  snprintf(buf, sizeof buf, "%016" PRIx64, v->info.incarnation);
  s->str(s->ctx, "incarnation", buf);
  event_time(buf, sizeof buf, v->info.created_unix_ns);
  s->str(s->ctx, "created", buf);
  s->u64(s->ctx, "created_unix_ns", v->info.created_unix_ns);
  s->u64(s->ctx, "size_bytes", v->info.size);
  s->u64(s->ctx, "layout_version", v->info.layout_version);
  s->str(s->ctx, "state", state_name(v->info.state));
  s->u64(s->ctx, "live_processes", v->info.live_processes);
  s->i64(s->ctx, "supervisor_pid", v->info.supervisor_pid); /* 0: none */
  s->str(s->ctx, "supervisor_state", supervisor_state(v->info.supervisor_pid));
  s->u64(s->ctx, "max_processes", v->info.max_processes);
  s->u64(s->ctx, "max_tenants", v->cfg.max_tenants);
  s->u64(s->ctx, "starvation_after_ns", v->cfg.starvation_after_ns);
  snprintf(buf, sizeof buf, "%04o", v->info.file_mode);
  s->str(s->ctx, "mode", buf);
  s->str(s->ctx, "group", group_name(buf, sizeof buf, v->info.file_gid));
  s->u64(s->ctx, "gid", v->info.file_gid);
  s->str(s->ctx, "owner", cli_user_name(v->info.file_uid, buf, sizeof buf));
  s->u64(s->ctx, "owner_uid", v->info.file_uid);
  /* Who else may administer it (docs/security.md): -1 and "(none)" when nobody. */
  int64_t admin = v->cfg.admin_group;
  s->str(s->ctx, "admin_group",
         admin < 0 ? "(none)" : group_name(buf, sizeof buf, (uint32_t)admin));
  s->i64(s->ctx, "admin_gid", admin);
  /* Each quota as "quota.NAME.max", ".used", ".waiters": a name holds no spaces. */
  s->u64(s->ctx, "quotas", v->nquotas);
  for (uint32_t i = 0; i < v->nquotas; i++) {
    char key[SHMS_TENANT_MAX + 16];
    snprintf(key, sizeof key, "quota.%s.max", v->quotas[i].name);
    s->u64(s->ctx, key, v->quotas[i].max);
    snprintf(key, sizeof key, "quota.%s.used", v->quotas[i].name);
    s->u64(s->ctx, key, v->quotas[i].used);
    snprintf(key, sizeof key, "quota.%s.waiters", v->quotas[i].name);
    s->u64(s->ctx, key, v->quotas[i].waiters);
  }
}

static void emit_class(int c, const shms_class_config *k, const shms_class_stats *st,
                       const struct sink *s) {
  s->section(s->ctx, shms_class_name((shms_class_t)c));
  s->str(s->ctx, "mode", k->mode == SHMS_MODE_WORKER ? "worker" : "lease");
  s->u64(s->ctx, "cells", k->cells);
  s->u64(s->ctx, "queue", k->queue);
  s->u64(s->ctx, "payload_bytes", k->payload);
  s->u64(s->ctx, "tenant_max_active", k->tenant_max_active);
  s->str(s->ctx, "tenant",
         k->tenant_bind == SHMS_TENANT_USER    ? "user"
         : k->tenant_bind == SHMS_TENANT_GROUP ? "group"
                                               : "any");
  s->str(s->ctx, "on_holder_death",
         k->on_holder_death == SHMS_ON_DEATH_RELEASE ? "release" : "quarantine");
  s->str(s->ctx, "on_command_crash",
         k->on_command_crash == SHMS_ON_CRASH_QUARANTINE ? "quarantine" : "release");
  /* The timeout in force (the default when the configuration says 0); 0 for a worker class. */
  s->u64(s->ctx, "grant_timeout_ns",
         k->mode == SHMS_MODE_WORKER ? 0
         : k->grant_timeout_ns != 0  ? k->grant_timeout_ns
                                     : SHMS_DEFAULT_GRANT_TIMEOUT_NS);
  /* The overtake bound in force (docs/protocol.md, "Bounded overtaking"): the default when the
   * configuration says 0; 0 for strict hand-off, and for the classes that never overtake (a
   * worker class, one with tenant-max-active). */
  s->u64(s->ctx, "overtake_ns",
         k->mode == SHMS_MODE_WORKER || k->tenant_max_active != 0 ? 0
         : k->overtake_ns == SHMS_OVERTAKE_STRICT                 ? 0
         : k->overtake_ns != 0                                    ? k->overtake_ns
                                                                  : SHMS_DEFAULT_OVERTAKE_NS);
  s->str(s->ctx, "fairness", shms_class_fairness(k) == SHMS_FAIRNESS_TIME ? "time" : "grants");
  s->allow(s->ctx, k, k->allow_count == 0 && c != SHMS_CLASS_EXTRA_LARGE);
  s->u64(s->ctx, "cells_available", st->available);
  s->u64(s->ctx, "cells_leased", st->leased);
  s->u64(s->ctx, "cells_granted", st->granted_unaccepted);
  s->u64(s->ctx, "cells_quarantined", st->quarantined);
  s->u64(s->ctx, "cells_offline", st->offline);
  s->u64(s->ctx, "cells_reserved", st->reserved);
  s->u64(s->ctx, "queue_depth", st->queue_depth);
  s->u64(s->ctx, "queue_capacity", st->queue_capacity);
  s->u64(s->ctx, "queued_tenants", st->queued_tenants);
  s->u64(s->ctx, "granted", st->granted);
  s->u64(s->ctx, "rejected", st->rejected);
  s->u64(s->ctx, "cancelled", st->cancelled);
  s->u64(s->ctx, "expired", st->expired);
  s->u64(s->ctx, "revoked", st->revoked);
  /* Keyed submits that joined a live job of their key (0 in a lease class: no jobs, no keys). */
  s->u64(s->ctx, "joined", st->joined);
  s->u64(s->ctx, "total_wait_ns", st->total_wait_ns);
  s->u64(s->ctx, "max_wait_ns", st->max_wait_ns);
  s->u64(s->ctx, "oldest_lease_age_ns", st->oldest_lease_age_ns);
  s->u64(s->ctx, "oldest_grant_age_ns", st->oldest_grant_age_ns);
}

static const char *cell_state_name(uint32_t st) {
  static const char *const names[] = {"unknown",     "available", "granted", "leased",
                                      "quarantined", "offline",   "reserved"};
  return st < sizeof names / sizeof names[0] ? names[st] : "unknown";
}

static void emit_cells(const struct status_view *v, int c, const struct sink *s) {
  s->cells_begin(s->ctx, v->cells_count[c]);
  for (uint32_t i = 0; i < v->cells_count[c]; i++) {
    const shms_cell_info *ci = &v->cells[c][i];
    struct lease_row r = {.c = ci, .state = cell_state_name(ci->state), .reason = ""};
    r.holder_state = holder_state_ns(ci->pid, ci->pid_foreign, ci->alive, &r.holder_code);
    pid_name(r.pid, sizeof r.pid, ci->pid, ci->ns_pid, ci->pid_foreign, ci->pidns);
    if (ci->ticket.seq != 0)
      shms_ticket_format(&ci->ticket, r.ticket);
    /* Granted, leased, or quarantined (the last lease's, which the cell keeps). */
    if (ci->state == SHMS_CELL_GRANTED || ci->state == SHMS_CELL_LEASED ||
        ci->state == SHMS_CELL_QUARANTINED || ci->state == SHMS_CELL_RESERVED)
      cli_user_name(ci->uid, r.user, sizeof r.user);
    if ((ci->state == SHMS_CELL_GRANTED || ci->state == SHMS_CELL_LEASED) && ci->since_ns != 0 &&
        v->now_ns >= ci->since_ns) {
      r.age_ns = v->now_ns - ci->since_ns;
      r.aged = 1;
    }
    if (ci->state == SHMS_CELL_QUARANTINED) {
      r.reason = ci->reason < 0 ? shms_err_name(ci->reason) : "";
      if (ci->quarantined_unix_ns != 0)
        event_time(r.quarantined_at, sizeof r.quarantined_at, ci->quarantined_unix_ns);
    }
    s->cell(s->ctx, &r);
  }
  s->cells_end(s->ctx);
}

static void emit(const struct status_view *v, const struct sink *s) {
  emit_segment(v, s);
  shms_class_t order[SHMS_CLASS_COUNT];
  int n = shms_class_order(&v->cfg, order);
  for (int i = 0; i < n; i++) {
    int c = (int)order[i];
    emit_class(c, &v->cfg.classes[c], &v->stats[c], s);
    if (v->with_tenants)
      s->tenants(s->ctx, v->tenants[c], v->tenants_shown[c]);
    if (v->with_leases)
      emit_cells(v, c, s);
  }
}

/* ---- text: "# Section" then "key: value" lines -------------------------- */

static void text_section(void *f, const char *name) {
  if (name == NULL)
    fprintf(f, "# Segment\n");
  else
    fprintf(f, "\n# Class %s\n", name);
}

static void text_u64(void *f, const char *key, uint64_t v) {
  fprintf(f, "%s: %" PRIu64 "\n", key, v);
}

static void text_i64(void *f, const char *key, int64_t v) {
  fprintf(f, "%s: %" PRId64 "\n", key, v);
}

/* Values come from a segment another process wrote: keep each on its one line. */
static void text_str(void *f, const char *key, const char *v) {
  char q[96];
  fprintf(f, "%s: %s\n", key, cli_quote(q, sizeof q, v));
}

/* Tenant names are graphic ASCII, so "(any tenant)" can never be mistaken for a list. */
static void text_allow(void *f, const shms_class_config *k, int any) {
  char name[SHMS_TENANT_MAX + 1], q[96];
  fputs("allow: ", f);
  if (k->allow_count == 0)
    fputs(any ? "(any tenant)" : "(no tenant)", f);
  for (uint32_t i = 0; i < k->allow_count && i < SHMS_ALLOW_MAX; i++) {
    snprintf(name, sizeof name, "%.*s", SHMS_TENANT_MAX, k->allow[i]);
    fprintf(f, "%s%s", i ? "+" : "", cli_quote(q, sizeof q, name));
  }
  fputc('\n', f);
}

/*
 * "tenants: N", then one line per tenant: "tenant.NAME: queued=... ...". A
 * tenant name has no spaces, so the first ": " ends the key.
 */
static void text_tenants(void *f, const shms_tenant_stats *t, uint32_t n) {
  char q[96];
  fprintf(f, "tenants: %u\n", n);
  for (uint32_t i = 0; i < n; i++)
    fprintf(f,
            "tenant.%s: queued=%u active=%u in_ring=%s granted=%" PRIu64 " total_wait_ns=%" PRIu64
            " max_wait_ns=%" PRIu64 " weight=%u team=%s cell_ns=%" PRIu64 " entitled_share=%.4f\n",
            cli_quote(q, sizeof q, t[i].name), t[i].queued, t[i].active,
            t[i].in_ring ? "yes" : "no", t[i].granted, t[i].total_wait_ns, t[i].max_wait_ns,
            t[i].weight, t[i].team[0] != '\0' ? t[i].team : "-", t[i].cell_ns, t[i].entitled_share);
}

static void text_cells_begin(void *f, uint32_t n) { fprintf(f, "leases: %u\n", n); }

/*
 * "cell.N: state=... gen=... pid=... holder=... tenant=... ticket=... lease_cells=... lead=...
 * age_ns=...", the fields
 * that apply to its state only; a quarantined cell adds reason= (the reason word, or the
 * holder's own code) and quarantined= (ISO time). Values hold no spaces.
 */
static void text_cell(void *f, const struct lease_row *r) {
  char q[96];
  const shms_cell_info *c = r->c;
  fprintf(f, "cell.%u: state=%s generation=%u leases=%" PRIu64, c->cell, r->state, c->generation,
          c->leases);
  if (r->pid[0] != '\0')
    fprintf(f, " pid=%s holder=%s proc_state=%c", r->pid, r->holder_state, r->holder_code);
  if (c->tenant[0] != '\0')
    fprintf(f, " tenant=%s", cli_quote(q, sizeof q, c->tenant));
  if (r->user[0] != '\0')
    fprintf(f, " uid=%u user=%s", c->uid, r->user);
  if (r->ticket[0] != '\0')
    fprintf(f, " ticket=%s", r->ticket);
  if (c->lease_cells > 1)
    fprintf(f, " lease_cells=%u lead=%u", c->lease_cells, c->lead);
  if (r->aged)
    fprintf(f, " age_ns=%" PRIu64, r->age_ns);
  if (c->state == SHMS_CELL_QUARANTINED) {
    if (r->reason[0] != '\0')
      fprintf(f, " reason=%s", r->reason);
    else
      fprintf(f, " reason=%d", c->reason);
    if (r->quarantined_at[0] != '\0')
      fprintf(f, " quarantined=%s", r->quarantined_at);
  }
  fputc('\n', f);
}

static void text_cells_end(void *f) { (void)f; }

void status_print_text(FILE *f, const struct status_view *v) {
  const struct sink s = {text_section, text_u64,         text_i64,  text_str,       text_allow,
                         text_tenants, text_cells_begin, text_cell, text_cells_end, f};
  emit(v, &s);
}

/* ---- JSON ---------------------------------------------------------------- */

struct json_ctx {
  struct json_out j;
  int in_segment, in_classes, in_class; /* which objects are open below the top one */
};

static void json_section(void *ctx, const char *name) {
  struct json_ctx *x = ctx;
  if (x->in_class || x->in_segment)
    json_end(&x->j);
  x->in_class = x->in_segment = 0;
  if (name == NULL) {
    json_begin_object(&x->j, "segment");
    x->in_segment = 1;
    return;
  }
  if (!x->in_classes)
    json_begin_object(&x->j, "classes");
  json_begin_object(&x->j, name);
  x->in_classes = x->in_class = 1;
}

static void json_sink_u64(void *ctx, const char *key, uint64_t v) {
  json_u64(&((struct json_ctx *)ctx)->j, key, v);
}

static void json_sink_i64(void *ctx, const char *key, int64_t v) {
  json_i64(&((struct json_ctx *)ctx)->j, key, v);
}

static void json_sink_str(void *ctx, const char *key, const char *v) {
  json_str(&((struct json_ctx *)ctx)->j, key, v);
}

/* null: any tenant; []: no tenant; else the names. */
static void json_sink_allow(void *ctx, const shms_class_config *k, int any) {
  struct json_out *j = &((struct json_ctx *)ctx)->j;
  if (any) {
    json_null(j, "allow");
    return;
  }
  json_begin_array(j, "allow");
  for (uint32_t i = 0; i < k->allow_count && i < SHMS_ALLOW_MAX; i++) {
    char name[SHMS_TENANT_MAX + 1];
    snprintf(name, sizeof name, "%.*s", SHMS_TENANT_MAX, k->allow[i]);
    json_str(j, NULL, name);
  }
  json_end(j);
}

/* "tenants": [{"name": ..., "queued": ..., ...}, ...] inside the class's object. */
static void json_sink_tenants(void *ctx, const shms_tenant_stats *t, uint32_t n) {
  struct json_out *j = &((struct json_ctx *)ctx)->j;
  json_begin_array(j, "tenants");
  for (uint32_t i = 0; i < n; i++) {
    json_begin_object(j, NULL);
    json_str(j, "name", t[i].name);
    json_u64(j, "queued", t[i].queued);
    json_u64(j, "active", t[i].active);
    json_bool(j, "in_ring", t[i].in_ring != 0);
    json_u64(j, "granted", t[i].granted);
    json_u64(j, "total_wait_ns", t[i].total_wait_ns);
    json_u64(j, "max_wait_ns", t[i].max_wait_ns);
    json_u64(j, "weight", t[i].weight);
    if (t[i].team[0] != '\0')
      json_str(j, "team", t[i].team);
    else
      json_null(j, "team");
    json_u64(j, "cell_ns", t[i].cell_ns);
    json_double(j, "entitled_share", t[i].entitled_share);
    json_end(j);
  }
  json_end(j);
}

/* "leases": [{"cell": N, "state": ..., ...}, ...] inside the class's object (one per cell; "cells"
 * is the class's count already); null for what does not apply to the cell's state. */
static void json_cells_begin(void *ctx, uint32_t n) {
  (void)n;
  json_begin_array(&((struct json_ctx *)ctx)->j, "leases");
}

static void json_cell(void *ctx, const struct lease_row *r) {
  struct json_out *j = &((struct json_ctx *)ctx)->j;
  const shms_cell_info *c = r->c;
  int quarantined = c->state == SHMS_CELL_QUARANTINED;
  char code[2] = {r->holder_code, '\0'};
  json_begin_object(j, NULL);
  json_u64(j, "cell", c->cell);
  json_str(j, "state", r->state);
  json_u64(j, "generation", c->generation);
  json_u64(j, "leases", c->leases);
  pid_json(j, r->pid[0] != '\0', c->pid, c->ns_pid, c->pidns, r->holder_state);
  if (r->pid[0] != '\0')
    json_str(j, "proc_state", code);
  else
    json_null(j, "proc_state");
  if (c->tenant[0] != '\0')
    json_str(j, "tenant", c->tenant);
  else
    json_null(j, "tenant");
  if (r->user[0] != '\0') {
    json_u64(j, "uid", c->uid);
    json_str(j, "user", r->user);
  } else {
    json_null(j, "uid");
    json_null(j, "user");
  }
  if (r->ticket[0] != '\0')
    json_str(j, "ticket", r->ticket);
  else
    json_null(j, "ticket");
  /* The lease the cell belongs to: its lead cell and how many it holds (1 for most). */
  if (c->lease_cells != 0) {
    json_u64(j, "lease_cells", c->lease_cells);
    json_u64(j, "lead", c->lead);
  } else {
    json_null(j, "lease_cells");
    json_null(j, "lead");
  }
  if (r->aged)
    json_u64(j, "lease_age_ns", r->age_ns);
  else
    json_null(j, "lease_age_ns");
  if (quarantined && r->reason[0] != '\0')
    json_str(j, "reason", r->reason);
  else if (quarantined)
    json_i64(j, "reason", c->reason);
  else
    json_null(j, "reason");
  if (quarantined && c->quarantined_unix_ns != 0) {
    json_str(j, "quarantined", r->quarantined_at);
    json_u64(j, "quarantined_unix_ns", c->quarantined_unix_ns);
  } else {
    json_null(j, "quarantined");
    json_null(j, "quarantined_unix_ns");
  }
  json_end(j);
}

static void json_cells_end(void *ctx) { json_end(&((struct json_ctx *)ctx)->j); }

void status_print_json(FILE *f, const struct status_view *v) {
  struct json_ctx x = {.in_segment = 0};
  const struct sink s = {
      json_section,      json_sink_u64,    json_sink_i64, json_sink_str,  json_sink_allow,
      json_sink_tenants, json_cells_begin, json_cell,     json_cells_end, &x};
  json_open(&x.j, f);
  emit(v, &s);
  json_close(&x.j);
}
