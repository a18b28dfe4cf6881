/*
 * `shmsched top`'s pieces that need no terminal (supervisor/top/top_cols.c, top_text.c,
 * top_model.c, top_source.c): which columns a width keeps, what a frame's lines say (classes
 * in configuration order, no keys in batch output, paused, a destroyed segment), sort orders
 * reversed, no interval across two segments, and the following of a segment by incarnation
 * through destroy and create. tests/top_tmux.sh drives the whole
 * command in a terminal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "top/top.h"

/* ---- the lines a frame is drawn as ---------------------------------------- */

#define MAX_LINES 64

struct captured {
  char text[MAX_LINES][512];
  int kind[MAX_LINES];
  int n;
};

static void capture(void *ctx, const char *text, int kind) {
  struct captured *c = ctx;
  ck_assert_int_lt(c->n, MAX_LINES);
  snprintf(c->text[c->n], sizeof c->text[0], "%s", text);
  c->kind[c->n++] = kind;
}

/* The first line that begins with prefix, or NULL. */
static const char *line_with(const struct captured *c, const char *prefix) {
  for (int i = 0; i < c->n; i++)
    if (strncmp(c->text[i], prefix, strlen(prefix)) == 0)
      return c->text[i];
  return NULL;
}

/* The line whose first word is word (a table's heading), or NULL. */
static const char *heading(const struct captured *c, const char *word) {
  size_t n = strlen(word);
  for (int i = 0; i < c->n; i++)
    if (strncmp(c->text[i], word, n) == 0 && (c->text[i][n] == ' ' || c->text[i][n] == '\0'))
      return c->text[i];
  return NULL;
}

/* The words of line joined by one space: a heading line's columns. */
static const char *words(char *out, size_t n, const char *line) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", line);
  out[0] = '\0';
  char *save = NULL;
  for (char *w = strtok_r(buf, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save))
    snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] != '\0' ? " " : "", w);
  return out;
}

static struct top_tenant carol = {.name = "carol",
                                  .queued = 2,
                                  .share = 0.5,
                                  .wait_mean_ns = 1500000,
                                  .wait_max_ns = 9000000,
                                  .weight = 1,
                                  .time_share = -1,
                                  .team = "builds"};

/* A frame of classes large, small and standard (configured in that order on the command line),
 * standard with one tenant. */
static void frame(struct top_frame *f) {
  memset(f, 0, sizeof *f);
  f->name = "jobs";
  f->state = "active";
  f->wall_ns = 1;
  for (int c = 0; c < SHMS_CLASS_COUNT; c++)
    f->classes[c].cls = -1;
  const int configured[] = {SHMS_CLASS_LARGE, SHMS_CLASS_SMALL, SHMS_CLASS_STANDARD};
  for (int i = 0; i < 3; i++) {
    f->order[f->norder++] = (shms_class_t)configured[i];
    struct top_class *r = &f->classes[configured[i]];
    r->cls = configured[i];
    r->cells = r->available = 2;
    r->capacity = 8;
    r->wait_mean_ns = r->wait_max_ns = TOP_NONE;
  }
  f->classes[SHMS_CLASS_STANDARD].tenants = &carol;
  f->classes[SHMS_CLASS_STANDARD].ntenants = 1;
}

static void render(struct captured *c, int width, int keys, int paused) {
  struct top_frame f;
  frame(&f);
  struct top_view v = {.sel = SHMS_CLASS_STANDARD, .width = width, .keys = keys, .paused = paused};
  memset(c, 0, sizeof *c);
  top_render(&f, &v, capture, c);
  for (int i = 0; width > 0 && i < c->n; i++)
    ck_assert_msg((int)strlen(c->text[i]) <= width, "wider than %d: '%s'", width, c->text[i]);
}

static void headings_are(int width, const char *classes, const char *tenants) {
  struct captured c;
  char got[512];
  render(&c, width, 1, 0);
  const char *h = heading(&c, "CLASS");
  ck_assert_ptr_nonnull(h);
  ck_assert_str_eq(words(got, sizeof got, h), classes);
  h = heading(&c, "TENANT");
  ck_assert_ptr_nonnull(h);
  ck_assert_str_eq(words(got, sizeof got, h), tenants);
}

#define ALL_CLASS_COLUMNS                                                                          \
  "CLASS CELLS LSD GRT AVL QRN OFF QUEUE GRANT/s REJ/s CANC/s EXP/s WAIT WAITMAX OLDEST"
