/* A recorded process's pid as the viewer sees it (pid_name.h). */
#include "pid_name.h"

#include <inttypes.h>
#include <stdio.h>

#include "json_out.h"

char *pid_name(char *buf, size_t n, int32_t here, int32_t ns_pid, uint32_t foreign,
               uint64_t pidns) {
  if (here > 0)
    snprintf(buf, n, "%" PRId32, here);
  else if (foreign && ns_pid > 0)
    snprintf(buf, n, "ns:%" PRIu64 ":%" PRId32, pidns, ns_pid);
  else if (n > 0)
    buf[0] = '\0';
  return buf;
}

void pid_json(struct json_out *j, int held, int32_t here, int32_t ns_pid, uint64_t pidns,
              const char *holder_state) {
  if (!held) {
    json_null(j, "pid");
    json_null(j, "ns_pid");
    json_null(j, "pidns");
    json_null(j, "holder_state");
    return;
  }
  if (here != 0)
    json_i64(j, "pid", here);
  else
    json_null(j, "pid"); /* of a pid namespace whose numbers are not ours: ns_pid, pidns */
  json_i64(j, "ns_pid", ns_pid);
  json_u64(j, "pidns", pidns);
  json_str(j, "holder_state", holder_state);
}
