/* Helpers of the scheduling subcommands (cli_sched.h). */
#include "cli_sched.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_config.h"

int cli_sched_outcome(int rc) {
  switch (rc) {
  case SHMS_EQUEUEFULL:
  case SHMS_EDENIED:
  case SHMS_EDUPACT:
  case SHMS_ECANCELLED:
  case SHMS_EDEADLINE:
  case SHMS_EQUARANTINED:
  case SHMS_ESHUTDOWN:
  case SHMS_ESEQEXHAUSTED:
  case SHMS_EOWNERLOST:
  case SHMS_EWORKERLOST:
  case SHMS_ESUPERSEDED:
    return 1;
  default:
    return 0;
  }
}

int cli_sched_fail(int rc) {
  const char *detail = shms_last_error_detail();
  cli_fail(rc, "%s", detail[0] != '\0' ? detail : shms_strerror(rc));
  if (cli_sched_outcome(rc))
    return CLI_EXIT_SCHED;
  return rc == SHMS_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
}

int cli_parse_class(const char *cmd, const char *s, shms_class_t *out) {
  char q[96];
  int c = shms_class_from_name(s);
  if (c < 0)
    return cli_usage("%s: --class '%s': unknown class (expected tiny, small, standard, large or "
                     "extra-large)",
                     cmd, cli_quote(q, sizeof q, s));
  *out = (shms_class_t)c;
  return 0;
}

int cli_request_target(const char *cmd, const char *cls, shms_request *req) {
  if (cls == NULL || req->tenant == NULL)
    return cli_usage("%s: missing --%s (see 'shmsched %s --help')", cmd,
                     cls == NULL ? "class" : "tenant", cmd);
  return cli_parse_class(cmd, cls, &req->cls);
}

int cli_parse_i32(const char *s, int32_t *out) {
  size_t start = s[0] == '-' || s[0] == '+';
  if (s[start] == '\0' || strspn(s + start, "0123456789") != strlen(s + start))
    return -1;
  errno = 0;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < INT32_MIN || v > INT32_MAX)
    return -1;
  *out = (int32_t)v;
  return 0;
}

int cli_take_name_ticket(const char *cmd, int argc, char *const argv[], const char **name,
                         shms_ticket *ticket, const char **text) {
  char q[96];
  if (optind >= argc)
    return cli_usage("%s: missing NAME (see 'shmsched %s --help')", cmd, cmd);
  if (optind + 1 >= argc)
    return cli_usage("%s: missing TICKET (see 'shmsched %s --help')", cmd, cmd);
  if (optind + 2 < argc)
    return cli_usage("%s: unexpected argument '%s' (see 'shmsched %s --help')", cmd,
                     cli_quote(q, sizeof q, argv[optind + 2]), cmd);
  if (shms_name_check(argv[optind]) != SHMS_OK)
    return cli_usage("%s: %s", cmd, shms_last_error_detail());
  if (shms_ticket_parse(argv[optind + 1], ticket) != SHMS_OK)
    return cli_usage("%s: %s", cmd, shms_last_error_detail());
  *name = argv[optind];
  *text = argv[optind + 1];
  return 0;
}

const char *cli_signal_name(int sig, char *buf, size_t n) {
  const char *abbrev = sigabbrev_np(sig);
  if (abbrev != NULL)
    snprintf(buf, n, "SIG%s", abbrev);
  else
    snprintf(buf, n, "signal %d", sig);
  return buf;
}

int cli_attach(const char *name, unsigned flags, shms_t **out) {
  int rc = shms_attach(name, flags, out);
  return rc == SHMS_OK ? 0 : cli_sched_fail(rc);
}

int cli_attach_to_queue(const char *cmd, const char *name, shms_t **out) {
  int rc = shms_attach(name, 0, out);
  if (rc != SHMS_EBUSY)
    return rc == SHMS_OK ? 0 : cli_sched_fail(rc);
  /* The only busy an attach knows: every process-table entry is held by a live process. */
  cli_fail(rc,
           "%s: %s (segment '%s'; try again once a process detaches, or create the segment "
           "with a larger --max-processes)",
           cmd, shms_last_error_detail(), name);
  return CLI_EXIT_SCHED;
}

int cli_request_option(const char *cmd, int c, const char **cls, shms_request *req,
                       uint64_t *deadline_in_ns) {
  char err[256], q[96];
  switch (c) {
  case 'c':
    *cls = optarg;
    return -1;
  case 't':
    req->tenant = optarg;
    return -1;
  case 'p':
    if (cli_parse_i32(optarg, &req->priority) != 0)
      return cli_usage("%s: --priority: not an integer in -2147483648..2147483647: '%s'", cmd,
                       cli_quote(q, sizeof q, optarg));
    return -1;
  case 'd':
    if (cli_parse_duration(optarg, deadline_in_ns, err, sizeof err) != 0)
      return cli_usage("%s: --deadline: %s", cmd, err);
    return -1;
  case 'a':
    req->activation = optarg;
    return -1;
  case CLI_OPT_QUOTA: {
    /* The names stay optarg's (argv's): one request per command, so one list. */
    static const char *names[SHMS_REQUEST_QUOTAS_MAX];
    if (req->nquotas >= SHMS_REQUEST_QUOTAS_MAX)
      return cli_usage("%s: --quota %s: a request names at most %d quotas", cmd,
                       cli_quote(q, sizeof q, optarg), SHMS_REQUEST_QUOTAS_MAX);
    names[req->nquotas++] = optarg;
    req->quotas = names;
    return -1;
  }
  default:
    return 0;
  }
}