#define ALL_TENANT_COLUMNS "TENANT QUEUED ACTIVE GRANT/s SHARE WAIT WAITMAX W TIME ENTIT TEAM"

/* The columns each width keeps: what the operator reads first stays, the waits above all. */
START_TEST(columns_at_each_width) {
  headings_are(0, ALL_CLASS_COLUMNS, ALL_TENANT_COLUMNS); /* batch: no limit */
  headings_are(200, ALL_CLASS_COLUMNS, ALL_TENANT_COLUMNS);
  headings_are(126, ALL_CLASS_COLUMNS, ALL_TENANT_COLUMNS);
  headings_are(120,
               "CLASS CELLS LSD GRT AVL QRN OFF QUEUE GRANT/s REJ/s CANC/s WAIT WAITMAX OLDEST",
               ALL_TENANT_COLUMNS);
  headings_are(80, "CLASS CELLS QUEUE GRANT/s WAIT WAITMAX OLDEST",
               "TENANT QUEUED SHARE WAIT WAITMAX TIME");
  headings_are(60, "CLASS QUEUE GRANT/s WAIT WAITMAX", "TENANT SHARE WAIT WAITMAX");
  headings_are(30, "CLASS WAIT WAITMAX", "TENANT"); /* a tenant's name is wider than that */
}
END_TEST

/* Over every width, a column once dropped stays dropped at narrower ones, and the waits (and
 * a tenant's share) are the last to go. */
START_TEST(waits_and_share_go_last) {
  char prev_classes[512] = ALL_CLASS_COLUMNS, prev_tenants[512] = ALL_TENANT_COLUMNS;
  for (int width = 200; width >= 12; width--) {
    struct captured c;
    char cls[512], ten[512];
    render(&c, width, 1, 0);
    words(cls, sizeof cls, heading(&c, "CLASS"));
    words(ten, sizeof ten, heading(&c, "TENANT"));
    /* each heading word still shown was shown at the wider width */
    char buf[512], *save = NULL;
    snprintf(buf, sizeof buf, "%s", cls);
    for (char *w = strtok_r(buf, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save))
      ck_assert_msg(strstr(prev_classes, w) != NULL, "%s back at %d", w, width);
    if (strcmp(cls, "CLASS") != 0 && strcmp(cls, "CLASS WAIT") != 0)
      ck_assert_msg(strstr(cls, " WAIT WAITMAX") != NULL, "at %d: %s", width, cls);
    int others = strcmp(ten, "TENANT") != 0 && strcmp(ten, "TENANT WAIT") != 0 &&
                 strcmp(ten, "TENANT SHARE WAIT") != 0;
    if (others)
      ck_assert_msg(strstr(ten, "SHARE WAIT WAITMAX") != NULL, "at %d: %s", width, ten);
    snprintf(prev_classes, sizeof prev_classes, "%s", cls);
    snprintf(prev_tenants, sizeof prev_tenants, "%s", ten);
  }
  ck_assert_str_eq(prev_classes, "CLASS");
  ck_assert_str_eq(prev_tenants, "TENANT");
}
END_TEST

/* The fit itself: columns go in the order given until the rest fit; one not in it stays. */
START_TEST(fit_drops_in_order) {
  static const struct top_col cols[] = {{"NAME", 10, 1}, {"A", 5, 0}, {"B", 5, 0}, {"C", 5, 0}};
  static const int drop[] = {2, 1, 3};
  unsigned char keep[4];
  char line[128];
  top_cols_fit(cols, 4, drop, 3, 0, keep);
  ck_assert_str_eq(top_cols_join(line, sizeof line, cols, 4, keep, NULL),
                   "NAME           A     B     C");
  top_cols_fit(cols, 4, drop, 3, 28, keep); /* exactly fits */
  ck_assert(keep[0] && keep[1] && keep[2] && keep[3]);
  top_cols_fit(cols, 4, drop, 3, 27, keep);
  ck_assert(keep[0] && keep[1] && !keep[2] && keep[3]);
  top_cols_fit(cols, 4, drop, 3, 16, keep);
  ck_assert(keep[0] && !keep[1] && !keep[2] && keep[3]);
  ck_assert_str_eq(top_cols_join(line, sizeof line, cols, 4, keep, NULL), "NAME           C");
  top_cols_fit(cols, 4, drop, 3, 5, keep);
  ck_assert(keep[0] && !keep[1] && !keep[2] && !keep[3]);
  /* the last column, left-aligned, is not padded; a long field pushes the rest */
  static const struct top_col two[] = {{"X", 3, 0}, {"NAME", 6, 1}};
  unsigned char both[2] = {1, 1};
  ck_assert_str_eq(top_cols_join(line, sizeof line, two, 2, both, (const char *const[]){"7", "ab"}),
                   "  7 ab");
  ck_assert_str_eq(
      top_cols_join(line, sizeof line, two, 2, both, (const char *const[]){"12345", "ab"}),
      "12345 ab");
}
END_TEST

