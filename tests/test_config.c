/*
 * The CLI's configuration parsing (supervisor/cli/cli_config.h) without running
 * the binary: every field's bad values give an error naming the field, and
 * good --class specs and INI files land in the expected shms_config.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_config.h"
#include "harness.h"

static char err[512];
static shms_config cfg;

/* Assert expr fails and err contains needle. */
#define ck_assert_fails(expr, needle)                                                              \
  do {                                                                                             \
    err[0] = '\0';                                                                                 \
    int rc_ = (expr);                                                                              \
    ck_assert_msg(rc_ == SHMS_EINVAL, "%s succeeded, expected an error with '%s'", #expr,          \
                  (needle));                                                                       \
    ck_assert_msg(strstr(err, (needle)) != NULL, "%s: error '%s' lacks '%s'", #expr, err,          \
                  (needle));                                                                       \
    ck_assert_msg(strchr(err, '\n') == NULL, "%s: error '%s' is not one line", #expr, err);        \
  } while (0)

#define ck_assert_parses(expr)                                                                     \
  do {                                                                                             \
    err[0] = '\0';                                                                                 \
    int rc_ = (expr);                                                                              \
    ck_assert_msg(rc_ == 0, "%s failed: %s", #expr, err);                                          \
  } while (0)

/* ---- scalar values ------------------------------------------------------- */

START_TEST(durations_good) {
  static const struct {
    const char *s;
    uint64_t ns;
  } cases[] = {
      {"1ms", 1000000ull},        {"250ms", 250000000ull},  {"5s", 5000000000ull},
      {"2m", 120000000000ull},    {"1h", 3600000000000ull}, {"007s", 7000000000ull},
      {"24h", 86400000000000ull},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t ns = 0;
    ck_assert_parses(cli_parse_duration(cases[i].s, &ns, err, sizeof err));
    ck_assert_uint_eq(ns, cases[i].ns);
  }
}
END_TEST

START_TEST(durations_bad) {
  static const struct {
    const char *s, *needle;
  } cases[] = {
      {"", "empty"},
      {"5", "needs a unit"},
      {"0s", "must be positive"},
      {"0ms", "must be positive"},
      {"-5s", "must be positive"},
      {"5x", "unknown unit"},
      {"5sec", "unknown unit"},
      {"5 s", "unknown unit"},
      {"1.5s", "unknown unit"},
      {"s", "not a duration"},
      {"abc", "not a duration"},
      {" 5s", "not a duration"},
      {"99999999999999999999s", "out of range"},
      {"18446744073709551615h", "out of range"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t ns = 0;
    ck_assert_fails(cli_parse_duration(cases[i].s, &ns, err, sizeof err), cases[i].needle);
  }
}
END_TEST

/* top's -d: top(1)'s seconds with a fraction beside the unit forms; nothing else changes. */
START_TEST(delays_good) {
  static const struct {
    const char *s;
    uint64_t ns;
  } cases[] = {
      {"0.5", 500000000ull},   {"2", 2000000000ull},  {".25", 250000000ull},
      {"1.", 1000000000ull},   {"0.001", 1000000ull}, {"1.0000000019", 1000000001ull},
      {"500ms", 500000000ull}, {"2s", 2000000000ull}, {"1m", 60000000000ull},
      {"1ms", 1000000ull},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t ns = 0;
    ck_assert_parses(cli_parse_delay(cases[i].s, &ns, err, sizeof err));
    ck_assert_msg(ns == cases[i].ns, "%s: %llu ns", cases[i].s, (unsigned long long)ns);
  }
}
END_TEST

START_TEST(delays_bad) {
  static const struct {
    const char *s, *needle;
  } cases[] = {
      {"", "empty"},
      {"0", "must be positive: '0'"},
      {"0.0", "must be positive"},
      {"0s", "must be positive"},
      {"-1", "must be positive: '-1'"},
      {"-0.5", "must be positive"},
      {"abc", "not a delay: 'abc'"},
      {".", "not a delay: '.'"},
      {"0.0001", "below the shortest delay, 1ms"},
      {"1.5s", "take no unit"},
      {"1.2.3", "not a delay"},
      {"1.2.3s", "take no unit"},
      {"5x", "unknown unit"},
      {" 1", "not a delay"},
      {"99999999999999999999", "out of range"},
      {"18446744073709551615.5", "out of range"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t ns = 0;
    ck_assert_fails(cli_parse_delay(cases[i].s, &ns, err, sizeof err), cases[i].needle);
  }
}
END_TEST

START_TEST(numbers) {
  uint32_t v = 0;
  ck_assert_parses(cli_parse_u32("4294967295", &v, err, sizeof err));
  ck_assert_uint_eq(v, UINT32_MAX);
  ck_assert_parses(cli_parse_u32("0", &v, err, sizeof err));
  ck_assert_uint_eq(v, 0);
  ck_assert_fails(cli_parse_u32("", &v, err, sizeof err), "empty");
  ck_assert_fails(cli_parse_u32("-1", &v, err, sizeof err), "negative");
  ck_assert_fails(cli_parse_u32("+1", &v, err, sizeof err), "not a number: '+1'");
  ck_assert_fails(cli_parse_u32(" 1", &v, err, sizeof err), "not a number");
  ck_assert_fails(cli_parse_u32("12a", &v, err, sizeof err), "not a number: '12a'");
  ck_assert_fails(cli_parse_u32("0x10", &v, err, sizeof err), "not a number");
  ck_assert_fails(cli_parse_u32("4294967296", &v, err, sizeof err), "out of range");
  ck_assert_fails(cli_parse_u32("99999999999999999999999", &v, err, sizeof err), "out of range");
  /* Garbage is quoted printably, never echoed raw. */
  ck_assert_fails(cli_parse_u32("1\x01\n", &v, err, sizeof err), "'1\\x01\\x0a'");
}
END_TEST

START_TEST(modes_and_groups) {
  uint32_t mode = 0;
  int64_t gid = -1;
  ck_assert_parses(cli_parse_mode("0660", &mode, err, sizeof err));
  ck_assert_uint_eq(mode, 0660);
  ck_assert_parses(cli_parse_mode("640", &mode, err, sizeof err));
  ck_assert_uint_eq(mode, 0640);
  ck_assert_fails(cli_parse_mode("", &mode, err, sizeof err), "empty");
  ck_assert_fails(cli_parse_mode("0968", &mode, err, sizeof err), "not an octal mode");
  ck_assert_fails(cli_parse_mode("-600", &mode, err, sizeof err), "not an octal mode");
  ck_assert_fails(cli_parse_mode("777777777777777", &mode, err, sizeof err), "out of range");
  ck_assert_parses(cli_parse_group("0", &gid, err, sizeof err));
  ck_assert_int_eq(gid, 0);
  ck_assert_parses(cli_parse_group("root", &gid, err, sizeof err));
  ck_assert_int_eq(gid, 0);
  ck_assert_parses(cli_parse_group("1234", &gid, err, sizeof err));
  ck_assert_int_eq(gid, 1234);
  ck_assert_fails(cli_parse_group("no-such-group-shmst", &gid, err, sizeof err),
                  "no group named 'no-such-group-shmst'");
  ck_assert_fails(cli_parse_group("", &gid, err, sizeof err), "empty");
  ck_assert_fails(cli_parse_group("99999999999", &gid, err, sizeof err), "out of range");
}
END_TEST

/* ---- --class specs ------------------------------------------------------- */

START_TEST(class_spec_good) {
  shms_config_init(&cfg);
  ck_assert_parses(cli_parse_class_spec(&cfg,
                                        "small:cells=8,queue=64,tenant-max-active=2,"
                                        "on-holder-death=release,allow=ci+release,"
                                        "on-command-crash=quarantine,tenant=group",
                                        err, sizeof err));
  ck_assert_parses(
      cli_parse_class_spec(&cfg, "large:queue=0,cells=2,mode=worker", err, sizeof err));
  ck_assert_parses(cli_parse_class_spec(
      &cfg, "extra-large:cells=1,queue=4,mode=worker,payload=65536,allow=gpu", err, sizeof err));
  ck_assert_parses(
      cli_parse_class_spec(&cfg, "tiny:cells=4096,queue=1048576,mode=lease", err, sizeof err));
  const shms_class_config *s = &cfg.classes[SHMS_CLASS_SMALL];
  ck_assert_uint_eq(s->configured, 1);
  ck_assert_uint_eq(s->cells, 8);
  ck_assert_uint_eq(s->queue, 64);
  ck_assert_uint_eq(s->mode, SHMS_MODE_LEASE);
  ck_assert_uint_eq(s->payload, 0);
  ck_assert_uint_eq(s->tenant_max_active, 2);
  ck_assert_uint_eq(s->on_holder_death, SHMS_ON_DEATH_RELEASE);
  ck_assert_uint_eq(s->on_command_crash, SHMS_ON_CRASH_QUARANTINE);
  ck_assert_uint_eq(s->allow_count, 2);
  ck_assert_str_eq(s->allow[0], "ci");
  ck_assert_str_eq(s->allow[1], "release");
  ck_assert_uint_eq(s->tenant_bind, SHMS_TENANT_GROUP);
  const shms_class_config *l = &cfg.classes[SHMS_CLASS_LARGE];
  ck_assert_uint_eq(l->mode, SHMS_MODE_WORKER);
  ck_assert_uint_eq(l->payload, SHMS_DEFAULT_PAYLOAD); /* the worker default */
  ck_assert_uint_eq(l->queue, 0);
  ck_assert_uint_eq(l->on_holder_death, SHMS_ON_DEATH_QUARANTINE);
  ck_assert_uint_eq(l->on_command_crash, SHMS_ON_CRASH_RELEASE); /* the default */
  ck_assert_uint_eq(l->tenant_bind, SHMS_TENANT_ANY);            /* the default */
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_EXTRA_LARGE].payload, 65536);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_EXTRA_LARGE].allow_count, 1);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_TINY].cells, 4096);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_STANDARD].configured, 0);
  ck_assert_parses(cli_config_check(&cfg, err, sizeof err));
}
END_TEST

