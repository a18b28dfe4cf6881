/* The text form of tickets: "<class>.<slot>.<seq>.<incarnation, 16 hex digits>". */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../shm/error.h"
#include "shmsched.h"

void shms_ticket_format(const shms_ticket *t, char *buf) {
  const char *cn = shms_class_name((shms_class_t)t->cls);
  snprintf(buf, SHMS_TICKET_STRLEN, "%s.%" PRIu32 ".%" PRIu64 ".%016" PRIx64, cn ? cn : "?",
           t->slot, t->seq, t->incarnation);
}

/* Parse one unsigned field ending at a '.' (or the end, if last); advance *p. */
static int field(const char **p, int base, uint64_t max, int last, uint64_t *out) {
  char *end;
  /* strtoull would accept signs and spaces; a ticket has neither. */
  if (base == 10 ? !isdigit((unsigned char)**p) : !isxdigit((unsigned char)**p))
    return -1;
  errno = 0;
  unsigned long long v = strtoull(*p, &end, base);
  if (errno != 0 || end == *p || v > max || (last ? *end != '\0' : *end != '.'))
    return -1;
  *out = v;
  *p = last ? end : end + 1;
  return 0;
}

int shms_ticket_parse(const char *text, shms_ticket *out) {
  shms__clear_detail();
  if (text == NULL || out == NULL)
    return shms__fail(SHMS_EINVAL, "ticket text is NULL");
  const char *dot = strchr(text, '.');
  char cls[16];
  if (dot == NULL || (size_t)(dot - text) >= sizeof cls)
    return shms__fail(SHMS_EINVAL, "ticket '%.80s': expected CLASS.SLOT.SEQ.INCARNATION", text);
  memcpy(cls, text, (size_t)(dot - text));
  cls[dot - text] = '\0';
  int c = shms_class_from_name(cls);
  if (c < 0)
    return shms__fail(SHMS_EINVAL, "ticket '%.80s': unknown class '%s'", text, cls);
  const char *p = dot + 1;
  uint64_t slot, seq, inc;
  if (field(&p, 10, UINT32_MAX, 0, &slot) || field(&p, 10, UINT64_MAX, 0, &seq) ||
      strlen(p) != 16 || field(&p, 16, UINT64_MAX, 1, &inc))
    return shms__fail(SHMS_EINVAL, "ticket '%.80s': expected CLASS.SLOT.SEQ.INCARNATION", text);
  *out = (shms_ticket){.cls = (uint32_t)c, .slot = (uint32_t)slot, .seq = seq, .incarnation = inc};
  return SHMS_OK;
}
