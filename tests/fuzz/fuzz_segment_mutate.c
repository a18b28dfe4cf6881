/*
 * Attach and validation on a VALID segment image with a few bytes changed, so
 * every input gets past the magic, the version and the size checks that stop
 * most random bytes: the fuzzer spends its time on what follows them.
 *
 * Input: byte 0 picks one of the FUZZ_CONFIGS configurations (its image is
 * made once with shms_create and read back), and holds two switches; then
 * patches, each [offset: 2 bytes little-endian, taken modulo the image size]
 * [length - 1: low 4 bits of one byte][that many bytes], overwriting the image.
 *
 * The patched image becomes a fresh segment; an observer attaches and reads
 * it as fuzz_segment does. With bit 7, a member (a registered process)
 * attaches too, audits the segment with shms_check and lists each class's
 * tenants, which runs a dispatch pass, takes and releases a lease in each lease
 * class without a tenant limit (the identity checks; the lease's recorded uid)
 * and reads the cells (that uid again), then detaches, which runs its owner
 * cleanup: a corrupt segment may be reported or refused, never read or written
 * out of bounds, and no call may wait for ever (DESIGN.md, "Every index read
 * from shared memory is bounds-checked before use").
 *
 * With bit 6 (live), the segment is made of the unpatched image and the
 * patches land after the observer attached: a writer changing the header
 * under an attached handle, which must go by what it validated.
 *
 * Own patches: a patch header that reads "own" (the bytes 6f 77 6e) ends the
 * image's patches; the patches after it, in the same format, land in the
 * member's OWN process entry once it has attached (with bit 7; without it
 * there is no member and they are ignored): a hostile neighbour writing into
 * a live process's entry. Their offsets are taken modulo fuzz_own_size(), the
 * words of the entry laid end to end: ops[] (offset 0), marks_used (20),
 * own_head (24), own_dirty (28), marks[] (32: mark t at 32 + 4t) and tally[]
 * (96). Then the member's calls run as above, except that the lease is taken
 * with shms_acquire and a deadline 20 ms away, in every lease class (as `run
 * --deadline` takes one), instead of shms_try_acquire. A mark or count left
 * set in a live entry says that its process is inside an operation for good:
 * every call must still return, and shms_check must report at least one
 * violation when a configured class's ops[] count is left set. No committed
 * input read "own" at a patch header when own patches came in: the older
 * inputs mean what they meant.
 *
 * Every input must end within FUZZ_INPUT_SECONDS (fuzz.h): a call that waits
 * for ever is a broken contract, reported with the step it was in.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz.h"

static uint8_t *images[FUZZ_CONFIGS];
static size_t sizes[FUZZ_CONFIGS];

static const uint8_t *image(int which, size_t *size) {
  if (images[which] == NULL) {
    shms_config cfg;
    fuzz_config_example(which, &cfg);
    if ((images[which] = fuzz_segment_image(&cfg, &sizes[which])) == NULL)
      fuzz_fail("cannot make the image of configuration %d: %s", which, shms_last_error_detail());
  }
  *size = sizes[which];
  return images[which];
}

/* The patches in p (size bytes) applied to an area of n bytes through put(to, ...). */
typedef void put_fn(void *to, size_t off, const uint8_t *bytes, size_t len);
static void patch(const uint8_t *p, size_t size, size_t n, put_fn *put, void *to) {
  for (size_t i = 0; i + 3 <= size;) {
    size_t off = (p[i] | (size_t)p[i + 1] << 8) % n;
    size_t len = (size_t)(p[i + 2] & 15) + 1;
    i += 3;
    if (len > size - i)
      len = size - i;
    if (len > n - off)
      len = n - off;
    put(to, off, p + i, len);
    i += len;
  }
}

static void put_image(void *to, size_t off, const uint8_t *bytes, size_t len) {
  memcpy((uint8_t *)to + off, bytes, len);
}

static void put_own(void *to, size_t off, const uint8_t *bytes, size_t len) {
  fuzz_own_patch(to, off, bytes, len);
}

/* Where the image's patches end: at the first patch header that reads "own", or at the end. */
static size_t own_tag(const uint8_t *data, size_t size) {
  for (size_t i = 1; i + 3 <= size; i += 3 + (size_t)(data[i + 2] & 15) + 1)
    if (memcmp(data + i, "own", 3) == 0)
      return i;
  return size;
}

