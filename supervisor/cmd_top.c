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

#include "cli.h"
#include "cli_config.h"
#include "shmsched.h"
#include "top.h"

#define DEFAULT_DELAY_NS (1000ull * 1000 * 1000)

static const char help[] =
    "Usage: shmsched top NAME [-d DUR] [-n N] [-b | --json] [-c CLASS] [-s SORT] [-l]\n"
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
    "and the tenant.\n"
    "Keys: c or Tab next class, C previous class, s next sort order, l tenants or\n"
    "leases, q quit.\n"
    "\n"
    "Options:\n"
    "  -d, --delay DUR   time between frames (default: 1s)\n"
    "  -n, --frames N    stop after N frames (default: until q, or a signal)\n"
    "  -b, --batch       plain frames, no terminal control (default when stdout is\n"
    "                    not a terminal or TERM is dumb); a frame ends with a blank line\n"
    "  -j, --json        one JSON object per frame, one per line\n"
    "  -c, --class C     the class whose tenants are shown (default: the first)\n"
    "  -s, --sort KEY    tenants by grants (grants/s), queued, wait or name\n"
    "                    (default: grants)\n"
    "  -l, --leases      show the class's leases rather than its tenants (--json\n"
    "                    always gives both)\n"
    "  -h, --help        show this help\n"
    "\n"
    "In batch and JSON modes the first frame comes after one interval, so that its\n"
    "rates are over a whole one.\n"
    "\n"
    "Exit status: 0 done; 1 the segment could not be read; 2 usage error.\n"
    "\n"
    "Examples:\n"
    "  shmsched top jobs\n"
    "  shmsched top jobs -b -n 3 -d 2s\n"
    "  shmsched top jobs --json -n 10 | jq .classes.standard.grants_per_s\n";

struct top_args {
  const char *name;
  uint64_t delay_ns;
  long frames; /* 0: no limit */
  int batch, json, sel;
  enum top_sort sort;
  enum top_panel panel;
};

static volatile sig_atomic_t stopping;

