/*
 * Identities and admin rights (docs/security.md) with two users on one segment: root, and a
 * child that becomes `nobody` (group `nogroup`). Needs root to change users; skips (77) with a
 * message otherwise. The library's checks are among processes that trust each other; the
 * setgid front end that makes them a boundary is tests/setgid_e2e.sh's.
 */
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static uid_t nobody_uid;
static gid_t nobody_gid;

/* What the child reports: its call's result and detail, and a ticket it queued. */
struct report {
  int rc;
  char detail[512];
  shms_ticket ticket;
  int ready_fd; /* the child's end: report_ready writes its byte */
  int signalled;
};

static struct report *shared_report(void) {
  void *p =
      mmap(NULL, sizeof(struct report), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert(p != MAP_FAILED);
  return p;
}

static void become_nobody(void) {
  if (setgroups(1, &nobody_gid) != 0 || setresgid(nobody_gid, nobody_gid, nobody_gid) != 0 ||
      setresuid(nobody_uid, nobody_uid, nobody_uid) != 0)
    _exit(99);
}

/* Keep the last call's detail (a detach would forget it). */
static void keep(struct report *r) {
  snprintf(r->detail, sizeof r->detail, "%s", shms_last_error_detail());
}

/* The child has done its first part: the parent may read r and act. */
static void report_ready(struct report *r) {
  char b = 1;
  if (r->signalled)
    return;
  r->signalled = 1;
  if (write(r->ready_fd, &b, 1) != 1)
    _exit(98);
}

/* A step run as nobody: its result; it may block on go_fd (EOF: the parent has acted). */
typedef int (*as_fn)(const char *name, struct report *r, int go_fd);

static pid_t start_nobody(as_fn fn, const char *name, struct report *r, int ready[2], int go[2]) {
  r->signalled = 0;
  r->detail[0] = '\0';
  pid_t pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    become_nobody();
    close(ready[0]);
    close(go[1]);
    r->ready_fd = ready[1];
    r->rc = fn(name, r, go[0]);
    report_ready(r);
    _exit(0);
  }
  close(ready[1]);
  close(go[0]);
  char b;
  ck_assert_int_eq(read(ready[0], &b, 1), 1); /* its first part is done (EOF: it died) */
  return pid;
}

static void finish_nobody(pid_t pid, int ready[2], int go[2]) {
  close(go[1]); /* EOF: go on */
  int st;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the nobody child failed: %d", st);
  close(ready[0]);
}

/* fn as nobody, to its end; returns its result. */
static int as_nobody(as_fn fn, const char *name, struct report *r) {
  int ready[2], go[2];
  ck_assert(pipe(ready) == 0 && pipe(go) == 0);
  pid_t pid = start_nobody(fn, name, r, ready, go);
  finish_nobody(pid, ready, go);
  return r->rc;
}

/* A segment anyone may map (the library's checks are under test, not the file's mode). */
static const char *make_segment(const char *tag, unsigned cells, uint32_t bind, int64_t admin) {
  const char *name = harness_name(tag);
  shms_config cfg;
  harness_config(&cfg, cells, 8);
  cfg.file_mode = 0666;
  cfg.classes[SHMS_CLASS_STANDARD].tenant_bind = bind;
  cfg.admin_group = admin;
  harness_create(name, &cfg);
  return name;
}

static void attach(const char *name, shms_t **h) {
  if (shms_attach(name, 0, h) != SHMS_OK)
    _exit(97);
}

/* One try_acquire (released at once); its detail into r when r is not NULL. */
static int try_tenant(const char *name, const char *tenant, struct report *r) {
  shms_t *h;
  attach(name, &h);
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = tenant};
  shms_lease l;
  int rc = shms_try_acquire(h, &req, &l);
  if (r != NULL)
    keep(r);
  if (rc == SHMS_OK)
    shms_release(h, &l);
  shms_detach(h);
  return rc;
}

static int tenant_ci(const char *name, struct report *r, int go) {
  (void)go;
  return try_tenant(name, "ci", r);
}
static int tenant_nobody(const char *name, struct report *r, int go) {
  (void)go;
  return try_tenant(name, "nobody", r);
}
static int tenant_nogroup(const char *name, struct report *r, int go) {
  (void)go;
  return try_tenant(name, "nogroup", r);
}
static int tenant_root(const char *name, struct report *r, int go) {
  (void)go;
  return try_tenant(name, "root", r);
}

