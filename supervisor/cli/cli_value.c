/*
 * Scalar values of the CLI and the INI file: numbers, durations (and top's delay), modes, groups.
 * Strict by design: a typo must fail loudly rather than turn into a default.
 */
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli_config.h"

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (n > 0)
    vsnprintf(err, n, fmt, ap);
  va_end(ap);
  return SHMS_EINVAL;
}

const char *cli_quote(char *buf, size_t n, const char *s) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0, max_in = 64;
  if (n == 0)
    return buf;
  for (size_t i = 0; s[i] != '\0' && o + 8 < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (i == max_in) {
      memcpy(buf + o, "...", 3);
      o += 3;
      break;
    }
    if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
      buf[o++] = (char)ch;
      continue;
    }
    buf[o++] = '\\';
    buf[o++] = 'x';
    buf[o++] = hex[ch >> 4];
    buf[o++] = hex[ch & 15];
  }
  buf[o] = '\0';
  return buf;
}

/* Digits only, into a uint64; the caller bounds the result. */
static int parse_digits(const char *s, size_t len, uint64_t *out) {
  uint64_t v = 0;
  if (len == 0)
    return -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10)
      return -2;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

int cli_parse_u32(const char *s, uint32_t *out, char *err, size_t n) {
  char q[96];
  uint64_t v = 0;
  if (s == NULL || s[0] == '\0')
    return fail(err, n, "empty value, expected a number");
  if (s[0] == '-')
    return fail(err, n, "must not be negative: '%s'", cli_quote(q, sizeof q, s));
  int rc = parse_digits(s, strlen(s), &v);
  if (rc == -1)
    return fail(err, n, "not a number: '%s'", cli_quote(q, sizeof q, s));
  if (rc == -2 || v > UINT32_MAX)
    return fail(err, n, "out of range (at most %u): '%s'", UINT32_MAX, cli_quote(q, sizeof q, s));
  *out = (uint32_t)v;
  return 0;
}

static const struct {
  const char *suffix;
  uint64_t ns;
} units[] = {
    {"ms", 1000ull * 1000},
    {"s", 1000ull * 1000 * 1000},
    {"m", 60ull * 1000 * 1000 * 1000},
    {"h", 3600ull * 1000 * 1000 * 1000},
};

int cli_parse_duration(const char *s, uint64_t *ns, char *err, size_t n) {
  char q[96];
  if (s == NULL || s[0] == '\0')
    return fail(err, n, "empty value, expected a duration such as 5s");
  cli_quote(q, sizeof q, s);
  if (s[0] == '-')
    return fail(err, n, "must be positive: '%s'", q);
  size_t digits = strspn(s, "0123456789");
  if (digits == 0)
    return fail(err, n, "not a duration: '%s' (expected e.g. 250ms, 5s, 2m, 1h)", q);
  if (s[digits] == '\0')
    return fail(err, n, "'%s' needs a unit: ms, s, m or h", q);
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcmp(s + digits, units[i].suffix) != 0)
      continue;
    uint64_t v = 0;
    if (parse_digits(s, digits, &v) != 0 || v > UINT64_MAX / units[i].ns)
      return fail(err, n, "out of range: '%s'", q);
    if (v == 0)
      return fail(err, n, "must be positive: '%s'", q);
    *ns = v * units[i].ns;
    return 0;
  }
  return fail(err, n, "unknown unit in '%s' (use ms, s, m or h)", q);
}

/* top(1)'s seconds with an optional fraction ("0.5", "2", ".25") into ns; -1 if s is not one.
 * Digits past the ninth of the fraction are below a nanosecond and dropped. */
static int parse_seconds(const char *s, uint64_t *ns) {
  size_t whole = strspn(s, "0123456789"), frac = 0;
  if (s[whole] == '.')
    frac = strspn(s + whole + 1, "0123456789");
  size_t end = whole + (s[whole] == '.' ? 1 + frac : 0);
  if (whole + frac == 0 || s[end] != '\0')
    return -1;
  uint64_t sec = 0, sub = 0;
  if (whole > 0 && parse_digits(s, whole, &sec) != 0)
    return -2;
  for (size_t i = 0; i < 9; i++)
    sub = sub * 10 + (i < frac ? (uint64_t)(s[whole + 1 + i] - '0') : 0);
  if (sec > (UINT64_MAX - sub) / 1000000000ull)
    return -2;
  *ns = sec * 1000000000ull + sub;
  return 0;
}

int cli_parse_delay(const char *s, uint64_t *ns, char *err, size_t n) {
  char q[96];
  if (s == NULL || s[0] == '\0')
    return fail(err, n, "empty value, expected seconds such as 0.5 or a duration such as 500ms");
  cli_quote(q, sizeof q, s);
  if (s[0] == '-')
    return fail(err, n, "must be positive: '%s'", q);
  uint64_t v = 0;
  int rc = parse_seconds(s, &v);
  if (rc == -2)
    return fail(err, n, "out of range: '%s'", q);
  if (rc == -1) {
    size_t num = strspn(s, "0123456789.");
    int dot = num > 0 && memchr(s, '.', num) != NULL;
    if (dot && s[num] != '\0')
      return fail(err, n, "'%s': seconds with a fraction take no unit (e.g. 0.5 or 500ms)", q);
    if (num == 0 || dot)
      return fail(err, n, "not a delay: '%s' (expected seconds such as 0.5 or 2, or 500ms, 2s)", q);
    if (cli_parse_duration(s, &v, err, n) != 0)
      return SHMS_EINVAL;
  }
  if (v == 0)
    return fail(err, n, "must be positive: '%s'", q);
  if (v < CLI_DELAY_MIN_NS)
    return fail(err, n, "'%s' is below the shortest delay, 1ms", q);
  *ns = v;
  return 0;
}

int cli_parse_mode(const char *s, uint32_t *mode, char *err, size_t n) {
  char q[96];
  if (s == NULL || s[0] == '\0')
    return fail(err, n, "empty value, expected octal permission bits such as 0660");
  size_t len = strlen(s);
  if (strspn(s, "01234567") != len)
    return fail(err, n, "not an octal mode: '%s' (expected e.g. 0660)", cli_quote(q, sizeof q, s));
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    v = v * 8 + (uint64_t)(s[i] - '0');
    if (v > UINT32_MAX)
      return fail(err, n, "out of range: '%s'", cli_quote(q, sizeof q, s));
  }
  *mode = (uint32_t)v;
  return 0;
}

int cli_parse_group(const char *s, int64_t *gid, char *err, size_t n) {
  char q[96];
  if (s == NULL || s[0] == '\0')
    return fail(err, n, "empty value, expected a group name or gid");
  if (strspn(s, "0123456789") == strlen(s)) {
    uint32_t v = 0;
    if (cli_parse_u32(s, &v, err, n) != 0)
      return SHMS_EINVAL;
    *gid = v;
    return 0;
  }
  struct group *g = getgrnam(s);
  if (g == NULL)
    return fail(err, n, "no group named '%s'", cli_quote(q, sizeof q, s));
  *gid = (int64_t)g->gr_gid;
  return 0;
}
