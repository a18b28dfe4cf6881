/* The error map: every code has its reason word and a message, and the words are DESIGN.md's. */
#include <string.h>

#include "harness.h"

static const struct {
  int code;
  const char *word;
} contract[] = {
    {SHMS_EINVAL, "invalid-argument"},
    {SHMS_EQUEUEFULL, "queue-full"},
    {SHMS_EDENIED, "class-denied"},
    {SHMS_EDUPACT, "duplicate-activation"},
    {SHMS_ECANCELLED, "cancelled"},
    {SHMS_EDEADLINE, "deadline-exceeded"},
    {SHMS_EQUARANTINED, "all-cells-quarantined"},
    {SHMS_ESHUTDOWN, "shutdown"},
    {SHMS_ESEQEXHAUSTED, "sequence-exhausted"},
    {SHMS_ELEASE, "lease-mismatch"},
    {SHMS_ENOTFOUND, "not-found"},
    {SHMS_EOWNERLOST, "owner-lost"},
    {SHMS_EWORKERLOST, "worker-lost"},
    {SHMS_EINCOMPAT, "incompatible-segment"},
    {SHMS_EPERM, "permission-denied"},
};

START_TEST(reason_words_match_the_contract) {
  for (size_t i = 0; i < sizeof contract / sizeof contract[0]; i++) {
    ck_assert_str_eq(shms_err_name(contract[i].code), contract[i].word);
    ck_assert_int_lt(contract[i].code, 0);
  }
}
END_TEST

START_TEST(every_code_is_distinct_and_described) {
  /* Codes run -1, -2, ... down to the last entry of the map; names never repeat. */
  int last = -1;
  while (strcmp(shms_err_name(last - 1), "unknown-error") != 0)
    last--;
  ck_assert_int_le(last, SHMS_ESUPERSEDED);
  for (int a = -1; a >= last; a--) {
    ck_assert_str_ne(shms_err_name(a), "unknown-error");
    ck_assert_int_gt(strlen(shms_strerror(a)), 0);
    ck_assert_str_ne(shms_strerror(a), "unknown error");
    for (int b = a - 1; b >= last; b--)
      ck_assert_str_ne(shms_err_name(a), shms_err_name(b));
  }
}
END_TEST

START_TEST(unknown_codes_say_so) {
  ck_assert_str_eq(shms_err_name(SHMS_ESUPERSEDED - 1), "unknown-error");
  ck_assert_str_eq(shms_err_name(12345), "unknown-error");
  ck_assert_str_eq(shms_strerror(-9999), "unknown error");
  ck_assert_str_eq(shms_err_name(SHMS_OK), "ok");
}
END_TEST

START_TEST(detail_names_the_failure_and_is_per_call) {
  shms_config cfg;
  harness_config(&cfg, 0, 4);
  ck_assert_shms_err(shms_config_validate(&cfg), SHMS_EINVAL, "class standard: cells");
  harness_config(&cfg, 2, 4);
  cfg.classes[SHMS_CLASS_STANDARD].on_command_crash = 2;
  ck_assert_shms_err(shms_config_validate(&cfg), SHMS_EINVAL, "class standard: on-command-crash");
  cfg.classes[SHMS_CLASS_STANDARD].on_command_crash = SHMS_ON_CRASH_QUARANTINE;
  ck_assert_shms_ok(shms_config_validate(&cfg));
  ck_assert_str_eq(shms_last_error_detail(), "");
}
END_TEST

int main(void) {
  Suite *s = suite_create("errors");
  TCase *tc = harness_tcase("map");
  tcase_add_test(tc, reason_words_match_the_contract);
  tcase_add_test(tc, every_code_is_distinct_and_described);
  tcase_add_test(tc, unknown_codes_say_so);
  tcase_add_test(tc, detail_names_the_failure_and_is_per_call);
  suite_add_tcase(s, tc);
  return harness_run(s);
}