/* overtake: the fast path's bound over queued work (docs/config.md), 0 for strict hand-off. */
START_TEST(class_spec_overtake) {
  static const struct {
    const char *spec;
    uint64_t ns;
  } good[] = {
      {"standard:cells=1,queue=1,overtake=100us", 100000},
      {"standard:cells=1,queue=1,overtake=1us", 1000},
      {"standard:cells=1,queue=1,overtake=2ms", 2000000},
      {"standard:cells=1,queue=1,overtake=1s", 1000000000},
      {"standard:cells=1,queue=1,overtake=0", SHMS_OVERTAKE_STRICT},
      {"standard:cells=1,queue=1,overtake=0us", SHMS_OVERTAKE_STRICT},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    shms_config_init(&cfg);
    ck_assert_parses(cli_parse_class_spec(&cfg, good[i].spec, err, sizeof err));
    ck_assert_uint_eq(cfg.classes[SHMS_CLASS_STANDARD].overtake_ns, good[i].ns);
  }
  static const struct {
    const char *spec, *needle;
  } bad[] = {
      {"standard:cells=1,queue=1,overtake=2s", "--class standard: overtake: must be 0 (strict) or "
                                               "1us..1s"},
      {"standard:cells=1,queue=1,overtake=fast", "--class standard: overtake: must be 0 (strict) "
                                                 "or a duration such as 100us or 1ms, got 'fast'"},
      {"standard:cells=1,queue=1,overtake=-1us", "overtake: must be 0 (strict) or a duration"},
      {"standard:cells=1,queue=1,overtake=100", "overtake: must be 0 (strict) or a duration"},
      {"standard:cells=1,queue=1,mode=worker,overtake=100us",
       "--class standard: overtake: only a lease class has a fast path that overtakes"},
      {"standard:cells=1,queue=1,mode=worker,overtake=0", "overtake: only a lease class"},
      {"standard:cells=2,queue=1,tenant-max-active=1,overtake=100us",
       "--class standard: overtake: a class with tenant-max-active always queues"},
      {"standard:cells=1,queue=1,overtake=1ms,overtake=1ms", "--class standard: overtake: given "
                                                             "twice"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    shms_config_init(&cfg);
    ck_assert_fails(cli_parse_class_spec(&cfg, bad[i].spec, err, sizeof err), bad[i].needle);
    ck_assert_uint_eq(cfg.classes[SHMS_CLASS_STANDARD].configured, 0); /* nothing changed */
  }
  /* The library's own check, for a configuration built in C. */
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_STANDARD] =
      (shms_class_config){.configured = 1, .cells = 1, .queue = 1, .overtake_ns = 999};
  ck_assert_int_eq(shms_config_validate(&cfg), SHMS_EINVAL);
  ck_assert_str_eq(shms_last_error_detail(),
                   "class standard: overtake: must be 0 (strict) or 1us..1s");
}
END_TEST

