/*
 * The one formatter of events: the lines `shmsched events` prints and `supervise` logs, and the
 * JSON objects of `events --json`, from a shms_event (a recovery's report, a look at the cells)
 * or a record of the segment's event ring. One place, so a kind and its fields read the same
 * everywhere (docs/operations.md, "Events").
 */
#ifndef SHMS_SUPERVISOR_EVENT_FMT_H
#define SHMS_SUPERVISOR_EVENT_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "shmsched.h"

/*
 * "KIND class=C cell=N tenant=T ticket=K pid=P uid=U user=NAME reason=R" into buf (n bytes,
 * NUL-terminated), each field only where it applies; a caller's own code (positive reason) is
 * "code=N"; value is the record's figure (a grant's wait: "waited=DUR"), 0 for none; team a
 * policy event's team (NULL: none). Returns buf.
 */
char *event_line(char *buf, size_t n, const shms_event *ev, uint64_t value, const char *team);
/* One record as a JSON object on one line (JSON Lines), newline included. */
void event_json(FILE *f, const shms_event_record *r);
/* A CLOCK_REALTIME time as ISO 8601 UTC with milliseconds ("2026-05-01T12:00:00.123Z"). */
char *event_time(char *buf, size_t n, uint64_t unix_ns);

#endif
