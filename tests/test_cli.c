/*
 * The shmsched CLI end to end: each test runs <build>/bin/shmsched through
 * harness_cli and checks exit codes, the one-line error format, the output
 * and the segment left behind (or not).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char out[65536], err[4096];

/*
 * What the tests leave to clean up. Check ends a failed test's process with
 * _exit(), so the record lives in memory shared with the runner, which
 * removes everything in an unchecked teardown whether the tests passed or not.
 */
struct leftovers {
  char dir[64];       /* mkdtemp directory for INI files */
  char ini_path[128]; /* dir/seg.ini */
  int n;
  char names[32][96]; /* segments */
};
static struct leftovers *left;

static void leftovers_setup(void) {
  left = mmap(NULL, sizeof *left, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(left, MAP_FAILED);
  snprintf(left->dir, sizeof left->dir, "/tmp/shmst-cli-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(left->dir));
  snprintf(left->ini_path, sizeof left->ini_path, "%s/seg.ini", left->dir);
}

static void leftovers_teardown(void) {
  for (int i = 0; i < left->n && i < 32; i++)
    harness_remove(left->names[i]);
  unlink(left->ini_path);
  rmdir(left->dir);
  munmap(left, sizeof *left);
}

/* A fresh segment name, removed by the teardown even if the test fails. */
static const char *seg_name(const char *tag) {
  ck_assert_int_lt(left->n, 32);
  snprintf(left->names[left->n], sizeof left->names[0], "%s", harness_name(tag));
  return left->names[left->n++];
}

/* Run the CLI with these arguments (a NULL-terminated array, not varargs); returns its status. */
#define CLI(...)                                                                                   \
  harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){__VA_ARGS__, NULL})

static int shm_exists(const char *name) {
  char path[256];
  struct stat st;
  harness_shm_path(path, sizeof path, name);
  return stat(path, &st) == 0;
}

/* stderr holds exactly one line, "shmsched: <reason>: ...", naming needle. */
static void assert_error_line(const char *reason, const char *needle) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "shmsched: %s: ", reason);
  ck_assert_msg(strncmp(err, prefix, strlen(prefix)) == 0, "stderr '%s' lacks '%s'", err, prefix);
  ck_assert_msg(strstr(err, needle) != NULL, "stderr '%s' lacks '%s'", err, needle);
  char *nl = strchr(err, '\n');
  ck_assert_msg(nl != NULL && nl[1] == '\0', "stderr is not one line: '%s'", err);
}

/* ---- a minimal JSON checker: is the whole text one valid JSON value? ---- */

static const char *json_value(const char *p);

static const char *json_ws(const char *p) { return p + strspn(p, " \t\r\n"); }

static const char *json_string(const char *p) {
  if (*p++ != '"')
    return NULL;
  for (; *p != '"'; p++) {
    if ((unsigned char)*p < 0x20)
      return NULL;
    if (*p == '\\') {
      p++;
      if (*p == 'u') {
        if (strspn(p + 1, "0123456789abcdefABCDEF") < 4)
          return NULL;
        p += 4;
      } else if (*p == '\0' || strchr("\"\\/bfnrt", *p) == NULL) {
        return NULL;
      }
    }
  }
  return p + 1;
}

static const char *json_number(const char *p) {
  const char *start = p;
  if (*p == '-')
    p++;
  size_t digits = strspn(p, "0123456789");
  if (digits == 0 || (p[0] == '0' && digits > 1))
    return NULL;
  p += digits;
  if (*p == '.' || *p == 'e' || *p == 'E')
    p += strspn(p, ".eE+-0123456789"); /* loose: our writer prints integers only */
  return p > start ? p : NULL;
}

/* Members of an object (pairs) or an array, after the opening bracket. */
static const char *json_items(const char *p, char close, int pairs) {
  p = json_ws(p);
  if (*p == close)
    return p + 1;
  for (;;) {
    if (pairs) {
      if ((p = json_string(json_ws(p))) == NULL || *(p = json_ws(p)) != ':')
        return NULL;
      p++;
    }
    if ((p = json_value(p)) == NULL)
      return NULL;
    p = json_ws(p);
    if (*p == close)
      return p + 1;
    if (*p++ != ',')
      return NULL;
  }
}