START_TEST(tenant_user_refuses_impersonation) {
  const char *name = make_segment("tuser", 2, SHMS_TENANT_USER, -1);
  struct report *r = shared_report();
  ck_assert_int_eq(as_nobody(tenant_ci, name, r), SHMS_EPERM);
  ck_assert_msg(strstr(r->detail, "tenant 'ci' is not the caller's login name 'nobody'"), "%s",
                r->detail);
  ck_assert_int_eq(as_nobody(tenant_root, name, r), SHMS_EPERM);
  ck_assert_msg(as_nobody(tenant_nobody, name, r) == SHMS_OK, "%s", r->detail);
  /* Root is bound too: its tenant is its own login name. */
  ck_assert_int_eq(try_tenant(name, "nobody", NULL), SHMS_EPERM);
  ck_assert_int_eq(try_tenant(name, "root", NULL), SHMS_OK);
  harness_remove(name);
}
END_TEST

START_TEST(tenant_group_needs_membership) {
  const char *name = make_segment("tgroup", 2, SHMS_TENANT_GROUP, -1);
  struct report *r = shared_report();
  ck_assert_msg(as_nobody(tenant_nogroup, name, r) == SHMS_OK, "%s", r->detail);
  ck_assert_int_eq(as_nobody(tenant_root, name, r), SHMS_EPERM);
  ck_assert_msg(strstr(r->detail, "is not in group 'root'"), "%s", r->detail);
  ck_assert_int_eq(as_nobody(tenant_ci, name, r), SHMS_EPERM); /* no such group */
  ck_assert_msg(strstr(r->detail, "there is no group named 'ci'"), "%s", r->detail);
  ck_assert_int_eq(try_tenant(name, "root", NULL), SHMS_OK);
  ck_assert_int_eq(try_tenant(name, "nogroup", NULL), SHMS_EPERM);
  harness_remove(name);
}
END_TEST

/* allow=web+@nogroup: the tenant must be web, and the caller in nogroup. */
START_TEST(allow_lists_name_groups_and_users) {
  const char *name = harness_name("allowid");
  shms_config cfg;
  harness_config(&cfg, 2, 8);
  cfg.file_mode = 0666;
  shms_class_config *k = &cfg.classes[SHMS_CLASS_STANDARD];
  k->allow_count = 2;
  strcpy(k->allow[0], "web");
  strcpy(k->allow[1], "@nogroup");
  harness_create(name, &cfg);
  struct report *r = shared_report();
  ck_assert_int_eq(try_tenant(name, "web", r), SHMS_EPERM); /* root is not in nogroup */
  ck_assert_msg(strstr(r->detail, "allows only the users and groups"), "%s", r->detail);
  ck_assert_int_eq(as_nobody(tenant_nobody, name, r), SHMS_EDENIED); /* not a listed tenant */
  harness_remove(name);

  /* ~nobody admits that user, with any tenant (no tenant entries). */
  strcpy(k->allow[0], "~nobody");
  k->allow_count = 1;
  name = harness_name("allowuser");
  harness_create(name, &cfg);
  ck_assert_msg(as_nobody(tenant_ci, name, r) == SHMS_OK, "%s", r->detail);
  ck_assert_int_eq(try_tenant(name, "ci", NULL), SHMS_EPERM);
  harness_remove(name);
}
END_TEST

static int do_drain(const char *name, struct report *r, int go) {
  (void)go;
  shms_t *h;
  attach(name, &h);
  int rc = shms_drain(h);
  keep(r);
  shms_detach(h);
  return rc;
}
static int do_resume(const char *name, struct report *r, int go) {
  (void)go;
  shms_t *h;
  attach(name, &h);
  int rc = shms_resume(h);
  keep(r);
  shms_detach(h);
  return rc;
}
static int do_repair(const char *name, struct report *r, int go) {
  (void)go;
  shms_t *h;
  attach(name, &h);
  int rc = shms_repair(h, SHMS_CLASS_STANDARD, -1);
  keep(r);
  shms_detach(h);
  return rc;
}
static int do_recover(const char *name, struct report *r, int go) {
  (void)go;
  shms_t *h;
  attach(name, &h);
  int rc = shms_recover(h, NULL);
  if (rc == SHMS_OK)
    rc = shms_supervisor_claim(h);
  keep(r);
  shms_detach(h);
  return rc;
}
static int do_destroy(const char *name, struct report *r, int go) {
  (void)go;
  int rc = shms_destroy(name, 0);
  keep(r);
  return rc;
}

