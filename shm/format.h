/* Laying a new segment out, and validating a mapped one against its own configuration. */
#ifndef SHMS_SHM_FORMAT_H
#define SHMS_SHM_FORMAT_H

#include <stddef.h>

#include "layout.h"

/*
 * Lay out the zero-filled mapping base for cfg (valid) and layout l, then
 * publish the magic last with a store fence before it.
 */
void shms__format(char *base, const shms_config *cfg, const struct shms__layout *l,
                  uint64_t incarnation, uint64_t created_unix_ns);

/*
 * Check the mapping of file_size bytes at base: magic, version, sizes, the
 * stored configuration, and every offset and count against the layout that
 * configuration implies. Once this passes, every descriptor in the header
 * lies inside the mapping. SHMS_EINCOMPAT with a detail naming the check.
 */
int shms__validate(const char *base, uint64_t file_size);

/*
 * Re-check a private copy of the configuration taken after shms__validate:
 * another process could have changed the header in between.
 */
int shms__validate_config_copy(const shms_config *cfg, uint64_t file_size);

/*
 * Whether a file that failed validation is a shmsched segment all the same,
 * from its first len bytes (head) and its size: 1 if its first 8 bytes are
 * the magic (a corrupt segment, or one of another layout version), or if it is
 * a segment of ours whose creation was cut short (the magic not yet stored,
 * over a header this build wrote: its layout version, header size and total
 * size = file_size); 0 for anything else (a file too short for the magic, an
 * empty or zero-filled one, someone else's data).
 */
int shms__format_recognise(const void *head, size_t len, uint64_t file_size);

#endif