static const char *json_value(const char *p) {
  p = json_ws(p);
  if (*p == '{')
    return json_items(p + 1, '}', 1);
  if (*p == '[')
    return json_items(p + 1, ']', 0);
  if (*p == '"')
    return json_string(p);
  for (const char *const *w = (const char *const[]){"true", "false", "null", NULL}; *w; w++)
    if (strncmp(p, *w, strlen(*w)) == 0)
      return p + strlen(*w);
  return json_number(p);
}

static int json_valid(const char *text) {
  const char *end = json_value(text);
  return end != NULL && *json_ws(end) == '\0';
}

START_TEST(json_checker_sanity) {
  ck_assert(json_valid("{\"a\": [1, -2, \"x\\u00e9\", null, true, {}], \"b\": {\"c\": []}}\n"));
  ck_assert(!json_valid("{\"a\": 1,}"));
  ck_assert(!json_valid("{\"a\" 1}"));
  ck_assert(!json_valid("{\"a\": \"\x01\"}"));
  ck_assert(!json_valid("{\"a\": 1} x"));
  ck_assert(!json_valid("[01]"));
}
END_TEST

/* ---- create, status, destroy --------------------------------------------- */

START_TEST(create_status_destroy) {
  const char *name = seg_name("cli");
  ck_assert_int_eq(CLI("create", name, "--class", "standard:cells=4,queue=16", "--class",
                       "small:cells=2,queue=8,mode=worker,payload=512,allow=ci+nightly",
                       "--starvation-after", "250ms", "--max-tenants", "77", "--mode", "0660"),
                   0);
  ck_assert_msg(strstr(out, "created segment") != NULL, "stdout: %s", out);
  ck_assert_str_eq(err, "");
  ck_assert(shm_exists(name));

  ck_assert_int_eq(CLI("status", name, "--json"), 0);
  ck_assert_msg(json_valid(out), "status --json is not valid JSON:\n%s", out);
  static const char *const json_needles[] = {
      "\"state\": \"active\"",  "\"layout_version\": 16",
      "\"max_tenants\": 77",    "\"starvation_after_ns\": 250000000",
      "\"mode\": \"0660\"",     "\"standard\": {",
      "\"cells\": 4",           "\"queue\": 16",
      "\"cells_available\": 4", "\"queue_capacity\": 16",
      "\"small\": {",           "\"mode\": \"worker\"",
      "\"payload_bytes\": 512", "\"cells_offline\": 2",
      "\"granted\": 0",         "\"oldest_lease_age_ns\": 0",
      "\"live_processes\": 0",  "\"incarnation\": \"",
  };
  for (size_t i = 0; i < sizeof json_needles / sizeof json_needles[0]; i++)
    ck_assert_msg(strstr(out, json_needles[i]) != NULL, "JSON lacks %s:\n%s", json_needles[i], out);
  ck_assert_msg(strstr(out, "\"ci\"") && strstr(out, "\"nightly\""), "allow list:\n%s", out);

  ck_assert_int_eq(CLI("status", name), 0);
  static const char *const text_needles[] = {
      "# Segment\n",
      "\nname: ",
      "\nstate: active\n",
      "\n# Class standard\n",
      "\ncells: 4\n",
      "\nqueue: 16\n",
      "\n# Class small\n",
      "\nallow: ci+nightly\n",
      "\nallow: (any tenant)\n",
      "\nqueue_depth: 0\n",
      "\nmax_wait_ns: 0\n",
  };
  for (size_t i = 0; i < sizeof text_needles / sizeof text_needles[0]; i++)
    ck_assert_msg(strstr(out, text_needles[i]) != NULL, "status lacks '%s':\n%s", text_needles[i],
                  out);

  ck_assert_int_eq(CLI("destroy", name), 0);
  ck_assert(!shm_exists(name));
}
END_TEST

