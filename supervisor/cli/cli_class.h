/*
 * Building one class's configuration key by key, shared by the --class
 * grammar and the INI [class NAME] sections so both accept exactly the same
 * keys and values. Internal to the CLI.
 */
#ifndef SHMS_SUPERVISOR_CLI_CLASS_H
#define SHMS_SUPERVISOR_CLI_CLASS_H

#include <stddef.h>

#include "shmsched.h"

enum cli_class_key {
  CLI_KEY_CELLS,
  CLI_KEY_QUEUE,
  CLI_KEY_MODE,
  CLI_KEY_PAYLOAD,
  CLI_KEY_TENANT_MAX_ACTIVE,
  CLI_KEY_ALLOW,
  CLI_KEY_ON_HOLDER_DEATH,
  CLI_KEY_GRANT_TIMEOUT,
  CLI_KEY_ON_COMMAND_CRASH,
  CLI_KEY_TENANT,
  CLI_KEY_OVERTAKE,
  CLI_KEY_FAIRNESS,
  CLI_KEY_COUNT
};

struct cli_class_build {
  int cls;                 /* shms_class_t */
  shms_class_config k;     /* what the keys set so far */
  unsigned seen;           /* bit per cli_class_key */
  int line[CLI_KEY_COUNT]; /* INI line that set each key; 0 when none */
};

/* Start building class cls with nothing set. */
void cli_class_begin(struct cli_class_build *b, int cls);

/*
 * Apply key=value. Returns the key's cli_class_key, or SHMS_EINVAL with err
 * "KEY: reason". A key given twice is an error, except that allow_append
 * lets `allow` repeat and accumulate (INI lines are short).
 */
int cli_class_set(struct cli_class_build *b, const char *key, const char *value, int allow_append,
                  char *err, size_t n);

/*
 * Check the finished class (required keys, defaults, the library's range
 * checks) and store it into cfg. On failure err is "KEY: reason" and *key is
 * the offending cli_class_key, or -1 when no single key is to blame.
 */
int cli_class_finish(struct cli_class_build *b, shms_config *cfg, char *err, size_t n, int *key);

/* The key's name as written by the user ("tenant-max-active"). */
const char *cli_class_key_name(int key);

/* Validate cfg alone and keep only a detail starting with prefix (a field's own range error). */
int cli_validate_field(const shms_config *cfg, const char *prefix, char *err, size_t n);

#endif