static const struct {
  const char *spec, *needle;
} bad_specs[] = {
    {"standard:cells=0,queue=1", "--class standard: cells: must be 1..4096, got 0"},
    {"standard:cells=4097,queue=1", "--class standard: cells: must be 1..4096, got 4097"},
    {"standard:cells=-1,queue=1", "--class standard: cells: must not be negative: '-1'"},
    {"standard:cells=x,queue=1", "--class standard: cells: not a number: 'x'"},
    {"standard:cells=,queue=1", "--class standard: cells: empty value"},
    {"standard:cells=99999999999,queue=1", "--class standard: cells: out of range"},
    {"standard:cells=1,queue=1048577", "--class standard: queue: must be 0..1048576, got 1048577"},
    {"standard:cells=1,queue=-5", "--class standard: queue: must not be negative"},
    {"standard:queue=1", "--class standard: cells: missing (required)"},
    {"standard:cells=1", "--class standard: queue: missing (required)"},
    {"huge:cells=1,queue=1", "--class 'huge': unknown class"},
    {":cells=1,queue=1", "--class '': unknown class"},
    {"standard", "--class 'standard': expected CLASS:cells=N,queue=N"},
    {"", "--class '': expected CLASS:cells=N,queue=N"},
    {"standard:", "--class standard: empty key=value item"},
    {"standard:cells=1,,queue=1", "--class standard: empty key=value item"},
    {"standard:cells=1,queue=1,", "--class standard: empty key=value item"},
    {"standard:cells=1,queue", "--class standard: 'queue': expected key=value"},
    {"standard:cells=1,cells=2,queue=1", "--class standard: cells: given twice"},
    {"standard:cells=1,queue=1,colour=red", "--class standard: colour: unknown key"},
    {"standard:cells=1,queue=1,mode=batch", "--class standard: mode: must be lease or worker"},
    {"standard:cells=1,queue=1,payload=64",
     "--class standard: payload: only a worker class carries payloads"},
    {"standard:cells=1,queue=1,mode=worker,payload=0",
     "--class standard: payload: must be 1..1048576 bytes, got 0"},
    {"standard:cells=1,queue=1,mode=worker,payload=1048577", "--class standard: payload: must be"},
    {"standard:cells=2,queue=1,tenant-max-active=3",
     "--class standard: tenant-max-active: must be 0..cells (2), got 3"},
    {"standard:cells=1,queue=1,tenant-max-active=x",
     "--class standard: tenant-max-active: not a number"},
    {"standard:cells=1,queue=1,on-holder-death=ignore",
     "--class standard: on-holder-death: must be quarantine or release, got 'ignore'"},
    {"standard:cells=1,queue=1,on-command-crash=ignore",
     "--class standard: on-command-crash: must be release or quarantine, got 'ignore'"},
    {"standard:cells=1,queue=1,on-command-crash=release,on-command-crash=release",
     "--class standard: on-command-crash: given twice"},
    {"standard:cells=1,queue=1,allow=", "--class standard: allow: empty tenant name"},
    {"standard:cells=1,queue=1,allow=a++b", "--class standard: allow: empty tenant name"},
    {"standard:cells=1,queue=1,allow=a+", "--class standard: allow: empty tenant name"},
    {"standard:cells=1,queue=1,allow=a+a", "--class standard: allow: tenant 'a' is listed twice"},
    {"standard:cells=1,queue=1,allow=abcdefghijklmnopqrstuvwxyz0123456",
     "--class standard: allow: tenant 'abcdefghijklmnopqrstuvwxyz01234...' is longer than 31"},
    {"standard:cells=1,queue=1,allow=bad\x01name",
     "--class standard: allow: tenant 'bad\\x01name': tenant name has a control byte 0x01 at 3"},
    {"standard:cells=1,queue=1,allow=a b", "tenant name has a space (0x20) at 1 (no spaces,"},
    {"standard:cells=1,queue=1,allow=a+b+c+d+e+f+g+h+i+j+k+l+m+n+o+p+q",
     "--class standard: allow: at most 16 tenants"},
    {"standard:cells=1,queue=1,tenant=everyone",
     "--class standard: tenant: must be any, user or group, got 'everyone'"},
    {"standard:cells=1,queue=1,tenant=user,tenant=user", "--class standard: tenant: given twice"},
    {"standard:cells=1,queue=1,allow=@no-such-group-shmst",
     "--class standard: allow: '@no-such-group-shmst': there is no group named "
     "'no-such-group-shmst'"},
    {"standard:cells=1,queue=1,allow=~no-such-user-shmst",
     "--class standard: allow: '~no-such-user-shmst': there is no user named"},
    {"standard:cells=1,queue=1,allow=@", "--class standard: allow: '@': there is no group named"},
};

