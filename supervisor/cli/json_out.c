/* The JSON writer (json_out.h). */
#include "json_out.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>

static void put_string(FILE *f, const char *s) {
  static const char hex[] = "0123456789abcdef";
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p == '\t')
      fputs("\\t", f);
    else if (*p >= 0x20 && *p < 0x7f)
      fputc(*p, f);
    else /* controls, and bytes that need not be UTF-8: as code points U+0000..U+00FF */
      fprintf(f, "\\u00%c%c", hex[*p >> 4], hex[*p & 15]);
  }
  fputc('"', f);
}

/* Comma, newline and indent before an item, then its key. */
static void item(struct json_out *j, const char *key) {
  if (j->depth > 0) {
    if (j->has_items[j->depth - 1])
      fputc(',', j->f);
    j->has_items[j->depth - 1] = 1;
    if (!j->compact)
      fprintf(j->f, "\n%*s", 2 * j->depth, "");
  }
  if (key != NULL) {
    put_string(j->f, key);
    fputs(": ", j->f);
  }
}

static void begin(struct json_out *j, const char *key, char open, char close) {
  assert(j->depth < JSON_MAX_DEPTH);
  item(j, key);
  fputc(open, j->f);
  j->has_items[j->depth] = 0;
  j->closer[j->depth++] = close;
}

void json_open(struct json_out *j, FILE *f) {
  j->f = f;
  j->depth = 0;
  j->compact = 0;
  begin(j, NULL, '{', '}');
}

void json_open_compact(struct json_out *j, FILE *f) {
  json_open(j, f);
  j->compact = 1;
}

void json_begin_object(struct json_out *j, const char *key) { begin(j, key, '{', '}'); }

void json_begin_array(struct json_out *j, const char *key) { begin(j, key, '[', ']'); }

void json_end(struct json_out *j) {
  if (j->depth == 0)
    return;
  j->depth--;
  /* An empty container closes on its own line: "[]" rather than "[\n]". */
  if (j->has_items[j->depth] && !j->compact)
    fprintf(j->f, "\n%*s", 2 * j->depth, "");
  fputc(j->closer[j->depth], j->f);
}

void json_close(struct json_out *j) {
  while (j->depth > 0)
    json_end(j);
  fputc('\n', j->f);
}

void json_str(struct json_out *j, const char *key, const char *v) {
  item(j, key);
  put_string(j->f, v);
}

void json_u64(struct json_out *j, const char *key, uint64_t v) {
  item(j, key);
  fprintf(j->f, "%" PRIu64, v);
}

void json_i64(struct json_out *j, const char *key, int64_t v) {
  item(j, key);
  fprintf(j->f, "%" PRId64, v);
}

void json_null(struct json_out *j, const char *key) {
  item(j, key);
  fputs("null", j->f);
}

void json_bool(struct json_out *j, const char *key, int v) {
  item(j, key);
  fputs(v ? "true" : "false", j->f);
}

void json_double(struct json_out *j, const char *key, double v) {
  item(j, key);
  if (isfinite(v))
    fprintf(j->f, "%.6g", v);
  else
    fputs("null", j->f);
}
