/*
 * Commands die with the process that runs them (shmsched.h, "Commands"): a
 * holder records its command's process group (and puts it in a cgroup of
 * its own), then is SIGKILLed; whoever disposes of what it left kills the
 * whole tree first: recovery before it hands the cell on, a process taking
 * over its process-table entry, a client that finds its worker dead. The
 * test process is a child subreaper, so every orphan of the tree becomes its
 * child and its fate can be read with waitpid.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/sched.h"
#include "sched_util.h"
#include "shm/atomic.h"
#include "shm/cgroup.h"

enum tree { GROUP, DAEMON }; /* a leader and a member of its group; or a daemon in a cgroup */

struct holder {
  pid_t pid;     /* the process that holds the lease (or runs the job) */
  pid_t tree[2]; /* its command's processes */
};

/* A process of a command tree waits here to be killed; should a failed test leave it behind,
 * SIGALRM ends it after the test's own time limit. */
__attribute__((noreturn)) static void wait_to_be_killed(void) {
  signal(SIGALRM, SIG_DFL); /* the test runner catches it */
  alarm(SHMS_TEST_TIMEOUT);
  for (;;)
    pause();
}

/* In the command: the tree, reported on fd as two pids (a daemon reports its own on dfd); then
 * it waits to be killed. */
static void command(enum tree kind, const char *cgroup, int fd, int dfd) {
  if (cgroup != NULL) {
    char procs[PATH_MAX + 16];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", cgroup);
    int c = open(procs, O_WRONLY | O_CLOEXEC);
    if (c < 0 || write(c, "0", 1) != 1)
      _exit(10);
    close(c);
  }
  pid_t other = fork();
  if (other == 0 && kind == DAEMON) { /* setsid and double fork: out of the group for good */
    setsid();
    if (fork() != 0)
      _exit(0);
    pid_t self = getpid();
    if (write(dfd, &self, sizeof self) != (ssize_t)sizeof self)
      _exit(12);
  }
  if (other == 0)
    wait_to_be_killed();
  if (kind == DAEMON)
    other = -1; /* the daemon is the grandchild: it says so itself */
  pid_t pids[2] = {getpid(), other};
  if (write(fd, pids, sizeof pids) != (ssize_t)sizeof pids)
    _exit(11);
  wait_to_be_killed();
}

static pid_t read_pid(int fd) {
  pid_t p;
  ck_assert_int_eq(read(fd, &p, sizeof p), (ssize_t)sizeof p);
  return p;
}

/*
 * Fork a process that attaches to name, does act (take a lease; or bind a worker and take a
 * job), then runs a command tree of kind, recorded with shms_command_set (in its cgroup with
 * use_cgroup), and waits to be killed. Returns once the whole tree runs.
 */
static struct holder start_holder(const char *name, int (*act)(shms_t *), enum tree kind,
                                  int use_cgroup) {
  int p[2], d[2], rec[2];
  ck_assert_int_eq(pipe(p), 0);
  ck_assert_int_eq(pipe(d), 0);
  ck_assert_int_eq(pipe(rec), 0);
  struct holder ho;
  ho.pid = fork();
  ck_assert_int_ge(ho.pid, 0);
  if (ho.pid == 0) {
    shms_t *h;
    char cg[PATH_MAX];
    if (shms_attach(name, 0, &h) != SHMS_OK || act(h) != SHMS_OK)
      _exit(1);
    if (use_cgroup && shms_command_cgroup(h, cg, sizeof cg) != SHMS_OK)
      _exit(2);
    pid_t cmd = fork();
    if (cmd == 0) {
      setpgid(0, 0);
      command(kind, use_cgroup ? cg : NULL, p[1], d[1]);
    }
    setpgid(cmd, cmd);
    if (shms_command_set(h, cmd) != SHMS_OK)
      _exit(3);
    pid_t ok = 0;
    if (write(rec[1], &ok, sizeof ok) != (ssize_t)sizeof ok)
      _exit(4);
    wait_to_be_killed();
  }
  ck_assert_int_eq(read(p[0], ho.tree, sizeof ho.tree), (ssize_t)sizeof ho.tree);
  if (kind == DAEMON)
    ho.tree[1] = read_pid(d[0]);
  ck_assert_int_eq(read_pid(rec[0]), 0); /* recorded */
  int fds[] = {p[0], p[1], d[0], d[1], rec[0], rec[1]};
  for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
    close(fds[i]);
  return ho;
}

