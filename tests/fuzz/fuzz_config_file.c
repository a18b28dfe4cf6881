/*
 * The --config INI file (supervisor/cli/cli_config.h: cli_load_config_file) and
 * shms_config_validate. There is no in-memory variant of the loader, so the
 * input is written to a memfd and loaded through /proc/self/fd/N.
 *
 * Contracts checked besides memory safety: the result is 0 or
 * invalid-argument; a failure writes one non-empty line ("FILE:LINE: ...")
 * within the size given; a file that loads configures at least one class; and
 * cli_config_check agrees with shms_config_validate on what was loaded.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli/cli_config.h"
#include "fuzz.h"

#define ERR_N 400
static char err[ERR_N + 32];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    if ((fd = memfd_create("shms-fuzz-ini", MFD_CLOEXEC)) < 0)
      fuzz_fail("memfd_create failed");
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
    fuzz_fail("cannot write the input to the memfd");
  shms_config cfg;
  shms_config_init(&cfg);
  memset(err, 0x5a, sizeof err);
  int rc = cli_load_config_file(&cfg, path, err, ERR_N);
  for (size_t i = ERR_N; i < sizeof err; i++)
    if (err[i] != 0x5a)
      fuzz_fail("cli_load_config_file wrote past the %d bytes it was given", ERR_N);
  if (rc != 0 && rc != SHMS_EINVAL)
    fuzz_fail("cli_load_config_file returned %d", rc);
  if (rc != 0) {
    fuzz_check_error_line("cli_load_config_file", err, ERR_N);
    return 0;
  }
  int classes = 0;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    classes += cfg.classes[c].configured != 0;
  if (classes == 0)
    fuzz_fail("a file without a class section loaded");
  int valid = shms_config_validate(&cfg) == SHMS_OK;
  memset(err, 0x5a, sizeof err);
  rc = cli_config_check(&cfg, err, ERR_N);
  if (valid != (rc == 0))
    fuzz_fail("cli_config_check and shms_config_validate disagree");
  if (rc != 0)
    fuzz_check_error_line("cli_config_check", err, ERR_N);
  return 0;
}