START_TEST(class_spec_bad) {
  shms_config_init(&cfg);
  ck_assert_fails(cli_parse_class_spec(&cfg, bad_specs[_i].spec, err, sizeof err),
                  bad_specs[_i].needle);
}
END_TEST

START_TEST(class_spec_duplicate) {
  shms_config_init(&cfg);
  ck_assert_parses(cli_parse_class_spec(&cfg, "small:cells=1,queue=1", err, sizeof err));
  ck_assert_fails(cli_parse_class_spec(&cfg, "small:cells=2,queue=2", err, sizeof err),
                  "--class small: class given twice");
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_SMALL].cells, 1);
}
END_TEST

/* ---- segment options and whole-config checks ----------------------------- */

START_TEST(segment_options_good) {
  shms_config_init(&cfg);
  ck_assert_parses(cli_set_segment_option(&cfg, "starvation-after", "250ms", err, sizeof err));
  ck_assert_parses(cli_set_segment_option(&cfg, "max-tenants", "65536", err, sizeof err));
  ck_assert_parses(cli_set_segment_option(&cfg, "max-processes", "1", err, sizeof err));
  ck_assert_parses(cli_set_segment_option(&cfg, "mode", "0660", err, sizeof err));
  ck_assert_parses(cli_set_segment_option(&cfg, "group", "42", err, sizeof err));
  ck_assert_uint_eq(cfg.starvation_after_ns, 250000000ull);
  ck_assert_uint_eq(cfg.max_tenants, 65536);
  ck_assert_uint_eq(cfg.max_processes, 1);
  ck_assert_uint_eq(cfg.file_mode, 0660);
  ck_assert_int_eq(cfg.group, 42);
  ck_assert_int_eq(cfg.admin_group, -1); /* the default: none */
  ck_assert_parses(cli_set_segment_option(&cfg, "admin-group", "root", err, sizeof err));
  ck_assert_int_eq(cfg.admin_group, 0);
}
END_TEST

static const struct {
  const char *key, *value, *needle;
} bad_options[] = {
    {"starvation-after", "5", "starvation-after: '5' needs a unit"},
    {"starvation-after", "0s", "starvation-after: must be positive"},
    {"starvation-after", "-1s", "starvation-after: must be positive"},
    {"starvation-after", "25h", "starvation-after: must be 1ms..24h"},
    {"starvation-after", "soon", "starvation-after: not a duration"},
    {"max-tenants", "0", "max-tenants: must be 1..65536, got 0"},
    {"max-tenants", "65537", "max-tenants: must be 1..65536, got 65537"},
    {"max-tenants", "-3", "max-tenants: must not be negative"},
    {"max-tenants", "many", "max-tenants: not a number: 'many'"},
    {"max-tenants", "4294967296", "max-tenants: out of range"},
    {"max-processes", "0", "max-processes: must be 1..65536, got 0"},
    {"max-processes", "100000", "max-processes: must be 1..65536"},
    {"max-processes", "", "max-processes: empty value"},
    {"mode", "0400", "mode: the owner must keep read and write"},
    {"mode", "01777", "mode: only permission bits"},
    {"mode", "rw", "mode: not an octal mode"},
    {"group", "no-such-group-shmst", "group: no group named"},
    {"group", "4294967295", "group: not a valid gid"},
    {"admin-group", "no-such-group-shmst", "admin-group: no group named"},
    {"admin-group", "4294967295", "admin-group: not a valid gid"},
    {"colour", "red", "colour: unknown key"},
};