static void on_stop(int sig) {
  (void)sig;
  stopping = 1;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The next configured class after (dir 1) or before (dir -1) sel, wrapping. */
static int next_class(const struct top_sample *s, int sel, int dir) {
  for (int i = 1; i <= SHMS_CLASS_COUNT; i++) {
    int c = ((sel + dir * i) % SHMS_CLASS_COUNT + SHMS_CLASS_COUNT) % SHMS_CLASS_COUNT;
    if (s->cfg.classes[c].configured)
      return c;
  }
  return sel;
}

/* ---- batch and JSON ------------------------------------------------------- */

static void plain_line(void *ctx, const char *text, int kind) {
  (void)kind;
  fprintf(ctx, "%s\n", text);
}

static int run_batch(shms_t *h, struct top_args *a) {
  struct top_sample prev, now;
  int rc = top_sample_read(h, &prev);
  for (long n = 0; rc == SHMS_OK && !stopping && (a->frames == 0 || n < a->frames); n++) {
    struct timespec ts = {(time_t)(a->delay_ns / 1000000000u), (long)(a->delay_ns % 1000000000u)};
    while (!stopping && nanosleep(&ts, &ts) != 0 && errno == EINTR)
      ;
    if (stopping || (rc = top_sample_read(h, &now)) != SHMS_OK)
      break;
    struct top_frame f;
    if ((rc = top_frame_make(a->name, &prev, &now, a->sort, &f)) == SHMS_OK) {
      if (a->json)
        top_json(stdout, &f);
      else {
        top_render(&f, a->sel, a->sort, a->panel, 0, 0, plain_line, stdout);
        fputc('\n', stdout);
      }
      fflush(stdout);
    }
    top_frame_free(&f);
    top_sample_free(&prev);
    prev = now;
  }
  top_sample_free(&prev);
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

static void draw(const struct top_frame *f, const struct top_args *a) {
  struct screen s = {0};
  erase();
  top_render(f, a->sel, a->sort, a->panel, COLS, LINES, screen_line, &s);
  refresh();
}

/* Keys until the next frame is due (or something to redraw): 1 to quit. */
static int keys(const struct top_sample *now, struct top_args *a, uint64_t due, int *redraw) {
  for (;;) {
    uint64_t t = mono_ns();
    if (t >= due || stopping)
      return stopping;
    timeout((int)((due - t + 999999) / 1000000));
    int ch = getch();
    if (ch == 'q' || ch == 'Q')
      return 1;
    if (ch == 'c' || ch == '\t' || ch == KEY_RIGHT)
      a->sel = next_class(now, a->sel, 1);
    else if (ch == 'C' || ch == KEY_BTAB || ch == KEY_LEFT)
      a->sel = next_class(now, a->sel, -1);
    else if (ch == 's')
      a->sort = (enum top_sort)((a->sort + 1) % TOP_SORTS);
    else if (ch == 'l')
      a->panel = a->panel == TOP_PANEL_LEASES ? TOP_PANEL_TENANTS : TOP_PANEL_LEASES;
    else if (ch != KEY_RESIZE)
      continue;
    *redraw = 1; /* a key that changes the view, or a resize: draw again now */
    return 0;
  }
}

static int run_screen(shms_t *h, struct top_args *a) {
  struct top_sample prev, now;
  int rc = top_sample_read(h, &prev);
  if (rc != SHMS_OK)
    return rc;
  if (initscr() == NULL) {
    top_sample_free(&prev);
    return SHMS_ESYSTEM;
  }
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  struct top_sample none = {0};
  struct top_frame f;
  if (top_frame_make(a->name, &none, &prev, a->sort, &f) == SHMS_OK)
    draw(&f, a);
  top_frame_free(&f);
  for (long n = 1; rc == SHMS_OK && (a->frames == 0 || n < a->frames); n++) {
    uint64_t due = mono_ns() + a->delay_ns;
    int redraw = 0, quit = 0;
    while (!(quit = keys(&prev, a, due, &redraw)) && redraw) {
      redraw = 0; /* redraw the last frame as the keys or the new size want it */
      if (top_frame_make(a->name, &none, &prev, a->sort, &f) == SHMS_OK)
        draw(&f, a);
      top_frame_free(&f);
    }
    if (quit || (rc = top_sample_read(h, &now)) != SHMS_OK)
      break;
    if ((rc = top_frame_make(a->name, &prev, &now, a->sort, &f)) == SHMS_OK)
      draw(&f, a);
    top_frame_free(&f);
    top_sample_free(&prev);
    prev = now;
  }
  endwin();
  top_sample_free(&prev);
  return rc;
}

/* ---- options --------------------------------------------------------------- */

static int parse(int argc, char **argv, struct top_args *a) {
  static const struct option opts[] = {{"delay", required_argument, NULL, 'd'},
                                       {"frames", required_argument, NULL, 'n'},
                                       {"batch", no_argument, NULL, 'b'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"class", required_argument, NULL, 'c'},
                                       {"sort", required_argument, NULL, 's'},
                                       {"leases", no_argument, NULL, 'l'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  char why[160], q[96];
  uint32_t frames;
  int c;
  while ((c = getopt_long(argc, argv, ":d:n:bjc:s:lh", opts, NULL)) != -1) {
    if (c == 'h')
      return cli_help(help), -1;
    if (c == 'd' && cli_parse_duration(optarg, &a->delay_ns, why, sizeof why) != 0)
      return cli_usage("top: --delay: %s", why);
    if (c == 'n') {
      if (cli_parse_u32(optarg, &frames, why, sizeof why) != 0 || frames == 0)
        return cli_usage("top: --frames: %s", frames == 0 ? "must be at least 1" : why);
      a->frames = frames;
    } else if (c == 'b')
      a->batch = 1;
    else if (c == 'j')
      a->json = 1;
    else if (c == 'l')
      a->panel = TOP_PANEL_LEASES;
    else if (c == 'c') {
      if ((a->sel = shms_class_from_name(optarg)) < 0)
        return cli_usage("top: --class: no class named '%s'", cli_quote(q, sizeof q, optarg));
    } else if (c == 's') {
      static const char *const keys[] = {"grants", "queued", "wait", "name"};
      a->sort = TOP_SORTS;
      for (int k = 0; k < TOP_SORTS; k++)
        if (strcmp(optarg, keys[k]) == 0)
          a->sort = (enum top_sort)k;
      if (a->sort == TOP_SORTS)
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
  struct top_args a = {.delay_ns = DEFAULT_DELAY_NS, .sel = -1, .sort = TOP_SORT_GRANTS};
  int rc = parse(argc, argv, &a);
  if (rc != 0)
    return rc < 0 ? CLI_EXIT_OK : rc;
  const char *term = getenv("TERM");
  if (!a.json && (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO) || term == NULL ||
                  strcmp(term, "dumb") == 0 || term[0] == '\0'))
    a.batch = 1;
  shms_t *h;
  if ((rc = shms_attach(a.name, SHMS_ATTACH_OBSERVER, &h)) != SHMS_OK)
    return cli_fail_lib(rc);
  shms_config cfg;
  if ((rc = shms_get_config(h, &cfg)) == SHMS_OK) {
    if (a.sel >= 0 && !cfg.classes[a.sel].configured)
      rc = SHMS_EINVAL;
    for (int c = 0; a.sel < 0 && c < SHMS_CLASS_COUNT; c++)
      if (cfg.classes[c].configured)
        a.sel = c;
  }
  if (rc == SHMS_EINVAL) {
    shms_detach(h);
    return cli_usage("top: --class: segment '%s' has no class %s", a.name,
                     shms_class_name((shms_class_t)a.sel));
  }
  struct sigaction sa = {.sa_handler = on_stop}; /* no SA_RESTART: sleeps return EINTR */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  if (rc == SHMS_OK)
    rc = a.batch || a.json ? run_batch(h, &a) : run_screen(h, &a);
  int code = rc == SHMS_OK ? CLI_EXIT_OK : cli_fail_lib(rc);
  shms_detach(h);
  return code;
}