START_TEST(admin_operations_are_the_owners) {
  const char *name = make_segment("admin", 2, SHMS_TENANT_ANY, -1);
  struct report *r = shared_report();
  as_fn ops[] = {do_drain, do_resume, do_repair, do_recover, do_destroy};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    ck_assert_int_eq(as_nobody(ops[i], name, r), SHMS_EPERM);
    ck_assert_msg(strstr(r->detail, "only the segment's owner (uid 0) and root may"), "%s",
                  r->detail);
  }
  /* Nothing changed: the segment is active and still there. */
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  shms_segment_info info;
  ck_assert_shms_ok(shms_segment_info_get(h, &info));
  ck_assert_uint_eq(info.state, SHMS_SEG_ACTIVE);
  /* The owner may: drain, then lift it. */
  ck_assert_shms_ok(shms_drain(h));
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = "t"};
  shms_lease l;
  ck_assert_int_eq(shms_try_acquire(h, &req, &l), SHMS_ESHUTDOWN);
  ck_assert_int_eq(shms_resume(h), 1);
  ck_assert_int_eq(shms_resume(h), 0); /* already active */
  ck_assert_shms_ok(shms_try_acquire(h, &req, &l));
  ck_assert_shms_ok(shms_release(h, &l));
  shms_detach(h);
  harness_remove(name);
}
END_TEST

START_TEST(admin_group_members_may) {
  const char *name = make_segment("admgrp", 2, SHMS_TENANT_ANY, (int64_t)nobody_gid);
  struct report *r = shared_report();
  ck_assert_msg(as_nobody(do_drain, name, r) == SHMS_OK, "%s", r->detail);
  ck_assert_msg(as_nobody(do_resume, name, r) == 1, "%s", r->detail);
  ck_assert_msg(as_nobody(do_repair, name, r) == 0, "%s", r->detail);
  ck_assert_msg(as_nobody(do_recover, name, r) == SHMS_OK, "%s", r->detail);
  harness_remove(name);
}
END_TEST

static int cancel_ticket(const char *name, struct report *r, int go) {
  (void)go;
  shms_t *h;
  attach(name, &h);
  int rc = shms_cancel(h, &r->ticket);
  keep(r);
  shms_detach(h);
  return rc;
}

/* Queue (behind root's held cell) and cancel it: one's own. */
static int queue_and_cancel(const char *name, struct report *r, int go) {
  (void)go;
  shms_t *h;
  attach(name, &h);
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = "nobody"};
  shms_lease l;
  int rc = shms_enqueue(h, &req, &r->ticket);
  if (rc == SHMS_OK && (rc = shms_cancel(h, &r->ticket)) == 1)
    rc = shms_wait(h, &r->ticket, 0, &l);
  keep(r);
  shms_detach(h);
  return rc;
}

/* Queue, hand the ticket to the parent, wait until it has acted (go's EOF), then wait on it. */
static int queue_then_wait(const char *name, struct report *r, int go) {
  shms_t *h;
  attach(name, &h);
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = "nobody"};
  shms_lease l;
  int rc = shms_enqueue(h, &req, &r->ticket);
  r->rc = rc;
  keep(r);
  report_ready(r);
  char b;
  while (rc == SHMS_OK && read(go, &b, 1) > 0)
    ;
  if (rc == SHMS_OK)
    rc = shms_wait(h, &r->ticket, 0, &l);
  keep(r);
  shms_detach(h);
  return rc;
}

