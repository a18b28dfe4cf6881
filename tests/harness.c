/* Shared test scaffolding (harness.h). */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef SHMS_COVERAGE
/* The coverage build links every test with --wrap=_exit (tests/CMakeLists.txt): a child that
 * ends with _exit writes its coverage counts first, as exit would have. */
void __gcov_dump(void);
_Noreturn void __real__exit(int status);
_Noreturn void __wrap__exit(int status);
_Noreturn void __wrap__exit(int status) {
  __gcov_dump();
  __real__exit(status);
}
#endif

const char *harness_name(const char *tag) {
  static char buf[8][96];
  static unsigned n;
  /* A random part too: a pid is reused, and a killed run leaves its segments behind. */
  unsigned r = 0;
  if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
    r = (unsigned)time(NULL);
  char *out = buf[n % 8];
  snprintf(out, sizeof buf[0], "shmst-%d-%u-%08x-%s", (int)getpid(), n, r, tag);
  n++;
  return out;
}

void harness_config(shms_config *cfg, unsigned cells, unsigned queue) {
  shms_config_init(cfg);
  shms_class_config *k = &cfg->classes[SHMS_CLASS_STANDARD];
  k->configured = 1;
  k->cells = cells;
  k->queue = queue;
}

void harness_create(const char *name, const shms_config *cfg) {
  ck_assert_shms_ok(shms_create(name, cfg));
}

void harness_remove(const char *name) {
  char shm_name[256];
  snprintf(shm_name, sizeof shm_name, "/%s", name);
  shm_unlink(shm_name);
}

int harness_running(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "re");
  if (f == NULL)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* the command's name may hold anything */
  return p != NULL && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

void harness_shm_path(char *out, size_t n, const char *name) {
  snprintf(out, n, "/dev/shm/%s", name);
}

/* Read both pipes until EOF without letting either fill up. */
static void drain(int fo, char *out, size_t out_n, int fe, char *err, size_t err_n) {
  size_t no = 0, ne = 0;
  struct pollfd p[2] = {{.fd = fo, .events = POLLIN}, {.fd = fe, .events = POLLIN}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(p, 2, -1) < 0 && errno != EINTR)
      break;
    for (int i = 0; i < 2; i++) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      char tmp[4096];
      ssize_t r = read(p[i].fd, tmp, sizeof tmp);
      if (r <= 0) {
        close(p[i].fd);
        p[i].fd = -1;
        open_fds--;
        continue;
      }
      char *dst = i == 0 ? out : err;
      size_t cap = i == 0 ? out_n : err_n, *len = i == 0 ? &no : &ne;
      for (ssize_t k = 0; k < r && *len + 1 < cap; k++)
        dst[(*len)++] = tmp[k];
    }
  }
  if (out_n)
    out[no] = '\0';
  if (err_n)
    err[ne] = '\0';
}

int harness_cli(char *out, size_t out_n, char *err, size_t err_n, const char *const argv[]) {
  int po[2], pe[2];
  ck_assert(pipe(po) == 0 && pipe(pe) == 0);
  pid_t pid = fork();
  ck_assert(pid >= 0);
  if (pid == 0) {
    dup2(po[1], 1);
    dup2(pe[1], 2);
    close(po[0]);
    close(pe[0]);
    const char *args[64];
    size_t n = 0;
    args[n++] = SHMS_BIN_DIR "/shmsched";
    for (size_t i = 0; argv[i] != NULL && n < 63; i++)
      args[n++] = argv[i];
    args[n] = NULL;
    execv(args[0], (char *const *)args);
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  drain(po[0], out, out_n, pe[0], err, err_n);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int harness_run(Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

TCase *harness_tcase(const char *name) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, SHMS_TEST_TIMEOUT);
  return tc;
}
