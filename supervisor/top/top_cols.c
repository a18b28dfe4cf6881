/*
 * top's tables on a narrow terminal (top.h): rather than cut a line at the edge, which loses
 * whatever happens to be rightmost, columns go in an order of their own, the least telling
 * first, so that what an operator looks at first is what stays.
 */
#include <stdio.h>
#include <string.h>

#include "top.h"

static int line_width(const struct top_col *cols, int n, const unsigned char *keep) {
  int w = 0, shown = 0;
  for (int i = 0; i < n; i++)
    if (keep[i])
      w += cols[i].width + (shown++ > 0);
  return w;
}

void top_cols_fit(const struct top_col *cols, int n, const int *drop, int ndrop, int width,
                  unsigned char *keep) {
  memset(keep, 1, (size_t)n);
  for (int k = 0; width > 0 && k < ndrop && line_width(cols, n, keep) > width; k++)
    if (drop[k] >= 0 && drop[k] < n)
      keep[drop[k]] = 0;
}

char *top_cols_join(char *out, size_t n, const struct top_col *cols, int ncols,
                    const unsigned char *keep, const char *const *fields) {
  int last = -1;
  for (int i = 0; i < ncols; i++)
    if (keep[i])
      last = i;
  size_t at = 0;
  int shown = 0;
  out[0] = '\0';
  for (int i = 0; i < ncols && at < n; i++) {
    if (!keep[i])
      continue;
    const char *text = fields != NULL ? fields[i] : cols[i].head;
    /* No padding after the last column: no trailing blanks, a long name is cut at the edge. */
    int pad = cols[i].left && i == last ? 0 : cols[i].width;
    int w = snprintf(out + at, n - at, "%s%*s", shown++ > 0 ? " " : "", cols[i].left ? -pad : pad,
                     text);
    if (w < 0)
      break;
    at += (size_t)w;
  }
  return out;
}