/* Queue, be granted, and hold the lease until the parent has looked (go's EOF). */
static int hold_lease(const char *name, struct report *r, int go) {
  shms_t *h;
  attach(name, &h);
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = "nobody"};
  shms_lease l;
  int rc = shms_enqueue(h, &req, &r->ticket);
  if (rc == SHMS_OK)
    rc = shms_wait(h, &r->ticket, UINT64_MAX, &l);
  r->rc = rc;
  keep(r);
  report_ready(r);
  char b;
  while (rc == SHMS_OK && read(go, &b, 1) > 0)
    ;
  if (rc == SHMS_OK)
    rc = shms_release(h, &l);
  shms_detach(h);
  return rc;
}

static char cli_out[65536], cli_err[4096];

/* The CLI's stdout must hold want (a printf format and its arguments). */
static void assert_cli_shows(const char *const argv[], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void assert_cli_shows(const char *const argv[], const char *fmt, ...) {
  char want[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(want, sizeof want, fmt, ap);
  va_end(ap);
  int rc = harness_cli(cli_out, sizeof cli_out, cli_err, sizeof cli_err, argv);
  ck_assert_msg(rc == 0, "shmsched %s: exit %d: %s", argv[0], rc, cli_err);
  ck_assert_msg(strstr(cli_out, want) != NULL, "shmsched %s %s: '%s' lacks '%s'", argv[0],
                argv[2] != NULL ? argv[2] : "", cli_out, want);
}

/*
 * What root sees of nobody's lease in status --leases, metrics, top (the leases panel and JSON)
 * and events: nobody's uid and name, not the viewer's.
 */
static void views_show_nobody(const char *name) {
  unsigned u = (unsigned)nobody_uid;
  assert_cli_shows((const char *const[]){"status", name, "--leases", NULL},
                   "cell.0: state=leased generation=1 leases=1 pid=");
  assert_cli_shows((const char *const[]){"status", name, "--leases", NULL},
                   " tenant=nobody uid=%u user=nobody ", u);
  assert_cli_shows((const char *const[]){"status", name, "--leases", "--json", NULL},
                   "\"uid\": %u,\n", u);
  assert_cli_shows((const char *const[]){"metrics", name, NULL},
                   "shmsched_lease_info{segment=\"%s\",class=\"standard\",cell=\"0\",state="
                   "\"leased\",tenant=\"nobody\",uid=\"%u\",user=\"nobody\"} 1\n",
                   name, u);
  assert_cli_shows((const char *const[]){"top", name, "-b", "-n", "1", "-d", "1ms", "-l", NULL},
                   " running nobody       nobody\n");
  assert_cli_shows((const char *const[]){"top", name, "--json", "-n", "1", "-d", "1ms", NULL},
                   "\"uid\": %u,\"user\": \"nobody\",\"tenant\": \"nobody\"", u);
  assert_cli_shows((const char *const[]){"events", name, "--kind", "granted", NULL},
                   " uid=%u user=nobody waited=", u);
}

/* Each lease records whose it is: explain of its ticket and the cells' view say nobody's. */
START_TEST(leases_record_their_uid) {
  const char *name = make_segment("leaseuid", 1, SHMS_TENANT_ANY, -1);
  struct report *r = shared_report();
  int ready[2], go[2];
  ck_assert(pipe(ready) == 0 && pipe(go) == 0);
  pid_t pid = start_nobody(hold_lease, name, r, ready, go);
  ck_assert_msg(r->rc == SHMS_OK, "nobody's lease: %s", r->detail);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  shms_explanation x;
  ck_assert_shms_ok(shms_explain(h, &r->ticket, &x));
  ck_assert_uint_eq(x.state, SHMS_REQ_HELD);
  ck_assert_uint_eq(x.uid, nobody_uid);
  shms_cell_info cell;
  uint32_t count = 0;
  ck_assert_shms_ok(shms_cells(h, SHMS_CLASS_STANDARD, &cell, 1, &count));
  ck_assert_uint_eq(cell.state, SHMS_CELL_LEASED);
  ck_assert_uint_eq(cell.uid, nobody_uid);
  views_show_nobody(name);
  finish_nobody(pid, ready, go);
  ck_assert_int_eq(r->rc, SHMS_OK); /* its release */
  /* Root's own lease, on the fast path, is root's. */
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = "root"};
  shms_lease l;
  ck_assert_shms_ok(shms_try_acquire(h, &req, &l));
  ck_assert_shms_ok(shms_cells(h, SHMS_CLASS_STANDARD, &cell, 1, &count));
  ck_assert_uint_eq(cell.uid, 0);
  ck_assert_shms_ok(shms_release(h, &l));
  shms_detach(h);
  harness_remove(name);
}
END_TEST

START_TEST(cancel_own_and_anothers) {
  const char *name = make_segment("cancel", 1, SHMS_TENANT_ANY, -1);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = "root"};
  shms_lease held;
  ck_assert_shms_ok(shms_acquire(h, &req, &held)); /* the one cell: what follows queues */
  shms_ticket mine;
  ck_assert_shms_ok(shms_enqueue(h, &req, &mine));
  struct report *r = shared_report();
  /* nobody may not cancel root's request ... */
  r->ticket = mine;
  ck_assert_int_eq(as_nobody(cancel_ticket, name, r), SHMS_EPERM);
  ck_assert_msg(strstr(r->detail, "cancel another user's request (uid 0)"), "%s", r->detail);
  shms_explanation x;
  ck_assert_shms_ok(shms_explain(h, &mine, &x));
  ck_assert_uint_eq(x.state, SHMS_REQ_QUEUED); /* untouched */
  ck_assert_uint_eq(x.uid, 0);
  /* ... root may cancel its own. */
  ck_assert_int_eq(shms_cancel(h, &mine), 1);
  ck_assert_int_eq(shms_wait(h, &mine, 0, &held), SHMS_ECANCELLED);
  /* nobody may cancel its own ... */
  ck_assert_int_eq(as_nobody(queue_and_cancel, name, r), SHMS_ECANCELLED);
  /* ... and root may cancel nobody's, which the waiting owner then learns. */
  int ready[2], go[2];
  ck_assert(pipe(ready) == 0 && pipe(go) == 0);
  pid_t pid = start_nobody(queue_then_wait, name, r, ready, go);
  ck_assert_msg(r->rc == SHMS_OK, "enqueue as nobody: %s", r->detail);
  shms_ticket theirs = r->ticket;
  ck_assert_shms_ok(shms_explain(h, &theirs, &x));
  ck_assert_uint_eq(x.uid, nobody_uid);
  ck_assert_int_eq(shms_cancel(h, &theirs), 1);
  /* Root recorded the cancellation; the record names the request's owner, nobody. */
  shms_event_record rec;
  ck_assert_shms_ok(shms_events_find(h, &theirs, &rec));
  ck_assert_uint_eq(rec.event.kind, SHMS_EVENT_CANCELLED);
  ck_assert_int_eq(rec.writer, getpid());
  ck_assert_uint_eq(rec.event.uid, nobody_uid);
  assert_cli_shows((const char *const[]){"events", name, "--kind", "cancelled", "--json", NULL},
                   "\"uid\":%u,\"user\":\"nobody\"", (unsigned)nobody_uid);
  finish_nobody(pid, ready, go);
  ck_assert_msg(r->rc == SHMS_ECANCELLED, "nobody's wait: %s (%s)", shms_err_name(r->rc),
                r->detail);
  ck_assert_shms_ok(shms_release(h, &held));
  shms_detach(h);
  harness_remove(name);
}
END_TEST

