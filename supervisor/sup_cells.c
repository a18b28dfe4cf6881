/* The supervisor's eye on the cells (sup_cells.h). */
#include "sup_cells.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    if (look_class(h, s, c) != 0)
      s->count[c] = 0;
}

static void tell(const shms_cell_info *was, const shms_cell_info *now, int c,
                 void (*say)(const char *line)) {
  char line[256];
  size_t n;
  if (now->state == SHMS_CELL_QUARANTINED &&
      (was->state != SHMS_CELL_QUARANTINED || was->generation != now->generation)) {
    /* The cell keeps the quarantined lease's holder and tenant. */
    n = (size_t)snprintf(line, sizeof line, "cell-quarantined class=%s cell=%u",
                         shms_class_name((shms_class_t)c), now->cell);
    if (now->tenant[0] != '\0' && n < sizeof line)
      n += (size_t)snprintf(line + n, sizeof line - n, " tenant=%s", now->tenant);
    if (now->pid != 0 && n < sizeof line)
      n += (size_t)snprintf(line + n, sizeof line - n, " pid=%d", now->pid);
    if (n < sizeof line && now->reason < 0)
      snprintf(line + n, sizeof line - n, " reason=%s", shms_err_name(now->reason));
    else if (n < sizeof line) /* the holder's own code (run: 128 + the signal) */
      snprintf(line + n, sizeof line - n, " code=%d", now->reason);
    say(line);
  } else if (was->state == SHMS_CELL_QUARANTINED && now->state != SHMS_CELL_QUARANTINED) {
    snprintf(line, sizeof line, "cell-repaired class=%s cell=%u now=%s",
             shms_class_name((shms_class_t)c), now->cell,
             now->state == SHMS_CELL_OFFLINE ? "offline" : "in-service");
    say(line);
  }
}

void sup_cells_tell(shms_t *h, struct sup_cells *s, void (*say)(const char *line)) {
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