START_TEST(segment_options_bad) {
  shms_config_init(&cfg);
  ck_assert_fails(
      cli_set_segment_option(&cfg, bad_options[_i].key, bad_options[_i].value, err, sizeof err),
      bad_options[_i].needle);
}
END_TEST

START_TEST(whole_config_checks) {
  shms_config_init(&cfg);
  ck_assert_fails(cli_config_check(&cfg, err, sizeof err), "at least one class");
  /* Each field is in range, but together they need more than SHMS_SEGMENT_MAX bytes. */
  ck_assert_parses(cli_parse_class_spec(
      &cfg, "large:cells=4096,queue=1048576,mode=worker,payload=1048576", err, sizeof err));
  ck_assert_fails(cli_config_check(&cfg, err, sizeof err), "configuration needs a segment of");
  /* What only the library's validation sees (a program filling the struct itself). */
  shms_config_init(&cfg);
  ck_assert_parses(cli_parse_class_spec(&cfg, "small:cells=1,queue=1", err, sizeof err));
  cfg.classes[SHMS_CLASS_SMALL].tenant_bind = 3;
  ck_assert_fails(cli_config_check(&cfg, err, sizeof err),
                  "class small: tenant: must be any, user or group");
  cfg.classes[SHMS_CLASS_SMALL].tenant_bind = SHMS_TENANT_USER;
  cfg.classes[SHMS_CLASS_SMALL].allow_count = 1;
  strcpy(cfg.classes[SHMS_CLASS_SMALL].allow[0], "~");
  ck_assert_fails(cli_config_check(&cfg, err, sizeof err),
                  "class small: allow: entry 1: '~' names no user");
  cfg.classes[SHMS_CLASS_SMALL].allow_count = 0;
  cfg.admin_group = -2;
  ck_assert_fails(cli_config_check(&cfg, err, sizeof err), "admin-group: not a valid gid");
}
END_TEST

/* ---- INI files ----------------------------------------------------------- */

/*
 * INI files go to one mkdtemp directory made by the runner process before the
 * tests and removed after them: Check ends a failed test with _exit(), so the
 * test's own process could not be trusted to clean up.
 */
static char dir[64];
static char ini_path[128];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/shmst-config-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(ini_path, sizeof ini_path, "%s/cfg.ini", dir);
}

static void remove_dir(void) {
  unlink(ini_path);
  rmdir(dir);
}

/* Write text to cfg.ini; returns its path. */
static const char *write_ini(const char *text) {
  FILE *f = fopen(ini_path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  ck_assert_int_eq(fclose(f), 0);
  return ini_path;
}

static const char good_ini[] = "\xEF\xBB\xBF# The build farm's segment\n"
                               "[segment]\n"
                               "starvation-after = 2s\n"
                               "max-tenants = 64\n"
                               "max-processes: 128\n"
                               "mode = 0660\n"
                               "group = 0\n"
                               "admin-group = root\n"
                               "\n"
                               "; small jobs\r\n"
                               "[class small]\r\n"
                               "cells = 4\r\n"
                               "queue = 32   ; an inline comment\n"
                               "tenant-max-active = 2\n"
                               "tenant = user\n"
                               "\n"
                               "  [ class  extra-large ]\n"
                               "  cells = 1\n"
                               "  queue = 4\n"
                               "  mode = worker\n"
                               "  payload = 65536\n"
                               "  allow = ci+release\n"
                               "  allow = nightly\n"
                               "  on-holder-death = release\n"
                               "[class large]\n"
                               "cells=2\n"
                               "queue=0\n"
                               "mode=worker\n";

/* [tenant NAME] sections: each tenant's weight, collected for the segment once it is made. */
START_TEST(ini_tenant_weights) {
  shms_config_init(&cfg);
  struct cli_policies pol = {0};
  ck_assert_parses(cli_load_config_file_policies(
      &cfg,
      write_ini("[tenant paying]\nweight = 3\n[class small]\ncells=1\nqueue=1\n"
                "[tenant free]\n  weight=1\n"),
      &pol, err, sizeof err));
  ck_assert_uint_eq(pol.n, 2);
  ck_assert_str_eq(pol.v[0].tenant, "paying");
  ck_assert_uint_eq(pol.v[0].weight, 3);
  ck_assert_int_eq(pol.v[0].line, 1);
  ck_assert_str_eq(pol.v[1].tenant, "free");
  ck_assert_uint_eq(pol.v[1].weight, 1);
  cli_policies_free(&pol);
  /* [team NAME] and a tenant's team: a team's weight, a tenant's team without a weight. */
  shms_config_init(&cfg);
  ck_assert_parses(cli_load_config_file_policies(
      &cfg,
      write_ini("[class small]\ncells=1\nqueue=1\n[team red]\nweight = 2\n"
                "[tenant alice]\nteam = red\n[tenant red]\nweight = 4\n"),
      &pol, err, sizeof err));
  ck_assert_uint_eq(pol.n, 3);
  ck_assert(pol.v[0].is_team && strcmp(pol.v[0].tenant, "red") == 0 && pol.v[0].weight == 2);
  ck_assert(!pol.v[1].is_team && strcmp(pol.v[1].team, "red") == 0 && pol.v[1].weight == 0);
  ck_assert(!pol.v[2].is_team && pol.v[2].weight == 4); /* a tenant may share a team's name */
  cli_policies_free(&pol);
  ck_assert_ptr_null(pol.v);
}
END_TEST

START_TEST(ini_good) {
  shms_config_init(&cfg);
  ck_assert_parses(cli_load_config_file(&cfg, write_ini(good_ini), err, sizeof err));
  ck_assert_uint_eq(cfg.starvation_after_ns, 2000000000ull);
  ck_assert_uint_eq(cfg.max_tenants, 64);
  ck_assert_uint_eq(cfg.max_processes, 128);
  ck_assert_uint_eq(cfg.file_mode, 0660);
  ck_assert_int_eq(cfg.group, 0);
  const shms_class_config *s = &cfg.classes[SHMS_CLASS_SMALL];
  ck_assert_uint_eq(s->configured, 1);
  ck_assert_uint_eq(s->cells, 4);
  ck_assert_uint_eq(s->queue, 32);
  ck_assert_uint_eq(s->tenant_max_active, 2);
  ck_assert_uint_eq(s->mode, SHMS_MODE_LEASE);
  ck_assert_uint_eq(s->tenant_bind, SHMS_TENANT_USER);
  ck_assert_int_eq(cfg.admin_group, 0);
  const shms_class_config *x = &cfg.classes[SHMS_CLASS_EXTRA_LARGE];
  ck_assert_uint_eq(x->configured, 1);
  ck_assert_uint_eq(x->cells, 1);
  ck_assert_uint_eq(x->queue, 4);
  ck_assert_uint_eq(x->mode, SHMS_MODE_WORKER);
  ck_assert_uint_eq(x->payload, 65536);
  ck_assert_uint_eq(x->on_holder_death, SHMS_ON_DEATH_RELEASE);
  ck_assert_uint_eq(x->allow_count, 3);
  ck_assert_str_eq(x->allow[0], "ci");
  ck_assert_str_eq(x->allow[1], "release");
  ck_assert_str_eq(x->allow[2], "nightly");
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_LARGE].payload, SHMS_DEFAULT_PAYLOAD);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_LARGE].queue, 0);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_TINY].configured, 0);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_STANDARD].configured, 0);
  ck_assert_uint_eq(s->overtake_ns, 0); /* not given: the default bound */
  ck_assert_parses(cli_config_check(&cfg, err, sizeof err));
}
END_TEST