/* pid was killed by SIGKILL, and is reaped now (it is our child: we are a subreaper). */
static void assert_killed(pid_t pid) {
  int st;
  ck_assert_msg(!harness_running(pid), "process %d of the command still runs", (int)pid);
  ck_assert_int_eq(waitpid(pid, &st, WNOHANG), pid);
  ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "process %d: status 0x%x", (int)pid,
                st);
}

static void kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

static int take_lease(shms_t *h) {
  shms_request r = sched_req("holder", 0);
  shms_lease l;
  return shms_acquire(h, &r, &l);
}

static void subreaper(void) { ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0); }

static void recovery_case(enum tree kind, int use_cgroup, unsigned policy) {
  subreaper();
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = policy;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  struct holder ho = start_holder(name, take_lease, kind, use_cgroup);
  kill_and_reap(ho.pid);
  /* Its command outlives it, until someone disposes of what it left. */
  ck_assert(harness_running(ho.tree[0]) && harness_running(ho.tree[1]));
  shms_ticket t = sched_enqueue(h, "next", 0, 0);
  shms_recovery r;
  ck_assert_shms_ok(shms_recover(h, &r));
  assert_killed(ho.tree[0]);
  assert_killed(ho.tree[1]);
  shms_lease l;
  if (policy == SHMS_ON_DEATH_RELEASE) {
    ck_assert_uint_eq(r.leases_released, 1);
    ck_assert_shms_ok(shms_wait(h, &t, 0, &l));
    ck_assert_shms_ok(shms_release(h, &l));
  } else {
    ck_assert_uint_eq(r.leases_quarantined, 1);
  }
  sched_close(h, name);
}

START_TEST(recovery_kills_the_group_first) { recovery_case(GROUP, 0, SHMS_ON_DEATH_RELEASE); }
END_TEST

START_TEST(recovery_kills_a_daemon_in_the_cgroup) {
  recovery_case(DAEMON, 1, SHMS_ON_DEATH_RELEASE);
}
END_TEST

START_TEST(recovery_kills_under_quarantine_too) {
  recovery_case(GROUP, 0, SHMS_ON_DEATH_QUARANTINE);
}
END_TEST

/* A process taking over a dead process's entry kills that process's command first. */
START_TEST(claiming_the_entry_kills_first) {
  subreaper();
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.max_processes = 1; /* the holder's entry is the only one */
  const char *name = harness_name("claim");
  harness_create(name, &cfg);
  struct holder ho = start_holder(name, take_lease, GROUP, 0);
  kill_and_reap(ho.pid);
  ck_assert(harness_running(ho.tree[0]) && harness_running(ho.tree[1]));
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  assert_killed(ho.tree[0]);
  assert_killed(ho.tree[1]);
  shms_detach(h);
  harness_remove(name);
}
END_TEST

/* A process that detaches ends the command it recorded, and its cgroup. */
START_TEST(detach_ends_the_recorded_command) {
  subreaper();
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  char cg[PATH_MAX];
  int have_cgroup = shms_command_cgroup(h, cg, sizeof cg) == SHMS_OK;
  pid_t cmd = fork();
  ck_assert_int_ge(cmd, 0);
  if (cmd == 0) {
    setpgid(0, 0);
    wait_to_be_killed();
  }
  setpgid(cmd, cmd);
  ck_assert_shms_ok(shms_command_set(h, cmd));
  ck_assert_shms_err(shms_command_set(h, 1), SHMS_EINVAL, "process group 1");
  shms_detach(h);
  assert_killed(cmd);
  if (have_cgroup)
    ck_assert_int_ne(access(cg, F_OK), 0); /* removed */
  harness_remove(name);
}
END_TEST