/* Classes come in the order the command line configured them in, as status lists them. */
START_TEST(classes_in_configuration_order) {
  struct captured c;
  render(&c, 0, 0, 0);
  int at[3] = {-1, -1, -1};
  const char *const names[] = {"large ", "small ", "standard "};
  for (int i = 0; i < c.n; i++)
    for (int k = 0; k < 3; k++)
      if (strncmp(c.text[i], names[k], strlen(names[k])) == 0)
        at[k] = i;
  ck_assert_msg(at[0] >= 0 && at[0] < at[1] && at[1] < at[2], "%d %d %d", at[0], at[1], at[2]);
  ck_assert_int_eq(at[1], at[0] + 1);
  ck_assert_int_eq(at[2], at[1] + 1);
}
END_TEST

/* Batch output names no keys; on a terminal the panel's title says where they are. */
START_TEST(keys_only_on_a_terminal) {
  struct captured c;
  render(&c, 0, 0, 0);
  for (int i = 0; i < c.n; i++)
    ck_assert_msg(strstr(c.text[i], "keys") == NULL, "batch: '%s'", c.text[i]);
  ck_assert_str_eq(line_with(&c, "TENANTS of standard"),
                   "TENANTS of standard: 1  (fair share -)  sort: grants/s");
  render(&c, 80, 1, 0);
  ck_assert_ptr_nonnull(strstr(line_with(&c, "TENANTS of standard"), "keys: ? help"));
}
END_TEST

/* Paused shows in the header, early enough to be seen on an 80-column terminal. */
START_TEST(paused_in_header) {
  struct captured c;
  render(&c, 80, 1, 1);
  ck_assert_int_eq(strncmp(c.text[0], "shmsched top: jobs  paused  state active ", 41), 0);
  ck_assert_int_eq(c.kind[0], 1);
  render(&c, 80, 1, 0);
  ck_assert_ptr_null(strstr(c.text[0], "paused"));
}
END_TEST

/* The help screen lists every key, within 80x24. */
START_TEST(help_lists_the_keys) {
  struct captured c = {0};
  struct top_view v = {0};
  top_render_help(&v, capture, &c);
  for (int i = 0; i < c.n; i++)
    ck_assert_msg(strlen(c.text[i]) <= 80, "wider than 80: '%s'", c.text[i]);
  const char *const keys[] = {"  c, Tab, Right ",
                              "  C, Shift-Tab, Left ",
                              "  s ",
                              "  r ",
                              "  l ",
                              "  Space, p ",
                              "  ?, h ",
                              "  q "};
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
    ck_assert_msg(line_with(&c, keys[k]) != NULL, "no line for '%s'", keys[k]);
  ck_assert_int_le(c.n, 24);
}
END_TEST

/* A destroyed segment's frame: its lines say so, its JSON has no figures. */
START_TEST(gone_frame) {
  struct top_frame f;
  struct top_source src = {.incarnation = 0x41f02e41b5643c86ull, .attach_rc = SHMS_ENOTFOUND};
  top_frame_gone("jobs", &src, 1, &f);
  struct captured c = {0};
  struct top_view v = {.sel = SHMS_CLASS_STANDARD, .width = 80};
  top_render(&f, &v, capture, &c);
  ck_assert_int_eq(strncmp(c.text[0], "shmsched top: jobs  state gone  ", 32), 0);
  ck_assert_ptr_nonnull(
      line_with(&c, "segment 'jobs' (incarnation 41f02e41b5643c86) was destroyed"));
  ck_assert_ptr_nonnull(line_with(&c, "waiting for a new segment 'jobs'"));
  ck_assert_ptr_null(line_with(&c, "CLASS"));
  char *json = NULL;
  size_t n = 0;
  FILE *out = open_memstream(&json, &n);
  ck_assert_ptr_nonnull(out);
  top_json(out, &f);
  fclose(out);
  ck_assert_msg(strstr(json, "\"segment\": \"jobs\",\"incarnation\": \"41f02e41b5643c86\","
                             "\"state\": \"gone\",") != NULL &&
                    strstr(json, "\"classes\": {}") != NULL,
                "%s", json);
  free(json);
  top_frame_free(&f);
  /* A segment of the name that cannot be attached is not said to be missing. */
  src.attach_rc = SHMS_EPERM;
  top_frame_gone("jobs", &src, 1, &f);
  memset(&c, 0, sizeof c);
  top_render(&f, &v, capture, &c);
  char want[128];
  snprintf(want, sizeof want, "a segment 'jobs' is there, but top cannot attach it (%s)",
           shms_err_name(SHMS_EPERM));
  ck_assert_msg(line_with(&c, want) != NULL, "no line '%s'", want);
  ck_assert_ptr_null(line_with(&c, "waiting for a new segment"));
  top_frame_free(&f);
}
END_TEST

