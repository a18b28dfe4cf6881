/* Shared pieces of the fuzz targets: contract failures, and segments made from bytes (fuzz.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/report.h"
#include "fuzz.h"
#include "shm/handle.h"
#include "shm/layout.h"

void fuzz_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fuzz: broken contract: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

void fuzz_check_error_line(const char *what, const char *err, size_t n) {
  size_t len = strnlen(err, n);
  if (len == n)
    fuzz_fail("%s: the error is not NUL-terminated within its %zu bytes", what, n);
  if (len == 0)
    fuzz_fail("%s: failed without an error message", what);
  if (memchr(err, '\n', len) != NULL)
    fuzz_fail("%s: the error is more than one line: '%s'", what, err);
}

/* What runs now, for the watchdog's message. */
static const char *volatile watchdog_step = "";
static timer_t watchdog;
static int watchdog_made;

/* Write s to stderr with write(2) alone (a signal handler's). */
static void say(const char *s) {
  for (size_t n = strlen(s); n > 0;) {
    ssize_t w = write(STDERR_FILENO, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= (size_t)w;
  }
}

#define FUZZ_STR_(x) #x
#define FUZZ_STR(x)  FUZZ_STR_(x)

/* The input ran out of time: the wedged call may hold any lock (stdio's too), so fuzz_fail's
 * vfprintf is not safe here; the same words through write(2), then abort, which libFuzzer
 * reports as a crash and keeps the input for. */
static void watchdog_fired(int sig) {
  (void)sig;
  say("fuzz: broken contract: input took more than " FUZZ_STR(FUZZ_INPUT_SECONDS) " s, in ");
  say(watchdog_step);
  say("\n");
  abort();
}

void fuzz_watchdog_arm(void) {
  if (!watchdog_made) {
    /* A timer of its own on a real-time signal: libFuzzer's -timeout uses SIGALRM and
     * ITIMER_REAL (alarm() would take them over), and the library handles no signal. */
    struct sigaction sa = {.sa_handler = watchdog_fired};
    sigemptyset(&sa.sa_mask);
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN};
    if (sigaction(SIGRTMIN, &sa, NULL) != 0 || timer_create(CLOCK_MONOTONIC, &ev, &watchdog) != 0)
      fuzz_fail("cannot make the input watchdog: %s", strerror(errno));
    watchdog_made = 1;
  }
  watchdog_step = "the start";
  struct itimerspec it = {.it_value = {.tv_sec = FUZZ_INPUT_SECONDS}};
  if (timer_settime(watchdog, 0, &it, NULL) != 0)
    fuzz_fail("cannot arm the input watchdog: %s", strerror(errno));
}

void fuzz_watchdog_step(const char *step) { watchdog_step = step; }

void fuzz_watchdog_disarm(void) {
  struct itimerspec it = {{0, 0}, {0, 0}};
  if (watchdog_made && timer_settime(watchdog, 0, &it, NULL) != 0)
    fuzz_fail("cannot disarm the input watchdog: %s", strerror(errno));
  watchdog_step = "";
}

/*
 * The words of a process entry an own patch may land on (fuzz.h), in the entry's order. Not its
 * identity (state, generation, pid, role, start time), which says whose entry it is, nor who it
 * is and the command it runs (uid to cgroupns_ino): a detach kills the process group its entry
 * records and removes its cgroup, and a fuzzer that learned the target's own group and start
 * time (its comparisons are instrumented) could have it kill processes outside the input.
 */
#define OWN_WORDS(first, last)                                                                     \
  {                                                                                                \
    offsetof(struct shms__proc, first), offsetof(struct shms__proc, last) +                        \
                                            sizeof(((struct shms__proc *)0)->last) -               \
                                            offsetof(struct shms__proc, first)                     \
  }
static const struct {
  size_t off, len;
} own_words[] = {OWN_WORDS(ops, own_dirty), OWN_WORDS(marks, marks), OWN_WORDS(tally, tally)};

size_t fuzz_own_size(void) {
  size_t n = 0;
  for (size_t w = 0; w < sizeof own_words / sizeof own_words[0]; w++)
    n += own_words[w].len;
  return n;
}

void fuzz_own_patch(shms_t *h, size_t off, const uint8_t *bytes, size_t len) {
  if (h->proc == NULL)
    fuzz_fail("a member handle has no process entry");
  uint8_t *entry = (uint8_t *)h->proc;
  for (size_t k = 0; k < len; k++) {
    size_t at = off + k, w = 0;
    while (w < sizeof own_words / sizeof own_words[0] && at >= own_words[w].len)
      at -= own_words[w++].len;
    if (w == sizeof own_words / sizeof own_words[0])
      fuzz_fail("an own patch past the entry's words: %zu + %zu", off, len);
    entry[own_words[w].off + at] = bytes[k];
  }
}

