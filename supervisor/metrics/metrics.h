/*
 * `shmsched metrics`: segments' figures in the Prometheus text exposition format, version 0.0.4
 * (metrics_text.c), served once, into a textfile, or over HTTP (metrics_http.c). Every segment is
 * read as an observer: read-only, never registered, never waiting for a scheduling process.
 */
#ifndef SHMS_SUPERVISOR_METRICS_H
#define SHMS_SUPERVISOR_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct metrics_opts {
  char *const *names; /* the segments */
  int count;
  int tenants;            /* --tenants: per-tenant series */
  uint32_t tenant_series; /* --tenant-series: at most this many tenants per class, the rest
                             summed as tenant="_other" */
  int report_errors;      /* print a segment's failure on stderr (once mode) */
};

/* One exposition of every segment into a malloc'd buffer (*out, *len). Returns the number of
 * segments that could not be read (shmsched_up 0), or -1 when out of memory. */
int metrics_render(const struct metrics_opts *o, char **out, size_t *len);

/* The Content-Type of the exposition. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/*
 * Serve GET /metrics on addr ("HOST:PORT", "[V6]:PORT", ":PORT" or "PORT"; host 127.0.0.1 when
 * omitted) until SIGINT or SIGTERM; timeout_ns bounds each connection's whole exchange. Prints
 * "listening on HOST:PORT" on stdout once bound (port 0 picks one). Returns an exit code.
 */
int metrics_serve(const char *addr, uint64_t timeout_ns, const struct metrics_opts *o);

#endif
