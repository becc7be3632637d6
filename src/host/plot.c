/* Figures: creation, validation, colours and atomic saving as PNG or SVG (drawing is in plot_draw.c). */
#include "plot.h"

#include <cairo-svg.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_tmp.h"

/* ---- lifecycle ------------------------------------------------------------------------------------------ */

icl_plot *icl_plot_new(icl_plot_kind kind) {
  icl_plot *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->kind = kind;
  p->width = 800, p->height = 600;
  p->radius = 6;
  p->legend = 1, p->colorbar = 1;
  return p;
}

static void free_strings(char **s, int64_t n) {
  if (!s) return;
  for (int64_t i = 0; i < n; i++) free(s[i]);
  free(s);
}

void icl_plot_free(icl_plot *p) {
  if (!p) return;
  free(p->title), free(p->xlabel), free(p->ylabel);
  free(p->px), free(p->py), free(p->fill), free(p->border), free(p->edges);
  free_strings(p->labels, p->n);
  for (int s = 0; s < p->n_series; s++) {
    icl_plot_series *ser = &p->series[s];
    free(ser->x), free(ser->y), free(ser->std), free(ser->label);
  }
  free(p->series);
  free(p->data);
  free_strings(p->row_labels, p->rows);
  free_strings(p->col_labels, p->cols);
  free(p);
}

/* ---- validation ------------------------------------------------------------------------------------------ */

static int check_range(const char *name, const double r[2], icl_error *err) {
  if (isfinite(r[0]) && isfinite(r[1]) && r[0] < r[1]) return ICL_OK;
  return icl_error_set(err, ICL_EINVAL, "plot: %s must be {lo, hi} with finite lo < hi", name);
}

static int check_scatter(const icl_plot *p, icl_error *err) {
  if (p->n < 0 || (p->n > 0 && (!p->px || !p->py || !p->fill || !p->border)))
    return icl_error_set(err, ICL_EINVAL, "plot.scatter: points are missing");
  if (!(p->radius > 0 && p->radius < 100)) return icl_error_set(err, ICL_EINVAL, "plot.scatter: size out of range");
  for (int64_t k = 0; k < 2 * p->n_edges; k++)
    if (p->edges[k] < 0 || p->edges[k] >= p->n)
      return icl_error_set(err, ICL_EINVAL, "plot.scatter: edge %lld names point %lld of %lld",
                           (long long)(k / 2 + 1), (long long)(p->edges[k] + 1), (long long)p->n);
  return ICL_OK;
}

static int check_line(const icl_plot *p, icl_error *err) {
  for (int s = 0; s < p->n_series; s++)
    if (p->series[s].n < 0 || (p->series[s].n > 0 && (!p->series[s].x || !p->series[s].y)))
      return icl_error_set(err, ICL_EINVAL, "plot.line: series %d has no data", s + 1);
  return ICL_OK;
}

static int check_heatmap(const icl_plot *p, icl_error *err) {
  if (p->rows < 1 || p->cols < 1 || !p->data)
    return icl_error_set(err, ICL_EINVAL, "plot.heatmap: data must have at least one row and one column");
  if (p->has_vrange && !(isfinite(p->vmin) && isfinite(p->vmax) && p->vmin < p->vmax))
    return icl_error_set(err, ICL_EINVAL, "plot.heatmap: vmin and vmax must be finite with vmin < vmax");
  return ICL_OK;
}

int icl_plot_check(const icl_plot *p, icl_error *err) {
  if (p->width < 64 || p->width > 16384 || p->height < 64 || p->height > 16384)
    return icl_error_set(err, ICL_EINVAL, "plot: width and height must be in [64, 16384]");
  if (p->has_xlim && check_range("xlim", p->xlim, err)) return err->code;
  if (p->has_ylim && check_range("ylim", p->ylim, err)) return err->code;
  switch (p->kind) {
  case ICL_PLOT_SCATTER: return check_scatter(p, err);
  case ICL_PLOT_LINE: return check_line(p, err);
  case ICL_PLOT_HEATMAP: return check_heatmap(p, err);
  }
  return icl_error_set(err, ICL_EINVAL, "plot: unknown kind %d", (int)p->kind);
}

/* ---- colours --------------------------------------------------------------------------------------------- */

static const char *const palette_hex[10] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                            "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

