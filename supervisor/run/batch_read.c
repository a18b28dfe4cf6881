/*
 * The JSON lines of `shmsched submit --batch` (batch.h), parsed with jansson:
 * one object a line, every field checked, and the first bad line refuses the
 * whole batch before anything is submitted.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/secure.h"
#include "batch.h"

/* Where the input is, for messages: "'FILE'" or "(stdin)". */
struct reader {
  const struct submit_args *a;
  size_t limit;
  char shown[128];
  unsigned line;
};

#define BAD(r, ...) bad_line(r, __VA_ARGS__)

__attribute__((format(printf, 2, 3))) static int bad_line(const struct reader *r, const char *fmt,
                                                          ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return cli_usage("submit: --batch %s: line %u: %s; nothing was submitted", r->shown, r->line,
                   why);
}

/* Strict standard base64 (RFC 4648, padded) of s into a new buffer of *len bytes, or NULL. */
static unsigned char *base64_decode(const char *s, size_t n, size_t *len) {
  if (n % 4 != 0)
    return NULL;
  unsigned char *out = malloc(n / 4 * 3 + 1);
  if (out == NULL)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int j = 0; j < 4; j++) {
      char c = s[i + j];
      int d = c >= 'A' && c <= 'Z'   ? c - 'A'
              : c >= 'a' && c <= 'z' ? c - 'a' + 26
              : c >= '0' && c <= '9' ? c - '0' + 52
              : c == '+'             ? 62
              : c == '/'             ? 63
                                     : -1;
      if (c == '=' && i + 4 == n && j >= 2 && (j == 3 || s[i + 3] == '=')) {
        pad++;
        d = 0;
      } else if (d < 0 || pad > 0) {
        free(out);
        return NULL;
      }
      v = v << 6 | (uint32_t)d;
    }
    out[o++] = (unsigned char)(v >> 16);
    if (pad < 2)
      out[o++] = (unsigned char)(v >> 8);
    if (pad < 1)
      out[o++] = (unsigned char)v;
  }
  *len = o;
  return out;
}

/* A name field (tenant, key, quota): 1..31 graphic ASCII bytes, copied into *out. */
static int take_name(const struct reader *r, const char *field, json_t *v, char **out) {
  if (!json_is_string(v))
    return BAD(r, "\"%s\" must be a string", field);
  const char *s = json_string_value(v);
  if (strlen(s) != json_string_length(v) || shms_tenant_check(s) != SHMS_OK)
    return BAD(r, "\"%s\": 1 to %d graphic ASCII bytes, not '%s'", field, SHMS_TENANT_MAX, s);
  *out = strdup(s);
  return *out == NULL ? BAD(r, "out of memory") : 0;
}

/* "quota": a name or an array of 1..8 names; whether the segment has them is the submit's check,
 * which names the line too. */
static int take_quotas(const struct reader *r, json_t *v, struct batch_line *l) {
  if (json_is_string(v))
    return take_name(r, "quota", v, &l->quota[l->nquota++]);
  if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > SHMS_REQUEST_QUOTAS_MAX)
    return BAD(r, "\"quota\" must be a quota's name or an array of 1 to %d names",
               SHMS_REQUEST_QUOTAS_MAX);
  size_t i;
  json_t *e;
  json_array_foreach(v, i, e) {
    int rc = take_name(r, "quota", e, &l->quota[l->nquota]);
    if (rc != 0)
      return rc;
    for (uint32_t j = 0; j < l->nquota; j++)
      if (strcmp(l->quota[j], l->quota[l->nquota]) == 0)
        return BAD(r, "\"quota\": '%s' is named twice", l->quota[l->nquota]);
    l->nquota++;
  }
  return 0;
}

