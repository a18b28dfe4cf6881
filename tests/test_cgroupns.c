/*
 * A command's cgroup made in another cgroup namespace (a container's: Docker's default on
 * cgroup v2) is named by a path of that namespace's view, which does not exist here; that proves
 * nothing about its processes. A holder in a cgroup namespace of its own, rooted at a cgroup of
 * the test's, runs a daemon (out of its process group) in its command cgroup and is SIGKILLed;
 * recovery here must leave the daemon alone and quarantine the cell, though the class says
 * on-holder-death=release: releasing it would hand the cell on while the daemon runs. Needs root
 * and a writable cgroup v2 hierarchy: skips (77) without.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "sched_util.h"
#include "shm/cgroup.h"

static char mountpoint[PATH_MAX]; /* the cgroup2 mount the library uses here */

static int write_to(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  int ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);
  if (fd >= 0)
    close(fd);
  return ok ? 0 : -1;
}

/* In the holder: a cgroup namespace rooted at cgroup own (a path here), with the cgroup2
 * hierarchy mounted again at the same place, as a container sees it. */
static int enter_own_cgroupns(const char *own) {
  char procs[PATH_MAX + 64];
  snprintf(procs, sizeof procs, "%s/cgroup.procs", own);
  if (write_to(procs, "0") != 0 || unshare(CLONE_NEWNS | CLONE_NEWCGROUP) != 0 ||
      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      umount2(mountpoint, MNT_DETACH) != 0 || mount("none", mountpoint, "cgroup2", 0, NULL) != 0)
    return -1;
  return 0;
}

/* The holder: a lease, a command cgroup (named in its own view), a daemon in it; tells report
 * the daemon's pid, then waits to be killed. */
__attribute__((noreturn)) static void holder(const char *name, const char *own, int report) {
  shms_t *h;
  shms_lease l;
  char cg[PATH_MAX], procs[PATH_MAX + 16];
  shms_request r = sched_req("inside", 0);
  if (enter_own_cgroupns(own) != 0)
    _exit(10);
  if (shms_attach(name, 0, &h) != SHMS_OK || shms_acquire(h, &r, &l) != SHMS_OK)
    _exit(11);
  if (shms_command_cgroup(h, cg, sizeof cg) != SHMS_OK)
    _exit(12);
  snprintf(procs, sizeof procs, "%s/cgroup.procs", cg);
  pid_t d = fork();
  if (d == 0) { /* the daemon: in the command cgroup, out of every group of the holder's */
    if (write_to(procs, "0") != 0 || setsid() < 0)
      _exit(13);
    signal(SIGALRM, SIG_DFL);
    alarm(SHMS_TEST_TIMEOUT); /* should a failed test leave it */
    for (;;)
      pause();
  }
  if (d < 0 || write(report, &d, sizeof d) != (ssize_t)sizeof d)
    _exit(14);
  for (;;)
    pause();
}

/* rmdir every (empty) cgroup directly under dir. */
static void remove_cgroups_under(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char sub[2 * PATH_MAX];
    snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
    if (e->d_type == DT_DIR && e->d_name[0] != '.')
      ck_assert_msg(rmdir(sub) == 0, "rmdir %s: %s", sub, strerror(errno));
  }
  closedir(d);
}

START_TEST(a_cgroup_of_another_cgroup_namespace_is_not_proof) {
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_holder_death = SHMS_ON_DEATH_RELEASE;
  const char *name;
  shms_t *h = sched_open(&name, 0, 0, &cfg);
  prctl(PR_SET_CHILD_SUBREAPER, 1); /* the daemon, orphaned, comes to us to be reaped */
  char own[PATH_MAX + 32];
  snprintf(own, sizeof own, "%s/shmst-cgns-%d", mountpoint, (int)getpid());
  ck_assert_int_eq(mkdir(own, 0755), 0);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  pid_t hp = fork();
  ck_assert_int_ge(hp, 0);
  if (hp == 0)
    holder(name, own, p[1]);
  close(p[1]);
  pid_t daemon = 0;
  ck_assert_int_eq(read(p[0], &daemon, sizeof daemon), (ssize_t)sizeof daemon);
  ck_assert_int_eq(kill(hp, SIGKILL), 0);
  int st;
  ck_assert_int_eq(waitpid(hp, &st, 0), hp);

  /* Here the holder's cgroup path names nothing: not proof that its daemon is gone. */
  shms_recovery r;
  ck_assert_shms_ok(shms_recover_dead(h, 0, NULL, NULL, &r));
  ck_assert_uint_eq(r.dead_processes, 1);
  ck_assert_uint_eq(r.leases_released, 0);
  ck_assert_uint_eq(r.leases_quarantined, 1);
  ck_assert_msg(harness_running(daemon), "the daemon was killed though it could not be proven");
  ck_assert_uint_eq(sched_stats(h).quarantined, 1);

  ck_assert_int_eq(kill(daemon, SIGKILL), 0);
  ck_assert_int_eq(waitpid(daemon, NULL, 0), daemon);
  sched_close(h, name);
  /* What the holder made under its root, which is ours: emptied now, removed deepest first. */
  char root[PATH_MAX + 64];
  snprintf(root, sizeof root, "%s/shmsched", own);
  remove_cgroups_under(root);
  ck_assert_int_eq(rmdir(root), 0);
  ck_assert_int_eq(rmdir(own), 0);
}
END_TEST

/* Whether this process may make cgroup and mount namespaces and has a cgroup v2 hierarchy. */
static int usable(void) {
  char root[PATH_MAX];
  if (geteuid() != 0 || shms__cgroup_root(root, sizeof root) != 0)
    return 0;
  snprintf(mountpoint, sizeof mountpoint, "%s", dirname(root));
  pid_t pid = fork();
  if (pid == 0)
    _exit(unshare(CLONE_NEWNS | CLONE_NEWCGROUP) == 0 ? 0 : 1);
  int st;
  return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void) {
  if (!usable()) {
    printf("test_cgroupns: skipped: it needs root, a cgroup v2 hierarchy and cgroup and mount "
           "namespaces\n");
    return 77;
  }
  Suite *s = suite_create("cgroupns");
  TCase *tc = harness_tcase("cgroupns");
  tcase_add_test(tc, a_cgroup_of_another_cgroup_namespace_is_not_proof);
  suite_add_tcase(s, tc);
  return harness_run(s);
}
