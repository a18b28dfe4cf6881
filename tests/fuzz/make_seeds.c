/*
 * Write seed inputs for the segment and configuration fuzz targets into DIR:
 *   make_seeds segment DIR          valid images of the FUZZ_CONFIGS configurations
 *   make_seeds segment_mutate DIR   one unpatched input per configuration: observer, member,
 *                                   and member with an empty "own" section (own patches)
 *   make_seeds config_struct DIR    the configurations as raw shms_config bytes
 * scripts/fuzz.sh adds them to the fuzzing corpus so that it always starts
 * from images of the current layout; a few are committed in corpus/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static void put(const char *dir, const char *name, const void *bytes, size_t size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(bytes, 1, size, f) != size || fclose(f) != 0) {
    fprintf(stderr, "make_seeds: cannot write %s\n", path);
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s segment|segment_mutate|config_struct DIR\n", argv[0]);
    return 2;
  }
  const char *kind = argv[1], *dir = argv[2];
  for (int i = 0; i < FUZZ_CONFIGS; i++) {
    shms_config cfg;
    char name[64];
    fuzz_config_example(i, &cfg);
    if (strcmp(kind, "segment") == 0) {
      size_t size = 0;
      uint8_t *img = fuzz_segment_image(&cfg, &size);
      if (img == NULL) {
        fprintf(stderr, "make_seeds: configuration %d: %s\n", i, shms_last_error_detail());
        return 1;
      }
      snprintf(name, sizeof name, "valid-%d", i);
      put(dir, name, img, size);
      free(img);
    } else if (strcmp(kind, "segment_mutate") == 0) {
      uint8_t pick[2] = {(uint8_t)i, (uint8_t)(0x80 | i)};
      snprintf(name, sizeof name, "plain-%d", i);
      put(dir, name, &pick[0], 1);
      snprintf(name, sizeof name, "member-%d", i);
      put(dir, name, &pick[1], 1);
      uint8_t own[4] = {(uint8_t)(0x80 | i), 'o', 'w', 'n'};
      snprintf(name, sizeof name, "own-%d", i);
      put(dir, name, own, sizeof own);
    } else if (strcmp(kind, "config_struct") == 0) {
      snprintf(name, sizeof name, "valid-%d", i);
      put(dir, name, &cfg, sizeof cfg);
    } else {
      fprintf(stderr, "make_seeds: unknown kind '%s'\n", kind);
      return 2;
    }
  }
  return 0;
}