/* The same configuration as one spec and as a file gives the same bytes. */
START_TEST(ini_matches_spec) {
  shms_config a, b;
  shms_config_init(&a);
  shms_config_init(&b);
  ck_assert_parses(cli_parse_class_spec(
      &a, "standard:cells=3,queue=9,mode=worker,payload=100,allow=x+y", err, sizeof err));
  ck_assert_parses(cli_load_config_file(&b,
                                        write_ini("[class standard]\ncells=3\nqueue=9\n"
                                                  "mode=worker\npayload=100\nallow=x+y\n"),
                                        err, sizeof err));
  ck_assert_int_eq(memcmp(&a, &b, sizeof a), 0);
}
END_TEST

/* 50 bytes: four make a line longer than inih's limit of 197. */
#define LONG50 "a comment that goes on and on and on and on and on "

static const struct {
  const char *text, *needle;
} bad_inis[] = {
    {"[class small]\ncells = 4\nqueue = x\n", "cfg.ini:3: [class small] queue: not a number: 'x'"},
    {"[class small]\ncells = 1\nqueue = 1\n[tenant paying]\n",
     "cfg.ini:4: [tenant paying] weight or team: missing"},
    {"[class small]\ncells = 1\nqueue = 1\n[team red]\n", "cfg.ini:4: [team red] weight: missing"},
    {"[class small]\ncells = 1\nqueue = 1\n[team red]\nweight = 2\nteam = x\n",
     "cfg.ini:6: [team red] team: unknown key (expected weight)"},
    {"[class small]\ncells = 1\nqueue = 1\n[tenant p]\nteam = a b\n",
     "cfg.ini:5: [tenant p] team: not a team name"},
    {"[class small]\ncells = 1\nqueue = 1\n[tenant p]\nteam = a\nteam = b\n",
     "cfg.ini:6: [tenant p] team: given twice"},
    {"[team r]\nweight = 2\n[class small]\ncells = 1\nqueue = 1\n[team r]\nweight = 3\n",
     "cfg.ini:6: [team r]: duplicate section (first at line 1)"},
    {"[class small]\ncells = 1\nqueue = 1\n[tenant paying]\nweight = 1001\n",
     "cfg.ini:5: [tenant paying] weight: must be 1..1000, got 1001"},
    {"[class small]\ncells = 1\nqueue = 1\n[tenant paying]\nweight = 2\nshare = x\n",
     "cfg.ini:6: [tenant paying] share: unknown key (expected weight or team)"},
    {"[tenant p]\nweight = 2\n[class small]\ncells = 1\nqueue = 1\n[tenant p]\nweight = 3\n",
     "cfg.ini:6: [tenant p]: duplicate section (first at line 1)"},
    {"[class small]\ncells = 1\nqueue = 1\n[tenant]\nweight = 2\n",
     "cfg.ini:4: [tenant]: unknown section"},
    {"[class small]\ncells = 0\nqueue = 1\n", "cfg.ini:2: [class small] cells: must be 1..4096"},
    {"[class small]\ncells = -2\nqueue = 1\n", "cfg.ini:2: [class small] cells: must not be"},
    {"[class small]\ncells = 2\nqueue = 1\n\ntenant-max-active = 3\n",
     "cfg.ini:5: [class small] tenant-max-active: must be 0..cells (2), got 3"},
    {"[class small]\ncells = 1\nqueue = 1\npayload = 9\n",
     "cfg.ini:4: [class small] payload: only a worker class"},
    {"[class small]\ncells = 1\nqueue = 1\nmode = worker\npayload = 0\n",
     "cfg.ini:5: [class small] payload: must be 1..1048576 bytes, got 0"},
    {"[class small]\ncells = 1\nqueue = 1\nallow = a\nallow = a\n",
     "cfg.ini:4: [class small] allow: tenant 'a' is listed twice"},
    {"[class small]\ncells = 1\nqueue = 1\nallow = a+b+c+d+e+f+g+h\nallow = i+j+k+l+m+n+o+p+q\n",
     "cfg.ini:5: [class small] allow: at most 16 tenants"},
    {"[class small]\ncells = 1\nqueue = 1\nallow = abcdefghijklmnopqrstuvwxyz0123456\n",
     "cfg.ini:4: [class small] allow: tenant 'abcdefghijklmnopqrstuvwxyz01234...' is longer"},
    {"[class small]\ncells = 1\nqueue = 1\nallow = a\x7f\n",
     "cfg.ini:4: [class small] allow: tenant 'a\\x7f': tenant name has a control byte 0x7f (DEL)"},
    {"[class small]\nqueue = 1\n", "cfg.ini:1: [class small] cells: missing (required)"},
    {"[class small]\n[class tiny]\ncells=1\nqueue=1\n", "cfg.ini:1: [class small] cells: missing"},
    {"[class small]\ncells = 1\nqueue = 1\ncells = 2\n",
     "cfg.ini:4: [class small] cells: given twice"},
    {"[class small]\ncells = 1\nqueue = 1\ncolour = red\n",
     "cfg.ini:4: [class small] colour: unknown key"},
    {"[class small]\ncells=1\nqueue=1\n[class small]\ncells=2\nqueue=2\n",
     "cfg.ini:4: [class small]: duplicate section (first at line 1)"},
    {"[segment]\n[class tiny]\ncells=1\nqueue=1\n[segment]\n",
     "cfg.ini:5: [segment]: duplicate section (first at line 1)"},
    {"[class huge]\ncells=1\nqueue=1\n", "cfg.ini:1: [class huge]: unknown section"},
    {"[classes small]\ncells=1\n", "cfg.ini:1: [classes small]: unknown section"},
    {"[class]\ncells=1\n", "cfg.ini:1: [class]: unknown section"},
    {"[class small tiny]\ncells=1\n", "cfg.ini:1: [class small tiny]: unknown section"},
    {"[globals]\nx=1\n", "cfg.ini:1: [globals]: unknown section"},
    {"cells = 1\n[class small]\ncells=1\nqueue=1\n", "cfg.ini:1: cells: key outside any section"},
    {"[class small]\ncells 1\nqueue = 1\n",
     "cfg.ini:2: [class small] syntax error: expected 'key = value', got 'cells 1'"},
    {"[class small\ncells = 1\nqueue = 1\n", "cfg.ini:1: syntax error: section header lacks ']'"},
    {"[class small]\ncells=1\nqueue=1\nqueue ; = 2\n", "cfg.ini:4: syntax error"},
    {"[segment]\nmax-tenants = 0\n[class small]\ncells=1\nqueue=1\n",
     "cfg.ini:2: [segment] max-tenants: must be 1..65536, got 0"},
    {"[segment]\nmax-tenants = 9\nmax-tenants = 8\n[class small]\ncells=1\nqueue=1\n",
     "cfg.ini:3: [segment] max-tenants: given twice (first at line 2)"},
    {"[segment]\nstarvation-after = 5\n[class small]\ncells=1\nqueue=1\n",
     "cfg.ini:2: [segment] starvation-after: '5' needs a unit"},
    {"[segment]\nmode = 0400\n[class small]\ncells=1\nqueue=1\n",
     "cfg.ini:2: [segment] mode: the owner must keep read and write"},
    {"[segment]\ngroup = no-such-group-shmst\n[class small]\ncells=1\nqueue=1\n",
     "cfg.ini:2: [segment] group: no group named"},
    {"[segment]\nmax-tenant = 9\n[class small]\ncells=1\nqueue=1\n",
     "cfg.ini:2: [segment] max-tenant: unknown key"},
    {"[segment]\nmax-tenants = 9\n", "cfg.ini: no [class NAME] section"},
    {"", "cfg.ini: no [class NAME] section"},
    {"[class small]\ncells=1\nqueue=1\n# " LONG50 LONG50 LONG50 LONG50 "\n",
     "cfg.ini:4: [class small] line is longer than"},
};

