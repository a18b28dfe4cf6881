/*
 * shmsched events: the segment's flight recorder, read as an observer (a read-only mapping,
 * never registered): what just happened, or with --follow what happens from now on.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../cli/cli_sched.h"
#include "../cli/event_fmt.h"

static const char help[] =
    "Usage: shmsched events NAME [--follow] [--json] [--since DUR] [--class CLASS]\n"
    "                            [--kind KIND[,KIND]...]\n"
    "\n"
    "Print the segment's recent events, oldest first, from its event ring (the\n"
    "flight recorder: 'create --events N' sizes it): grants from the queue,\n"
    "rejections with their reason, cancellations, expirations, revocations,\n"
    "quarantines with their reason, repairs, drains, and what each recovery of a\n"
    "dead process settled (process-died, request-owner-lost, grant-returned,\n"
    "lease-released, lease-quarantined, job-requeued, job-lost, worker-offline,\n"
    "...). One line per event: its UTC time, kind, then class, cell, tenant,\n"
    "ticket, pid and reason where they apply. Acquisitions and releases that take\n"
    "the fast path (a free cell, nobody queued) are not recorded: 'status' counts\n"
    "them. Reads without registering and never slows the scheduler.\n"
    "\n"
    "Options:\n"
    "  -f, --follow           keep printing events as they happen, until interrupted\n"
    "                         or the segment is removed (polls every 10-250ms)\n"
    "  -j, --json             one JSON object per line (JSON Lines) instead of text\n"
    "  -s, --since DUR        only events of the last DUR (e.g. 30s, 5m)\n"
    "  -c, --class CLASS      only events of CLASS\n"
    "  -k, --kind KIND,...    only events of these kinds\n"
    "  -h, --help             show this help\n"
    "\n"
    "Exit status: 0 printed (or followed until interrupted or the segment went away);\n"
    "1 failed (not-found, or the segment has no event ring); 2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched events jobs --since 5m\n"
    "  shmsched events jobs --follow --class large --kind cell-quarantined,rejected\n"
    "  shmsched events jobs --json | jq 'select(.kind == \"rejected\") | .reason'\n";

#define KINDS_MAX 32

struct events_args {
  int follow, json;
  uint64_t since_ns; /* 0: everything the ring holds */
  int cls;           /* -1: every class */
  uint32_t kinds[KINDS_MAX];
  int nkinds; /* 0: every kind */
};

/* --kind a,b,c: each a known kind name, at most KINDS_MAX. Returns 0 or CLI_EXIT_USAGE. */
static int parse_kinds(const char *list, struct events_args *a) {
  char buf[512];
  if ((size_t)snprintf(buf, sizeof buf, "%s", list) >= sizeof buf)
    return cli_usage("events: --kind: the list is too long");
  char *save = NULL;
  for (char *k = strtok_r(buf, ",", &save); k != NULL; k = strtok_r(NULL, ",", &save)) {
    uint32_t kind = shms_event_kind(k);
    if (kind == 0)
      return cli_usage("events: --kind: unknown kind '%s' (see 'shmsched events --help')", k);
    if (a->nkinds == KINDS_MAX)
      return cli_usage("events: --kind: at most %d kinds", KINDS_MAX);
    a->kinds[a->nkinds++] = kind;
  }
  if (a->nkinds == 0)
    return cli_usage("events: --kind: expected a kind name, such as rejected");
  return 0;
}