/* A lease taken and released in class c as the member: without own patches shms_try_acquire,
 * not in a class with a tenant limit (whose try_acquire queues and waits); with them
 * shms_acquire and a deadline, in every lease class. */
static void take(shms_t *h, const shms_config *cfg, int c, int own) {
  if (!cfg->classes[c].configured || cfg->classes[c].mode != SHMS_MODE_LEASE)
    return;
  shms_lease l;
  shms_request req = {.cls = (shms_class_t)c, .tenant = "root"};
  int rc;
  if (own) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    req.deadline_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec + 20000000u;
    fuzz_watchdog_step("shms_acquire (20 ms deadline)");
    rc = shms_acquire(h, &req, &l);
  } else {
    if (cfg->classes[c].tenant_max_active != 0)
      return;
    fuzz_watchdog_step("shms_try_acquire");
    rc = shms_try_acquire(h, &req, &l);
  }
  if (rc == SHMS_OK) {
    fuzz_watchdog_step("shms_release");
    shms_release(h, &l);
  }
}

/* A member's view: audit, tenants, a lease, the cells, and the cleanup at detach; own (own_size
 * bytes, or NULL) patched into its process entry first. */
static void as_member(const char *name, const uint8_t *own, size_t own_size) {
  shms_t *h = NULL;
  fuzz_watchdog_step("the member's shms_attach");
  if (shms_attach(name, 0, &h) != SHMS_OK)
    return; /* e.g. a process table that looks full: a refusal is fine */
  shms_config cfg;
  shms_get_config(h, &cfg);
  /* A count of operations under way left set in a live entry (ours, alive while we are) keeps
   * any freeze of its class from finishing: check must say so, not pass the class over. Only
   * the count: this thread marks its operations in a word of marks[], which they may clear, or
   * counts each in and out again. */
  int held = -1;
  if (own != NULL) {
    patch(own, own_size, fuzz_own_size(), put_own, h);
    for (int c = 0; c < SHMS_CLASS_COUNT && held < 0; c++)
      if (cfg.classes[c].configured && fuzz_own_ops(h, c) != 0)
        held = c;
  }
  static char report[8192];
  uint32_t violations = 0;
  fuzz_watchdog_step("shms_check");
  int rc = shms_check(h, report, sizeof report, &violations);
  if (rc != SHMS_OK)
    fuzz_fail("check failed: %s (%s)", shms_err_name(rc), shms_last_error_detail());
  if (strnlen(report, sizeof report) == sizeof report)
    fuzz_fail("check's report is not NUL-terminated");
  if (held >= 0 && violations == 0)
    fuzz_fail("check found nothing, with class %s's count of operations under way in a live "
              "entry left at %u",
              shms_class_name((shms_class_t)held), fuzz_own_ops(h, held));
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    shms_tenant_stats t[4];
    uint32_t count = 0;
    fuzz_watchdog_step("shms_tenants");
    shms_tenants(h, (shms_class_t)c, t, 4, &count);
    /* The identity checks, the fast path that records the lease's uid, and the cells' view of
     * it. */
    take(h, &cfg, c, own != NULL);
    shms_cell_info cells[2];
    fuzz_watchdog_step("shms_cells");
    shms_cells(h, (shms_class_t)c, cells, 2, &count);
  }
  fuzz_watchdog_step("the member's shms_detach");
  if ((rc = shms_detach(h)) != SHMS_OK)
    fuzz_fail("detach failed: %s", shms_err_name(rc));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  fuzz_watchdog_arm();
  size_t n;
  const uint8_t *img = image(data[0] % FUZZ_CONFIGS, &n);
  int member = (data[0] & 0x80) != 0, live = (data[0] & 0x40) != 0;
  uint8_t *seg = malloc(n);
  if (seg == NULL) {
    fuzz_watchdog_disarm();
    return 0;
  }
  memcpy(seg, img, n);
  size_t end = own_tag(data, size);
  patch(data + 1, end - 1, n, put_image, seg);
  const uint8_t *own = end < size ? data + end + 3 : NULL;
  size_t own_size = end < size ? size - end - 3 : 0;
  char name[64];
  if (fuzz_segment_write(live ? img : seg, n, name) == 0) {
    fuzz_watchdog_step("the observer");
    if (fuzz_segment_observe(name, live ? seg : NULL, n) == SHMS_OK && member)
      as_member(name, own, own_size);
    fuzz_segment_remove(name);
  }
  free(seg);
  fuzz_watchdog_disarm();
  return 0;
}
