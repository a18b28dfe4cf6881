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
 */
#include <stdlib.h>
#include <string.h>

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

/* A member's view: audit, tenants, a lease, the cells, and the cleanup at detach. */
static void as_member(const char *name) {
  shms_t *h = NULL;
  if (shms_attach(name, 0, &h) != SHMS_OK)
    return; /* e.g. a process table that looks full: a refusal is fine */
  static char report[8192];
  uint32_t violations = 0;
  int rc = shms_check(h, report, sizeof report, &violations);
  if (rc != SHMS_OK)
    fuzz_fail("check failed: %s (%s)", shms_err_name(rc), shms_last_error_detail());
  if (strnlen(report, sizeof report) == sizeof report)
    fuzz_fail("check's report is not NUL-terminated");
  shms_config cfg;
  shms_get_config(h, &cfg);
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    shms_tenant_stats t[4];
    uint32_t count = 0;
    shms_tenants(h, (shms_class_t)c, t, 4, &count);
    /* The identity checks, the fast path that records the lease's uid, and the cells' view of
     * it; not in a class with a tenant limit, whose try_acquire queues and waits. */
    shms_lease l;
    shms_request req = {.cls = (shms_class_t)c, .tenant = "root"};
    if (cfg.classes[c].configured && cfg.classes[c].mode == SHMS_MODE_LEASE &&
        cfg.classes[c].tenant_max_active == 0 && shms_try_acquire(h, &req, &l) == SHMS_OK)
      shms_release(h, &l);
    shms_cell_info cells[2];
    shms_cells(h, (shms_class_t)c, cells, 2, &count);
  }
  if ((rc = shms_detach(h)) != SHMS_OK)
    fuzz_fail("detach failed: %s", shms_err_name(rc));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  size_t n;
  const uint8_t *img = image(data[0] % FUZZ_CONFIGS, &n);
  int member = (data[0] & 0x80) != 0, live = (data[0] & 0x40) != 0;
  uint8_t *seg = malloc(n);
  if (seg == NULL)
    return 0;
  memcpy(seg, img, n);
  for (size_t i = 1; i + 3 <= size;) {
    size_t off = (data[i] | (size_t)data[i + 1] << 8) % n;
    size_t len = (size_t)(data[i + 2] & 15) + 1;
    i += 3;
    if (len > size - i)
      len = size - i;
    if (len > n - off)
      len = n - off;
    memcpy(seg + off, data + i, len);
    i += len;
  }
  char name[64];
  if (fuzz_segment_write(live ? img : seg, n, name) == 0) {
    if (fuzz_segment_observe(name, live ? seg : NULL, n) == SHMS_OK && member)
      as_member(name);
    fuzz_segment_remove(name);
  }
  free(seg);
  return 0;
}