/* ---- frames from samples ----------------------------------------------------- */

/* A sample of a segment of that incarnation whose class standard has granted grants so far and
 * tenants a, b, c queuing 1, 3 and 2 requests. */
static void sample(struct top_sample *s, uint64_t incarnation, uint64_t mono_ns, uint64_t granted) {
  memset(s, 0, sizeof *s);
  s->mono_ns = mono_ns;
  s->wall_ns = 1;
  s->info.incarnation = incarnation;
  s->info.state = SHMS_SEG_ACTIVE;
  s->cfg.classes[SHMS_CLASS_STANDARD].configured = 1;
  s->st[SHMS_CLASS_STANDARD].granted = granted;
  shms_tenant_stats *t = calloc(3, sizeof *t);
  ck_assert_ptr_nonnull(t);
  const uint32_t queued[] = {1, 3, 2};
  for (int i = 0; i < 3; i++) {
    snprintf(t[i].name, sizeof t[i].name, "%c", 'a' + i);
    t[i].queued = queued[i];
  }
  s->tenants[SHMS_CLASS_STANDARD] = t;
  s->ntenants[SHMS_CLASS_STANDARD] = 3;
}

static void order_is(const struct top_sample *prev, const struct top_sample *now,
                     enum top_sort sort, int reverse, const char *want) {
  struct top_frame f;
  ck_assert_shms_ok(top_frame_make("jobs", prev, now, sort, reverse, &f));
  const struct top_class *r = &f.classes[SHMS_CLASS_STANDARD];
  char got[8] = "";
  for (uint32_t i = 0; i < r->ntenants && i < 7; i++)
    got[i] = r->tenants[i].name[0];
  ck_assert_msg(strcmp(got, want) == 0, "sort %s%s: %s, want %s", top_sort_name(sort),
                reverse ? " reversed" : "", got, want);
  top_frame_free(&f);
}

/* Each sort order, and the same reversed: the whole order turned round. */
START_TEST(sort_and_reverse) {
  struct top_sample prev, now;
  sample(&prev, 7, 1000000000, 0);
  sample(&now, 7, 2000000000, 0);
  order_is(&prev, &now, TOP_SORT_QUEUED, 0, "bca");
  order_is(&prev, &now, TOP_SORT_QUEUED, 1, "acb");
  order_is(&prev, &now, TOP_SORT_NAME, 0, "abc");
  order_is(&prev, &now, TOP_SORT_NAME, 1, "cba");
  order_is(&prev, &now, TOP_SORT_GRANTS, 0, "abc"); /* all equal: by name */
  order_is(&prev, &now, TOP_SORT_GRANTS, 1, "cba");
  top_sample_free(&prev);
  top_sample_free(&now);
}
END_TEST

/* Rates come from two samples of one segment; after a destroy and a create, the first frame of
 * the new segment has no interval rather than rates from the old one's counters. */