/* The value of key in `status`'s section of class cls (text output in out). */
static const char *class_value(const char *cls, const char *key, char *buf, size_t n) {
  char head[64], needle[64];
  snprintf(head, sizeof head, "\n# Class %s\n", cls);
  snprintf(needle, sizeof needle, "\n%s: ", key);
  const char *sec = strstr(out, head), *next, *at;
  ck_assert_msg(sec != NULL, "no section for class %s:\n%s", cls, out);
  next = strstr(sec + 1, "\n# ");
  at = strstr(sec, needle);
  ck_assert_msg(at != NULL && (next == NULL || at < next), "class %s lacks %s:\n%s", cls, key, out);
  at += strlen(needle);
  snprintf(buf, n, "%.*s", (int)strcspn(at, "\n"), at);
  return buf;
}

/* status shows the overtake bound in force per class: the default, one set, strict hand-off (0),
 * and 0 for the classes that never overtake. */
START_TEST(status_shows_each_class_overtake_bound) {
  const char *name = seg_name("cli-ot");
  ck_assert_int_eq(CLI("create", name, "--class", "standard:cells=2,queue=8", "--class",
                       "large:cells=1,queue=4,overtake=0", "--class",
                       "extra-large:cells=1,queue=4,overtake=1ms", "--class",
                       "small:cells=1,queue=4,mode=worker"),
                   0);
  ck_assert_int_eq(CLI("status", name), 0);
  char v[64];
  ck_assert_str_eq(class_value("standard", "overtake_ns", v, sizeof v), "300000");
  ck_assert_str_eq(class_value("large", "overtake_ns", v, sizeof v), "0");
  ck_assert_str_eq(class_value("extra-large", "overtake_ns", v, sizeof v), "1000000");
  ck_assert_str_eq(class_value("small", "overtake_ns", v, sizeof v), "0");
  ck_assert_int_eq(CLI("status", name, "--json"), 0);
  ck_assert_msg(json_valid(out), "status --json is not valid JSON:\n%s", out);
  ck_assert_msg(strstr(out, "\"overtake_ns\": 300000,") && strstr(out, "\"overtake_ns\": 1000000,"),
                "JSON lacks the bounds:\n%s", out);
  ck_assert_int_eq(CLI("destroy", name), 0);
}
END_TEST

/* status shows the segment file's real group, by name and gid, however it came to have it. */
START_TEST(status_shows_the_files_group) {
  const char *name = seg_name("group");
  ck_assert_int_eq(CLI("create", name, "--class", "standard:cells=1,queue=1", "--group", "65534",
                       "--mode", "0660"),
                   0);
  ck_assert_int_eq(CLI("status", name), 0);
  ck_assert_msg(strstr(out, "\ngroup: nogroup\ngid: 65534\n") != NULL, "%s", out);
  ck_assert_int_eq(CLI("status", name, "--json"), 0);
  ck_assert_msg(strstr(out, "\"group\": \"nogroup\",\n    \"gid\": 65534") != NULL, "%s", out);
  char path[256];
  harness_shm_path(path, sizeof path, name);
  ck_assert_int_eq(chown(path, (uid_t)-1, 0), 0); /* an operator's chgrp */
  ck_assert_int_eq(CLI("status", name), 0);
  ck_assert_msg(strstr(out, "\ngroup: root\ngid: 0\n") != NULL, "%s", out);
  ck_assert_int_eq(CLI("destroy", name), 0);
}
END_TEST

START_TEST(status_counts_live_processes) {
  const char *name = seg_name("live");
  shms_config cfg;
  shms_t *h;
  harness_config(&cfg, 2, 4);
  harness_create(name, &cfg);
  ck_assert_shms_ok(shms_attach(name, 0, &h));
  ck_assert_int_eq(CLI("status", name, "--json"), 0);
  ck_assert_msg(strstr(out, "\"live_processes\": 1") != NULL, "%s", out);
  /* A live attached process makes destroy refuse, unless forced. */
  ck_assert_int_eq(CLI("destroy", name), 1);
  assert_error_line("busy", "; --force removes it anyway");
  ck_assert_msg(strstr(err, "SHMS_DESTROY_FORCE") == NULL, "the library's spelling: %s", err);
  ck_assert(shm_exists(name));
  ck_assert_int_eq(CLI("destroy", "--force", name), 0);
  ck_assert(!shm_exists(name));
  shms_detach(h);
  harness_remove(name);
}
END_TEST

