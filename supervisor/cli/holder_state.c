/* A holder's process state from /proc/PID/stat (holder_state.h). */
#include "holder_state.h"

#include <stdio.h>
#include <string.h>

/* The state letter of /proc/PID/stat (the field after the command's closing parenthesis, which
 * may itself hold spaces and parentheses), or 0 if there is no such process. */
static char proc_state(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *close = strrchr(buf, ')');
  return close != NULL && close[1] == ' ' ? close[2] : 0;
}

const char *holder_state(pid_t pid, int alive, char *code) {
  *code = '-';
  if (pid <= 0)
    return "";
  char st = proc_state(pid);
  if (st != 0)
    *code = st;
  if (!alive || st == 0 || st == 'Z' || st == 'X')
    return "dead";
  return st == 'T' || st == 't' ? "stopped" : "running";
}

const char *holder_state_ns(pid_t pid, uint32_t foreign, int alive, char *code) {
  if (foreign && pid <= 0) {
    *code = '-';
    return alive ? "unknown" : "dead"; /* its lock says that much, in any namespace */
  }
  return holder_state(pid, alive, code);
}

const char *supervisor_state(pid_t pid) {
  char code;
  return pid > 0 ? holder_state(pid, 1, &code) : "none";
}
