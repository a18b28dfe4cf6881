/*
 * `shmsched top`: a live view of one segment. Two samples of the segment, read as an observer,
 * make a frame (top_model.c): figures now, and rates, mean and max waits over the interval from
 * the counters' deltas. A frame is drawn as lines of text (top_text.c, its columns fitted to the
 * width by top_cols.c), on a terminal with ncurses or as plain batch frames, or as one JSON
 * object (top_text.c). The segment is followed by incarnation (top_source.c): a destroyed one
 * is a frame that says so, a new one of the same name is attached when it appears.
 */
#ifndef SHMS_SUPERVISOR_TOP_H
#define SHMS_SUPERVISOR_TOP_H

#include <stdint.h>
#include <stdio.h>

#include "../cli/pid_name.h"
#include "shmsched.h"

#define TOP_NONE UINT64_MAX /* a wait figure with nothing to say (no grant in the interval) */

/* One reading of the segment. */
struct top_sample {
  uint64_t mono_ns, wall_ns;
  shms_segment_info info;
  shms_config cfg;
  shms_class_stats st[SHMS_CLASS_COUNT];
  shms_tenant_stats *tenants[SHMS_CLASS_COUNT]; /* malloc'd (top_sample_free) */
  uint32_t ntenants[SHMS_CLASS_COUNT];
  shms_cell_info *cells[SHMS_CLASS_COUNT]; /* every cell, malloc'd (top_sample_free) */
  uint32_t ncells[SHMS_CLASS_COUNT];
  shms_quota_row quotas[SHMS_QUOTAS_MAX]; /* the quota table */
  uint32_t nquotas;
};

/* A cell that carries a lease (granted, leased) or a quarantined one's last lease: whose. */
struct top_lease {
  uint32_t cell;
  const char *state; /* "granted", "leased", "quarantined" */
  int32_t pid;       /* the holder by its pid here, 0 if unknown or of another namespace */
  int32_t ns_pid;    /* its pid in its own pid namespace, 0 if unknown */
  uint64_t pidns;    /* that namespace's inode */
  char pid_name[PID_NAME_MAX]; /* pid_name(): "1234", "ns:INODE:PID" (pid_foreign), "" */
  const char *holder_state;    /* holder_state_ns(): "running", "stopped", "dead", "unknown", "" */
  uint32_t uid;                /* the lease's: its acquirer's or enqueuer's effective uid */
  char user[64];               /* uid's login name, or its number */
  char tenant[SHMS_TENANT_MAX + 1];
  uint64_t age_ns; /* since the grant; TOP_NONE when unknown */
};

struct top_tenant {
  char name[SHMS_TENANT_MAX + 1];
  uint32_t queued, active;
  double grants_per_s;
  double share;             /* of the class's grants from the queue in the interval; < 0: none */
  uint64_t wait_mean_ns;    /* over the interval, TOP_NONE if no grant */
  uint64_t wait_max_ns;     /* its longest wait during its stay in the tenant table */
  uint64_t interval_grants; /* grants from the queue in the interval */
  /* Fair share: its weight and team ("" none); its share of the cell-time the class's tenants
   * were counted in the interval (< 0: none counted); its entitled share now (shms_tenant_stats).
   */
  uint32_t weight;
  char team[SHMS_TENANT_MAX + 1];
  double time_share;
  double entitled;
  uint64_t interval_cell_ns;
};

struct top_class {
  int cls; /* shms_class_t; -1: not configured */
  int worker;
  uint32_t cells, available, granted, leased, quarantined, offline, reserved;
  uint32_t depth, capacity, queued_tenants;
  double grants_per_s, rejections_per_s, cancellations_per_s, expirations_per_s;
  double joins_per_s;    /* keyed submits that joined a live job (worker classes): JSON only */
  uint64_t wait_mean_ns; /* of the grants from the queue in the interval, TOP_NONE if none */
  uint64_t wait_max_ns;  /* their longest, TOP_NONE if none */
  int wait_max_bound;    /* wait_max_ns is a histogram bucket's bound, not exact */
  uint64_t oldest_lease_ns;
  double fair_share;          /* 1 / tenants that wanted cells in the interval; 0 if none */
  struct top_tenant *tenants; /* sorted (top_sort) */
  uint32_t ntenants;
  struct top_lease *leases; /* by cell */
  uint32_t nleases;
};

enum top_sort { TOP_SORT_GRANTS, TOP_SORT_QUEUED, TOP_SORT_WAIT, TOP_SORT_NAME, TOP_SORTS };