uint32_t fuzz_own_ops(shms_t *h, int c) { return h->proc->ops[c]; }

/* A name no other input, process or run uses. */
static void unique_name(char *name, const char *kind) {
  static unsigned long counter;
  snprintf(name, 64, "shms-fuzz-%s-%ld-%lu", kind, (long)getpid(), ++counter);
}

int fuzz_segment_write(const uint8_t *bytes, size_t size, char *name) {
  char path[80];
  int fd;
  for (;;) {
    unique_name(name, "seg");
    snprintf(path, sizeof path, "/%s", name);
    fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0)
      break;
    if (errno != EEXIST)
      return -1;
    shm_unlink(path); /* left by an earlier run that crashed with our pid: take the next name */
  }
  for (size_t done = 0; done < size;) {
    ssize_t n = write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int e = errno;
      close(fd);
      shm_unlink(path);
      errno = e;
      return -1;
    }
    done += (size_t)n;
  }
  close(fd);
  return 0;
}

void fuzz_segment_remove(const char *name) {
  char path[80];
  snprintf(path, sizeof path, "/%s", name);
  shm_unlink(path);
}

/* A name read from the segment: NUL-terminated, graphic ASCII only (the readers' promise). */
static void check_name(const char *what, int c, const char *name, size_t cap) {
  size_t len = strnlen(name, cap);
  if (len == cap)
    fuzz_fail("class %d: a %s name is not terminated", c, what);
  for (size_t i = 0; i < len; i++)
    if (name[i] <= ' ' || name[i] > '~')
      fuzz_fail("class %d: a %s name holds byte 0x%02x", c, what, (unsigned char)name[i]);
}

/* Who holds what, and the tenants, as observers read them (status --leases, metrics, top). */
static void observe_rows(shms_t *h, const shms_config *cfg, int c) {
  static shms_cell_info cells[SHMS_CELLS_MAX];
  static shms_tenant_stats tenants[4096];
  uint32_t n = 0;
  int rc = shms_cells(h, (shms_class_t)c, cells, SHMS_CELLS_MAX, &n);
  if (rc != SHMS_OK || n != cfg->classes[c].cells)
    fuzz_fail("class %d: shms_cells gave %d and %u rows for %u cells", c, rc, n,
              cfg->classes[c].cells);
  for (uint32_t i = 0; i < n; i++)
    check_name("cell's tenant", c, cells[i].tenant, sizeof cells[i].tenant);
  rc = shms_tenants_snapshot(h, (shms_class_t)c, tenants, 4096, &n);
  if (rc != SHMS_OK || n > cfg->max_tenants)
    fuzz_fail("class %d: shms_tenants_snapshot gave %d and %u rows for %u records", c, rc, n,
              cfg->max_tenants);
  for (uint32_t i = 0; i < n && i < 4096; i++)
    check_name("tenant", c, tenants[i].name, sizeof tenants[i].name);
}

/* What holds of every class of a segment that attached. */
static void observe_class(shms_t *h, const shms_config *cfg, int c) {
  shms_class_stats st;
  int rc = shms_observe(h, (shms_class_t)c, &st);
  if (!cfg->classes[c].configured) {
    if (rc != SHMS_EINVAL)
      fuzz_fail("observe of unconfigured class %d gave %d", c, rc);
    return;
  }
  if (rc != SHMS_OK)
    fuzz_fail("observe of class %d failed: %s (%s)", c, shms_err_name(rc),
              shms_last_error_detail());
  if (st.cells != cfg->classes[c].cells || st.queue_capacity != cfg->classes[c].queue)
    fuzz_fail("class %d: observed %u cells and %u slots, configured %u and %u", c, st.cells,
              st.queue_capacity, cfg->classes[c].cells, cfg->classes[c].queue);
  uint64_t sum =
      (uint64_t)st.available + st.leased + st.granted_unaccepted + st.quarantined + st.offline;
  if (sum != st.cells)
    fuzz_fail("class %d: available %u + leased %u + granted %u + quarantined %u + offline %u != "
              "cells %u",
              c, st.available, st.leased, st.granted_unaccepted, st.quarantined, st.offline,
              st.cells);
  observe_rows(h, cfg, c);
}

/*
 * The event ring read as `shmsched events` and `explain` read it: every record it returns lies in
 * the ring's window, in order, names a configured class or none, and a cell of that class or
 * none; a lookup by ticket returns or refuses. The reads are bounded by the validated ring size,
 * whatever the head and the records say.
 */