START_TEST(create_twice_leaves_first) {
  const char *name = seg_name("twice");
  ck_assert_int_eq(CLI("create", name, "--class", "large:cells=3,queue=5"), 0);
  ck_assert_int_eq(CLI("create", name, "--class", "tiny:cells=1,queue=1"), 1);
  assert_error_line("already-exists", name);
  ck_assert_msg(strstr(err, "left untouched") != NULL, "%s", err);
  /* The first segment is intact: attachable, with its own configuration. */
  shms_t *h;
  shms_config cfg;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &h));
  ck_assert_shms_ok(shms_get_config(h, &cfg));
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_LARGE].configured, 1);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_LARGE].cells, 3);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_TINY].configured, 0);
  shms_detach(h);
  harness_remove(name);
}
END_TEST

START_TEST(missing_segment) {
  const char *name = seg_name("missing");
  ck_assert_int_eq(CLI("destroy", name), 1);
  assert_error_line("not-found", "no segment named");
  ck_assert_msg(strstr(err, name) != NULL, "%s", err);
  ck_assert_int_eq(CLI("status", name), 1);
  assert_error_line("not-found", name);
  ck_assert_str_eq(out, "");
}
END_TEST

/* Write len bytes of data at offset at of /dev/shm/NAME, creating it if need be. */
static void shm_write(const char *name, long at, const void *data, size_t len) {
  char path[256];
  harness_shm_path(path, sizeof path, name);
  FILE *f = fopen(path, "r+");
  if (f == NULL)
    f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fseek(f, at, SEEK_SET), 0);
  ck_assert_uint_eq(fwrite(data, 1, len, f), len);
  ck_assert_int_eq(fclose(f), 0);
}

/* The bytes of /dev/shm/NAME (at most n), or -1 if it does not exist. */
static long shm_read(const char *name, char *buf, size_t n) {
  char path[256];
  harness_shm_path(path, sizeof path, name);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return -1;
  size_t got = fread(buf, 1, n, f);
  fclose(f);
  return (long)got;
}

/*
 * destroy, forced or not, never removes a file that is not a shmsched
 * segment: one whose first 8 bytes are not the magic, unless it is a
 * half-made segment of ours (magic not yet stored over a header we wrote).
 */
START_TEST(destroy_refuses_foreign_files) {
  static const char *const contents[] = {"not a segment, someone's data\n", "", "zeros"};
  for (size_t i = 0; i < sizeof contents / sizeof contents[0]; i++) {
    const char *name = seg_name("foreign");
    static char zeros[8192];
    int zero = strcmp(contents[i], "zeros") == 0;
    const char *data = zero ? zeros : contents[i];
    size_t len = zero ? sizeof zeros : strlen(contents[i]);
    shm_write(name, 0, data, len);
    for (int force = 0; force < 2; force++) {
      ck_assert_int_eq(force ? CLI("destroy", name, "--force") : CLI("destroy", name), 1);
      assert_error_line("incompatible-segment", "is not a shmsched segment");
      ck_assert_msg(strstr(err, "not removed, forced or not") != NULL, "%s", err);
      ck_assert_msg(strstr(err, "--force removes") == NULL, "suggests --force: %s", err);
      char back[8192];
      ck_assert_int_eq(shm_read(name, back, sizeof back), (long)len);
      ck_assert_msg(memcmp(back, data, len) == 0, "destroy changed /dev/shm/%s", name);
    }
    harness_remove(name);
  }
}
END_TEST