static const struct {
  const char *name, *hex;
} named_colors[] = {{"black", "#000000"},  {"white", "#ffffff"},    {"red", "#d62728"},    {"green", "#2ca02c"},
                    {"blue", "#1f77b4"},   {"orange", "#ff7f0e"},   {"purple", "#9467bd"}, {"brown", "#8c564b"},
                    {"pink", "#e377c2"},   {"grey", "#7f7f7f"},     {"gray", "#7f7f7f"},   {"olive", "#bcbd22"},
                    {"cyan", "#17becf"},   {"magenta", "#ff00ff"},  {"yellow", "#ffd700"}, {"navy", "#000080"},
                    {"teal", "#008080"},   {"steelblue", "#4682b4"}, {"lightgrey", "#d3d3d3"},
                    {"lightgray", "#d3d3d3"}, {"darkgrey", "#404040"}, {"darkgray", "#404040"},
                    {"none", "#00000000"}};

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Parses n hex channels of w digits each (w = 1: "#rgb", w = 2: "#rrggbb"). */
static int parse_hex(const char *s, int n, int w, double *ch) {
  for (int i = 0; i < n; i++) {
    int v = 0;
    for (int k = 0; k < w; k++) {
      int d = hex_digit(s[i * w + k]);
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    ch[i] = w == 1 ? v / 15.0 : v / 255.0;
  }
  return 0;
}

int icl_plot_parse_color(const char *s, icl_rgba *out) {
  for (size_t i = 0; s[0] != '#' && i < sizeof named_colors / sizeof named_colors[0]; i++)
    if (strcasecmp(s, named_colors[i].name) == 0) return icl_plot_parse_color(named_colors[i].hex, out);
  if (s[0] != '#') return -1;
  size_t len = strlen(s + 1);
  double ch[4] = {0, 0, 0, 1};
  int rc = len == 3 ? parse_hex(s + 1, 3, 1, ch) : len == 6 ? parse_hex(s + 1, 3, 2, ch)
           : len == 8 ? parse_hex(s + 1, 4, 2, ch) : -1;
  if (rc == 0) *out = (icl_rgba){ch[0], ch[1], ch[2], ch[3]};
  return rc;
}

icl_rgba icl_plot_palette(int i) {
  icl_rgba c = {0, 0, 0, 1};
  icl_plot_parse_color(palette_hex[((i % 10) + 10) % 10], &c);
  return c;
}

/* ---- saving ---------------------------------------------------------------------------------------------- */

/* Creates the directories above the file at path (like mkdir -p of its dirname). */
static int make_parents(const char *path, icl_error *err) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
    return icl_error_set(err, ICL_EINVAL, "%s: path too long", path);
  for (char *s = buf + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
      return icl_error_set(err, ICL_EIO, "%s: cannot create directory %s: %s", path, buf, strerror(errno));
    *s = '/';
  }
  return ICL_OK;
}

static cairo_status_t write_stream(void *closure, const unsigned char *data, unsigned int len) {
  return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

static cairo_status_t render_png(const icl_plot *p, FILE *f) {
  cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, p->width, p->height);
  cairo_t *cr = cairo_create(s);
  icl_plot_render(p, cr);
  cairo_status_t st = cairo_status(cr);
  cairo_destroy(cr);
  if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_write_to_png_stream(s, write_stream, f);
  cairo_surface_destroy(s);
  return st;
}

static cairo_status_t render_svg(const icl_plot *p, FILE *f) {
  cairo_surface_t *s = cairo_svg_surface_create_for_stream(write_stream, f, p->width, p->height);
  cairo_t *cr = cairo_create(s);
  icl_plot_render(p, cr);
  cairo_status_t st = cairo_status(cr);
  cairo_destroy(cr);
  cairo_surface_finish(s);
  if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(s);
  cairo_surface_destroy(s);
  return st;
}

/* 1 for PNG, 2 for SVG, 0 for anything else. */
static int format_of(const char *path) {
  const char *dot = strrchr(path, '.');
  if (!dot || strchr(dot, '/')) return 0;
  return strcasecmp(dot, ".png") == 0 ? 1 : strcasecmp(dot, ".svg") == 0 ? 2 : 0;
}

/* Renders into a temporary file next to path, then renames it over path. */
static int save_atomic(const icl_plot *p, const char *path, int fmt, icl_error *err) {
  char tmp[4200];
  int fd = icl_tmp_create(path, tmp, sizeof tmp, err); /* also removes orphans of killed writers */
  if (fd < 0) return ICL_EIO;
  FILE *f = fdopen(fd, "wb");
  if (!f) {
    close(fd), unlink(tmp);
    return icl_error_set(err, ICL_EIO, "%s: %s", path, strerror(errno));
  }
  cairo_status_t st = fmt == 1 ? render_png(p, f) : render_svg(p, f);
  int bad = fclose(f) != 0;
  if (st != CAIRO_STATUS_SUCCESS || bad || rename(tmp, path) != 0) {
    unlink(tmp);
    return icl_error_set(err, ICL_EIO, "%s: cannot write the figure: %s", path,
                         st != CAIRO_STATUS_SUCCESS ? cairo_status_to_string(st) : strerror(errno));
  }
  return ICL_OK;
}

int icl_plot_save(const icl_plot *p, const char *path, icl_error *err) {
  int fmt = format_of(path);
  if (!fmt) return icl_error_set(err, ICL_EINVAL, "%s: the file name must end in .png or .svg", path);
  if (strlen(path) >= 4096) return icl_error_set(err, ICL_EINVAL, "path too long");
  if (icl_plot_check(p, err) != ICL_OK) return err->code;
  if (make_parents(path, err) != ICL_OK) return err->code;
  return save_atomic(p, path, fmt, err);
}
