/* The one formatter of events (event_fmt.h). */
#include "event_fmt.h"

#include "cli.h"
#include "cli_sched.h"
#include "pid_name.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

char *event_time(char *buf, size_t n, uint64_t unix_ns) {
  time_t secs = (time_t)(unix_ns / 1000000000u);
  struct tm tm;
  char date[32] = "?";
  if (gmtime_r(&secs, &tm) != NULL)
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, n, "%s.%03uZ", date, (unsigned)(unix_ns / 1000000u % 1000u));
  return buf;
}

/* A duration for people: ns, us, ms or s with up to three significant decimals. */
static void duration(char *buf, size_t n, uint64_t ns) {
  if (ns < 1000)
    snprintf(buf, n, "%" PRIu64 "ns", ns);
  else if (ns < 1000000)
    snprintf(buf, n, "%.3gus", (double)ns / 1e3);
  else if (ns < 1000000000)
    snprintf(buf, n, "%.3gms", (double)ns / 1e6);
  else
    snprintf(buf, n, "%.3fs", (double)ns / 1e9);
}

char *event_line(char *buf, size_t n, const shms_event *ev, uint64_t value, const char *team) {
  char ticket[SHMS_TICKET_STRLEN], d[32], user[64], pid[PID_NAME_MAX];
  size_t k = (size_t)snprintf(buf, n, "%s", shms_event_name(ev->kind));
#define ADD(...)                                                                                   \
  do {                                                                                             \
    if (k < n)                                                                                     \
      k += (size_t)snprintf(buf + k, n - k, __VA_ARGS__);                                          \
  } while (0)
  if (ev->cls >= 0)
    ADD(" class=%s", shms_class_name((shms_class_t)ev->cls));
  if (ev->cell >= 0)
    ADD(" cell=%d", ev->cell);
  int quota = ev->kind == SHMS_EVENT_POLICY_CHANGED && ev->reason == SHMS_POLICY_EVENT_QUOTA;
  if (ev->tenant[0] != '\0')
    ADD(quota ? " quota=%s" : " tenant=%s", ev->tenant); /* a quota's event names it there */
  if (ev->ticket.seq != 0) {
    shms_ticket_format(&ev->ticket, ticket);
    ADD(" ticket=%s", ticket);
  }
  if (pid_name(pid, sizeof pid, ev->pid, ev->ns_pid, ev->pid_foreign, ev->pidns)[0] != '\0')
    ADD(" pid=%s", pid);
  if (ev->uid != SHMS_UID_NONE)
    ADD(" uid=%u user=%s", ev->uid, cli_user_name(ev->uid, user, sizeof user));
  if (ev->reason < 0)
    ADD(" reason=%s", shms_err_name(ev->reason));
  else if (ev->reason > 0 && ev->kind != SHMS_EVENT_POLICY_CHANGED) /* run: 128 + the signal */
    ADD(" code=%d", ev->reason);
  if (ev->kind == SHMS_EVENT_GRANTED) {
    duration(d, sizeof d, value);
    ADD(" waited=%s", d);
  }
  if (ev->kind == SHMS_EVENT_CELL_REPAIRED && value != 0) /* an operator's repair */
    ADD(" now=%s", value == 2 ? "offline" : "in-service");
  if (ev->kind == SHMS_EVENT_LEASE_ENDED && SHMS_LEASE_HOW(value) == 1)
    ADD(" exit=%u", SHMS_LEASE_CODE(value));
  else if (ev->kind == SHMS_EVENT_LEASE_ENDED && SHMS_LEASE_HOW(value) == 2)
    ADD(" signal=%s", cli_signal_name((int)SHMS_LEASE_CODE(value), d, sizeof d));
  else if (ev->kind == SHMS_EVENT_LEASE_ENDED)
    ADD(" exit=none"); /* it never started */
  team = team != NULL ? team : "";
  if (quota)
    ADD(" max=%" PRIu64, value);
  else if (ev->kind == SHMS_EVENT_POLICY_CHANGED && ev->reason == SHMS_POLICY_EVENT_TEAM)
    ADD(" team=%s", team[0] != '\0' ? team : "-");
  else if (ev->kind == SHMS_EVENT_POLICY_CHANGED)
    ADD("%s%s weight=%" PRIu64, team[0] != '\0' ? " team=" : "", team, value);
#undef ADD
  return buf;
}