/* "payload_file": the file's bytes, at most the class's payload size. */
static int take_file(const struct reader *r, const char *path, struct batch_line *l) {
  char q[96];
  int fd = cli_open_as_user(path, O_RDONLY); /* never with a setgid group */
  if (fd < 0)
    return BAD(r, "\"payload_file\" '%s': cannot open: %s", cli_quote(q, sizeof q, path),
               strerror(errno));
  char *buf = malloc(r->limit + 1);
  size_t len = 0;
  int e = buf == NULL ? ENOMEM : 0;
  while (e == 0 && len <= r->limit) {
    ssize_t got = read(fd, buf + len, r->limit + 1 - len);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      e = errno;
    if (got <= 0)
      break;
    len += (size_t)got;
  }
  close(fd);
  if (e != 0 || len > r->limit) {
    free(buf);
    return e != 0 ? BAD(r, "\"payload_file\" '%s': cannot read: %s", cli_quote(q, sizeof q, path),
                        strerror(e))
                  : BAD(r, "\"payload_file\" '%s': more than class %s's payload size of %zu bytes",
                        cli_quote(q, sizeof q, path), r->a->cls, r->limit);
  }
  l->payload = buf;
  l->len = len;
  return 0;
}

/* The payload, from whichever one of its three fields the line has. */
static int take_payload(const struct reader *r, json_t *o, struct batch_line *l) {
  json_t *text = json_object_get(o, "payload"), *b64 = json_object_get(o, "payload_b64"),
         *file = json_object_get(o, "payload_file");
  if ((text != NULL) + (b64 != NULL) + (file != NULL) > 1)
    return BAD(r, "give at most one of \"payload\", \"payload_b64\" and \"payload_file\"");
  json_t *v = text != NULL ? text : b64 != NULL ? b64 : file;
  const char *field = text != NULL ? "payload" : b64 != NULL ? "payload_b64" : "payload_file";
  if (v == NULL)
    return 0; /* an empty payload */
  if (!json_is_string(v))
    return BAD(r, "\"%s\" must be a string", field);
  const char *s = json_string_value(v);
  size_t n = json_string_length(v);
  if (file != NULL)
    return strlen(s) != n || n == 0 ? BAD(r, "\"payload_file\" must name a file")
                                    : take_file(r, s, l);
  if (b64 != NULL) {
    if ((l->payload = base64_decode(s, n, &l->len)) == NULL)
      return BAD(r, "\"payload_b64\" is not valid base64 (standard alphabet, padded)");
  } else if (n > 0) {
    if ((l->payload = malloc(n)) == NULL)
      return BAD(r, "out of memory");
    memcpy(l->payload, s, n);
    l->len = n;
  }
  if (l->len > r->limit)
    return BAD(r, "\"%s\": %zu bytes, more than class %s's payload size of %zu bytes", field,
               l->len, r->a->cls, r->limit);
  return 0;
}

static int known(const char *field) {
  static const char *const fields[] = {"tenant",   "payload",  "payload_b64", "payload_file",
                                       "priority", "deadline", "key",         "quota"};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (strcmp(field, fields[i]) == 0)
      return 1;
  return 0;
}

/* The fields other than the payload. */
static int take_fields(const struct reader *r, json_t *o, struct batch_line *l) {
  const char *field;
  json_t *v;
  json_object_foreach(o, field, v) {
    if (strcmp(field, "supersede") == 0)
      return BAD(r, "\"supersede\": a batch's keyed jobs join or queue, they supersede nothing "
                    "(supersede a key alone: --key KEY --supersede)");
    if (!known(field))
      return BAD(r,
                 "unknown field \"%s\" (known: tenant, payload, payload_b64, payload_file, "
                 "priority, deadline, key, quota)",
                 field);
  }
  int rc;
  if ((v = json_object_get(o, "tenant")) != NULL && (rc = take_name(r, "tenant", v, &l->tenant)))
    return rc;
  if (l->tenant == NULL && r->a->req.tenant == NULL)
    return BAD(r, "no \"tenant\", and no --tenant for lines without one");
  if (l->tenant == NULL && (l->tenant = strdup(r->a->req.tenant)) == NULL)
    return BAD(r, "out of memory");
  if ((v = json_object_get(o, "priority")) != NULL) {
    if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN ||
        json_integer_value(v) > INT32_MAX)
      return BAD(r, "\"priority\" must be an integer from %d to %d", INT32_MIN, INT32_MAX);
    l->priority = (int32_t)json_integer_value(v);
  }
  if ((v = json_object_get(o, "deadline")) != NULL) {
    char err[256];
    if (!json_is_string(v))
      return BAD(r, "\"deadline\" must be a duration string such as \"30s\"");
    if (cli_parse_duration(json_string_value(v), &l->deadline, err, sizeof err) != 0)
      return BAD(r, "\"deadline\": %s", err);
  }
  if ((v = json_object_get(o, "key")) != NULL && (rc = take_name(r, "key", v, &l->key)))
    return rc;
  if ((v = json_object_get(o, "quota")) != NULL && (rc = take_quotas(r, v, l)))
    return rc;
  return take_payload(r, o, l);
}

