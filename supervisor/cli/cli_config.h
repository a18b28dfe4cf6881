/*
 * Turning the CLI's options and INI files into a shms_config.
 *
 * The parser owns syntax (numbers, durations, names, the --class grammar, the
 * INI layout) and says which option or key was wrong; the library's
 * shms_config_validate() owns ranges, and its detail is re-attributed to the
 * option or file:line that set the field. docs/config.md is the user's view.
 *
 * Every function returns 0 or SHMS_EINVAL. On failure it writes one line to
 * err (at most n bytes) naming the field and never a newline, e.g.
 *   "--class standard: cells: not a number: 'x'"
 *   "cfg.ini:7: [class small] queue: must be 0..1048576, got 2000000"
 * and leaves cfg partly updated: callers discard cfg after a failure.
 */
#ifndef SHMS_SUPERVISOR_CLI_CONFIG_H
#define SHMS_SUPERVISOR_CLI_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "shmsched.h"

/* A decimal uint32: digits only, no sign, no spaces, no overflow. */
int cli_parse_u32(const char *s, uint32_t *out, char *err, size_t n);

/* A positive duration with a unit: "250ms", "5s", "2m", "1h". */
int cli_parse_duration(const char *s, uint64_t *ns, char *err, size_t n);

/* top's -d, in top(1)'s form as well: seconds with an optional fraction ("0.5", "2", ".25") or a
 * duration with a unit ("500ms", "2s"); at least CLI_DELAY_MIN_NS. No other option takes a bare
 * number as a duration. */
#define CLI_DELAY_MIN_NS (1000ull * 1000)
int cli_parse_delay(const char *s, uint64_t *ns, char *err, size_t n);

/* Permission bits in octal: "0660" or "660". */
int cli_parse_mode(const char *s, uint32_t *mode, char *err, size_t n);

/* A group name (looked up with getgrnam) or a numeric gid. */
int cli_parse_group(const char *s, int64_t *gid, char *err, size_t n);

/*
 * One --class spec, "CLASS:cells=N,queue=N[,key=value]...", into cfg. A class
 * cfg already configures is an error. Errors read "--class CLASS: KEY: ...".
 */
int cli_parse_class_spec(shms_config *cfg, const char *spec, char *err, size_t n);

/*
 * A segment-wide setting by its option/INI name: starvation-after,
 * max-tenants, max-processes, mode or group. Errors read "KEY: ..."; the
 * caller adds "--" or "file:line: [segment] ".
 */
/* Add quota spec, NAME=MAX, to cfg's table: 0, or SHMS_EINVAL with why in err (a bad name or
 * maximum, a name given twice, the table full). */
int cli_add_quota(shms_config *cfg, const char *spec, char *err, size_t n);
int cli_set_segment_option(shms_config *cfg, const char *key, const char *value, char *err,
                           size_t n);

/*
 * Apply the INI file at path to cfg (see docs/config.md). It must define at
 * least one class; its classes must not already be configured in cfg.
 */
int cli_load_config_file(shms_config *cfg, const char *path, char *err, size_t n);

/* The policy of an INI file's [tenant NAME] and [team NAME] sections, applied once the segment
 * is made (shms_policy_tenant, shms_policy_tenant_team, shms_policy_team). */
struct cli_policy {
  char tenant[SHMS_TENANT_MAX + 1]; /* the tenant's name, or the team's (is_team) */
  char team[SHMS_TENANT_MAX + 1];   /* a tenant's team, "" for none given */
  uint32_t weight;                  /* 0: none given */
  int is_team;
  int line; /* its section's header line */
};
struct cli_policies {
  struct cli_policy *v;
  size_t n, cap;
};

/* cli_load_config_file, also collecting the file's [tenant NAME] sections into *pol (free it
 * with cli_policies_free, on failure too). */
int cli_load_config_file_policies(shms_config *cfg, const char *path, struct cli_policies *pol,
                                  char *err, size_t n);
void cli_policies_free(struct cli_policies *pol);

/* The whole-configuration checks left after the per-field ones (segment size, no class). */
int cli_config_check(const shms_config *cfg, char *err, size_t n);

/* s made printable for an error message: non-graphic bytes as \xNN, long values cut. */
const char *cli_quote(char *buf, size_t n, const char *s);

#endif