struct top_frame {
  const char *name;
  const char *state; /* the segment's, or "gone" once it was destroyed */
  int gone;          /* destroyed: no figures, no classes */
  int gone_rc;       /* while gone: why no segment of the name could be attached */
  uint64_t incarnation;
  uint64_t uptime_s, wall_ns;
  double interval_s;
  uint32_t live_processes;
  int32_t supervisor_pid;
  shms_quota_row quotas[SHMS_QUOTAS_MAX]; /* the quota table: nquotas rows */
  uint32_t nquotas;
  struct top_class classes[SHMS_CLASS_COUNT];
  /* The classes in configuration order (shms_class_order): how every view lists them. */
  shms_class_t order[SHMS_CLASS_COUNT];
  int norder;
};

/* Read the segment h into s. Returns an SHMS_E* code. */
int top_sample_read(shms_t *h, struct top_sample *s);
void top_sample_free(struct top_sample *s);
/* The frame of sample now over the interval since prev (no interval when prev->mono_ns is 0, or
 * prev is of another incarnation), its tenants sorted by sort (reverse: the other way). */
int top_frame_make(const char *name, const struct top_sample *prev, const struct top_sample *now,
                   enum top_sort sort, int reverse, struct top_frame *f);
/* The frame of NAME's segment that src followed, destroyed (src->incarnation): seen gone at
 * wall_ns, with why nothing of the name could be attached since (src->attach_rc). */
struct top_source;
void top_frame_gone(const char *name, const struct top_source *src, uint64_t wall_ns,
                    struct top_frame *f);
void top_frame_free(struct top_frame *f);
const char *top_sort_name(enum top_sort s);

/* What the panel below the classes lists for the selected class. */
enum top_panel { TOP_PANEL_TENANTS, TOP_PANEL_LEASES };

/* How a frame is drawn. */
struct top_view {
  int sel; /* the class whose panel is shown: its index in top_frame.classes */
  enum top_sort sort;
  int reverse;
  enum top_panel panel;
  int width, height; /* columns and lines; 0: no limit (batch) */
  int keys;          /* on a terminal: the titles say where the keys are */
  int paused;        /* the display is frozen: the header says so */
};

/* Lines of at most width columns, columns dropped to fit (top_cols_fit). Calls line(ctx, text,
 * kind) per line; kind 1 for a heading line, 0 otherwise. */
void top_render(const struct top_frame *f, const struct top_view *v,
                void (*line)(void *ctx, const char *text, int kind), void *ctx);
/* The help screen: the keys. */
void top_render_help(const struct top_view *v, void (*line)(void *ctx, const char *text, int kind),
                     void *ctx);
/* One JSON object for the frame, on one line. */
void top_json(FILE *out, const struct top_frame *f);

/*
 * A table's columns on a narrow terminal (top_cols.c). Each column has a heading and a width (a
 * field longer than that pushes the rest right); one separating space between columns.
 */
struct top_col {
  const char *head;
  int width;
  int left; /* aligned left; the last column shown, if left-aligned, is not padded */
};
/*
 * Which of cols[0..n) a line of width columns shows, into keep[] (1 shown): the columns of drop
 * (ndrop indexes into cols) go one at a time, in that order, until the rest fit; a column drop
 * does not name always stays, the line cut at the edge if it must be. width <= 0: every column.
 */
void top_cols_fit(const struct top_col *cols, int n, const int *drop, int ndrop, int width,
                  unsigned char *keep);
/* The columns keep[] shows, of fields (NULL: the headings), into out (n bytes). Returns out. */
char *top_cols_join(char *out, size_t n, const struct top_col *cols, int ncols,
                    const unsigned char *keep, const char *const *fields);

/* The segment top follows: NAME's, by incarnation (top_source.c). */
struct top_source {
  const char *name;
  shms_t *h;            /* NULL while gone */
  uint64_t incarnation; /* the attached segment's, or the destroyed one's while gone */
  int attach_rc;        /* while gone: why NAME could not be attached (SHMS_ENOTFOUND: none) */
};
enum top_look {
  TOP_LOOK_SAME, /* the segment attached is NAME's still */
  TOP_LOOK_GONE, /* none is attached: it was destroyed, and no new one is there yet */
  TOP_LOOK_NEW,  /* a segment of another incarnation is attached now */
};
/* Attach NAME as an observer. Returns an SHMS_E* code; s is usable only on SHMS_OK. */
int top_source_open(struct top_source *s, const char *name);
/* Whether the segment was destroyed, and once it was, whether a new one can be attached. */
enum top_look top_source_look(struct top_source *s);
void top_source_close(struct top_source *s);

#endif
