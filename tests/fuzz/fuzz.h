/*
 * Shared pieces of the fuzz targets (docs/testing.md, "Fuzzing").
 *
 * Each fuzz_*.c defines LLVMFuzzerTestOneInput. Built with clang and
 * -fsanitize=fuzzer (cmake -DSHMS_FUZZ=ON, scripts/fuzz.sh) it is a libFuzzer
 * target; built with replay_main.c it replays a corpus in the ordinary test
 * run. A target checks the contract of what it calls, not only that nothing
 * crashes: a broken promise calls fuzz_fail(), which aborts with a message.
 */
#ifndef SHMS_TESTS_FUZZ_H
#define SHMS_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "shmsched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Report a broken contract (printf-style) and abort, so the fuzzer keeps the input. */
void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* err must be a non-empty line (no newline) NUL-terminated within n bytes; what names the call. */
void fuzz_check_error_line(const char *what, const char *err, size_t n);

/*
 * Write bytes as the whole contents of a fresh segment /dev/shm/NAME (name
 * receives a unique name, at least 64 bytes). 0, or -1 with errno set.
 */
int fuzz_segment_write(const uint8_t *bytes, size_t size, char *name);

/* Remove the segment fuzz_segment_write made. */
void fuzz_segment_remove(const char *name);

/*
 * Attach to NAME as an observer; if that succeeds, read everything an
 * observer can (configuration, segment info, every class's figures) checking
 * what must hold of any segment that validated, then detach. With live, the
 * segment's size bytes are first overwritten with live after the attach (a
 * writer changing a segment under an attached handle). Returns the attach's
 * result.
 */
int fuzz_segment_observe(const char *name, const uint8_t *live, size_t size);

/*
 * A valid segment image of configuration cfg, made with shms_create and read
 * back with its incarnation and creation time fixed, so that it is the same
 * every time (malloc'd, *size bytes; the caller frees it), or NULL.
 */
uint8_t *fuzz_segment_image(const shms_config *cfg, size_t *size);

/*
 * The words of a member's own process entry that a patch may change while it is attached: its
 * operation counts (ops[]), marks_used, own_head and own_dirty, its threads' operation marks
 * (marks[]) and its fast-path tallies (tally[]), laid end to end as fuzz_own_size() bytes.
 * fuzz_own_patch writes len bytes at offset off of that run (off + len <= fuzz_own_size())
 * into the live entry of the member handle h.
 */
size_t fuzz_own_size(void);
void fuzz_own_patch(shms_t *h, size_t off, const uint8_t *bytes, size_t len);
/* The member handle h's own count of operations under way on class c (ops[c] of its entry). */
uint32_t fuzz_own_ops(shms_t *h, int c);

/*
 * The per-input watchdog: no input may run for longer than FUZZ_INPUT_SECONDS (wall clock).
 * fuzz_watchdog_arm starts the count for an input, fuzz_watchdog_step names what runs now (a
 * string that lives for ever), fuzz_watchdog_disarm stops it. When the time is up, the input
 * fails as a broken contract ("input took more than 8 s, in STEP") and aborts, so that it is
 * kept: the replay run (which has no per-input limit of its own) and libFuzzer alike report it.
 *
 * 8 s: below libFuzzer's -timeout of 10 s in scripts/fuzz.sh, so that a wedge is reported as a
 * broken contract naming its step rather than as a bare timeout, with room above the longest a
 * healthy input may take: a freeze that a live process's mark keeps waiting gives up after
 * about a second, and an input may meet a few (one per class checked), on a loaded machine.
 */
#define FUZZ_INPUT_SECONDS 8
void fuzz_watchdog_arm(void);
void fuzz_watchdog_step(const char *step);
void fuzz_watchdog_disarm(void);

/* The small configurations whose images seed the segment targets. */
enum { FUZZ_CONFIGS = 4 };
void fuzz_config_example(int which, shms_config *cfg);

#endif
