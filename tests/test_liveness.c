/*
 * Liveness by byte-range lock: a registered process is alive exactly while it
 * holds its locks, whatever pid the entry names; a dead owner stays dead while
 * its entry is claimed again; one registration per
 * process, shared by its handles; destroy refuses live segments.
 */
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "shm/handle.h"
#include "shm/proc.h"
#include "shm/procfs.h"

/* A child that does something, reports a number (UINT32_MAX: it failed), and holds on until
 * told to go, then exits without detaching: a crash as far as the segment can tell. */
struct child {
  pid_t pid;
  int go;
  uint32_t index;
};

struct child_args {
  const char *name;
  const shms_t *h;
  uint32_t index;
};

static struct child spawn_child(uint32_t (*body)(const struct child_args *),
                                const struct child_args *args) {
  int ready[2], go[2];
  ck_assert(pipe(ready) == 0 && pipe(go) == 0);
  struct child c = {.pid = fork()};
  ck_assert_int_ge(c.pid, 0);
  if (c.pid == 0) {
    close(ready[0]);
    close(go[1]);
    uint32_t v = body(args);
    if (write(ready[1], &v, sizeof v) != sizeof v)
      _exit(1);
    char b;
    ssize_t r = read(go[0], &b, 1);
    (void)r;
    _exit(0);
  }
  close(ready[1]);
  close(go[0]);
  ck_assert_int_eq(read(ready[0], &c.index, sizeof c.index), (ssize_t)sizeof c.index);
  ck_assert_uint_ne(c.index, UINT32_MAX);
  close(ready[0]);
  c.go = go[1];
  return c;
}

/* Attach; report the entry index. */
static uint32_t attach_body(const struct child_args *a) {
  shms_t *h;
  return shms_attach(a->name, 0, &h) == SHMS_OK ? h->self : UINT32_MAX;
}

static struct child spawn_attached(const char *name) {
  return spawn_child(attach_body, &(struct child_args){.name = name});
}

static void finish(struct child *c) {
  /* A byte, not EOF: later children inherited this pipe's write end too. A child we killed
   * no longer reads it: ignore SIGPIPE and the write's failure then. */
  signal(SIGPIPE, SIG_IGN);
  ssize_t r = write(c->go, "x", 1);
  (void)r;
  close(c->go);
  int status;
  ck_assert_int_eq(waitpid(c->pid, &status, 0), c->pid);
}

static struct shms__proc *entry_of(shms_t *h, uint32_t index) { return shms__proc_at(h, index); }

static const char *fresh(unsigned procs) {
  shms_config cfg;
  harness_config(&cfg, 2, 4);
  cfg.max_processes = procs;
  const char *name = harness_name("live");
  harness_create(name, &cfg);
  return name;
}

START_TEST(dead_owner_is_dead_even_when_its_pid_is_reused) {
  const char *name = fresh(8);
  struct child dead = spawn_attached(name), live = spawn_attached(name);
  finish(&dead);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, SHMS__ATTACH_ADMIN, &h));
  struct shms__proc *e = entry_of(h, dead.index);
  ck_assert_uint_eq(e->state, SHMS__PROC_LIVE); /* it never detached */
  ck_assert_int_eq(e->pid, dead.pid);
  ck_assert_int_eq(shms__proc_alive(h, h->fd, dead.index, UINT32_MAX), 0);
  ck_assert_int_eq(shms__proc_alive(h, h->fd, live.index, UINT32_MAX), 1);
  /* The dead entry now names a live process, start time and all: the lock still says dead. */
  e->pid = live.pid;
  e->start_time = shms__proc_start_time(live.pid);
  ck_assert_uint_ne(e->start_time, 0);
  ck_assert_int_eq(shms__proc_alive(h, h->fd, dead.index, UINT32_MAX), 0);
  e->pid = getpid();
  ck_assert_int_eq(shms__proc_alive(h, h->fd, dead.index, UINT32_MAX), 0);
  shms_segment_info info;
  ck_assert_shms_ok(shms_segment_info_get(h, &info));
  ck_assert_uint_eq(info.live_processes, 1);
  finish(&live);
  ck_assert_int_eq(shms__proc_alive(h, h->fd, live.index, UINT32_MAX), 0);
  shms_detach(h);
  harness_remove(name);
}
END_TEST