/* Segments of ours that fail validation: --force removes them (and only --force). */
START_TEST(destroy_force_removes_broken_segments) {
  /* A corrupt one (its layout version): the magic is there. */
  const char *name = seg_name("corrupt");
  ck_assert_int_eq(CLI("create", name, "--class", "standard:cells=1,queue=1"), 0);
  uint32_t version = 99;
  shm_write(name, 8, &version, sizeof version);
  ck_assert_int_eq(CLI("destroy", name), 1);
  assert_error_line("incompatible-segment", "; --force removes it anyway");
  ck_assert_int_eq(CLI("destroy", name, "--force"), 0);
  ck_assert(!shm_exists(name));
  /* A half-made one: its creator died before storing the magic over the header it wrote. */
  name = seg_name("halfmade");
  ck_assert_int_eq(CLI("create", name, "--class", "standard:cells=1,queue=1"), 0);
  uint64_t no_magic = 0;
  shm_write(name, 0, &no_magic, sizeof no_magic);
  ck_assert_int_eq(CLI("destroy", name), 1);
  assert_error_line("incompatible-segment", "magic: not set");
  ck_assert_msg(strstr(err, "; --force removes it anyway") != NULL, "%s", err);
  ck_assert_int_eq(CLI("destroy", name, "--force"), 0);
  ck_assert(!shm_exists(name));
}
END_TEST

/* ---- bad configurations: exit 2, one error line, nothing created --------- */

static const struct {
  const char *opt, *value, *needle;
} bad_creates[] = {
    {"--class", "standard:cells=0,queue=1", "--class standard: cells: must be 1..4096, got 0"},
    {"--class", "standard:cells=x,queue=1", "--class standard: cells: not a number: 'x'"},
    {"--class", "standard:cells=1", "--class standard: queue: missing (required)"},
    {"--class", "gigantic:cells=1,queue=1", "unknown class"},
    {"--class", "standard:cells=1,queue=1,allow=abcdefghijklmnopqrstuvwxyz0123456",
     "allow: tenant"},
    {"--starvation-after", "5", "--starvation-after: '5' needs a unit"},
    {"--starvation-after", "0s", "--starvation-after: must be positive"},
    {"--max-tenants", "0", "--max-tenants: must be 1..65536, got 0"},
    {"--max-processes", "-1", "--max-processes: must not be negative"},
    {"--mode", "0400", "--mode: the owner must keep read and write"},
    {"--mode", "abc", "--mode: not an octal mode"},
    {"--group", "no-such-group-shmst", "--group: no group named"},
    {"--bogus", "x", "unknown option '--bogus'"},
};

START_TEST(bad_create) {
  const char *name = seg_name("bad");
  /* Each bad option comes after a good one, so the error is the bad option's. */
  int is_class = strcmp(bad_creates[_i].opt, "--class") == 0;
  const char *first = is_class ? "--max-tenants" : "--class";
  const char *first_value = is_class ? "8" : "standard:cells=1,queue=1";
  ck_assert_int_eq(
      CLI("create", name, first, first_value, bad_creates[_i].opt, bad_creates[_i].value), 2);
  assert_error_line("invalid-argument", bad_creates[_i].needle);
  ck_assert_msg(!shm_exists(name), "a bad configuration created /dev/shm/%s", name);
  harness_remove(name);
}
END_TEST

