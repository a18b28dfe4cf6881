/*
 * shmsched top: a live view of one segment, read as an observer, in the habits of top(1), htop
 * and `redis-cli --stat`: on a terminal with ncurses (keys to switch class, sort and quit; a
 * resize redraws), or as plain batch frames (-b, or when stdout is not a terminal or TERM is
 * dumb), or one JSON object per frame (--json).
 */
#include <curses.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../cli/cli_config.h"
#include "../top/top.h"
#include "shmsched.h"

#define DEFAULT_DELAY_NS (1000ull * 1000 * 1000)

static const char help[] =
    "Usage: shmsched top NAME [-d DUR] [-n N] [-b | --json] [-c CLASS] [-s SORT] [-r] [-l]\n"
    "\n"
    "A live view of the segment, read as an observer (read-only, unregistered):\n"
    "a header (state, uptime, live processes, supervisor), one row per class (a bar\n"
    "of leased/granted/available/quarantined/offline cells, the queue against its\n"
    "capacity, grants, rejections, cancellations and expirations per second over\n"
    "the last interval, the mean and longest wait of the grants from the queue in\n"
    "it, the oldest lease), and the tenants of one class (queued, active, grants\n"
    "per second, their share of the class's grants against the fair share, mean\n"
    "wait in the interval and longest wait), or instead its leases: one row per\n"
    "granted, leased or quarantined cell, with its state, age, holder process and\n"
    "its state, the user (the uid that acquired or enqueued the lease, by name)\n"
    "and the tenant. On a narrow terminal the least telling columns go first; the\n"
    "waits and the share last.\n"
    "Keys: c or Tab next class, C previous class, s next sort order, r reverse it,\n"
    "l tenants or leases, Space or p pause, ? or h help, q quit.\n"
    "A destroyed segment shows as gone; one created again under NAME is followed.\n"
    "\n"
    "Options:\n"
    "  -d, --delay DUR   time between frames: seconds, as top(1) takes them (0.5, 2),\n"
    "                    or with a unit (500ms, 2s, 1m); at least 1ms (default: 1s)\n"
    "  -n, --frames N    stop after N frames (default: until q, or a signal)\n"
    "  -b, --batch       plain frames, no terminal control (default when stdout is\n"
    "                    not a terminal or TERM is dumb); a frame ends with a blank line\n"
    "  -j, --json        one JSON object per frame, one per line\n"
    "  -c, --class C     the class whose tenants are shown (default: the first)\n"
    "  -s, --sort KEY    tenants by grants (grants/s), queued, wait or name\n"
    "                    (default: grants)\n"
    "  -r, --reverse     the sort order reversed\n"
    "  -l, --leases      show the class's leases rather than its tenants (--json\n"
    "                    always gives both)\n"
    "  -h, --help        show this help\n"
    "\n"
    "In batch and JSON modes the first frame comes after one interval, so that its\n"
    "rates are over a whole one.\n"
    "\n"
    "Exit status: 0 done; 1 the segment could not be read (in batch and JSON modes,\n"
    "also: it was destroyed, and none was created again, when top stopped);\n"
    "2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched top jobs\n"
    "  shmsched top jobs -b -n 3 -d 2s\n"
    "  shmsched top jobs -d 0.5\n"
    "  shmsched top jobs --json -n 10 | jq .classes.standard.grants_per_s\n";

struct top_args {
  const char *name;
  uint64_t delay_ns;
  long frames; /* 0: no limit */
  int batch, json;
  int help; /* the help screen is shown */
  struct top_view v;
};

static volatile sig_atomic_t stopping;