/* The cgroups of segment incarnation inc under ROOT (shm/cgroup.h: $SHMSCHED_CGROUP, or
 * <cgroup2 mount>/shmsched). */
static int cgroups_of(uint64_t inc) {
  char root[PATH_MAX], prefix[24];
  if (shms__cgroup_root(root, sizeof root) != 0)
    return 0;
  DIR *d = opendir(root);
  if (d == NULL)
    return 0;
  snprintf(prefix, sizeof prefix, "%016llx-", (unsigned long long)inc);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  closedir(d);
  return n;
}

/* A holder that died unrecovered leaves an empty cgroup; destroying its segment removes it. */
START_TEST(destroy_sweeps_cgroups) {
  subreaper();
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_segment_info info;
  ck_assert_shms_ok(shms_segment_info_get(h, &info));
  struct holder ho = start_holder(name, take_lease, GROUP, 1);
  kill_and_reap(ho.pid);
  if (cgroups_of(info.incarnation) == 0)
    return; /* no cgroup v2 hierarchy at the default place here: nothing to sweep */
  for (int i = 0; i < 2; i++)
    kill_and_reap(ho.tree[i]);
  shms_detach(h);
  ck_assert_shms_ok(shms_destroy(name, SHMS_DESTROY_FORCE));
  ck_assert_int_eq(cgroups_of(info.incarnation), 0);
}
END_TEST

/*
 * The recovery that holds a class still (check --repair, the supervisor's first pass, a class
 * a process left mid-operation) kills a dead holder's command before it freezes the class:
 * killing may take up to 2 s per holder (a tree stuck in the kernel), and every operation on a
 * frozen class waits. Seen from a crash-point hook inside the kill: while the dead holder's
 * command still runs, the class is not frozen, and another process acquires its free cell.
 */
static struct {
  const struct shms__cls *k;
  pid_t leader;
  int ask, answer; /* pipes to and from the other process */
  int frozen_while_running, asked, acquired;
} during;

static void during_kill(void) {
  if (!harness_running(during.leader))
    return;
  if (shms__load_64(&during.k->ctl->fast) & SHMS__FAST_FROZEN) {
    during.frozen_while_running++;
    return; /* never ask then: the other process would wait for the class, and we for it */
  }
  if (during.asked++)
    return;
  int rc = 1;
  if (write(during.ask, "a", 1) == 1 && read(during.answer, &rc, sizeof rc) == (ssize_t)sizeof rc)
    during.acquired = rc == SHMS_OK;
}

