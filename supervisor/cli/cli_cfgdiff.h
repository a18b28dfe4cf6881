/*
 * Comparing a segment's configuration with a configuration file's: what
 * `shmsched create --config FILE --if-missing` does when the segment exists
 * (docs/operations.md, "Segments that survive a reboot").
 */
#ifndef SHMS_SUPERVISOR_CLI_CFGDIFF_H
#define SHMS_SUPERVISOR_CLI_CFGDIFF_H

#include <stddef.h>

#include "shmsched.h"

/*
 * Compare seg (the segment's, shms_get_config) with file (what `create` would make of the file
 * source names). Defaults are compared as the values they stand for, and the order of classes
 * is not compared. Returns 0 when they are the same, else 1 with the first difference in err
 * (at most n bytes, one line), e.g.
 *   "class small: cells is 2 in the segment, 4 in /etc/shmsched/jobs.conf"
 */
int cli_config_diff(const shms_config *seg, const shms_config *file, const char *source, char *err,
                    size_t n);

#endif
