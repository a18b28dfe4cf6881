/*
 * Helpers shared by the benchmarks: clocks, CPU pinning, shared anonymous
 * memory for cross-process flags, percentiles, CSV rows and argument parsing.
 *
 * Every benchmark prints CSV rows `bench,system,metric,value,unit` on stdout
 * (no header: perf/run.sh adds it) and diagnostics on stderr.
 */
#ifndef SHMS_BENCH_UTIL_H
#define SHMS_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds (vDSO: no system call). */
uint64_t bu_now_ns(void);

/* CPUs this process may run on (at least 1). */
int bu_ncpus(void);
/*
 * Pin the calling process to the (cpu % bu_ncpus())-th CPU it may run on.
 * A failure is reported on stderr once and otherwise ignored: pinning only
 * steadies the figures, it does not make them valid.
 */
void bu_pin(int cpu);

/* size bytes of zeroed memory shared with children forked later; exits on failure. */
void *bu_shared(size_t size);

/* Sort v[0..n) and return its p-quantile (0 <= p <= 1, nearest rank). n > 0. */
uint64_t bu_quantile(uint64_t *v, size_t n, double p);

/* Print one CSV row `bench,system,metric,value,unit` and flush. */
void bu_row(const char *bench, const char *system, const char *metric, double value,
            const char *unit);

/* Print "PROG: message" on stderr and exit 1. */
void bu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Die with a shmsched error code, its reason word and detail. */
void bu_die_shms(const char *what, int rc) __attribute__((noreturn));
/* The program name used in messages (set from argv[0] by bu_args_init). */
extern const char *bu_prog;

/*
 * A minimal `--key value` parser: bu_args_init(argc, argv) once, then
 * bu_arg_str/bu_arg_long look a key up (with its default). Unknown keys or a
 * key without a value make bu_args_done() exit 2 with the usage line.
 */
void bu_args_init(int argc, char **argv, const char *usage);
const char *bu_arg_str(const char *key, const char *dflt);
long bu_arg_long(const char *key, long dflt);
void bu_args_done(void);

/* Spin (with a CPU pause) until *w == v. */
void bu_spin_until(const volatile uint32_t *w, uint32_t v);
/* Atomic load/store of a shared 32/64-bit word (sequentially consistent). */
uint32_t bu_load32(const volatile uint32_t *w);
void bu_store32(volatile uint32_t *w, uint32_t v);
uint64_t bu_load64(const volatile uint64_t *w);
void bu_store64(volatile uint64_t *w, uint64_t v);

/* Burn about ns nanoseconds of CPU (the "work" done while holding a cell). */
void bu_busy_ns(uint64_t ns);

/*
 * The scheduler state of process pid as /proc shows it ('R', 'S', ...), or
 * '?' if it cannot be read. Used outside the timed region only.
 */
char bu_proc_state(int pid);

/* Write v[0..n) one per line to path (for the latency plots); exits on failure. */
void bu_write_samples(const char *path, const uint64_t *v, size_t n);

#endif