START_TEST(usage_errors) {
  const char *name = seg_name("usage");
  ck_assert_int_eq(harness_cli(out, sizeof out, err, sizeof err, (const char *const[]){NULL}), 2);
  assert_error_line("invalid-argument", "missing command");
  ck_assert_int_eq(CLI("frobnicate"), 2);
  assert_error_line("invalid-argument", "unknown command 'frobnicate'");
  ck_assert_int_eq(CLI("--frobnicate"), 2);
  assert_error_line("invalid-argument", "unknown option '--frobnicate'");
  ck_assert_int_eq(CLI("create", name), 2);
  assert_error_line("invalid-argument", "no class");
  ck_assert_int_eq(CLI("create", "--class", "standard:cells=1,queue=1"), 2);
  assert_error_line("invalid-argument", "create: missing NAME");
  ck_assert_int_eq(CLI("create", name, "--class"), 2);
  assert_error_line("invalid-argument", "missing argument for option '--class'");
  ck_assert_int_eq(CLI("create", name, "extra", "--class", "standard:cells=1,queue=1"), 2);
  assert_error_line("invalid-argument", "unexpected argument 'extra'");
  ck_assert_int_eq(CLI("create", "bad/", "--class", "standard:cells=1,queue=1"), 2);
  assert_error_line("invalid-argument", "segment path 'bad/' ends in '/'");
  ck_assert_int_eq(CLI("create", "bad name", "--class", "standard:cells=1,queue=1"), 2);
  assert_error_line("invalid-argument", "segment name has a space (0x20) at 3");
  ck_assert_int_eq(CLI("status", name, "--json=yes"), 2);
  assert_error_line("invalid-argument", "no argument allowed for option '--json'");
  ck_assert_int_eq(CLI("status"), 2);
  assert_error_line("invalid-argument", "status: missing NAME");
  ck_assert_int_eq(CLI("destroy", name, "-x"), 2);
  assert_error_line("invalid-argument", "unknown option '-x'");
  ck_assert_int_eq(CLI("version", "now"), 2);
  assert_error_line("invalid-argument", "unexpected argument 'now'");
  ck_assert(!shm_exists(name));
}
END_TEST

/* ---- help and version ---------------------------------------------------- */

static const char *const help_commands[][4] = {
    {"--help", NULL, NULL},      {"-h", NULL, NULL},          {"help", NULL, NULL},
    {"create", "--help", NULL},  {"destroy", "--help", NULL}, {"status", "-h", NULL},
    {"version", "--help", NULL}, {"help", "create", NULL},    {"create", "x", "--help"},
};

START_TEST(help_texts) {
  const char *const *argv = help_commands[_i];
  int rc = harness_cli(out, sizeof out, err, sizeof err, argv);
  ck_assert_msg(rc == 0, "%s %s: exit %d, stderr: %s", argv[0], argv[1] ? argv[1] : "", rc, err);
  ck_assert_msg(strncmp(out, "Usage: shmsched", 15) == 0, "%s: no usage line:\n%s", argv[0], out);
  ck_assert_msg(strstr(out, "\nExamples:\n") != NULL, "%s: no Examples:\n%s", argv[0], out);
  ck_assert_msg(strstr(out, "--help") != NULL, "%s: no options:\n%s", argv[0], out);
  ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(help_lists_defaults) {
  ck_assert_int_eq(CLI("create", "--help"), 0);
  static const char *const needles[] = {"(default 5s)",   "(default 1024)",  "(default 0600)",
                                        "(default 4096)", "(default lease)", "--config FILE",
                                        "--group GROUP",  "Exit status"};
  for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
    ck_assert_msg(strstr(out, needles[i]) != NULL, "create --help lacks '%s'", needles[i]);
}
END_TEST

START_TEST(version) {
  ck_assert_int_eq(CLI("version"), 0);
  ck_assert_str_eq(out, "shmsched " SHMS_VERSION_STRING "\n");
  ck_assert_int_eq(CLI("--version"), 0);
  ck_assert_str_eq(out, "shmsched " SHMS_VERSION_STRING "\n");
}
END_TEST

/* ---- --config FILE ------------------------------------------------------- */

/* Write the INI file at left->ini_path. */
static void write_ini(const char *text) {
  FILE *f = fopen(left->ini_path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  ck_assert_int_eq(fclose(f), 0);
}

START_TEST(create_from_config) {
  const char *name = seg_name("ini");
  write_ini("[segment]\nmax-tenants = 50\nmax-processes = 20\nstarvation-after = 3s\n\n"
            "[class tiny]\ncells = 6\nqueue = 12\ntenant-max-active = 3\n\n"
            "[class extra-large]\ncells = 1\nqueue = 2\nallow = gpu-team\n");
  /* Options on the command line override the file's [segment] settings. */
  ck_assert_int_eq(CLI("create", name, "--config", left->ini_path, "--max-processes", "30"), 0);
  shms_t *h;
  shms_config cfg;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &h));
  ck_assert_shms_ok(shms_get_config(h, &cfg));
  shms_detach(h);
  ck_assert_uint_eq(cfg.max_tenants, 50);
  ck_assert_uint_eq(cfg.max_processes, 30);
  ck_assert_uint_eq(cfg.starvation_after_ns, 3000000000ull);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_TINY].cells, 6);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_TINY].queue, 12);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_TINY].tenant_max_active, 3);
  ck_assert_uint_eq(cfg.classes[SHMS_CLASS_EXTRA_LARGE].allow_count, 1);
  ck_assert_int_eq(CLI("status", name, "--json"), 0);
  ck_assert_msg(json_valid(out), "%s", out);
  ck_assert_msg(strstr(out, "\"gpu-team\"") != NULL, "%s", out);
  ck_assert_int_eq(CLI("destroy", name), 0);
  harness_remove(name);
}
END_TEST

