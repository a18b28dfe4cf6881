/* MAKEFLAGS, -jN on make's command line and the auto style (js_flags.h). */
#include "js_flags.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The end of the word at s: a space ends it unless a backslash escapes it (make writes "\ "). */
static const char *word_end(const char *s) {
  while (*s != '\0' && *s != ' ' && *s != '\t') {
    if (*s == '\\' && s[1] != '\0')
      s++;
    s++;
  }
  return s;
}

static int starts(const char *w, size_t len, const char *prefix) {
  size_t p = strlen(prefix);
  return len >= p && memcmp(w, prefix, p) == 0;
}

/* -j, -j12, --jobs, --jobs=12, and the jobserver's own words. */
static int jobserver_word(const char *w, size_t len) {
  if (starts(w, len, "--jobserver-auth=") || starts(w, len, "--jobserver-fds=") ||
      starts(w, len, "--jobserver-style="))
    return 1;
  if ((len == 6 && memcmp(w, "--jobs", 6) == 0) || starts(w, len, "--jobs="))
    return 1;
  if (len < 2 || w[0] != '-' || w[1] != 'j')
    return 0;
  for (size_t i = 2; i < len; i++)
    if (w[i] < '0' || w[i] > '9')
      return 0;
  return 1;
}

/* Append len bytes of w to out (a word, preceded by a space unless out is empty). */
static void put_word(char *out, size_t *at, const char *w, size_t len, int space) {
  if (space)
    out[(*at)++] = ' ';
  memcpy(out + *at, w, len);
  *at += len;
  out[*at] = '\0';
}

char *js_makeflags(const char *inherited, const char *words) {
  const char *in = inherited != NULL ? inherited : "";
  size_t cap = strlen(in) + strlen(words) + 4;
  char *out = malloc(cap);
  if (out == NULL)
    return NULL;
  size_t at = 0;
  out[0] = '\0';
  const char *p = in, *vars = NULL;
  /* The first word is make's single-letter flags when it does not begin with '-' (and is no
   * assignment); make 4.4 leaves it empty, beginning the value with a space. */
  if (*p != '\0' && *p != ' ' && *p != '\t' && *p != '-') {
    const char *e = word_end(p);
    if (memchr(p, '=', (size_t)(e - p)) == NULL) {
      put_word(out, &at, p, (size_t)(e - p), 0);
      p = e;
    }
  }
  for (;;) {
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p == '\0')
      break;
    const char *e = word_end(p);
    size_t len = (size_t)(e - p);
    if (len == 2 && memcmp(p, "--", 2) == 0) { /* command-line variables follow: they go last */
      vars = p;
      break;
    }
    if (!jobserver_word(p, len))
      put_word(out, &at, p, len, 1);
    p = e;
  }
  put_word(out, &at, words, strlen(words), 1);
  if (vars != NULL)
    put_word(out, &at, vars, strlen(vars), 1);
  return out;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

static int is_make(const char *cmd0) {
  const char *b = base_name(cmd0);
  return strcmp(b, "make") == 0 || strcmp(b, "gmake") == 0;
}

/* make's long options that take their argument as the next word when it has no '='. */
static int long_takes_next(const char *a) {
  static const char *const with_arg[] = {
      "--directory",  "--file",     "--makefile",   "--include-dir", "--old-file",
      "--assume-old", "--new-file", "--assume-new", "--what-if",     "--eval",
  };
  if (strchr(a, '=') != NULL)
    return 0;
  for (size_t i = 0; i < sizeof with_arg / sizeof with_arg[0]; i++)
    if (strcmp(a, with_arg[i]) == 0)
      return 1;
  return 0;
}

/* In a cluster of short options "-kj4": 1 if it has j; *skip set when the next word is the
 * argument of its last option (-C dir). */
static int short_cluster_has_j(const char *a, int *skip) {
  for (const char *c = a + 1; *c != '\0'; c++) {
    if (*c == 'j')
      return 1;
    if (strchr("CfIoWE", *c) != NULL) { /* the rest, or the next word, is its argument */
      *skip = c[1] == '\0';
      return 0;
    }
    if (*c == 'l' || *c == 'O') /* an optional argument, attached */
      return 0;
  }
  return 0;
}

int js_make_forces_jobs(char *const cmd[], char *what, size_t n) {
  if (cmd[0] == NULL || !is_make(cmd[0]))
    return 0;
  for (size_t i = 1; cmd[i] != NULL; i++) {
    const char *a = cmd[i];
    int skip = 0, found = 0;
    if (strcmp(a, "--") == 0)
      return 0;
    if (strncmp(a, "--", 2) == 0) {
      found = strcmp(a, "--jobs") == 0 || strncmp(a, "--jobs=", 7) == 0;
      skip = long_takes_next(a);
    } else if (a[0] == '-' && a[1] != '\0') {
      found = short_cluster_has_j(a, &skip);
    }
    if (found) {
      snprintf(what, n, "%s", a);
      return 1;
    }
    if (skip && cmd[i + 1] != NULL)
      i++;
  }
  return 0;
}

int js_style_probe_wanted(const char *cmd0) {
  return is_make(cmd0) || strcmp(base_name(cmd0), "ninja") == 0;
}

/* The first "X.Y" in text into *major, *minor; 0, or -1 if there is none. */
static int version_of(const char *text, int *major, int *minor) {
  for (const char *p = text; *p != '\0'; p++)
    if (*p >= '0' && *p <= '9' && (p == text || p[-1] == ' ') &&
        sscanf(p, "%d.%d", major, minor) == 2) // NOLINT(cert-err34-c): digits checked
      return 0;
  return -1;
}

enum js_style js_style_for_version(const char *cmd0, const char *text) {
  int major, minor;
  if (text == NULL || version_of(text, &major, &minor) != 0)
    return JS_STYLE_PIPE;
  if (is_make(cmd0))
    return strncmp(text, "GNU Make ", 9) == 0 && (major > 4 || (major == 4 && minor >= 4))
               ? JS_STYLE_FIFO
               : JS_STYLE_PIPE;
  if (strcmp(base_name(cmd0), "ninja") == 0)
    return major > 1 || (major == 1 && minor >= 13) ? JS_STYLE_FIFO : JS_STYLE_PIPE;
  return JS_STYLE_PIPE;
}

int js_style_parse(const char *s, enum js_style *out) {
  static const char *const names[] = {"auto", "fifo", "pipe"};
  for (int i = 0; i < 3; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = (enum js_style)i;
      return 0;
    }
  return -1;
}

const char *js_style_name(enum js_style s) {
  return s == JS_STYLE_FIFO ? "fifo" : s == JS_STYLE_PIPE ? "pipe" : "auto";
}
