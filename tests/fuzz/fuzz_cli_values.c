/*
 * The CLI's value parsers (supervisor/cli/cli_config.h) and shms_config_validate.
 *
 * Input: lines; the first byte of each picks the parser, the rest is its text.
 *   c  cli_parse_class_spec       "standard:cells=2,queue=8,..."
 *   d  cli_parse_duration         "250ms"
 *   D  cli_parse_delay            "0.5" (top -d)
 *   u  cli_parse_u32              "4096"
 *   m  cli_parse_mode             "0660"
 *   s  cli_set_segment_option     "max-tenants=4" (split at the first '=')
 *   q  cli_quote                  the next byte is the buffer size, then the text
 * The specs and options accumulate into one configuration, which is then
 * checked with cli_config_check and shms_config_validate.
 *
 * Contracts checked besides memory safety: a failure writes one non-empty
 * line, NUL-terminated within the size given and nothing beyond it; a parsed
 * u32 or mode is exactly its (decimal or octal) digits, whatever its range,
 * which validation checks; a duration is positive; a delay is at least
 * CLI_DELAY_MIN_NS, and a duration that long is the same delay; a quoted string is
 * printable and fits; cli_config_check agrees with shms_config_validate; a
 * valid configuration has a size within SHMS_SEGMENT_MAX.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "fuzz.h"

#define ERR_N 300 /* what the callee may use of err; the rest must stay untouched */
static char err[ERR_N + 32];

static void err_reset(void) { memset(err, 0x5a, sizeof err); }

/* After a call: on failure one line within ERR_N; never a byte past ERR_N. */
static void err_after(const char *what, int rc) {
  for (size_t i = ERR_N; i < sizeof err; i++)
    if (err[i] != 0x5a)
      fuzz_fail("%s wrote past the %d bytes it was given", what, ERR_N);
  if (rc != 0 && rc != SHMS_EINVAL)
    fuzz_fail("%s returned %d, not 0 or invalid-argument", what, rc);
  if (rc != 0)
    fuzz_check_error_line(what, err, ERR_N);
}

static void parse_u32(const char *s) {
  uint32_t v = 0;
  err_reset();
  int rc = cli_parse_u32(s, &v, err, ERR_N);
  err_after("cli_parse_u32", rc);
  if (rc != 0)
    return;
  size_t len = strlen(s);
  if (len == 0 || strspn(s, "0123456789") != len)
    fuzz_fail("cli_parse_u32 accepted '%s', which is not just digits", s);
  if (strtoull(s, NULL, 10) != v)
    fuzz_fail("cli_parse_u32 read '%s' as %u", s, v);
}

static void parse_duration(const char *s) {
  uint64_t ns = 0;
  err_reset();
  int rc = cli_parse_duration(s, &ns, err, ERR_N);
  err_after("cli_parse_duration", rc);
  if (rc == 0 && ns == 0)
    fuzz_fail("cli_parse_duration accepted '%s' as zero", s);
}

static void parse_delay(const char *s) {
  uint64_t ns = 0, as_duration = 0;
  err_reset();
  int rc = cli_parse_delay(s, &ns, err, ERR_N);
  err_after("cli_parse_delay", rc);
  if (rc == 0 && ns < CLI_DELAY_MIN_NS)
    fuzz_fail("cli_parse_delay accepted '%s' as %llu ns", s, (unsigned long long)ns);
  char derr[ERR_N];
  if (cli_parse_duration(s, &as_duration, derr, sizeof derr) == 0 &&
      as_duration >= CLI_DELAY_MIN_NS && (rc != 0 || ns != as_duration))
    fuzz_fail("cli_parse_delay read the duration '%s' otherwise", s);
}

static void parse_mode(const char *s) {
  uint32_t mode = 0;
  err_reset();
  int rc = cli_parse_mode(s, &mode, err, ERR_N);
  err_after("cli_parse_mode", rc);
  if (rc != 0)
    return;
  /* The parser owns the syntax, validation the range (0600..0777): just the digits here. */
  size_t len = strlen(s);
  if (len == 0 || strspn(s, "01234567") != len)
    fuzz_fail("cli_parse_mode accepted '%s', which is not just octal digits", s);
  if (strtoull(s, NULL, 8) != mode)
    fuzz_fail("cli_parse_mode read '%s' as 0%o", s, mode);
}

static void segment_option(shms_config *cfg, char *s) {
  char *eq = strchr(s, '=');
  if (eq == NULL)
    return;
  *eq = '\0';
  err_reset();
  err_after("cli_set_segment_option", cli_set_segment_option(cfg, s, eq + 1, err, ERR_N));
}

static void class_spec(shms_config *cfg, const char *s) {
  err_reset();
  int rc = cli_parse_class_spec(cfg, s, err, ERR_N);
  err_after("cli_parse_class_spec", rc);
  if (rc != 0)
    return;
  char name[32] = "";
  const char *colon = strchr(s, ':');
  if (colon != NULL && (size_t)(colon - s) < sizeof name)
    memcpy(name, s, (size_t)(colon - s));
  int c = shms_class_from_name(name);
  if (c < 0 || !cfg->classes[c].configured)
    fuzz_fail("cli_parse_class_spec accepted '%s' without configuring its class", s);
}

static void quote(const char *s) {
  if (*s == '\0')
    return;
  size_t n = (unsigned char)*s++ % 100;
  char buf[128];
  memset(buf, 0x5a, sizeof buf);
  cli_quote(buf, n, s);
  for (size_t i = n; i < sizeof buf; i++)
    if (buf[i] != 0x5a)
      fuzz_fail("cli_quote wrote past the %zu bytes it was given", n);
  if (n == 0)
    return;
  size_t len = strnlen(buf, n);
  if (len == n)
    fuzz_fail("cli_quote left no NUL within %zu bytes", n);
  for (size_t i = 0; i < len; i++)
    if (buf[i] < 0x20 || buf[i] > 0x7e)
      fuzz_fail("cli_quote left the byte 0x%02x", (unsigned char)buf[i]);
}

static void whole(const shms_config *cfg) {
  err_reset();
  int rc = cli_config_check(cfg, err, ERR_N);
  err_after("cli_config_check", rc);
  int valid = shms_config_validate(cfg) == SHMS_OK;
  if (valid != (rc == 0))
    fuzz_fail("cli_config_check and shms_config_validate disagree");
  uint64_t size = shms_segment_size(cfg);
  if (valid && (size == 0 || size > SHMS_SEGMENT_MAX))
    fuzz_fail("a valid configuration needs %llu bytes", (unsigned long long)size);
  if (!valid && size != 0)
    fuzz_fail("an invalid configuration has a size");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  shms_config cfg;
  shms_config_init(&cfg);
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL;
       line = strtok_r(NULL, "\n", &save)) {
    switch (line[0]) {
    case 'c':
      class_spec(&cfg, line + 1);
      break;
    case 'd':
      parse_duration(line + 1);
      break;
    case 'D':
      parse_delay(line + 1);
      break;
    case 'u':
      parse_u32(line + 1);
      break;
    case 'm':
      parse_mode(line + 1);
      break;
    case 's':
      segment_option(&cfg, line + 1);
      break;
    case 'q':
      quote(line + 1);
      break;
    default:
      break;
    }
  }
  whole(&cfg);
  free(text);
  return 0;
}