/* One non-blank line into l. */
static int parse_line(const struct reader *r, const char *text, size_t n, struct batch_line *l) {
  json_error_t err;
  json_t *o = json_loadb(text, n, JSON_REJECT_DUPLICATES, &err);
  if (o == NULL)
    return BAD(r, "not JSON: %s (column %d)", err.text, err.column);
  int rc = json_is_object(o) ? take_fields(r, o, l) : BAD(r, "not a JSON object");
  json_decref(o);
  return rc;
}

static int blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
      return 0;
  return 1;
}

/* Every line of f into in. */
static int read_lines(struct reader *r, FILE *f, struct batch_input *in) {
  char *text = NULL;
  size_t cap = 0;
  ssize_t n;
  int rc = 0;
  while (rc == 0 && (n = getline(&text, &cap, f)) >= 0) {
    r->line++;
    if (blank(text, (size_t)n))
      continue;
    if (in->n >= SHMS_BATCH_MAX) {
      rc = BAD(r, "more than %u jobs in one batch", SHMS_BATCH_MAX);
      break;
    }
    struct batch_line *v = realloc(in->v, (in->n + 1) * sizeof *v);
    if (v == NULL) {
      rc = BAD(r, "out of memory");
      break;
    }
    in->v = v;
    struct batch_line *l = &in->v[in->n++];
    *l = (struct batch_line){
        .line = r->line, .priority = r->a->req.priority, .deadline = r->a->deadline_in_ns};
    rc = parse_line(r, text, (size_t)n, l);
  }
  if (rc == 0 && ferror(f))
    rc = cli_usage("submit: --batch %s: cannot read: %s", r->shown, strerror(errno));
  free(text);
  return rc;
}

int batch_read(const struct submit_args *a, size_t limit, struct batch_input *in) {
  char q[96];
  struct reader r = {.a = a, .limit = limit};
  int std = strcmp(a->batch, "-") == 0;
  snprintf(r.shown, sizeof r.shown, std ? "%s (stdin)" : "'%s'", cli_quote(q, sizeof q, a->batch));
  *in = (struct batch_input){0};
  int fd = std ? STDIN_FILENO : cli_open_as_user(a->batch, O_RDONLY);
  FILE *f = fd < 0 ? NULL : std ? stdin : fdopen(fd, "r");
  if (f == NULL) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return cli_usage("submit: --batch %s: cannot open: %s", r.shown, strerror(e));
  }
  int rc = read_lines(&r, f, in);
  if (!std)
    fclose(f);
  if (rc == 0 && in->n == 0)
    rc = cli_usage("submit: --batch %s: the batch is empty (no JSON lines); nothing was submitted",
                   r.shown);
  if (rc != 0)
    batch_free(in);
  return rc;
}

void batch_free(struct batch_input *in) {
  for (size_t i = 0; i < in->n; i++) {
    free(in->v[i].tenant);
    free(in->v[i].payload);
    free(in->v[i].key);
    for (uint32_t q = 0; q < SHMS_REQUEST_QUOTAS_MAX; q++)
      free(in->v[i].quota[q]);
  }
  free(in->v);
  *in = (struct batch_input){0};
}
