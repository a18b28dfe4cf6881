/*
 * What the bridge's reclaim heuristic counts (docs/jobserver.md, "A client
 * that dies holding tokens"): the tasks (threads) of every process below us.
 * The bridge is a child subreaper, so the whole tree of its command is below
 * it, orphans included.
 */
#ifndef SHMS_SUPERVISOR_JS_TREE_H
#define SHMS_SUPERVISOR_JS_TREE_H

#include <sys/types.h>

/*
 * The tasks of the descendants of root (root not counted), read from
 * /proc/PID/stat: each process counts its threads, and a zombie (whose
 * parent has not reaped it yet, and may still hold its token) counts one.
 * -1 when /proc cannot be read.
 */
long js_tree_tasks(pid_t root);

#endif
