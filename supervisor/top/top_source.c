/*
 * The segment top follows (top.h). A name is not a segment: destroy unlinks the name, and an
 * observer's mapping of the old segment stays readable, frozen in state destroying, for as
 * long as it is held. So top asks whether its segment was removed (shms_segment_removed, as
 * events --follow and supervise do), lets it go, and attaches whatever is created under the
 * name next: a new incarnation.
 */
#include <stddef.h>

#include "top.h"

static int attach(struct top_source *s) {
  shms_t *h;
  int rc = shms_attach(s->name, SHMS_ATTACH_OBSERVER, &h);
  shms_segment_info info;
  if (rc == SHMS_OK && (rc = shms_segment_info_get(h, &info)) != SHMS_OK)
    shms_detach(h);
  if (rc == SHMS_OK) {
    s->h = h;
    s->incarnation = info.incarnation;
  }
  return s->attach_rc = rc;
}

int top_source_open(struct top_source *s, const char *name) {
  *s = (struct top_source){.name = name};
  return attach(s);
}

enum top_look top_source_look(struct top_source *s) {
  if (s->h != NULL) {
    /* An error here (none is expected of a valid handle) keeps the segment: reading it says. */
    if (shms_segment_removed(s->h) != 1)
      return TOP_LOOK_SAME;
    shms_detach(s->h);
    s->h = NULL;
  }
  return attach(s) == SHMS_OK ? TOP_LOOK_NEW : TOP_LOOK_GONE;
}

void top_source_close(struct top_source *s) {
  if (s->h != NULL)
    shms_detach(s->h);
  s->h = NULL;
}
