/*
 * Attach and validation on arbitrary bytes: the input is the whole contents of
 * a fresh /dev/shm segment. Attach as an observer must refuse it with an error
 * code (incompatible-segment, with a detail) or accept it; an accepted segment
 * must then be readable by everything an observer does (its configuration,
 * segment info, every class's figures) without a wild access or a hang, and
 * what those say must agree (fuzz_common.c). The corpus starts from valid
 * images of small configurations (make_seeds.c), so the fuzzer begins past the
 * magic; fuzz_segment_mutate mutates valid images structurally.
 */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char name[64];
  if (fuzz_segment_write(data, size, name) != 0)
    return 0; /* no room in /dev/shm: nothing was tested */
  fuzz_segment_observe(name, NULL, 0);
  fuzz_segment_remove(name);
  return 0;
}
