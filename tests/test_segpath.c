/*
 * Segments at a path: a name with a '/' is the path of the segment file, and
 * SHMSCHED_DIR moves plain names out of /dev/shm. Through the library, two
 * processes and the CLI; and every refusal of what a path may name (a
 * directory, a FIFO, a symbolic link, a file that is not a segment, a missing
 * directory, a bad SHMSCHED_DIR, a bad or long path), each with its specific
 * error and nothing changed.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "sched_util.h"

static char out[65536], err[4096];

#define CLI(...)                                                                                   \
  harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

/* The scratch directory (mkdtemp, under /tmp: any local filesystem will do), in memory shared
 * with the runner, which removes it whether the tests passed or not. */
static char *scratch;

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path); /* best effort: whatever can be removed is */
  return 0;
}

static void scratch_setup(void) {
  scratch = mmap(NULL, 256, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(scratch, MAP_FAILED);
  snprintf(scratch, 256, "/tmp/shmst-path-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(scratch));
}

static void scratch_teardown(void) {
  nftw(scratch, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  munmap(scratch, 256);
}

/* SCRATCH/<unique name>-tag (one of a few rotating buffers). */
static const char *in_scratch(const char *tag) {
  static char buf[4][256];
  static unsigned n;
  char *p = buf[n++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", scratch, harness_name(tag));
  return p;
}

static int exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* What a refusal must leave as it was: the file's identity, type, size, mode and times. */
struct snap {
  struct stat st;
  char head[64];
  ssize_t len;
};

static struct snap snap_of(const char *path) {
  struct snap s;
  memset(&s, 0, sizeof s);
  ck_assert_int_eq(lstat(path, &s.st), 0);
  s.len = -1;
  if (S_ISREG(s.st.st_mode)) {
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    s.len = pread(fd, s.head, sizeof s.head, 0);
    close(fd);
  }
  return s;
}

static void assert_unchanged(const char *path, const struct snap *before) {
  struct snap now = snap_of(path);
  ck_assert_msg(now.st.st_ino == before->st.st_ino && now.st.st_dev == before->st.st_dev,
                "%s was replaced", path);
  ck_assert_int_eq(now.st.st_mode, before->st.st_mode);
  ck_assert_int_eq(now.st.st_size, before->st.st_size);
  ck_assert_int_eq(now.st.st_nlink, before->st.st_nlink);
  ck_assert_msg(now.st.st_mtim.tv_sec == before->st.st_mtim.tv_sec &&
                    now.st.st_mtim.tv_nsec == before->st.st_mtim.tv_nsec,
                "%s was modified", path);
  ck_assert_int_eq(now.len, before->len);
  if (now.len > 0)
    ck_assert(memcmp(now.head, before->head, (size_t)now.len) == 0);
}

/* One lease of the class standard, taken and given back through h. */
static void lease_once(shms_t *h) {
  shms_request r = sched_req("t", 0);
  shms_lease l;
  ck_assert_shms_ok(shms_acquire(h, &r, &l));
  ck_assert_shms_ok(shms_release(h, &l));
}

/* ---- a segment at a path ------------------------------------------------------------ */

START_TEST(create_attach_lease_destroy_at_a_path) {
  const char *path = in_scratch("seg");
  shms_config cfg;
  harness_config(&cfg, 2, 4);
  ck_assert_shms_ok(shms_create(path, &cfg));
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert(S_ISREG(st.st_mode));
  ck_assert_int_eq(st.st_mode & 0777, cfg.file_mode);
  ck_assert_shms_err(shms_create(path, &cfg), SHMS_EEXISTS, "already exists");
  shms_t *h;
  ck_assert_shms_ok(shms_attach(path, 0, &h));
  lease_once(h);
  ck_assert_int_eq(shms_segment_removed(h), 0);
  ck_assert_shms_err(shms_destroy(path, 0), SHMS_EBUSY, "live attached");
  ck_assert(exists(path));
  ck_assert_shms_ok(shms_destroy(path, SHMS_DESTROY_FORCE));
  ck_assert(!exists(path));
  ck_assert_int_eq(shms_segment_removed(h), 1);
  ck_assert_shms_ok(shms_detach(h));
  ck_assert_shms_err(shms_attach(path, 0, &h), SHMS_ENOTFOUND, "no segment");
}
END_TEST

START_TEST(a_relative_path_is_against_the_working_directory) {
  ck_assert_int_eq(chdir(scratch), 0);
  char rel[128];
  snprintf(rel, sizeof rel, "./%s", harness_name("rel"));
  shms_config cfg;
  harness_config(&cfg, 1, 1);
  ck_assert_shms_ok(shms_create(rel, &cfg));
  char abs[512];
  snprintf(abs, sizeof abs, "%s/%s", scratch, rel + 2);
  ck_assert(exists(abs));
  shms_t *h;
  ck_assert_shms_ok(shms_attach(abs, 0, &h)); /* the same file, by either name */
  lease_once(h);
  ck_assert_shms_ok(shms_detach(h));
  ck_assert_shms_ok(shms_destroy(rel, 0));
  ck_assert(!exists(abs));
}
END_TEST

START_TEST(shmsched_dir_holds_plain_names) {
  ck_assert_int_eq(setenv("SHMSCHED_DIR", scratch, 1), 0);
  const char *name = harness_name("dir");
  char path[512], dev[512];
  snprintf(path, sizeof path, "%s/%s", scratch, name);
  harness_shm_path(dev, sizeof dev, name);
  shms_config cfg;
  harness_config(&cfg, 1, 2);
  ck_assert_shms_ok(shms_create(name, &cfg));
  ck_assert(exists(path));
  ck_assert(!exists(dev));
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  lease_once(h);
  ck_assert_shms_ok(shms_detach(h));
  ck_assert_shms_ok(shms_destroy(name, 0));
  ck_assert(!exists(path));
  /* Empty is unset: /dev/shm again. */
  ck_assert_int_eq(setenv("SHMSCHED_DIR", "", 1), 0);
  ck_assert_shms_ok(shms_create(name, &cfg));
  ck_assert(exists(dev));
  ck_assert(!exists(path));
  ck_assert_shms_ok(shms_destroy(name, 0));
}
END_TEST

START_TEST(a_relative_shmsched_dir_is_refused) {
  const char *name = harness_name("reldir");
  ck_assert_int_eq(chdir(scratch), 0);
  ck_assert_int_eq(setenv("SHMSCHED_DIR", "jobs", 1), 0);
  ck_assert_int_eq(mkdir("jobs", 0700), 0);
  struct snap before = snap_of("jobs");
  shms_config cfg;
  harness_config(&cfg, 1, 1);
  ck_assert_shms_err(shms_create(name, &cfg), SHMS_EINVAL, "SHMSCHED_DIR must be an absolute");
  shms_t *h;
  ck_assert_shms_err(shms_attach(name, 0, &h), SHMS_EINVAL, "SHMSCHED_DIR must be an absolute");
  ck_assert_shms_err(shms_destroy(name, 0), SHMS_EINVAL, "SHMSCHED_DIR must be an absolute");
  assert_unchanged("jobs", &before);
  char inside[256];
  snprintf(inside, sizeof inside, "jobs/%s", name);
  ck_assert(!exists(inside));
  /* A path does not use it. */
  ck_assert_shms_ok(shms_create(inside, &cfg));
  ck_assert_shms_ok(shms_destroy(inside, 0));
  ck_assert_int_eq(setenv("SHMSCHED_DIR", "/tmp/with space", 1), 0);
  ck_assert_shms_err(shms_create(name, &cfg), SHMS_EINVAL, "SHMSCHED_DIR has byte 0x20");
}
END_TEST

/* A child attaches the same path and holds the one cell: the parent sees it taken, then free. */
START_TEST(two_processes_attach_one_path) {
  const char *path = in_scratch("two");
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  ck_assert_shms_ok(shms_create(path, &cfg));
  shms_t *h;
  ck_assert_shms_ok(shms_attach(path, 0, &h));
  int held[2], go[2];
  ck_assert_int_eq(pipe(held), 0);
  ck_assert_int_eq(pipe(go), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    shms_t *c;
    shms_request r = sched_req("child", 0);
    shms_lease l;
    char b = 0;
    if (shms_attach(path, 0, &c) != SHMS_OK || shms_acquire(c, &r, &l) != SHMS_OK)
      _exit(1);
    if (write(held[1], "x", 1) != 1 || read(go[0], &b, 1) != 1)
      _exit(2);
    _exit(shms_release(c, &l) == SHMS_OK && shms_detach(c) == SHMS_OK ? 0 : 3);
  }
  char b;
  ck_assert_int_eq(read(held[0], &b, 1), 1);
  shms_segment_info info;
  ck_assert_shms_ok(shms_segment_info_get(h, &info));
  ck_assert_uint_eq(info.live_processes, 2);
  shms_request r = sched_req("parent", 0);
  shms_lease l;
  ck_assert_int_eq(shms_try_acquire(h, &r, &l), SHMS_EWOULDBLOCK);
  ck_assert_int_eq(write(go[1], "x", 1), 1);
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  lease_once(h);
  ck_assert_shms_ok(shms_detach(h));
  ck_assert_shms_ok(shms_destroy(path, 0));
}
END_TEST

/* ---- refusals ----------------------------------------------------------------------- */

/* Every entry point on path fails with code and a detail holding needle; path unchanged. */
static void refused_everywhere(const char *path, int code, const char *needle) {
  struct snap before = snap_of(path);
  shms_t *h;
  ck_assert_shms_err(shms_attach(path, 0, &h), code, needle);
  ck_assert_shms_err(shms_attach(path, SHMS_ATTACH_OBSERVER, &h), code, needle);
  ck_assert_shms_err(shms_destroy(path, 0), code, needle);
  ck_assert_shms_err(shms_destroy(path, SHMS_DESTROY_FORCE), code, needle);
  assert_unchanged(path, &before);
}

START_TEST(a_directory_is_refused) {
  const char *path = in_scratch("isdir");
  ck_assert_int_eq(mkdir(path, 0700), 0);
  refused_everywhere(path, SHMS_EINCOMPAT, "is a directory, not a segment file");
  shms_config cfg;
  harness_config(&cfg, 1, 1);
  struct snap before = snap_of(path);
  ck_assert_shms_err(shms_create(path, &cfg), SHMS_EEXISTS, "already exists and is a directory");
  assert_unchanged(path, &before);
}
END_TEST

START_TEST(a_fifo_is_refused_without_blocking) {
  const char *path = in_scratch("fifo");
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  alarm(10); /* opening a FIFO to read would block until a writer came: a hang fails the test */
  refused_everywhere(path, SHMS_EINCOMPAT, "is a FIFO, not a segment file");
  shms_config cfg;
  harness_config(&cfg, 1, 1);
  ck_assert_shms_err(shms_create(path, &cfg), SHMS_EEXISTS, "already exists and is a FIFO");
  alarm(0);
}
END_TEST

/* Not through refused_everywhere: other processes' writes to /dev/null may touch its times. */
START_TEST(a_device_is_refused) {
  const char *needle = "is a character device, not a segment file";
  shms_t *h;
  ck_assert_shms_err(shms_attach("/dev/null", 0, &h), SHMS_EINCOMPAT, needle);
  ck_assert_shms_err(shms_attach("/dev/null", SHMS_ATTACH_OBSERVER, &h), SHMS_EINCOMPAT, needle);
  ck_assert_shms_err(shms_destroy("/dev/null", SHMS_DESTROY_FORCE), SHMS_EINCOMPAT, needle);
  struct stat st;
  ck_assert_int_eq(lstat("/dev/null", &st), 0);
  ck_assert(S_ISCHR(st.st_mode));
}
END_TEST

START_TEST(a_symbolic_link_is_refused) {
  const char *target = in_scratch("target");
  shms_config cfg;
  harness_config(&cfg, 1, 1);
  ck_assert_shms_ok(shms_create(target, &cfg));
  char link[512];
  snprintf(link, sizeof link, "%s.link", target);
  ck_assert_int_eq(symlink(target, link), 0);
  struct snap seg = snap_of(target);
  refused_everywhere(link, SHMS_EINCOMPAT, "is a symbolic link");
  struct snap before = snap_of(link);
  ck_assert_shms_err(shms_create(link, &cfg), SHMS_EEXISTS, "already exists and is a symbolic");
  assert_unchanged(link, &before);
  assert_unchanged(target, &seg);
  /* A dangling link too: create must not make its target. */
  char dangling[512], where[512];
  snprintf(where, sizeof where, "%s.nowhere", target);
  snprintf(dangling, sizeof dangling, "%s.dangling", target);
  ck_assert_int_eq(symlink(where, dangling), 0);
  ck_assert_shms_err(shms_create(dangling, &cfg), SHMS_EEXISTS, "symbolic link");
  ck_assert(!exists(where));
  ck_assert_shms_ok(shms_destroy(target, 0));
}
END_TEST

START_TEST(a_file_that_is_not_a_segment_is_refused) {
  const char *path = in_scratch("foreign");
  int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
  ck_assert_int_ge(fd, 0);
  char data[8192];
  memset(data, 'z', sizeof data);
  ck_assert_int_eq(write(fd, data, sizeof data), (ssize_t)sizeof data);
  close(fd);
  struct snap before = snap_of(path);
  shms_t *h;
  ck_assert_shms_err(shms_attach(path, 0, &h), SHMS_EINCOMPAT, "magic");
  ck_assert_shms_err(shms_destroy(path, SHMS_DESTROY_FORCE), SHMS_EINCOMPAT,
                     "is not a shmsched segment");
  ck_assert_msg(strstr(shms_last_error_detail(), path) != NULL, "%s", shms_last_error_detail());
  assert_unchanged(path, &before);
  /* Truncated to less than a header: still not ours to remove. */
  ck_assert_int_eq(truncate(path, 16), 0);
  before = snap_of(path);
  ck_assert_shms_err(shms_attach(path, 0, &h), SHMS_EINCOMPAT, "");
  ck_assert_shms_err(shms_destroy(path, SHMS_DESTROY_FORCE), SHMS_EINCOMPAT,
                     "is not a shmsched segment");
  assert_unchanged(path, &before);
}
END_TEST

START_TEST(a_missing_directory_is_named) {
  char path[600], dir[512];
  snprintf(dir, sizeof dir, "%s/no-such-dir", scratch);
  snprintf(path, sizeof path, "%s/seg", dir);
  shms_config cfg;
  harness_config(&cfg, 1, 1);
  char needle[600];
  snprintf(needle, sizeof needle, "directory '%s' does not exist", dir);
  shms_t *h;
  ck_assert_shms_err(shms_create(path, &cfg), SHMS_ENOTFOUND, needle);
  ck_assert_shms_err(shms_attach(path, 0, &h), SHMS_ENOTFOUND, needle);
  ck_assert_shms_err(shms_destroy(path, 0), SHMS_ENOTFOUND, needle);
  ck_assert(!exists(dir));
  /* And through SHMSCHED_DIR. */
  ck_assert_int_eq(setenv("SHMSCHED_DIR", dir, 1), 0);
  ck_assert_shms_err(shms_create("seg", &cfg), SHMS_ENOTFOUND, needle);
  ck_assert(!exists(dir));
  /* A file where a directory should be. */
  const char *file = in_scratch("file");
  int fd = open(file, O_CREAT | O_EXCL | O_WRONLY, 0600);
  ck_assert_int_ge(fd, 0);
  close(fd);
  snprintf(path, sizeof path, "%s/seg", file);
  ck_assert_shms_err(shms_attach(path, 0, &h), SHMS_ENOTFOUND, "is not a directory");
  ck_assert_shms_err(shms_create(path, &cfg), SHMS_ENOTFOUND, "is not a directory");
}
END_TEST

/* A directory anyone may write that is not sticky: anyone could replace the segment file. */
START_TEST(a_directory_anyone_may_replace_in_is_refused) {
  const char *dir = in_scratch("open");
  ck_assert_int_eq(mkdir(dir, 0700), 0);
  ck_assert_int_eq(chmod(dir, 0777), 0); /* not through mkdir: the umask would narrow it */
  char path[600];
  snprintf(path, sizeof path, "%s/seg", dir);
  shms_config cfg;
  harness_config(&cfg, 1, 1);
  struct snap before = snap_of(dir);
  ck_assert_shms_err(shms_create(path, &cfg), SHMS_EPERM, "is writable by anyone and not sticky");
  ck_assert(!exists(path));
  assert_unchanged(dir, &before);
  ck_assert_int_eq(chmod(dir, 01777), 0); /* sticky, as /dev/shm and /tmp are */
  ck_assert_shms_ok(shms_create(path, &cfg));
  ck_assert_int_eq(chmod(dir, 0777), 0);
  struct snap seg = snap_of(path);
  shms_t *h;
  ck_assert_shms_err(shms_attach(path, 0, &h), SHMS_EPERM, "is writable by anyone and not sticky");
  ck_assert_shms_err(shms_destroy(path, SHMS_DESTROY_FORCE), SHMS_EPERM, "(mode 0777: chmod +t");
  assert_unchanged(path, &seg);
  ck_assert_int_eq(chmod(dir, 0770), 0); /* its users' alone: fine */
  ck_assert_shms_ok(shms_attach(path, 0, &h));
  ck_assert_shms_ok(shms_detach(h));
  ck_assert_shms_ok(shms_destroy(path, 0));
}
END_TEST

START_TEST(bad_paths_are_refused) {
  shms_config cfg;
  harness_config(&cfg, 1, 1);
  char trailing[512], dot[512], dotdot[512];
  snprintf(trailing, sizeof trailing, "%s/", scratch);
  snprintf(dot, sizeof dot, "%s/.", scratch);
  snprintf(dotdot, sizeof dotdot, "%s/..", scratch);
  struct snap before = snap_of(scratch);
  shms_t *h;
  ck_assert_shms_err(shms_create(trailing, &cfg), SHMS_EINVAL, "ends in '/'");
  ck_assert_shms_err(shms_attach(trailing, 0, &h), SHMS_EINVAL, "ends in '/'");
  ck_assert_shms_err(shms_destroy(trailing, SHMS_DESTROY_FORCE), SHMS_EINVAL, "ends in '/'");
  ck_assert_shms_err(shms_create(dot, &cfg), SHMS_EINVAL, "ends in '.', a directory");
  ck_assert_shms_err(shms_destroy(dotdot, 0), SHMS_EINVAL, "ends in '..', a directory");
  ck_assert_shms_err(shms_attach("a/b c", 0, &h), SHMS_EINVAL, "a space (0x20) at 3");
  ck_assert_shms_err(shms_attach("a/b\n", 0, &h), SHMS_EINVAL, "a control byte 0x0a at 3");
  ck_assert_shms_err(shms_attach("a/\xc3\xa9", 0, &h), SHMS_EINVAL, "a non-ASCII byte 0xc3");
  assert_unchanged(scratch, &before);
  /* Too long, a path as a plain name: the limit is named. */
  char lengthy[SHMS_NAME_MAX + 2];
  int n = snprintf(lengthy, sizeof lengthy, "%s/", scratch);
  memset(lengthy + n, 'x', sizeof lengthy - 1 - (size_t)n);
  lengthy[sizeof lengthy - 1] = '\0';
  ck_assert_shms_err(shms_create(lengthy, &cfg), SHMS_EINVAL, "longer than 200 bytes");
  ck_assert_shms_err(shms_attach(lengthy, 0, &h), SHMS_EINVAL, "(SHMS_NAME_MAX");
  assert_unchanged(scratch, &before);
  lengthy[SHMS_NAME_MAX] = '\0'; /* exactly the limit: allowed */
  ck_assert_shms_ok(shms_create(lengthy, &cfg));
  ck_assert_shms_ok(shms_destroy(lengthy, 0));
}
END_TEST

/* ---- the CLI ------------------------------------------------------------------------ */

START_TEST(cli_create_status_run_destroy_at_a_path) {
  const char *path = in_scratch("cli");
  ck_assert_int_eq(CLI("create", path, "--class", "standard:cells=1,queue=4"), 0);
  ck_assert(exists(path));
  ck_assert_int_eq(CLI("status", path), 0);
  ck_assert_msg(strstr(out, "standard") != NULL, "%s", out);
  ck_assert_int_eq(CLI("run", path, "--class", "standard", "--tenant", "ci", "--", "sh", "-c",
                       "echo \"$SHMSCHED_SEGMENT\""),
                   0);
  ck_assert_msg(strstr(out, path) != NULL, "%s", out);
  ck_assert_int_eq(CLI("create", path, "--class", "standard:cells=1,queue=4"), 1);
  ck_assert_msg(strstr(err, "already exists") != NULL, "%s", err);
  ck_assert_int_eq(CLI("destroy", path), 0);
  ck_assert(!exists(path));
  ck_assert_int_eq(CLI("status", path), 1);
  ck_assert_msg(strncmp(err, "shmsched: not-found: ", 21) == 0, "%s", err);
}
END_TEST

START_TEST(cli_refusals_at_a_path) {
  const char *dir = in_scratch("clidir");
  ck_assert_int_eq(mkdir(dir, 0700), 0);
  struct snap before = snap_of(dir);
  ck_assert_int_eq(CLI("status", dir), 1);
  ck_assert_msg(strstr(err, "is a directory, not a segment file") != NULL, "%s", err);
  ck_assert_int_eq(CLI("destroy", dir, "--force"), 1);
  ck_assert_msg(strstr(err, "is a directory, not a segment file") != NULL, "%s", err);
  assert_unchanged(dir, &before);
  char trailing[512];
  snprintf(trailing, sizeof trailing, "%s/", dir);
  ck_assert_int_eq(CLI("create", trailing, "--class", "standard:cells=1,queue=1"), 2);
  ck_assert_msg(strstr(err, "ends in '/'") != NULL, "%s", err);
  assert_unchanged(dir, &before);
  ck_assert_int_eq(setenv("SHMSCHED_DIR", "relative/dir", 1), 0);
  ck_assert_int_eq(CLI("create", "plain", "--class", "standard:cells=1,queue=1"), 2);
  ck_assert_msg(strstr(err, "shmsched: invalid-argument: ") == err, "%s", err);
  ck_assert_msg(strstr(err, "SHMSCHED_DIR must be an absolute path") != NULL, "%s", err);
  ck_assert_int_eq(setenv("SHMSCHED_DIR", dir, 1), 0);
  ck_assert_int_eq(CLI("create", "plain", "--class", "standard:cells=1,queue=1"), 0);
  char inside[512];
  snprintf(inside, sizeof inside, "%s/plain", dir);
  ck_assert(exists(inside));
  ck_assert_int_eq(CLI("destroy", "plain"), 0);
  ck_assert(!exists(inside));
}
END_TEST

/* Every command that takes a segment refuses a FIFO or a directory in its place at once, with
 * one error line, and leaves it as it was: none opens it (a FIFO would block the open). */
START_TEST(every_command_refuses_a_fifo_and_a_directory) {
  static const char *const commands[][8] = {
      {"status"},
      {"top", "--batch", "-n", "1"},
      {"metrics"},
      {"events"},
      {"explain", "standard.0.1.0123456789abcdef"},
      {"cancel", "standard.0.1.0123456789abcdef"},
      {"run", "-c", "standard", "-t", "a", "--", "true"},
      {"submit", "-c", "standard", "-t", "a", "--payload", "x"},
      {"worker", "-c", "standard", "--", "true"},
      {"jobserver", "-c", "standard", "-t", "a", "--", "true"},
      {"check"},
      {"check", "--repair"},
      {"supervise"},
      {"policy"},
      {"drain"},
      {"resume"},
      {"repair", "-c", "standard"},
      {"destroy", "--force"},
  };
  const char *fifo = in_scratch("fifo"), *dir = in_scratch("dir");
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  ck_assert_int_eq(mkdir(dir, 0700), 0);
  struct snap fifo_before = snap_of(fifo), dir_before = snap_of(dir);
  const char *targets[] = {fifo, dir}, *kinds[] = {"is a FIFO", "is a directory"};
  alarm(60); /* a command blocked in an open fails the test rather than hang it */
  for (size_t t = 0; t < 2; t++)
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
      const char *argv[10] = {commands[c][0], targets[t]};
      for (size_t i = 1; i < 8 && commands[c][i] != NULL; i++)
        argv[i + 1] = commands[c][i];
      int rc = harness_cli(out, sizeof out, err, sizeof err, argv);
      ck_assert_msg(rc == 1, "%s %s: exit %d: %s", argv[0], targets[t], rc, err);
      ck_assert_msg(strstr(err, "shmsched: incompatible-segment: ") == err, "%s: %s", argv[0], err);
      ck_assert_msg(strstr(err, kinds[t]) != NULL && strchr(err, '\n') == err + strlen(err) - 1,
                    "%s: not one line naming what it is: %s", argv[0], err);
    }
  alarm(0);
  assert_unchanged(fifo, &fifo_before);
  assert_unchanged(dir, &dir_before);
}
END_TEST

int main(void) {
  Suite *s = suite_create("segpath");
  TCase *tc = harness_tcase("path");
  tcase_add_unchecked_fixture(tc, scratch_setup, scratch_teardown);
  tcase_add_test(tc, create_attach_lease_destroy_at_a_path);
  tcase_add_test(tc, a_relative_path_is_against_the_working_directory);
  tcase_add_test(tc, shmsched_dir_holds_plain_names);
  tcase_add_test(tc, a_relative_shmsched_dir_is_refused);
  tcase_add_test(tc, two_processes_attach_one_path);
  suite_add_tcase(s, tc);
  tc = harness_tcase("refusals");
  tcase_add_unchecked_fixture(tc, scratch_setup, scratch_teardown);
  tcase_add_test(tc, a_directory_is_refused);
  tcase_add_test(tc, a_fifo_is_refused_without_blocking);
  tcase_add_test(tc, a_device_is_refused);
  tcase_add_test(tc, a_symbolic_link_is_refused);
  tcase_add_test(tc, a_file_that_is_not_a_segment_is_refused);
  tcase_add_test(tc, a_missing_directory_is_named);
  tcase_add_test(tc, a_directory_anyone_may_replace_in_is_refused);
  tcase_add_test(tc, bad_paths_are_refused);
  suite_add_tcase(s, tc);
  tc = harness_tcase("cli");
  tcase_add_unchecked_fixture(tc, scratch_setup, scratch_teardown);
  tcase_add_test(tc, cli_create_status_run_destroy_at_a_path);
  tcase_add_test(tc, cli_refusals_at_a_path);
  tcase_add_test(tc, every_command_refuses_a_fifo_and_a_directory);
  suite_add_tcase(s, tc);
  return harness_run(s);
}