/* Lock entry index's byte, as a process claiming the entry holds it before it moves the
 * entry's generation on; report the index. */
static uint32_t lock_entry_body(const struct child_args *a) {
  char path[256];
  harness_shm_path(path, sizeof path, a->name);
  int fd = open(path, O_RDWR);
  struct flock fl = {.l_type = F_WRLCK,
                     .l_whence = SEEK_SET,
                     .l_start =
                         (off_t)(a->h->layout.procs_off + a->index * sizeof(struct shms__proc)),
                     .l_len = 1};
  return fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0 ? a->index : UINT32_MAX;
}

static struct child hold_entry_byte(const char *name, const shms_t *h, uint32_t index) {
  return spawn_child(lock_entry_body, &(struct child_args){.name = name, .h = h, .index = index});
}

START_TEST(a_dead_owner_stays_dead_while_its_entry_is_claimed_again) {
  /* One entry: a claim takes a dead owner's entry only when none is free. */
  const char *name = fresh(1);
  struct child dead = spawn_attached(name);
  finish(&dead);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, SHMS__ATTACH_ADMIN, &h));
  uint32_t owner = SHMS__OWNER(dead.index, entry_of(h, dead.index)->gen);
  ck_assert_int_eq(shms__owner_alive(h, h->fd, owner, 0), 0);
  /* A new process has the entry's lock but has not yet moved its generation on: the entry is
   * occupied, and its previous owner still dead (recovery must not skip what it left). */
  struct child claimant = hold_entry_byte(name, h, dead.index);
  ck_assert_int_eq(shms__proc_alive(h, h->fd, dead.index, UINT32_MAX), 1);
  ck_assert_int_eq(shms__owner_alive(h, h->fd, owner, 0), 0);
  finish(&claimant);
  /* A whole claim: the new owner lives, the old one stays dead. */
  struct child next = spawn_attached(name);
  ck_assert_uint_eq(next.index, dead.index);
  uint32_t next_owner = SHMS__OWNER(next.index, entry_of(h, next.index)->gen);
  ck_assert_uint_ne(next_owner, owner);
  ck_assert_int_eq(shms__owner_alive(h, h->fd, next_owner, 0), 1);
  ck_assert_int_eq(shms__owner_alive(h, h->fd, owner, 0), 0);
  finish(&next);
  ck_assert_int_eq(shms__owner_alive(h, h->fd, next_owner, 0), 0);
  shms_detach(h);
  harness_remove(name);
}
END_TEST

/* A dead owner's entry keeps saying that its owner died attached (what the supervisor reads)
 * for as long as a free entry is left to take instead. */
START_TEST(a_claim_prefers_a_free_entry_to_a_dead_ones) {
  const char *name = fresh(4);
  struct child dead = spawn_attached(name);
  kill(dead.pid, SIGKILL);
  finish(&dead);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  ck_assert_uint_ne(h->self, dead.index);
  ck_assert_uint_eq(entry_of(h, dead.index)->state, SHMS__PROC_LIVE);
  shms_detach(h);
  harness_remove(name);
}
END_TEST

START_TEST(a_full_table_refuses_and_a_dead_entry_is_reclaimed) {
  const char *name = fresh(2);
  struct child a = spawn_attached(name), b = spawn_attached(name);
  shms_t *h;
  ck_assert_shms_err(shms_attach(name, 0, &h), SHMS_EBUSY, "process table is full");
  kill(a.pid, SIGKILL);
  finish(&a);
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  ck_assert_uint_eq(h->self, a.index);
  ck_assert_int_eq(entry_of(h, a.index)->pid, getpid());
  shms_detach(h);
  finish(&b);
  harness_remove(name);
}
END_TEST