void event_json(FILE *f, const shms_event_record *r) {
  const shms_event *ev = &r->event;
  char t[40], ticket[SHMS_TICKET_STRLEN], user[64];
  fprintf(f,
          "{\"position\":%" PRIu64 ",\"time\":\"%s\",\"wall_ns\":%" PRIu64 ",\"mono_ns\":%" PRIu64
          ",\"kind\":\"%s\"",
          r->position, event_time(t, sizeof t, r->wall_ns), r->wall_ns, r->mono_ns,
          shms_event_name(ev->kind));
  if (ev->cls >= 0)
    fprintf(f, ",\"class\":\"%s\"", shms_class_name((shms_class_t)ev->cls));
  else
    fputs(",\"class\":null", f);
  if (ev->cell >= 0)
    fprintf(f, ",\"cell\":%d", ev->cell);
  else
    fputs(",\"cell\":null", f);
  /* A tenant name is graphic ASCII (readers replace anything else): only '"' and '\' need
   * escaping. */
  fputs(",\"tenant\":", f);
  if (ev->tenant[0] == '\0')
    fputs("null", f);
  else {
    fputc('"', f);
    for (const char *p = ev->tenant; *p != '\0'; p++) {
      if (*p == '"' || *p == '\\')
        fputc('\\', f);
      fputc(*p, f);
    }
    fputc('"', f);
  }
  if (ev->ticket.seq != 0) {
    shms_ticket_format(&ev->ticket, ticket);
    fprintf(f, ",\"ticket\":\"%s\"", ticket);
  } else
    fputs(",\"ticket\":null", f);
  fprintf(f, ",\"pid\":%d", ev->pid);
  if (ev->pid_foreign) /* of a pid namespace whose numbers are not ours (pid 0) */
    fprintf(f, ",\"ns_pid\":%d,\"pidns\":%" PRIu64, ev->ns_pid, ev->pidns);
  /* cli_user_name gives graphic ASCII without '"' or '\': no escaping needed */
  if (ev->uid != SHMS_UID_NONE)
    fprintf(f, ",\"uid\":%u,\"user\":\"%s\"", ev->uid, cli_user_name(ev->uid, user, sizeof user));
  else
    fputs(",\"uid\":null,\"user\":null", f);
  if (ev->reason < 0)
    fprintf(f, ",\"reason\":\"%s\",\"code\":null", shms_err_name(ev->reason));
  else if (ev->reason > 0 && ev->kind != SHMS_EVENT_POLICY_CHANGED)
    fprintf(f, ",\"reason\":null,\"code\":%d", ev->reason);
  else
    fputs(",\"reason\":null,\"code\":null", f);
  if (ev->kind == SHMS_EVENT_GRANTED)
    fprintf(f, ",\"waited_ns\":%" PRIu64, r->value);
  if (ev->kind == SHMS_EVENT_CELL_REPAIRED && r->value != 0)
    fprintf(f, ",\"now\":\"%s\"", r->value == 2 ? "offline" : "in-service");
  if (ev->kind == SHMS_EVENT_LEASE_ENDED) {
    uint32_t how = SHMS_LEASE_HOW(r->value), code = SHMS_LEASE_CODE(r->value);
    if (how == 1)
      fprintf(f, ",\"exit\":%u,\"signal\":null", code);
    else if (how == 2)
      fprintf(f, ",\"exit\":null,\"signal\":%u", code);
    else
      fputs(",\"exit\":null,\"signal\":null", f);
  }
  if (ev->kind == SHMS_EVENT_POLICY_CHANGED && ev->reason == SHMS_POLICY_EVENT_QUOTA) {
    fputs(",\"quota\":\"", f);
    for (const char *p = ev->tenant; *p != '\0'; p++) {
      if (*p == '"' || *p == '\\')
        fputc('\\', f);
      fputc(*p, f);
    }
    fprintf(f, "\",\"max\":%" PRIu64, r->value);
  } else if (ev->kind == SHMS_EVENT_POLICY_CHANGED && ev->reason == SHMS_POLICY_EVENT_TEAM)
    fprintf(f, ",\"team\":%s%s%s", r->team[0] ? "\"" : "", r->team[0] ? r->team : "null",
            r->team[0] ? "\"" : "");
  else if (ev->kind == SHMS_EVENT_POLICY_CHANGED)
    fprintf(f, ",\"team\":%s%s%s,\"weight\":%" PRIu64, r->team[0] ? "\"" : "",
            r->team[0] ? r->team : "null", r->team[0] ? "\"" : "", r->value);
  fprintf(f, ",\"writer\":%d", r->writer);
  fputs("}\n", f);
}