static void observe_ring(shms_t *h, const shms_config *cfg) {
  static shms_event_record recs[64];
  uint64_t cursor = 0, last = 0, lost = 0;
  size_t n, total = 0;
  int first = 1;
  do {
    int rc = shms_events_read(h, &cursor, SHMS_EVENTS_SKIP_PENDING, recs, 64, &n, &lost);
    if (rc != SHMS_OK)
      fuzz_fail("events_read failed: %s (%s)", shms_err_name(rc), shms_last_error_detail());
    for (size_t i = 0; i < n; i++) {
      const shms_event_record *r = &recs[i];
      if (!first && r->position <= last)
        fuzz_fail("event positions out of order: %llu after %llu", (unsigned long long)r->position,
                  (unsigned long long)last);
      first = 0;
      last = r->position;
      int c = r->event.cls;
      if (c != -1 && (c < 0 || c >= SHMS_CLASS_COUNT || !cfg->classes[c].configured))
        fuzz_fail("an event names class %d, not a class of the segment", c);
      if (r->event.cell < -1)
        fuzz_fail("an event names cell %d", r->event.cell);
      if (strnlen(r->event.tenant, sizeof r->event.tenant) == sizeof r->event.tenant)
        fuzz_fail("an event's tenant is not NUL-terminated");
      shms_event_record found;
      if (r->event.ticket.seq != 0 && shms_events_find(h, &r->event.ticket, &found) == SHMS_OK &&
          found.position < r->position)
        fuzz_fail("events_find returned an older record than one the ring holds");
    }
    total += n;
    if (total > (size_t)cfg->events + 64)
      fuzz_fail("the ring returned %zu records, more than its %u", total, cfg->events);
  } while (n == 64);
}

/* Overwrite the segment NAME with size bytes: a writer changing it under an attached handle. */
static void overwrite(const char *name, const uint8_t *bytes, size_t size) {
  char path[96];
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0 || pwrite(fd, bytes, size, 0) != (ssize_t)size)
    fuzz_fail("cannot rewrite segment %s", name);
  close(fd);
}

int fuzz_segment_observe(const char *name, const uint8_t *live, size_t size) {
  shms_t *h = NULL;
  int rc = shms_attach(name, SHMS_ATTACH_OBSERVER, &h);
  if (rc != SHMS_OK) {
    if (rc > 0 || strcmp(shms_err_name(rc), "unknown-error") == 0)
      fuzz_fail("attach failed with %d, not an error code", rc);
    if (h != NULL)
      fuzz_fail("a failed attach set the handle");
    return rc;
  }
  /* What was validated is the configuration the handle must go by, whatever happens next. */
  shms_config cfg;
  if ((rc = shms_get_config(h, &cfg)) != SHMS_OK)
    fuzz_fail("get_config failed: %s", shms_err_name(rc));
  if (live != NULL)
    overwrite(name, live, size);
  if (shms_config_validate(&cfg) != SHMS_OK)
    fuzz_fail("a segment attached with an invalid configuration: %s", shms_last_error_detail());
  shms_segment_info info;
  if ((rc = shms_segment_info_get(h, &info)) != SHMS_OK)
    fuzz_fail("segment_info_get failed: %s", shms_err_name(rc));
  if (info.size != shms_segment_size(&cfg) || info.max_processes != cfg.max_processes)
    fuzz_fail("segment info (size %llu, %u processes) disagrees with its configuration",
              (unsigned long long)info.size, info.max_processes);
  /* The state is live by design (drain, destroy): only what attach validated is checked. */
  if (live == NULL && (info.state < SHMS_SEG_ACTIVE || info.state > SHMS_SEG_DESTROYING))
    fuzz_fail("segment state %u", info.state);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    observe_class(h, &cfg, c);
  observe_ring(h, &cfg);
  shms_class_stats st;
  if (shms_observe(h, SHMS_CLASS_COUNT, &st) != SHMS_EINVAL)
    fuzz_fail("observe of an out-of-range class did not fail");
  if ((rc = shms_detach(h)) != SHMS_OK)
    fuzz_fail("detach failed: %s", shms_err_name(rc));
  return SHMS_OK;
}

/* A few records of every kind in the ring of the segment NAME (more than a small ring holds, so
 * that it has wrapped), as the scheduler writes them. */
