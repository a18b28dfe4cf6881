/* The supervisor's eye on the cells (sup_cells.h). */
#include "sup_cells.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cli/event_fmt.h"

/* The class's cells now into s (rows reused); 0, or -1 if they could not be read. */
static int look_class(shms_t *h, struct sup_cells *s, int c) {
  uint32_t n = 0;
  if (shms_cells(h, (shms_class_t)c, NULL, 0, &n) != SHMS_OK)
    return -1;
  if (n != s->count[c]) {
    shms_cell_info *rows = realloc(s->seen[c], (n ? n : 1) * sizeof *rows);
    if (rows == NULL)
      return -1;
    s->seen[c] = rows;
    s->count[c] = n;
  }
  return shms_cells(h, (shms_class_t)c, s->seen[c], n, &n) == SHMS_OK ? 0 : -1;
}

void sup_cells_look(shms_t *h, struct sup_cells *s) {
  if (!s->started) {
    shms_config cfg;
    s->started = 1;
    s->self = (int32_t)getpid();
    s->ring = shms_get_config(h, &cfg) == SHMS_OK && cfg.events != 0;
    size_t none;
    if (s->ring) /* what happened before we came is not ours to tell */
      shms_events_read(h, &s->cursor, 0, NULL, 0, &none, NULL);
  }
  if (s->ring)
    return; /* the ring keeps what happens meanwhile; our own records we skip */
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (look_class(h, s, c) != 0)
      s->count[c] = 0;
}

static void tell(const shms_cell_info *was, const shms_cell_info *now, int c, sup_say_fn *say) {
  shms_event ev = {.cls = c, .cell = (int32_t)now->cell, .uid = SHMS_UID_NONE};
  uint64_t value = 0;
  if (now->state == SHMS_CELL_QUARANTINED &&
      (was->state != SHMS_CELL_QUARANTINED || was->generation != now->generation)) {
    /* The cell keeps the quarantined lease's holder and tenant. */
    ev.kind = SHMS_EVENT_CELL_QUARANTINED;
    memcpy(ev.tenant, now->tenant, sizeof ev.tenant);
    ev.pid = now->pid;
    ev.reason = now->reason;
    ev.uid = now->uid;
  } else if (was->state == SHMS_CELL_QUARANTINED && now->state != SHMS_CELL_QUARANTINED) {
    ev.kind = SHMS_EVENT_CELL_REPAIRED;
    value = now->state == SHMS_CELL_OFFLINE ? 2 : 1;
  } else {
    return;
  }
  char line[512];
  say(0, event_line(line, sizeof line, &ev, value, NULL));
}

/* The kinds of the requests' ordinary course: told only with --verbose. */
static int routine(uint32_t kind) {
  return kind == SHMS_EVENT_GRANTED || kind == SHMS_EVENT_REJECTED ||
         kind == SHMS_EVENT_CANCELLED || kind == SHMS_EVENT_EXPIRED || kind == SHMS_EVENT_REVOKED;
}

static uint64_t mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A record still being written after this long had its writer die: skip it (ns). */
#define PENDING_NS (1000ull * 1000 * 1000)

static void tell_ring(shms_t *h, struct sup_cells *s, sup_say_fn *say) {
  static shms_event_record recs[64];
  char line[512];
  size_t n;
  uint64_t lost = 0;
  unsigned flags = s->stalled != 0 && mono_now() - s->stalled >= PENDING_NS
                       ? (unsigned)SHMS_EVENTS_SKIP_PENDING
                       : 0;
  do {
    uint64_t missed = 0;
    if (shms_events_read(h, &s->cursor, flags, recs, 64, &n, &missed) != SHMS_OK)
      return;
    lost += missed;
    for (size_t i = 0; i < n; i++)
      if (recs[i].writer != s->self && (s->verbose || !routine(recs[i].event.kind)))
        say(recs[i].wall_ns,
            event_line(line, sizeof line, &recs[i].event, recs[i].value, recs[i].team));
  } while (n == 64);
  if (lost != 0) {
    snprintf(line, sizeof line,
             "events-lost count=%llu (the event ring overran between two looks: "
             "'create --events' sizes it)",
             (unsigned long long)lost);
    say(0, line);
  }
  /* Held up by a record being written? A probe that skips it gets further. */
  uint64_t probe = s->cursor;
  shms_events_read(h, &probe, SHMS_EVENTS_SKIP_PENDING, recs, 1, &n, NULL);
  s->stalled = probe == s->cursor ? 0 : s->stalled ? s->stalled : mono_now();
}

void sup_cells_tell(shms_t *h, struct sup_cells *s, sup_say_fn *say) {
  if (s->ring) {
    tell_ring(h, s, say);
    return;
  }
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    uint32_t n = s->count[c];
    shms_cell_info *was = n ? malloc(n * sizeof *was) : NULL;
    if (n && was == NULL)
      continue;
    if (n)
      memcpy(was, s->seen[c], n * sizeof *was);
    if (look_class(h, s, c) == 0)
      for (uint32_t i = 0; i < n && i < s->count[c]; i++)
        tell(&was[i], &s->seen[c][i], c, say);
    free(was);
  }
}

void sup_cells_free(struct sup_cells *s) {
  for (int c = 0; c < SHMS_CLASS_COUNT; c++) {
    free(s->seen[c]);
    s->seen[c] = NULL;
    s->count[c] = 0;
  }
}
