/*
 * The words `shmsched jobserver` gives a build tool (docs/jobserver.md): the
 * MAKEFLAGS it composes, the make command lines whose -jN would make make
 * ignore the jobserver, and which style `--style auto` picks for a tool from
 * what its `--version` says. Pure functions, so the tests drive them directly.
 */
#ifndef SHMS_SUPERVISOR_JS_FLAGS_H
#define SHMS_SUPERVISOR_JS_FLAGS_H

#include <stddef.h>

enum js_style { JS_STYLE_AUTO, JS_STYLE_FIFO, JS_STYLE_PIPE };

/*
 * MAKEFLAGS for the command: the inherited value (NULL: none) less every
 * jobserver word (--jobserver-auth=, --jobserver-fds=, --jobserver-style=,
 * -j, -jN, --jobs, --jobs=N), with ours ("-jN --jobserver-auth=...", given in
 * words) after its options and before its " -- VAR=value" part. The inherited
 * first word of single-letter flags ("k", "ns") stays first; without one the
 * value begins with a space, as make writes it, so that no word of ours (a
 * FIFO path with an 'n' in it) is read as make's flag letters (n: dry run).
 * Returns a malloc'd string, or NULL when out of memory.
 */
char *js_makeflags(const char *inherited, const char *words);

/*
 * 1 if cmd (NULL-ended) runs make (make or gmake, by its last path
 * component) with -j, -jN, --jobs or --jobs=N on its command line: make then
 * ignores the jobserver it inherits ("-jN forced in submake"). The -j found
 * is copied into what (n bytes) for the warning.
 */
int js_make_forces_jobs(char *const cmd[], char *what, size_t n);

/*
 * 1 if cmd[0] names a tool whose `--version` decides --style auto (make,
 * gmake, ninja), else 0 (auto is then pipe).
 */
int js_style_probe_wanted(const char *cmd0);

/*
 * The style for --style auto, from the first line the tool's `--version`
 * printed (text, possibly NULL): fifo for GNU Make 4.4 and later and for
 * ninja 1.13 and later (which reads only a FIFO), pipe otherwise: every
 * client since make 3.78 understands a pipe.
 */
enum js_style js_style_for_version(const char *cmd0, const char *text);

/* "auto", "fifo" or "pipe" into *out; -1 for anything else. */
int js_style_parse(const char *s, enum js_style *out);
const char *js_style_name(enum js_style s);

#endif
