/* Figures drawn with cairo: scatter (with graph edges and labels), line (with ±std bands and a legend) and
 * heatmap (with a colour bar), saved as PNG or SVG. The Lua binding (lua/l_plot.c) fills an icl_plot; the
 * figure owns every array and string in it (malloc'd; icl_plot_free releases them). */
#ifndef ICL_PLOT_H
#define ICL_PLOT_H

#include <cairo.h>
#include <stdint.h>

#include "icl/icl.h"

typedef struct icl_rgba {
  double r, g, b, a; /* 0..1 */
} icl_rgba;

typedef enum icl_plot_kind { ICL_PLOT_SCATTER, ICL_PLOT_LINE, ICL_PLOT_HEATMAP } icl_plot_kind;

typedef struct icl_plot_series {
  int64_t n;
  double *x, *y;  /* [n] */
  double *std;    /* [n] or NULL: a shaded band y - std .. y + std */
  char *label;    /* NULL: left out of the legend */
  icl_rgba color;
} icl_plot_series;

typedef struct icl_plot {
  icl_plot_kind kind;
  char *title, *xlabel, *ylabel; /* each may be NULL */
  int width, height;             /* canvas in pixels (PNG) or points (SVG) */
  int has_xlim, has_ylim;
  double xlim[2], ylim[2]; /* axis ranges when has_*lim, else from the data */

  /* scatter */
  int64_t n;
  double *px, *py;         /* [n] */
  char **labels;           /* [n] or NULL (entries may be NULL) */
  icl_rgba *fill, *border; /* [n] */
  double radius;           /* marker radius */
  int64_t n_edges;
  int64_t *edges; /* [n_edges][2] 0-based point ids, drawn under the points */
  int dashed;     /* edges dashed */
  int equal;      /* one data unit is as long on both axes (ranges widened to fit) */

  /* line */
  int n_series;
  icl_plot_series *series; /* [n_series] */
  int legend;              /* draw the legend (series with labels) */

  /* heatmap: data[r * cols + c] drawn at row r (top to bottom), column c (left to right); NaN cells grey */
  int64_t rows, cols;
  double *data;
  int colorbar;
  int has_vrange;
  double vmin, vmax;                /* colour range when has_vrange, else the data range */
  char **row_labels, **col_labels;  /* [rows], [cols] or NULL: 0-based indices */
} icl_plot;

/* A zeroed figure of that kind with the defaults (800 x 600, radius 6, legend and colour bar on). NULL on
 * allocation failure. */
icl_plot *icl_plot_new(icl_plot_kind kind);

/* Frees the figure and everything it owns; NULL allowed. */
void icl_plot_free(icl_plot *p);

/* Checks the figure's contents (sizes, edge ids, finite ranges); ICL_EINVAL with a message naming the field. */
int icl_plot_check(const icl_plot *p, icl_error *err);

/* Writes the figure to path as PNG or SVG (by the extension, case-insensitive), atomically: a temporary file in
 * the same directory renamed over path. Missing parent directories are created. */
int icl_plot_save(const icl_plot *p, const char *path, icl_error *err);

/* Draws the figure on cr, a surface of p->width x p->height (src/plot_draw.c); icl_plot_check must pass. */
void icl_plot_render(const icl_plot *p, cairo_t *cr);

/* The default colour cycle (10 colours); i wraps around. */
icl_rgba icl_plot_palette(int i);

/* Parses "#rgb", "#rrggbb", "#rrggbbaa" or a colour name ("red", "steelblue", "grey", ...). 0 or -1. */
int icl_plot_parse_color(const char *s, icl_rgba *out);

#endif
