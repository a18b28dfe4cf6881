#include "bench_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shmsched.h"

const char *bu_prog = "bench";

uint64_t bu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int bu_ncpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return 1;
  int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

void bu_pin(int cpu) {
  static int warned;
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return;
  int want = cpu % bu_ncpus(), seen = 0;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &allowed))
      continue;
    if (seen++ == want) {
      CPU_SET(c, &one);
      break;
    }
  }
  if (sched_setaffinity(0, sizeof one, &one) != 0 && !warned++)
    fprintf(stderr, "%s: sched_setaffinity: %s (running unpinned)\n", bu_prog, strerror(errno));
}

void *bu_shared(size_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    bu_die("mmap %zu shared bytes: %s", size, strerror(errno));
  return p;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

uint64_t bu_quantile(uint64_t *v, size_t n, double p) {
  qsort(v, n, sizeof *v, cmp_u64);
  size_t i = (size_t)(p * (double)n);
  return v[i < n ? i : n - 1];
}

void bu_row(const char *bench, const char *system, const char *metric, double value,
            const char *unit) {
  if (value == (double)(long long)value)
    printf("%s,%s,%s,%lld,%s\n", bench, system, metric, (long long)value, unit);
  else
    printf("%s,%s,%s,%.6g,%s\n", bench, system, metric, value, unit);
  fflush(stdout);
}

void bu_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", bu_prog);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

void bu_die_shms(const char *what, int rc) {
  bu_die("%s: %s: %s", what, shms_err_name(rc), shms_last_error_detail());
}

/* ---- arguments ---------------------------------------------------------- */

static int g_argc;
static char **g_argv;
static const char *g_usage;
static unsigned char g_used[64];

void bu_args_init(int argc, char **argv, const char *usage) {
  const char *slash = strrchr(argv[0], '/');
  bu_prog = slash ? slash + 1 : argv[0];
  g_argc = argc;
  g_argv = argv;
  g_usage = usage;
  if (argc > (int)sizeof g_used || argc % 2 == 0) {
    fprintf(stderr, "usage: %s %s\n", bu_prog, usage);
    exit(2);
  }
}

const char *bu_arg_str(const char *key, const char *dflt) {
  for (int i = 1; i + 1 < g_argc; i += 2)
    if (strncmp(g_argv[i], "--", 2) == 0 && strcmp(g_argv[i] + 2, key) == 0) {
      g_used[i] = 1;
      return g_argv[i + 1];
    }
  return dflt;
}

long bu_arg_long(const char *key, long dflt) {
  const char *s = bu_arg_str(key, NULL);
  if (!s)
    return dflt;
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < 0) {
    fprintf(stderr, "%s: --%s wants a non-negative integer, got '%s'\n", bu_prog, key, s);
    exit(2);
  }
  return v;
}

void bu_args_done(void) {
  for (int i = 1; i < g_argc; i += 2)
    if (!g_used[i]) {
      fprintf(stderr, "%s: unknown option '%s'\nusage: %s %s\n", bu_prog, g_argv[i], bu_prog,
              g_usage);
      exit(2);
    }
}

/* ---- shared words ------------------------------------------------------- */

uint32_t bu_load32(const volatile uint32_t *w) { return __atomic_load_n(w, __ATOMIC_SEQ_CST); }
void bu_store32(volatile uint32_t *w, uint32_t v) { __atomic_store_n(w, v, __ATOMIC_SEQ_CST); }
uint64_t bu_load64(const volatile uint64_t *w) { return __atomic_load_n(w, __ATOMIC_SEQ_CST); }
void bu_store64(volatile uint64_t *w, uint64_t v) { __atomic_store_n(w, v, __ATOMIC_SEQ_CST); }

void bu_spin_until(const volatile uint32_t *w, uint32_t v) {
  for (unsigned n = 0; bu_load32(w) != v; n++) {
    __builtin_ia32_pause();
    if ((n & 1023) == 1023)
      sched_yield(); /* more processes than CPUs: let the one we wait for run */
  }
}

void bu_busy_ns(uint64_t ns) {
  uint64_t end = bu_now_ns() + ns;
  while (bu_now_ns() < end)
    __builtin_ia32_pause();
}

char bu_proc_state(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return '?';
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return '?';
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')'); /* the command name may contain spaces or parens */
  return paren && paren[1] == ' ' ? paren[2] : '?';
}

void bu_write_samples(const char *path, const uint64_t *v, size_t n) {
  FILE *f = fopen(path, "w");
  if (!f)
    bu_die("%s: %s", path, strerror(errno));
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%llu\n", (unsigned long long)v[i]);
  if (fclose(f) != 0)
    bu_die("%s: %s", path, strerror(errno));
}