START_TEST(handles_share_one_registration) {
  const char *name = fresh(8);
  shms_t *a, *b, *obs;
  ck_assert_shms_ok(shms_attach(name, 0, &a));
  ck_assert_shms_ok(shms_attach(name, 0, &b));
  ck_assert_uint_eq(a->self, b->self);
  /* Opening and closing another handle must not drop this process's lock. */
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &obs));
  ck_assert_shms_ok(shms_detach(obs));
  ck_assert_shms_ok(shms_detach(b));
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *o;
    shms_segment_info info;
    /* The inherited handle is refused; a fresh attach sees the parent alive. */
    if (shms_segment_info_get(a, &info) != SHMS_EINVAL)
      _exit(1);
    if (shms_attach(name, SHMS_ATTACH_OBSERVER, &o) != SHMS_OK ||
        shms_segment_info_get(o, &info) != SHMS_OK)
      _exit(2);
    _exit(info.live_processes == 1 ? 0 : 3);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit %d",
                WEXITSTATUS(status));
  shms_segment_info info;
  ck_assert_shms_ok(shms_segment_info_get(a, &info));
  ck_assert_uint_eq(info.live_processes, 1);
  ck_assert_shms_ok(shms_detach(a));
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &obs));
  ck_assert_shms_ok(shms_segment_info_get(obs, &info));
  ck_assert_uint_eq(info.live_processes, 0);
  shms_detach(obs);
  harness_remove(name);
}
END_TEST

START_TEST(destroy_refuses_while_live_unless_forced) {
  const char *name = fresh(8);
  struct child c = spawn_attached(name);
  char pid[32];
  snprintf(pid, sizeof pid, "%d", (int)c.pid);
  ck_assert_shms_err(shms_destroy(name, 0), SHMS_EBUSY, pid);
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &h));
  shms_segment_info info;
  ck_assert_shms_ok(shms_segment_info_get(h, &info));
  ck_assert_uint_eq(info.state, SHMS_SEG_ACTIVE); /* the refusal changed nothing */
  shms_detach(h);
  ck_assert_shms_ok(shms_destroy(name, SHMS_DESTROY_FORCE));
  ck_assert_int_eq(shms_attach(name, 0, &h), SHMS_ENOTFOUND);
  finish(&c);
}
END_TEST

START_TEST(destroy_ignores_dead_processes) {
  const char *name = fresh(8);
  struct child c = spawn_attached(name);
  finish(&c);
  ck_assert_shms_ok(shms_destroy(name, 0));
}
END_TEST

START_TEST(destroy_force_removes_a_corrupt_segment) {
  const char *name = fresh(8);
  char path[256];
  harness_shm_path(path, sizeof path, name);
  ck_assert_int_eq(truncate(path, 10), 0);
  ck_assert_shms_err(shms_destroy(name, 0), SHMS_EINCOMPAT,
                     "; SHMS_DESTROY_FORCE removes it anyway");
  ck_assert_shms_ok(shms_destroy(name, SHMS_DESTROY_FORCE));
  ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("liveness");
  TCase *tc = harness_tcase("locks");
  tcase_add_test(tc, dead_owner_is_dead_even_when_its_pid_is_reused);
  tcase_add_test(tc, a_dead_owner_stays_dead_while_its_entry_is_claimed_again);
  tcase_add_test(tc, a_full_table_refuses_and_a_dead_entry_is_reclaimed);
  tcase_add_test(tc, a_claim_prefers_a_free_entry_to_a_dead_ones);
  tcase_add_test(tc, handles_share_one_registration);
  tcase_add_test(tc, destroy_refuses_while_live_unless_forced);
  tcase_add_test(tc, destroy_ignores_dead_processes);
  tcase_add_test(tc, destroy_force_removes_a_corrupt_segment);
  suite_add_tcase(s, tc);
  return harness_run(s);
}
