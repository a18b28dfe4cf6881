/*
 * A recorded process named as the viewer sees it: its pid here, or, when its pid namespace's
 * numbers cannot be translated to ours (a container beside or above this one), the number it
 * has there with that namespace, so that it is never taken for the process with that number
 * here (docs/cli.md, "Pids across pid namespaces").
 */
#ifndef SHMS_SUPERVISOR_PID_NAME_H
#define SHMS_SUPERVISOR_PID_NAME_H

#include <stddef.h>
#include <stdint.h>

/* Wide enough for "ns:" + a 20-digit inode + ":" + an 11-character pid. */
#define PID_NAME_MAX 40

/* "1234" (here > 0), "ns:4026532301:1" (foreign: its own number in its namespace), or "" (no
 * process). buf has n bytes; returns buf. */
char *pid_name(char *buf, size_t n, int32_t here, int32_t ns_pid, uint32_t foreign, uint64_t pidns);

struct json_out;
/* A holder in JSON: "pid" (null when its number here cannot be told), "ns_pid", "pidns" and
 * "holder_state"; all null when there is none (held 0). */
void pid_json(struct json_out *j, int held, int32_t here, int32_t ns_pid, uint64_t pidns,
              const char *holder_state);

#endif