START_TEST(ini_bad) {
  shms_config_init(&cfg);
  ck_assert_fails(cli_load_config_file(&cfg, write_ini(bad_inis[_i].text), err, sizeof err),
                  bad_inis[_i].needle);
  /* Errors name the file as the user gave it. */
  ck_assert_msg(strncmp(err, ini_path, strlen(ini_path)) == 0, "'%s' lacks the path", err);
}
END_TEST

START_TEST(ini_missing_file) {
  shms_config_init(&cfg);
  ck_assert_fails(cli_load_config_file(&cfg, "/nonexistent/shmst.ini", err, sizeof err),
                  "/nonexistent/shmst.ini: cannot open: No such file or directory");
}
END_TEST

START_TEST(ini_class_already_configured) {
  shms_config_init(&cfg);
  ck_assert_parses(cli_parse_class_spec(&cfg, "small:cells=1,queue=1", err, sizeof err));
  ck_assert_fails(
      cli_load_config_file(&cfg, write_ini("[class small]\ncells=2\nqueue=2\n"), err, sizeof err),
      "cfg.ini:1: [class small]: class is already configured");
}
END_TEST

/* Classes keep the order they were configured in, from --class options and from a file's
 * sections alike; a configuration built in C orders them by position, or in class order. */
START_TEST(classes_keep_their_configuration_order) {
  shms_class_t order[SHMS_CLASS_COUNT];
  shms_config_init(&cfg);
  ck_assert_parses(cli_parse_class_spec(&cfg, "large:cells=1,queue=1", err, sizeof err));
  ck_assert_parses(cli_parse_class_spec(&cfg, "tiny:cells=1,queue=1", err, sizeof err));
  ck_assert_parses(cli_parse_class_spec(&cfg, "standard:cells=1,queue=1", err, sizeof err));
  ck_assert_int_eq(shms_class_order(&cfg, order), 3);
  ck_assert_int_eq(order[0], SHMS_CLASS_LARGE);
  ck_assert_int_eq(order[1], SHMS_CLASS_TINY);
  ck_assert_int_eq(order[2], SHMS_CLASS_STANDARD);
  ck_assert_int_eq(shms_config_validate(&cfg), SHMS_OK);
  shms_config_init(&cfg);
  ck_assert_parses(cli_load_config_file(
      &cfg, write_ini("[class small]\ncells=1\nqueue=1\n[class tiny]\ncells=1\nqueue=1\n"), err,
      sizeof err));
  ck_assert_int_eq(shms_class_order(&cfg, order), 2);
  ck_assert_int_eq(order[0], SHMS_CLASS_SMALL);
  ck_assert_int_eq(order[1], SHMS_CLASS_TINY);
  /* In C: no positions, the class order; two classes at one position, refused. */
  shms_config_init(&cfg);
  cfg.classes[SHMS_CLASS_LARGE] = (shms_class_config){.configured = 1, .cells = 1, .queue = 1};
  cfg.classes[SHMS_CLASS_SMALL] = (shms_class_config){.configured = 1, .cells = 1, .queue = 1};
  ck_assert_int_eq(shms_class_order(&cfg, order), 2);
  ck_assert_int_eq(order[0], SHMS_CLASS_SMALL);
  ck_assert_int_eq(shms_config_validate(&cfg), SHMS_OK);
  cfg.classes[SHMS_CLASS_LARGE].position = 2;
  cfg.classes[SHMS_CLASS_SMALL].position = 2;
  ck_assert_int_eq(shms_config_validate(&cfg), SHMS_EINVAL);
  ck_assert_str_eq(shms_last_error_detail(), "class large: position: 2 is class small's too");
  cfg.classes[SHMS_CLASS_LARGE].position = 6;
  ck_assert_int_eq(shms_config_validate(&cfg), SHMS_EINVAL);
  ck_assert_str_eq(shms_last_error_detail(), "class large: position: must be 0..5, got 6");
}
END_TEST

