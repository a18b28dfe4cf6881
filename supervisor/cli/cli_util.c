/* The CLI's error line and option helpers (cli.h). */
#include <getopt.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_config.h"
#include "shmsched.h"

static void vreport(const char *reason, const char *fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  /* Scripts read the error as one line: keep it one line whatever the detail holds. */
  for (char *p = msg; *p != '\0'; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  fprintf(stderr, "shmsched: %s: %s\n", reason, msg);
}

int cli_fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(shms_err_name(code), fmt, ap);
  va_end(ap);
  return CLI_EXIT_FAIL;
}

int cli_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(shms_err_name(SHMS_EINVAL), fmt, ap);
  va_end(ap);
  return CLI_EXIT_USAGE;
}

int cli_fail_lib(int rc) {
  const char *detail = shms_last_error_detail();
  cli_fail(rc, "%s", detail[0] != '\0' ? detail : shms_strerror(rc));
  return rc == SHMS_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
}

int cli_bad_option(const char *cmd, int c, char *const argv[]) {
  char opt[64], q[96];
  const char *arg = optind > 0 ? argv[optind - 1] : "";
  const char *why = c == ':' ? "missing argument for option" : "unknown option";
  if (strncmp(arg, "--", 2) == 0) {
    size_t len = strcspn(arg, "=");
    /* getopt names the option in optopt when it exists but "--opt=value" gave a value. */
    if (c == '?' && optopt != 0 && arg[len] == '=')
      why = "no argument allowed for option";
    snprintf(opt, sizeof opt, "%.*s", (int)len, arg);
  } else {
    snprintf(opt, sizeof opt, "-%c", optopt);
  }
  return cli_usage("%s: %s '%s' (see 'shmsched %s --help')", cmd, why, cli_quote(q, sizeof q, opt),
                   cmd);
}

/* cli_take_name, with hint (a sentence and "; ", or "") in the unexpected-argument message. */
static int take_name(const char *cmd, int argc, char *const argv[], const char *hint,
                     const char **name) {
  char q[96];
  if (optind >= argc)
    return cli_usage("%s: missing NAME (see 'shmsched %s --help')", cmd, cmd);
  if (optind + 1 < argc)
    return cli_usage("%s: unexpected argument '%s' (%ssee 'shmsched %s --help')", cmd,
                     cli_quote(q, sizeof q, argv[optind + 1]), hint, cmd);
  if (shms_name_check(argv[optind]) != SHMS_OK)
    return cli_usage("%s: %s", cmd, shms_last_error_detail());
  *name = argv[optind];
  return 0;
}

int cli_take_name(const char *cmd, int argc, char *const argv[], const char **name) {
  return take_name(cmd, argc, argv, "", name);
}

int cli_dashes(int argc, char *const argv[]) {
  int dashes = 1;
  while (dashes < argc && strcmp(argv[dashes], "--") != 0)
    dashes++;
  return dashes;
}

int cli_take_name_before_cmd(const char *cmd, int dashes, char *const argv[], const char **name) {
  return take_name(cmd, dashes, argv, "CMD must follow '--'; ", name);
}

int cli_take_cmd(const char *cmd, int argc, char **argv, int dashes, char ***cmdv) {
  if (dashes + 1 >= argc)
    return cli_usage("%s: missing '-- CMD [ARGS...]' (see 'shmsched %s --help')", cmd, cmd);
  *cmdv = argv + dashes + 1;
  return 0;
}

int cli_help(const char *text) {
  fputs(text, stdout);
  return CLI_EXIT_OK;
}

/*
 * Names looked up lately: top and metrics name the same few uids on every refresh or scrape, and
 * a lookup may ask NSS over the network. An answer (a name, or none) is kept for NAME_TTL_NS,
 * so a renamed or new user shows within that. Locked: metrics may be served from a thread.
 */
#define NAME_CACHE  32
#define NAME_TTL_NS (60ull * 1000 * 1000 * 1000)
static struct {
  uint32_t uid;
  uint64_t at_ns; /* 0: empty */
  char name[64];  /* "" when the uid has none (or none that fits) */
} names[NAME_CACHE];
static unsigned names_next;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t cli_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + 1; /* never 0 */
}

/* A login name as shown: graphic ASCII only (a name from NSS is another system's data). */
static int printable(const char *s) {
  for (; *s != '\0'; s++)
    if (*s <= ' ' || *s > '~' || *s == '"' || *s == '\\')
      return 0;
  return 1;
}

const char *cli_user_name(uint32_t uid, char *buf, size_t n) {
  uint64_t now = cli_mono_ns();
  char name[sizeof names[0].name] = "";
  int hit = 0;
  pthread_mutex_lock(&names_lock);
  for (unsigned i = 0; i < NAME_CACHE && !hit; i++)
    if (names[i].at_ns != 0 && names[i].uid == uid && now - names[i].at_ns < NAME_TTL_NS) {
      memcpy(name, names[i].name, sizeof name);
      hit = 1;
    }
  pthread_mutex_unlock(&names_lock);
  if (!hit) {
    struct passwd p, *found = NULL;
    char rec[4096];
    if (getpwuid_r((uid_t)uid, &p, rec, sizeof rec, &found) == 0 && found != NULL &&
        strlen(found->pw_name) < sizeof name && found->pw_name[0] != '\0' &&
        printable(found->pw_name))
      snprintf(name, sizeof name, "%s", found->pw_name);
    pthread_mutex_lock(&names_lock);
    unsigned i = names_next++ % NAME_CACHE;
    names[i].uid = uid;
    names[i].at_ns = now;
    memcpy(names[i].name, name, sizeof name);
    pthread_mutex_unlock(&names_lock);
  }
  if (name[0] != '\0')
    snprintf(buf, n, "%s", name);
  else
    snprintf(buf, n, "%u", uid);
  return buf;
}

int cli_tenants(shms_t *h, int c, shms_tenant_stats **rows, uint32_t *n) {
  /* The count can grow between two calls: ask again with room for what the last one said. */
  uint32_t cap = 64, count = 0;
  for (;;) {
    shms_tenant_stats *t = calloc(cap, sizeof *t);
    if (t == NULL)
      return SHMS_ENOMEM;
    int rc = shms_tenants_snapshot(h, (shms_class_t)c, t, cap, &count);
    if (rc == SHMS_OK && count <= cap) {
      *rows = t;
      *n = count;
      return SHMS_OK;
    }
    free(t);
    if (rc != SHMS_OK)
      return rc;
    cap = count + 16;
  }
}
