/* A recorded process's pid as the viewer sees it (pid_name.h). */
#include "pid_name.h"

#include <inttypes.h>
#include <stdio.h>

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
