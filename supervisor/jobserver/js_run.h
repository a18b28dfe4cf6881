/*
 * Running the build tool under `shmsched jobserver`: its environment (our
 * MAKEFLAGS and CARGO_MAKEFLAGS, and where it runs), and the loop that waits
 * for it, contained as `run` contains its command (contain.h), while keeping
 * the bridge's books (js_bridge.h) and forwarding signals as `run` does.
 */
#ifndef SHMS_SUPERVISOR_JS_RUN_H
#define SHMS_SUPERVISOR_JS_RUN_H

#include "../run/contain.h"
#include "../run/run.h"
#include "js_bridge.h"

/*
 * The command's environment: ours, less MAKEFLAGS, CARGO_MAKEFLAGS and the
 * SHMSCHED_ variables of an outer `run`, plus MAKEFLAGS and CARGO_MAKEFLAGS
 * set to makeflags, and SHMSCHED_SEGMENT, SHMSCHED_CLASS, SHMSCHED_TENANT.
 * NULL when out of memory; free with js_run_env_free.
 */
char **js_run_env(const char *makeflags, const char *segment, const char *cls, const char *tenant);
void js_run_env_free(char **env);

/*
 * Fork cmd contained by c with env and the tokens' descriptors, start the
 * bridge's waiting thread, and keep the bridge's books until the command and
 * its whole tree are gone. Returns 0 with the leader's wait status in
 * *status, or -1 with errno when it could not be started.
 */
int js_run_command(struct js_bridge *b, char *const cmd[], char **env, const struct run_signals *s,
                   struct contain *c, int *status);

#endif