static Suite *config_suite(void) {
  Suite *s = suite_create("config");
  TCase *tc = harness_tcase("values");
  tcase_add_test(tc, durations_good);
  tcase_add_test(tc, durations_bad);
  tcase_add_test(tc, delays_good);
  tcase_add_test(tc, delays_bad);
  tcase_add_test(tc, numbers);
  tcase_add_test(tc, modes_and_groups);
  suite_add_tcase(s, tc);
  tc = harness_tcase("class_spec");
  tcase_add_test(tc, class_spec_good);
  tcase_add_test(tc, class_spec_overtake);
  tcase_add_loop_test(tc, class_spec_bad, 0, sizeof bad_specs / sizeof bad_specs[0]);
  tcase_add_test(tc, class_spec_duplicate);
  suite_add_tcase(s, tc);
  tc = harness_tcase("segment");
  tcase_add_test(tc, segment_options_good);
  tcase_add_loop_test(tc, segment_options_bad, 0, sizeof bad_options / sizeof bad_options[0]);
  tcase_add_test(tc, whole_config_checks);
  suite_add_tcase(s, tc);
  tc = harness_tcase("ini");
  tcase_add_unchecked_fixture(tc, make_dir, remove_dir);
  tcase_add_test(tc, ini_good);
  tcase_add_test(tc, ini_tenant_weights);
  tcase_add_test(tc, ini_matches_spec);
  tcase_add_loop_test(tc, ini_bad, 0, sizeof bad_inis / sizeof bad_inis[0]);
  tcase_add_test(tc, ini_missing_file);
  tcase_add_test(tc, ini_class_already_configured);
  tcase_add_test(tc, classes_keep_their_configuration_order);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return harness_run(config_suite()); }