/* One prepared acquire (released at once) by the calling thread's credentials of the moment. */
static int prepared_once(shms_t *h, const shms_prepared *p) {
  shms_lease l;
  int rc = shms_acquire_prepared(h, p, &l);
  if (rc == SHMS_OK)
    ck_assert_int_eq(shms_release(h, &l), SHMS_OK);
  return rc;
}

/* A prepared request of a class whose rules name users or groups: validated as root, then the
 * process takes nobody's effective uid, or nogroup as its only group, and back. Every acquire
 * judges the credentials of the moment, as shms_acquire does; nothing is taken when refused. */
START_TEST(prepared_requests_check_credentials_each_time) {
  const char *name = make_segment("prepuser", 1, SHMS_TENANT_USER, -1);
  shms_t *h;
  ck_assert_int_eq(shms_attach(name, 0, &h), SHMS_OK);
  shms_request req = {.cls = SHMS_CLASS_STANDARD, .tenant = "root"};
  shms_prepared p;
  ck_assert_int_eq(shms_request_prepare(h, &req, &p), SHMS_OK);
  ck_assert_int_eq(prepared_once(h, &p), SHMS_OK);
  ck_assert_int_eq(seteuid(nobody_uid), 0);
  ck_assert_int_eq(prepared_once(h, &p), SHMS_EPERM);
  ck_assert_msg(strstr(shms_last_error_detail(), "is not the caller's login name 'nobody'"), "%s",
                shms_last_error_detail());
  shms_class_stats st;
  ck_assert_int_eq(shms_observe(h, SHMS_CLASS_STANDARD, &st), SHMS_OK);
  ck_assert_uint_eq(st.available, 1);
  ck_assert_int_eq(seteuid(0), 0);
  ck_assert_int_eq(prepared_once(h, &p), SHMS_OK);
  shms_detach(h);
  harness_remove(name);

  name = make_segment("prepgroup", 1, SHMS_TENANT_GROUP, -1);
  ck_assert_int_eq(shms_attach(name, 0, &h), SHMS_OK);
  ck_assert_int_eq(shms_request_prepare(h, &req, &p), SHMS_OK); /* group root */
  ck_assert_int_eq(prepared_once(h, &p), SHMS_OK);
  ck_assert_int_eq(setgroups(1, &nobody_gid), 0);
  ck_assert_int_eq(setresgid(nobody_gid, nobody_gid, nobody_gid), 0);
  ck_assert_int_eq(prepared_once(h, &p), SHMS_EPERM);
  ck_assert_msg(strstr(shms_last_error_detail(), "is not in group 'root'"), "%s",
                shms_last_error_detail());
  ck_assert_int_eq(setresgid(0, 0, 0), 0);
  ck_assert_int_eq(prepared_once(h, &p), SHMS_OK);
  shms_detach(h);
  harness_remove(name);

  /* allow=~root: an identity entry, on a class that binds nothing. */
  name = harness_name("prepallow");
  shms_config cfg;
  harness_config(&cfg, 1, 8);
  cfg.file_mode = 0666;
  cfg.classes[SHMS_CLASS_STANDARD].allow_count = 1;
  strcpy(cfg.classes[SHMS_CLASS_STANDARD].allow[0], "~root");
  harness_create(name, &cfg);
  ck_assert_int_eq(shms_attach(name, 0, &h), SHMS_OK);
  req.tenant = "ci";
  ck_assert_int_eq(shms_request_prepare(h, &req, &p), SHMS_OK);
  ck_assert_int_eq(seteuid(nobody_uid), 0);
  ck_assert_int_eq(prepared_once(h, &p), SHMS_EPERM);
  ck_assert_msg(strstr(shms_last_error_detail(), "allows only the users and groups"), "%s",
                shms_last_error_detail());
  ck_assert_int_eq(seteuid(0), 0);
  ck_assert_int_eq(prepared_once(h, &p), SHMS_OK);
  shms_detach(h);
  harness_remove(name);
}
END_TEST

int main(void) {
  if (geteuid() != 0) {
    printf("test_security: skipped: it needs root, to run as two users (root and nobody)\n");
    return 77;
  }
  struct passwd *pw = getpwnam("nobody");
  struct group *gr = getgrnam("nogroup");
  if (pw == NULL || gr == NULL) {
    printf("test_security: skipped: no user 'nobody' or group 'nogroup' on this system\n");
    return 77;
  }
  nobody_uid = pw->pw_uid;
  nobody_gid = gr->gr_gid;
  Suite *s = suite_create("security");
  TCase *tc = harness_tcase("identities");
  tcase_add_test(tc, tenant_user_refuses_impersonation);
  tcase_add_test(tc, tenant_group_needs_membership);
  tcase_add_test(tc, allow_lists_name_groups_and_users);
  tcase_add_test(tc, admin_operations_are_the_owners);
  tcase_add_test(tc, admin_group_members_may);
  tcase_add_test(tc, cancel_own_and_anothers);
  tcase_add_test(tc, leases_record_their_uid);
  tcase_add_test(tc, prepared_requests_check_credentials_each_time);
  suite_add_tcase(s, tc);
  return harness_run(s);
}