START_TEST(no_interval_across_incarnations) {
  struct top_sample old, now;
  sample(&old, 7, 1000000000, 10);
  sample(&now, 7, 2000000000, 15);
  old.st[SHMS_CLASS_STANDARD].joined = 2;
  now.st[SHMS_CLASS_STANDARD].joined = 5;
  struct top_frame f;
  ck_assert_shms_ok(top_frame_make("jobs", &old, &now, TOP_SORT_GRANTS, 0, &f));
  ck_assert(f.interval_s > 0.99 && f.interval_s < 1.01);
  ck_assert(f.classes[SHMS_CLASS_STANDARD].grants_per_s > 4.99);
  ck_assert(f.classes[SHMS_CLASS_STANDARD].joins_per_s > 2.99);
  ck_assert(f.classes[SHMS_CLASS_STANDARD].joins_per_s < 3.01);
  ck_assert_uint_eq(f.incarnation, 7);
  top_frame_free(&f);
  top_sample_free(&now);
  sample(&now, 8, 2000000000, 15);
  ck_assert_shms_ok(top_frame_make("jobs", &old, &now, TOP_SORT_GRANTS, 0, &f));
  ck_assert(f.interval_s == 0);
  ck_assert(f.classes[SHMS_CLASS_STANDARD].grants_per_s == 0);
  ck_assert(f.classes[SHMS_CLASS_STANDARD].joins_per_s == 0);
  ck_assert_uint_eq(f.incarnation, 8);
  top_frame_free(&f);
  top_sample_free(&old);
  top_sample_free(&now);
}
END_TEST

/* ---- following the segment ------------------------------------------------ */

static uint64_t incarnation_of(const char *name) {
  shms_t *h;
  ck_assert_shms_ok(shms_attach(name, SHMS_ATTACH_OBSERVER, &h));
  shms_segment_info info;
  ck_assert_shms_ok(shms_segment_info_get(h, &info));
  shms_detach(h);
  return info.incarnation;
}

/* Destroyed, the segment is gone (and stays so) until one is created under its name; that one,
 * of another incarnation, is attached. */
START_TEST(follows_by_incarnation) {
  const char *name = harness_name("top");
  shms_config cfg;
  harness_config(&cfg, 1, 4);
  struct top_source s;
  ck_assert_int_eq(top_source_open(&s, name), SHMS_ENOTFOUND);
  harness_create(name, &cfg);
  ck_assert_shms_ok(top_source_open(&s, name));
  uint64_t first = s.incarnation;
  ck_assert_uint_eq(first, incarnation_of(name));
  ck_assert_int_eq(top_source_look(&s), TOP_LOOK_SAME);

  ck_assert_shms_ok(shms_destroy(name, SHMS_DESTROY_FORCE));
  ck_assert_int_eq(top_source_look(&s), TOP_LOOK_GONE);
  ck_assert_ptr_null(s.h);
  ck_assert_uint_eq(s.incarnation, first); /* the destroyed one's, for the gone frame */
  ck_assert_int_eq(s.attach_rc, SHMS_ENOTFOUND);
  ck_assert_int_eq(top_source_look(&s), TOP_LOOK_GONE);

  harness_create(name, &cfg);
  ck_assert_int_eq(top_source_look(&s), TOP_LOOK_NEW);
  ck_assert_ptr_nonnull(s.h);
  uint64_t second = s.incarnation;
  ck_assert_uint_ne(second, first);
  ck_assert_uint_eq(second, incarnation_of(name));
  ck_assert_int_eq(top_source_look(&s), TOP_LOOK_SAME);

  /* Destroyed and created again between two looks: the new one at once. */
  ck_assert_shms_ok(shms_destroy(name, SHMS_DESTROY_FORCE));
  harness_create(name, &cfg);
  ck_assert_int_eq(top_source_look(&s), TOP_LOOK_NEW);
  ck_assert_uint_ne(s.incarnation, second);
  ck_assert_uint_eq(s.incarnation, incarnation_of(name));
  top_source_close(&s);
  harness_remove(name);
}
END_TEST

int main(void) {
  Suite *s = suite_create("top");
  TCase *tc = harness_tcase("columns");
  tcase_add_test(tc, columns_at_each_width);
  tcase_add_test(tc, waits_and_share_go_last);
  tcase_add_test(tc, fit_drops_in_order);
  suite_add_tcase(s, tc);
  tc = harness_tcase("text");
  tcase_add_test(tc, classes_in_configuration_order);
  tcase_add_test(tc, keys_only_on_a_terminal);
  tcase_add_test(tc, paused_in_header);
  tcase_add_test(tc, help_lists_the_keys);
  tcase_add_test(tc, gone_frame);
  suite_add_tcase(s, tc);
  tc = harness_tcase("model");
  tcase_add_test(tc, sort_and_reverse);
  tcase_add_test(tc, no_interval_across_incarnations);
  suite_add_tcase(s, tc);
  tc = harness_tcase("source");
  tcase_add_test(tc, follows_by_incarnation);
  suite_add_tcase(s, tc);
  return harness_run(s);
}