START_TEST(bad_config_file) {
  const char *name = seg_name("badini");
  write_ini("[class small]\ncells = 2\nqueue = lots\n");
  ck_assert_int_eq(CLI("create", name, "--config", left->ini_path), 2);
  assert_error_line("invalid-argument", "seg.ini:3: [class small] queue: not a number: 'lots'");
  ck_assert(!shm_exists(name));
  write_ini("[class small]\ncells = 2\nqueue = 2\n[class small]\n");
  ck_assert_int_eq(CLI("create", name, "--config", left->ini_path), 2);
  assert_error_line("invalid-argument", "seg.ini:4: [class small]: duplicate section");
  ck_assert_int_eq(
      CLI("create", name, "--config", left->ini_path, "--class", "tiny:cells=1,queue=1"), 2);
  assert_error_line("invalid-argument", "--config and --class cannot be combined");
  ck_assert_int_eq(CLI("create", name, "--config", "/nonexistent/seg.ini"), 2);
  assert_error_line("invalid-argument", "/nonexistent/seg.ini: cannot open");
  ck_assert(!shm_exists(name));
  harness_remove(name);
}
END_TEST

static Suite *cli_suite(void) {
  Suite *s = suite_create("cli");
  TCase *tc = harness_tcase("segments");
  tcase_add_unchecked_fixture(tc, leftovers_setup, leftovers_teardown);
  tcase_add_test(tc, json_checker_sanity);
  tcase_add_test(tc, create_status_destroy);
  tcase_add_test(tc, status_shows_each_class_overtake_bound);
  tcase_add_test(tc, status_counts_live_processes);
  tcase_add_test(tc, status_shows_the_files_group);
  tcase_add_test(tc, create_twice_leaves_first);
  tcase_add_test(tc, missing_segment);
  tcase_add_test(tc, destroy_refuses_foreign_files);
  tcase_add_test(tc, destroy_force_removes_broken_segments);
  suite_add_tcase(s, tc);
  tc = harness_tcase("errors");
  tcase_add_unchecked_fixture(tc, leftovers_setup, leftovers_teardown);
  tcase_add_loop_test(tc, bad_create, 0, sizeof bad_creates / sizeof bad_creates[0]);
  tcase_add_test(tc, usage_errors);
  suite_add_tcase(s, tc);
  tc = harness_tcase("help");
  tcase_add_unchecked_fixture(tc, leftovers_setup, leftovers_teardown);
  tcase_add_loop_test(tc, help_texts, 0, sizeof help_commands / sizeof help_commands[0]);
  tcase_add_test(tc, help_lists_defaults);
  tcase_add_test(tc, version);
  suite_add_tcase(s, tc);
  tc = harness_tcase("config_file");
  tcase_add_unchecked_fixture(tc, leftovers_setup, leftovers_teardown);
  tcase_add_test(tc, create_from_config);
  tcase_add_test(tc, bad_config_file);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return harness_run(cli_suite()); }
