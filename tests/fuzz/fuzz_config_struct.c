/*
 * shms_config_validate on arbitrary bytes as a shms_config (the same check an
 * attach makes of the configuration stored in a segment header): any bytes
 * are judged without a wild read (tenant names in allow lists need not be
 * terminated), a refusal is invalid-argument with a one-line detail, and an
 * accepted configuration has a segment size within SHMS_SEGMENT_MAX.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Exactly one configuration on the heap: a read past its end is caught. */
  shms_config *cfg = malloc(sizeof *cfg);
  if (cfg == NULL)
    return 0;
  memset(cfg, 0, sizeof *cfg);
  memcpy(cfg, data, size < sizeof *cfg ? size : sizeof *cfg);
  int rc = shms_config_validate(cfg);
  if (rc == SHMS_OK) {
    uint64_t bytes = shms_segment_size(cfg);
    if (bytes == 0 || bytes > SHMS_SEGMENT_MAX)
      fuzz_fail("a valid configuration needs %llu bytes", (unsigned long long)bytes);
  } else {
    if (rc != SHMS_EINVAL)
      fuzz_fail("validate returned %d, not invalid-argument", rc);
    const char *d = shms_last_error_detail();
    fuzz_check_error_line("shms_config_validate", d, strlen(d) + 1);
    if (shms_segment_size(cfg) != 0)
      fuzz_fail("an invalid configuration has a size");
  }
  free(cfg);
  return 0;
}