static int parse(int argc, char **argv, struct events_args *a) {
  static const struct option opts[] = {{"follow", no_argument, NULL, 'f'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"since", required_argument, NULL, 's'},
                                       {"class", required_argument, NULL, 'c'},
                                       {"kind", required_argument, NULL, 'k'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  char err[256];
  shms_class_t cls;
  int c, rc;
  while ((c = getopt_long(argc, argv, ":fjs:c:k:h", opts, NULL)) != -1) {
    switch (c) {
    case 'h':
      return cli_help(help);
    case 'f':
      a->follow = 1;
      break;
    case 'j':
      a->json = 1;
      break;
    case 's':
      if (cli_parse_duration(optarg, &a->since_ns, err, sizeof err) != 0)
        return cli_usage("events: --since: %s", err);
      break;
    case 'c':
      if ((rc = cli_parse_class("events", optarg, &cls)) != 0)
        return rc;
      a->cls = (int)cls;
      break;
    case 'k':
      if ((rc = parse_kinds(optarg, a)) != 0)
        return rc;
      break;
    default:
      return cli_bad_option("events", c, argv);
    }
  }
  return -1;
}

static int wanted(const struct events_args *a, const shms_event_record *r, uint64_t after_ns) {
  if (r->mono_ns < after_ns)
    return 0;
  if (a->cls >= 0 && r->event.cls != a->cls)
    return 0;
  for (int i = 0; i < a->nkinds; i++)
    if (a->kinds[i] == r->event.kind)
      return 1;
  return a->nkinds == 0;
}

static void print(const struct events_args *a, const shms_event_record *r) {
  if (a->json) {
    event_json(stdout, r);
    return;
  }
  char t[40], line[512];
  printf("%s %s\n", event_time(t, sizeof t, r->wall_ns),
         event_line(line, sizeof line, &r->event, r->value, r->team));
}

/* How long a record still being written holds up the records after it before it is skipped: a
 * writer takes well under a microsecond, so one that takes this long has died. */
#define PENDING_NS (1000ull * 1000 * 1000)

/*
 * Print what the ring holds from *cursor on. Records still being written hold up those after
 * them (order is the ring's), unless skip. Returns how many records were read; *stalled set
 * if a record being written held the rest up.
 */
static size_t drain_ring(shms_t *h, const struct events_args *a, uint64_t *cursor,
                         uint64_t after_ns, int skip, int *stalled, uint64_t *lost) {
  static shms_event_record recs[256];
  size_t total = 0, n;
  *stalled = 0;
  for (;;) {
    uint64_t missed = 0;
    if (shms_events_read(h, cursor, skip ? SHMS_EVENTS_SKIP_PENDING : 0, recs, 256, &n, &missed) !=
        SHMS_OK)
      return total;
    *lost += missed;
    for (size_t i = 0; i < n; i++)
      if (wanted(a, &recs[i], after_ns))
        print(a, &recs[i]);
    total += n;
    if (n < 256) {
      /* Stopped short: if a probe that skips pending records gets further, one being written
       * held us up. */
      uint64_t probe = *cursor;
      size_t one;
      shms_event_record r;
      shms_events_read(h, &probe, SHMS_EVENTS_SKIP_PENDING, &r, 1, &one, NULL);
      *stalled = !skip && probe != *cursor;
      break;
    }
  }
  fflush(stdout);
  return total;
}

static int follow(shms_t *h, const struct events_args *a, uint64_t *cursor) {
  uint64_t pause_ms = 10, stalled_since = 0, lost = 0;
  for (;;) {
    int stalled;
    int skip = stalled_since != 0 && cli_mono_ns() - stalled_since >= PENDING_NS;
    size_t n = drain_ring(h, a, cursor, 0, skip, &stalled, &lost);
    if (lost != 0) {
      fprintf(stderr,
              "shmsched events: %" PRIu64 " events lost (overwritten before they were "
              "read, or their writer died)\n",
              lost);
      lost = 0;
    }
    stalled_since = !stalled ? 0 : stalled_since ? stalled_since : cli_mono_ns();
    if (shms_segment_removed(h) == 1)
      return CLI_EXIT_OK;
    /* Poll: an observer maps the segment read-only and cannot ask writers to wake it, and
     * writers pay nothing for followers. Back off while nothing happens. */
    pause_ms = n != 0 ? 10 : pause_ms * 2 > 250 ? 250 : pause_ms * 2;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(pause_ms * 1000000)};
    nanosleep(&ts, NULL);
  }
}

int cmd_events(int argc, char **argv) {
  struct events_args a = {.cls = -1};
  int rc = parse(argc, argv, &a);
  if (rc >= 0)
    return rc;
  const char *name;
  if (cli_take_name("events", argc, argv, &name) != 0)
    return CLI_EXIT_USAGE;
  shms_t *h;
  if ((rc = cli_attach(name, SHMS_ATTACH_OBSERVER, &h)) != 0)
    return rc;
  shms_config cfg;
  if (shms_get_config(h, &cfg) != SHMS_OK || cfg.events == 0) {
    shms_detach(h);
    return cli_fail(SHMS_ENOTFOUND,
                    "segment '%s' has no event ring (it was created with --events 0)", name);
  }
  if (a.cls >= 0 && !cfg.classes[a.cls].configured) {
    shms_detach(h);
    return cli_usage("events: --class: segment '%s' has no class %s", name,
                     shms_class_name((shms_class_t)a.cls));
  }
  uint64_t cursor = 0, lost = 0, now = cli_mono_ns();
  uint64_t after = a.since_ns != 0 && a.since_ns < now ? now - a.since_ns : 0;
  int stalled;
  /* What the ring holds now; a record still being written is skipped, not waited for. */
  drain_ring(h, &a, &cursor, after, 1, &stalled, &lost);
  rc = a.follow ? follow(h, &a, &cursor) : CLI_EXIT_OK;
  shms_detach(h);
  return rc;
}