static int fill_ring(const char *name, const shms_config *cfg) {
  shms_t *h;
  if (shms_attach(name, 0, &h) != SHMS_OK)
    return -1;
  int c = 0;
  while (!cfg->classes[c].configured)
    c++;
  for (uint32_t i = 0; i < 2 * cfg->events + 3; i++) {
    struct shms__ev e = {.kind = 1 + i % SHMS_EVENT_DRAINED,
                         .cls = i % 5 == 0 ? -1 : c,
                         .cell = i % 3 == 0 ? -1 : 0,
                         .pid = (int32_t)i,
                         .reason = -(int32_t)(i % 24),
                         .slot_ref = i % 2,
                         .ticket_seq = i % 2 ? i : 0,
                         .value = i};
    memcpy(e.tenant, "t", 2);
    shms__note(h, &e);
  }
  return shms_detach(h) == SHMS_OK ? 0 : -1;
}

uint8_t *fuzz_segment_image(const shms_config *cfg, size_t *size) {
  char name[64], path[96];
  unique_name(name, "img");
  if (shms_create(name, cfg) != SHMS_OK)
    return NULL;
  if (cfg->events != 0 && fill_ring(name, cfg) != 0) {
    shms_destroy(name, SHMS_DESTROY_FORCE);
    return NULL;
  }
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  uint8_t *bytes = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0 && (bytes = malloc((size_t)st.st_size))) {
    if (pread(fd, bytes, (size_t)st.st_size, 0) == st.st_size) {
      /* The same image every time (inputs that patch it reproduce exactly): the creation's
       * random incarnation and its time are fixed. */
      struct shms__header *hdr = (struct shms__header *)bytes;
      hdr->incarnation = 0x5eed;
      hdr->created_unix_ns = 0;
      *size = (size_t)st.st_size;
    } else {
      free(bytes);
      bytes = NULL;
    }
  }
  if (fd >= 0)
    close(fd);
  shms_destroy(name, SHMS_DESTROY_FORCE);
  return bytes;
}

static void class_set(shms_config *cfg, shms_class_t c, uint32_t cells, uint32_t queue) {
  cfg->classes[c].configured = 1;
  cfg->classes[c].cells = cells;
  cfg->classes[c].queue = queue;
}

void fuzz_config_example(int which, shms_config *cfg) {
  shms_config_init(cfg);
  cfg->max_tenants = 1;
  cfg->max_processes = 1;
  cfg->events = 16; /* the smallest ring: the images stay small, and it has wrapped */
  switch (which) {
  case 0: /* the smallest: one lease class of one cell */
    class_set(cfg, SHMS_CLASS_STANDARD, 1, 1);
    break;
  case 1: /* a lease class with a tenant limit beside a worker class */
    cfg->max_tenants = 2;
    cfg->max_processes = 2;
    class_set(cfg, SHMS_CLASS_TINY, 2, 2);
    cfg->classes[SHMS_CLASS_TINY].tenant_max_active = 1;
    cfg->classes[SHMS_CLASS_TINY].on_holder_death = SHMS_ON_DEATH_RELEASE;
    class_set(cfg, SHMS_CLASS_SMALL, 1, 2);
    cfg->classes[SHMS_CLASS_SMALL].mode = SHMS_MODE_WORKER;
    cfg->classes[SHMS_CLASS_SMALL].payload = 16;
    break;
  case 2: /* restricted and denied classes; identities (docs/security.md) */
    cfg->starvation_after_ns = 1000 * 1000;
    cfg->admin_group = 0;
    class_set(cfg, SHMS_CLASS_EXTRA_LARGE, 1, 1);
    cfg->classes[SHMS_CLASS_EXTRA_LARGE].allow_count = 4;
    strcpy(cfg->classes[SHMS_CLASS_EXTRA_LARGE].allow[0], "a");
    strcpy(cfg->classes[SHMS_CLASS_EXTRA_LARGE].allow[1], "b");
    strcpy(cfg->classes[SHMS_CLASS_EXTRA_LARGE].allow[2], "@0");
    strcpy(cfg->classes[SHMS_CLASS_EXTRA_LARGE].allow[3], "~0");
    class_set(cfg, SHMS_CLASS_LARGE, 1, 0);
    class_set(cfg, SHMS_CLASS_TINY, 1, 1);
    cfg->classes[SHMS_CLASS_TINY].tenant_bind = SHMS_TENANT_GROUP;
    break;
  default: /* every class */
    for (int c = 0; c < SHMS_CLASS_COUNT; c++)
      class_set(cfg, (shms_class_t)c, 1, 1);
    cfg->classes[SHMS_CLASS_SMALL].tenant_bind = SHMS_TENANT_USER;
    cfg->classes[SHMS_CLASS_EXTRA_LARGE].allow_count = 1;
    strcpy(cfg->classes[SHMS_CLASS_EXTRA_LARGE].allow[0], "t");
    break;
  }
}