START_TEST(recovery_kills_before_it_freezes) {
  subreaper();
  shms_config cfg;
  harness_config(&cfg, 2, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_RELEASE;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  int ask[2], answer[2];
  ck_assert_int_eq(pipe(ask), 0);
  ck_assert_int_eq(pipe(answer), 0);
  pid_t other = fork();
  ck_assert_int_ge(other, 0);
  if (other == 0) { /* attached before the holder dies: it never takes over the dead entry */
    shms_t *oh;
    char b;
    close(ask[1]);
    close(answer[0]);
    int rc = shms_attach(name, 0, &oh);
    if (write(answer[1], &rc, sizeof rc) != (ssize_t)sizeof rc || rc != SHMS_OK)
      _exit(1);
    while (read(ask[0], &b, 1) == 1) {
      shms_request r = sched_req("other", 0);
      shms_lease l;
      rc = shms_try_acquire(oh, &r, &l);
      if (rc == SHMS_OK)
        rc = shms_release(oh, &l);
      if (write(answer[1], &rc, sizeof rc) != (ssize_t)sizeof rc)
        _exit(2);
    }
    shms_detach(oh);
    _exit(0);
  }
  close(ask[0]);
  close(answer[1]);
  int rc;
  ck_assert_int_eq(read(answer[0], &rc, sizeof rc), (ssize_t)sizeof rc);
  ck_assert_shms_ok(rc);
  struct holder ho = start_holder(name, take_lease, GROUP, 0); /* no cgroup: the group kill */
  kill_and_reap(ho.pid);
  during.k = &h->cls[SHMS_CLASS_STANDARD];
  during.leader = ho.tree[0];
  during.ask = ask[1];
  during.answer = answer[0];
  shms__test_step_check(during_kill);
  shms_recovery r;
  rc = shms_recover(h, &r);
  shms__test_step_check(NULL);
  ck_assert_shms_ok(rc);
  assert_killed(ho.tree[0]);
  assert_killed(ho.tree[1]);
  ck_assert_uint_eq(r.leases_released, 1);
  ck_assert_msg(during.frozen_while_running == 0,
                "the class was frozen while the dead holder's command still ran (%d times)",
                during.frozen_while_running);
  ck_assert_msg(during.asked && during.acquired,
                "no other process acquired the free cell during the kill (asked: %d)",
                during.asked);
  close(ask[1]);
  close(answer[0]);
  ck_assert_int_eq(waitpid(other, &rc, 0), other);
  ck_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
  sched_close(h, name);
}
END_TEST

/*
 * A holder that died while its command (a daemon in its cgroup) ran, never recovered: destroying
 * the segment kills the command (nobody could dispose of it afterwards) and removes its
 * cgroup, with or without --force (a dead process does not keep a segment in use).
 */
START_TEST(destroy_ends_dead_holders_commands) {
  subreaper();
  const char *name;
  shms_t *h = sched_open(&name, 1, 4, NULL);
  shms_segment_info info;
  ck_assert_shms_ok(shms_segment_info_get(h, &info));
  struct holder ho = start_holder(name, take_lease, DAEMON, 1);
  kill_and_reap(ho.pid);
  if (cgroups_of(info.incarnation) == 0) {
    for (int i = 0; i < 2; i++)
      kill_and_reap(ho.tree[i]);
    sched_close(h, name);
    return; /* no cgroup v2 hierarchy here to leave anything in */
  }
  ck_assert(harness_running(ho.tree[0]) && harness_running(ho.tree[1]));
  shms_detach(h);
  ck_assert_shms_ok(shms_destroy(name, _i ? SHMS_DESTROY_FORCE : 0));
  assert_killed(ho.tree[0]);
  assert_killed(ho.tree[1]);
  ck_assert_int_eq(cgroups_of(info.incarnation), 0);
}
END_TEST

static int take_job(shms_t *h) {
  shms_worker_t *w;
  shms_job job;
  int rc = shms_worker_open(h, SHMS_CLASS_STANDARD, &w);
  return rc != SHMS_OK ? rc : shms_worker_take(w, UINT64_MAX, &job);
}

/* A client that finds its job's worker dead kills the job's command before it says so. */
START_TEST(worker_lost_after_its_command) {
  subreaper();
  shms_config cfg;
  shms_config_init(&cfg);
  shms_class_config *k = &cfg.classes[SHMS_CLASS_STANDARD];
  *k = (shms_class_config){
      .configured = 1, .cells = 1, .queue = 4, .mode = SHMS_MODE_WORKER, .payload = 64};
  const char *name = harness_name("wlost");
  harness_create(name, &cfg);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  shms_request r = sched_req("client", 0);
  shms_ticket t;
  ck_assert_shms_ok(shms_submit(h, &r, "job", 3, 0, &t));
  struct holder ho = start_holder(name, take_job, GROUP, 0);
  kill_and_reap(ho.pid);
  ck_assert(harness_running(ho.tree[0]));
  char buf[64];
  shms_result res;
  ck_assert_int_eq(shms_wait_result(h, &t, UINT64_MAX, buf, sizeof buf, &res), SHMS_EWORKERLOST);
  assert_killed(ho.tree[0]);
  assert_killed(ho.tree[1]);
  shms_detach(h);
  harness_remove(name);
}
END_TEST

/*
 * A recovery killed at each of its crash points, the command kill among them: the next
 * recovery finishes the job, and the tree is dead before the cell is released.
 */
static const struct {
  enum tree kind;
  int cgroup;
} mid_kill[] = {{DAEMON, 1}, {GROUP, 0}};

START_TEST(recovery_killed_mid_kill) {
  subreaper();
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_RELEASE;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  for (uint32_t k = 1;; k++) {
    ck_assert_uint_lt(k, 400);
    struct holder ho = start_holder(name, take_lease, mid_kill[_i].kind, mid_kill[_i].cgroup);
    /* The recoverer attaches first: attaching after the death would take over the dead
     * entry, and kill the command there, before any crash point is armed. */
    int ready[2], go[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(go), 0);
    pid_t rec = fork();
    ck_assert_int_ge(rec, 0);
    if (rec == 0) {
      shms_t *rh;
      shms_recovery r;
      char b;
      if (shms_attach(name, 0, &rh) != SHMS_OK || write(ready[1], "a", 1) != 1 ||
          read(go[0], &b, 1) != 1)
        _exit(2);
      shms__test_crash_at(k);
      _exit(shms_recover(rh, &r) == SHMS_OK ? 0 : 3);
    }
    char b;
    ck_assert_int_eq(read(ready[0], &b, 1), 1);
    kill_and_reap(ho.pid);
    ck_assert_int_eq(write(go[1], "g", 1), 1);
    int fds[] = {ready[0], ready[1], go[0], go[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
      close(fds[i]);
    int st;
    ck_assert_int_eq(waitpid(rec, &st, 0), rec);
    int died = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    ck_assert_msg(died || (WIFEXITED(st) && WEXITSTATUS(st) == 0), "recoverer: status 0x%x", st);
    /* Whatever point it died at, no cell was handed on while the tree ran. */
    if (harness_running(ho.tree[0]) || harness_running(ho.tree[1]))
      ck_assert_uint_eq(sched_stats(h).leased, 1);
    shms_recovery r;
    ck_assert_shms_ok(shms_recover(h, &r));
    assert_killed(ho.tree[0]);
    assert_killed(ho.tree[1]);
    shms_request req = sched_req("next", 0);
    shms_lease l;
    ck_assert_shms_ok(shms_try_acquire(h, &req, &l));
    ck_assert_shms_ok(shms_release(h, &l));
    if (!died)
      break; /* past its last crash point: every one was tried */
  }
  sched_close(h, name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("command");
  TCase *tc = harness_tcase("kill");
  tcase_add_test(tc, recovery_kills_the_group_first);
  tcase_add_test(tc, recovery_kills_a_daemon_in_the_cgroup);
  tcase_add_test(tc, recovery_kills_under_quarantine_too);
  tcase_add_test(tc, claiming_the_entry_kills_first);
  tcase_add_test(tc, detach_ends_the_recorded_command);
  tcase_add_test(tc, worker_lost_after_its_command);
  tcase_add_test(tc, destroy_sweeps_cgroups);
  tcase_add_test(tc, recovery_kills_before_it_freezes);
  tcase_add_loop_test(tc, destroy_ends_dead_holders_commands, 0, 2);
  suite_add_tcase(s, tc);
  tc = harness_tcase("crash");
  tcase_add_loop_test(tc, recovery_killed_mid_kill, 0, sizeof mid_kill / sizeof mid_kill[0]);
  suite_add_tcase(s, tc);
  return harness_run(s);
}
