/*
 * A minimal streaming JSON writer: pretty-printed, every string escaped, so
 * whatever bytes a name holds the output stays valid JSON.
 */
#ifndef SHMS_SUPERVISOR_JSON_OUT_H
#define SHMS_SUPERVISOR_JSON_OUT_H

#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json_out {
  FILE *f;
  int depth;
  unsigned char has_items[JSON_MAX_DEPTH]; /* per open container: needs a comma first */
  char closer[JSON_MAX_DEPTH];             /* per open container: '}' or ']' */
  int compact;                             /* everything on one line (JSON Lines) */
};

/*
 * Values take a key inside objects and NULL inside arrays. json_open and
 * json_begin_* open containers (at most JSON_MAX_DEPTH deep, a caller's
 * bug otherwise); json_end closes the innermost one.
 */
void json_open(struct json_out *j, FILE *f);         /* the top-level object */
void json_open_compact(struct json_out *j, FILE *f); /* the same, all of it on one line */
void json_begin_object(struct json_out *j, const char *key);
void json_begin_array(struct json_out *j, const char *key);
void json_end(struct json_out *j);
void json_close(struct json_out *j); /* close everything still open, then a newline */

void json_str(struct json_out *j, const char *key, const char *v);
void json_u64(struct json_out *j, const char *key, uint64_t v);
void json_i64(struct json_out *j, const char *key, int64_t v);
void json_null(struct json_out *j, const char *key);
void json_bool(struct json_out *j, const char *key, int v);
void json_double(struct json_out *j, const char *key, double v); /* finite; else null */

#endif
