/*
 * What `shmsched jobserver` tells a build tool (supervisor/jobserver/js_flags.c): the
 * MAKEFLAGS it composes from an inherited one, the make command lines whose
 * -jN make would obey instead of the jobserver, and --style auto's choice.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "jobserver/js_flags.h"

#define OURS "-j4 --jobserver-auth=3,4"

static void flags_are(const char *inherited, const char *words, const char *want) {
  char *got = js_makeflags(inherited, words);
  ck_assert_ptr_nonnull(got);
  ck_assert_msg(strcmp(got, want) == 0, "MAKEFLAGS from '%s': got '%s', want '%s'",
                inherited ? inherited : "(unset)", got, want);
  free(got);
}

/* Without single-letter flags the value begins with a space: the first word is make's flag
 * letters, and a FIFO path ending in 'n' must never be read as -n (dry run). */
START_TEST(leading_space) {
  flags_are(NULL, OURS, " " OURS);
  flags_are("", OURS, " " OURS);
  flags_are(NULL, "-j4 --jobserver-auth=fifo:/tmp/run/n", " -j4 --jobserver-auth=fifo:/tmp/run/n");
  flags_are(" --no-print-directory", OURS, " --no-print-directory " OURS);
  flags_are("-k", OURS, " -k " OURS);
}
END_TEST

/* The inherited flag letters stay first, a dry run among them. */
START_TEST(flag_letters_stay_first) {
  flags_are("k", OURS, "k " OURS);
  flags_are("ns -j8", OURS, "ns " OURS);
  flags_are("k -j8 --jobserver-auth=5,6", OURS, "k " OURS);
}
END_TEST

/* Every inherited jobserver word goes; other words stay, in their order. */
START_TEST(jobserver_words_removed) {
  flags_are(" -j8 --jobserver-fds=5,6 --jobserver-auth=5,6 -l2", OURS, " -l2 " OURS);
  flags_are(" --jobserver-auth=fifo:/tmp/x --jobserver-style=fifo -j", OURS, " " OURS);
  flags_are(" --jobs=3 --jobs -Otarget", OURS, " -Otarget " OURS);
  flags_are(" -jx", OURS, " -jx " OURS); /* not a -j word: make would have said so itself */
}
END_TEST

/* Command-line variables (after " -- ") stay last; escaped spaces stay inside their word. */
START_TEST(variables_and_escapes) {
  flags_are("k -j2 --jobserver-auth=5,6 -- CC=gcc V=1", OURS, "k " OURS " -- CC=gcc V=1");
  flags_are(" --eval=a\\ b -j2", OURS, " --eval=a\\ b " OURS);
  flags_are("CC=gcc", OURS, " CC=gcc " OURS);
  flags_are("  \t ", OURS, " " OURS);
}
END_TEST

static int forces(const char *const *cmd) {
  char what[64];
  return js_make_forces_jobs((char *const *)cmd, what, sizeof what);
}
#define FORCES(...) forces((const char *const[]){__VA_ARGS__, NULL})

START_TEST(make_j_detected) {
  char what[64];
  ck_assert(FORCES("make", "-j4"));
  ck_assert(FORCES("make", "-j"));
  ck_assert(FORCES("make", "all", "-kj"));
  ck_assert(FORCES("/usr/bin/gmake", "--jobs=3"));
  ck_assert(FORCES("make", "--jobs"));
  ck_assert(FORCES("make", "-C", "dir", "-j2"));
  const char *cmd[] = {"make", "-s", "-j12", NULL};
  ck_assert(js_make_forces_jobs((char *const *)cmd, what, sizeof what));
  ck_assert_str_eq(what, "-j12");
}
END_TEST

START_TEST(make_j_not_detected) {
  ck_assert(!FORCES("make"));
  ck_assert(!FORCES("make", "-C", "-j"));   /* the directory named -j */
  ck_assert(!FORCES("make", "-Cj"));        /* -C j */
  ck_assert(!FORCES("make", "-f", "-j4"));  /* the makefile named -j4 */
  ck_assert(!FORCES("make", "-l4", "all")); /* load average */
  ck_assert(!FORCES("make", "--", "-j4"));
  ck_assert(!FORCES("make", "--directory", "-j2"));
  ck_assert(!FORCES("make", "JOBS=-j4"));
  ck_assert(!FORCES("cargo", "build", "-j4")); /* cargo's -j caps its jobs under the jobserver */
  ck_assert(!FORCES("makefoo", "-j4"));
}
END_TEST

START_TEST(auto_style) {
  ck_assert(js_style_probe_wanted("make"));
  ck_assert(js_style_probe_wanted("/usr/bin/gmake"));
  ck_assert(js_style_probe_wanted("ninja"));
  ck_assert(!js_style_probe_wanted("cargo"));
  ck_assert_int_eq(js_style_for_version("make", "GNU Make 4.3"), JS_STYLE_PIPE);
  ck_assert_int_eq(js_style_for_version("make", "GNU Make 4.4.1"), JS_STYLE_FIFO);
  ck_assert_int_eq(js_style_for_version("make", "GNU Make 5.0"), JS_STYLE_FIFO);
  ck_assert_int_eq(js_style_for_version("make", "GNU Make 3.81"), JS_STYLE_PIPE);
  ck_assert_int_eq(js_style_for_version("make", "bmake 20240711 5.9"), JS_STYLE_PIPE);
  ck_assert_int_eq(js_style_for_version("make", NULL), JS_STYLE_PIPE);
  ck_assert_int_eq(js_style_for_version("ninja", "1.11.1"), JS_STYLE_PIPE);
  ck_assert_int_eq(js_style_for_version("ninja", "1.13.0"), JS_STYLE_FIFO);
  enum js_style s;
  ck_assert_int_eq(js_style_parse("fifo", &s), 0);
  ck_assert_int_eq(s, JS_STYLE_FIFO);
  ck_assert_int_eq(js_style_parse("FIFO", &s), -1);
  ck_assert_int_eq(js_style_parse("", &s), -1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("js_flags");
  TCase *tc = harness_tcase("makeflags");
  tcase_add_test(tc, leading_space);
  tcase_add_test(tc, flag_letters_stay_first);
  tcase_add_test(tc, jobserver_words_removed);
  tcase_add_test(tc, variables_and_escapes);
  suite_add_tcase(s, tc);
  tc = harness_tcase("make_j");
  tcase_add_test(tc, make_j_detected);
  tcase_add_test(tc, make_j_not_detected);
  tcase_add_test(tc, auto_style);
  suite_add_tcase(s, tc);
  return harness_run(s);
}