static void on_stop(int sig) {
  (void)sig;
  stopping = 1;
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

/* The configured class after (dir 1) or before (dir -1) sel in configuration order, wrapping;
 * with sel not configured (-1), the first. */
static int next_class(const shms_config *cfg, int sel, int dir) {
  shms_class_t order[SHMS_CLASS_COUNT];
  int n = shms_class_order(cfg, order), at = -1;
  for (int i = 0; i < n; i++)
    if ((int)order[i] == sel)
      at = i;
  if (n == 0)
    return sel;
  if (at < 0)
    return (int)order[0];
  return (int)order[((at + dir) % n + n) % n];
}

/* ---- what is shown ------------------------------------------------------- */

/* The segment followed, and its last two samples; or, since it was destroyed, that it is gone. */
struct feed {
  struct top_source src;
  struct top_sample older, newer;
  int gone;
  uint64_t gone_wall_ns; /* when it was last seen gone */
};

/* Look whether the segment is still there, and sample the one there is. */
static int feed_tick(struct feed *d, struct top_args *a) {
  if (top_source_look(&d->src) == TOP_LOOK_GONE) {
    d->gone = 1;
    d->gone_wall_ns = clock_ns(CLOCK_REALTIME);
    return SHMS_OK;
  }
  struct top_sample s;
  int rc = top_sample_read(d->src.h, &s);
  if (rc != SHMS_OK) {
    top_sample_free(&s);
    return rc;
  }
  d->gone = 0;
  top_sample_free(&d->older);
  d->older = d->newer;
  d->newer = s;
  /* A segment created again may lack the class shown: show its first. */
  if (a->v.sel < 0 || !s.cfg.classes[a->v.sel].configured)
    a->v.sel = next_class(&s.cfg, -1, 1);
  return SHMS_OK;
}

/* The frame of the last two samples; frame_make leaves out an interval across incarnations. */
static int feed_frame(const struct feed *d, const struct top_args *a, struct top_frame *f) {
  if (d->gone) {
    top_frame_gone(a->name, &d->src, d->gone_wall_ns, f);
    return SHMS_OK;
  }
  return top_frame_make(a->name, &d->older, &d->newer, a->v.sort, a->v.reverse, f);
}

static void feed_free(struct feed *d) {
  top_sample_free(&d->older);
  top_sample_free(&d->newer);
  top_source_close(&d->src);
}

/* ---- batch and JSON ------------------------------------------------------- */

static void plain_line(void *ctx, const char *text, int kind) {
  (void)kind;
  fprintf(ctx, "%s\n", text);
}

static int run_batch(struct feed *d, struct top_args *a) {
  int rc = feed_tick(d, a);
  for (long n = 0; rc == SHMS_OK && !stopping && (a->frames == 0 || n < a->frames); n++) {
    struct timespec ts = {(time_t)(a->delay_ns / 1000000000u), (long)(a->delay_ns % 1000000000u)};
    while (!stopping && nanosleep(&ts, &ts) != 0 && errno == EINTR)
      ;
    if (stopping || (rc = feed_tick(d, a)) != SHMS_OK)
      break;
    struct top_frame f;
    if ((rc = feed_frame(d, a, &f)) == SHMS_OK) {
      if (a->json)
        top_json(stdout, &f);
      else {
        top_render(&f, &a->v, plain_line, stdout);
        fputc('\n', stdout);
      }
      fflush(stdout);
    }
    top_frame_free(&f);
  }
  return rc;
}

/* ---- the terminal --------------------------------------------------------- */

struct screen {
  int row;
};

static void screen_line(void *ctx, const char *text, int kind) {
  struct screen *s = ctx;
  if (kind)
    attron(A_BOLD);
  mvaddnstr(s->row++, 0, text, COLS);
  if (kind)
    attroff(A_BOLD);
}

static void draw(const struct feed *d, struct top_args *a) {
  struct screen s = {0};
  a->v.width = COLS;
  a->v.height = LINES;
  erase();
  if (a->help)
    top_render_help(&a->v, screen_line, &s);
  else {
    struct top_frame f;
    if (feed_frame(d, a, &f) == SHMS_OK)
      top_render(&f, &a->v, screen_line, &s);
    top_frame_free(&f);
  }
  refresh();
}

/* What a key asks of the loop. */
enum key_do { KEY_TICK, KEY_REDRAW, KEY_QUIT };

/* A key that changes the view. */
static int view_key(int ch, const struct feed *d, struct top_args *a) {
  struct top_view *v = &a->v;
  if ((ch == 'c' || ch == '\t' || ch == KEY_RIGHT) && !d->gone)
    v->sel = next_class(&d->newer.cfg, v->sel, 1);
  else if ((ch == 'C' || ch == KEY_BTAB || ch == KEY_LEFT) && !d->gone)
    v->sel = next_class(&d->newer.cfg, v->sel, -1);
  else if (ch == 's')
    v->sort = (enum top_sort)((v->sort + 1) % TOP_SORTS);
  else if (ch == 'r')
    v->reverse = !v->reverse;
  else if (ch == 'l')
    v->panel = v->panel == TOP_PANEL_LEASES ? TOP_PANEL_TENANTS : TOP_PANEL_LEASES;
  else if (ch == '?' || ch == 'h')
    a->help = 1;
  else
    return ch == KEY_RESIZE;
  return 1;
}

/* Keys until the next frame is due: what the loop does next. */
static enum key_do keys(const struct feed *d, struct top_args *a, uint64_t due) {
  for (;;) {
    uint64_t t = mono_ns();
    if (stopping)
      return KEY_QUIT;
    if (t >= due)
      return KEY_TICK;
    timeout((int)((due - t + 999999) / 1000000));
    int ch = getch();
    if (ch == ERR)
      continue;
    if (a->help && ch != KEY_RESIZE) { /* any key leaves the help screen, and only does that */
      a->help = 0;
      return KEY_REDRAW;
    }
    if (ch == 'q' || ch == 'Q')
      return KEY_QUIT;
    if (ch == ' ' || ch == 'p') {
      /* Paused, nothing is read: the next frame, once resumed, comes at once, over the time
       * the display was frozen. */
      a->v.paused = !a->v.paused;
      return a->v.paused ? KEY_REDRAW : KEY_TICK;
    }
    if (view_key(ch, d, a))
      return KEY_REDRAW;
  }
}

static int run_screen(struct feed *d, struct top_args *a) {
  int rc = feed_tick(d, a);
  if (rc != SHMS_OK)
    return rc;
  if (initscr() == NULL)
    return SHMS_ESYSTEM;
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  draw(d, a);
  for (long n = 1; rc == SHMS_OK && (a->frames == 0 || n < a->frames);) {
    uint64_t due = mono_ns() + a->delay_ns;
    enum key_do k;
    while ((k = keys(d, a, due)) == KEY_REDRAW)
      draw(d, a); /* the last frame again, as the keys or the new size want it */
    if (k == KEY_QUIT)
      break;
    if (a->v.paused)
      continue;
    if ((rc = feed_tick(d, a)) == SHMS_OK)
      draw(d, a);
    n++;
  }
  endwin();
  return rc;
}

/* ---- options --------------------------------------------------------------- */

static int parse(int argc, char **argv, struct top_args *a) {
  static const struct option opts[] = {
      {"delay", required_argument, NULL, 'd'}, {"frames", required_argument, NULL, 'n'},
      {"batch", no_argument, NULL, 'b'},       {"json", no_argument, NULL, 'j'},
      {"class", required_argument, NULL, 'c'}, {"sort", required_argument, NULL, 's'},
      {"reverse", no_argument, NULL, 'r'},     {"leases", no_argument, NULL, 'l'},
      {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
  char why[160], q[96];
  uint32_t frames;
  int c;
  while ((c = getopt_long(argc, argv, ":d:n:bjc:s:rlh", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(help), -1;
    if (c == 'd' && cli_parse_delay(optarg, &a->delay_ns, why, sizeof why) != 0)
      return cli_usage("top: --delay: %s", why);
    if (c == 'n') {
      if (cli_parse_u32(optarg, &frames, why, sizeof why) != 0 || frames == 0)
        return cli_usage("top: --frames: %s", frames == 0 ? "must be at least 1" : why);
      a->frames = frames;
    } else if (c == 'b')
      a->batch = 1;
    else if (c == 'j')
      a->json = 1;
    else if (c == 'r')
      a->v.reverse = 1;
    else if (c == 'l')
      a->v.panel = TOP_PANEL_LEASES;
    else if (c == 'c') {
      if ((a->v.sel = shms_class_from_name(optarg)) < 0)
        return cli_usage("top: --class: no class named '%s'", cli_quote(q, sizeof q, optarg));
    } else if (c == 's') {
      static const char *const keys[] = {"grants", "queued", "wait", "name"};
      a->v.sort = TOP_SORTS;
      for (int k = 0; k < TOP_SORTS; k++)
        if (strcmp(optarg, keys[k]) == 0)
          a->v.sort = (enum top_sort)k;
      if (a->v.sort == TOP_SORTS)
        return cli_usage("top: --sort: expected grants, queued, wait or name, got '%s'",
                         cli_quote(q, sizeof q, optarg));
    } else if (c != 'd')
      return cli_bad_option("top", c, argv);
  }
  if (a->batch && a->json)
    return cli_usage("top: --batch and --json exclude each other");
  return cli_take_name("top", argc, argv, &a->name) != 0 ? CLI_EXIT_USAGE : 0;
}

int cmd_top(int argc, char **argv) {
  struct top_args a = {.delay_ns = DEFAULT_DELAY_NS, .v = {.sel = -1, .sort = TOP_SORT_GRANTS}};
  int rc = parse(argc, argv, &a);
  if (rc != 0)
    return rc < 0 ? CLI_EXIT_OK : rc;
  const char *term = getenv("TERM");
  if (!a.json && (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO) || term == NULL ||
                  strcmp(term, "dumb") == 0 || term[0] == '\0'))
    a.batch = 1;
  a.v.keys = !a.batch && !a.json;
  struct feed d = {0};
  if ((rc = top_source_open(&d.src, a.name)) != SHMS_OK)
    return cli_fail_lib(rc);
  shms_config cfg;
  if ((rc = shms_get_config(d.src.h, &cfg)) == SHMS_OK && a.v.sel >= 0 &&
      !cfg.classes[a.v.sel].configured) {
    feed_free(&d);
    return cli_usage("top: --class: segment '%s' has no class %s", a.name,
                     shms_class_name((shms_class_t)a.v.sel));
  }
  struct sigaction sa = {.sa_handler = on_stop}; /* no SA_RESTART: sleeps return EINTR */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  if (rc == SHMS_OK)
    rc = a.v.keys ? run_screen(&d, &a) : run_batch(&d, &a);
  int code = rc == SHMS_OK ? CLI_EXIT_OK : cli_fail_lib(rc);
  /* A script reading frames learns by the status that they stopped on a destroyed segment. */
  if (code == CLI_EXIT_OK && d.gone && !a.v.keys)
    code = cli_fail(SHMS_ENOTFOUND, "top: segment '%s' was destroyed", a.name);
  feed_free(&d);
  return code;
}
