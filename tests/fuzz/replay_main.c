/*
 * Replay a fuzz target's corpus without libFuzzer: run LLVMFuzzerTestOneInput
 * once on every file named, and on every regular file of every directory
 * named (in name order). This is how the ordinary test run checks the corpora
 * (tests/fuzz/CMakeLists.txt); a broken contract aborts, a wild access is
 * caught in the sanitizer build. Prints how many inputs ran; exits 1 if none.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static unsigned long ran;

static void replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    exit(1);
  }
  size_t cap = 4096, len = 0, n;
  uint8_t *buf = malloc(cap);
  while (buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0)
    if ((len += n) == cap)
      buf = realloc(buf, cap *= 2);
  fclose(f);
  if (buf == NULL) {
    fprintf(stderr, "replay: out of memory reading %s\n", path);
    exit(1);
  }
  /* Exactly len bytes on the heap, as libFuzzer passes them: a read past the end is caught. */
  uint8_t *input = malloc(len ? len : 1);
  memcpy(input, buf, len);
  free(buf);
  fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
  LLVMFuzzerTestOneInput(input, len);
  free(input);
  ran++;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static void replay_dir(const char *dir) {
  struct dirent **list;
  int n = scandir(dir, &list, NULL, by_name);
  if (n < 0) {
    fprintf(stderr, "replay: cannot read %s\n", dir);
    exit(1);
  }
  for (int i = 0; i < n; i++) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
    if (list[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode))
      replay_file(path);
    free(list[i]);
  }
  free(list);
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize != NULL)
    LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
      return 1;
    }
    if (S_ISDIR(st.st_mode))
      replay_dir(argv[i]);
    else
      replay_file(argv[i]);
  }
  printf("replay: %lu inputs, no failure\n", ran);
  return ran > 0 ? 0 : 1;
}
