/* Drawing an icl_plot with cairo: axes with ticks, grid, title and labels, then the scatter, line or heatmap. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plot.h"

#define FONT "DejaVu Sans"
#define MAX_TICKS 64
enum { TITLE_PX = 18, LABEL_PX = 14, TICK_PX = 12, TICK_LEN = 5 };

typedef struct axis {
  double lo, hi; /* data values at the left/bottom and right/top ends (lo > hi flips the axis) */
} axis;

typedef struct frame {
  double left, top, w, h; /* the plot area on the canvas */
  axis x, y;
} frame;

typedef struct ticks {
  int n;
  double at[MAX_TICKS];        /* data coordinates */
  char text[MAX_TICKS][40];
} ticks;

/* ---- coordinates and ranges ------------------------------------------------------------------------------ */

static double map_x(const frame *f, double v) { return f->left + (v - f->x.lo) / (f->x.hi - f->x.lo) * f->w; }
static double map_y(const frame *f, double v) { return f->top + f->h - (v - f->y.lo) / (f->y.hi - f->y.lo) * f->h; }

static void range_add(double *lo, double *hi, double v) {
  if (!isfinite(v)) return;
  if (v < *lo) *lo = v;
  if (v > *hi) *hi = v;
}

/* An axis over [lo, hi] widened by pad (a fraction of the span) unless fixed; empty or flat ranges get a span. */
static axis make_axis(double lo, double hi, double pad, int fixed) {
  if (!(lo <= hi)) lo = 0, hi = 1;
  if (hi - lo <= 1e-12 * fmax(1.0, fabs(lo))) {
    double d = lo != 0 ? 0.5 * fabs(lo) : 0.5;
    lo -= d, hi += d;
  } else if (!fixed) {
    double m = (hi - lo) * pad;
    lo -= m, hi += m;
  }
  return (axis){lo, hi};
}

/* A step of 1, 2 or 5 times a power of ten giving about `target` intervals over span. */
static double nice_step(double span, int target) {
  double raw = span / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

static void format_tick(char *buf, size_t cap, double v, double step) {
  if (fabs(v) < step * 1e-9) v = 0;
  if (fmax(fabs(v), step) >= 1e6 || step < 1e-4) {
    snprintf(buf, cap, "%.3g", v);
  } else {
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    snprintf(buf, cap, "%.*f", dec, v);
  }
}

/* Ticks at multiples of a nice step inside the axis. */
static void numeric_ticks(const axis *a, int target, ticks *t) {
  double lo = fmin(a->lo, a->hi), hi = fmax(a->lo, a->hi), step = nice_step(hi - lo, target);
  t->n = 0;
  for (double k = ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9 && t->n < MAX_TICKS; k++) {
    t->at[t->n] = k * step;
    format_tick(t->text[t->n], sizeof t->text[0], k * step, step);
    t->n++;
  }
}

/* Ticks at the n cell centres 0..n-1 labelled by labels (or by the index), every `every`-th one. */
static void index_ticks(int64_t n, char *const *labels, int64_t every, ticks *t) {
  t->n = 0;
  for (int64_t i = 0; i < n && t->n < MAX_TICKS; i += every) {
    t->at[t->n] = (double)i;
    if (labels && labels[i]) snprintf(t->text[t->n], sizeof t->text[0], "%s", labels[i]);
    else snprintf(t->text[t->n], sizeof t->text[0], "%lld", (long long)i);
    t->n++;
  }
}

/* ---- text ---------------------------------------------------------------------------------------------- */

static void set_font(cairo_t *cr, double px, int bold) {
  cairo_select_font_face(cr, FONT, CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, px);
}

static double text_width(cairo_t *cr, const char *s) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s, &e);
  return e.x_advance;
}

/* Draws s anchored at (x, y): ax 0/0.5/1 = left/centre/right edge at x; ay 0/0.5/1 = top/middle/baseline at y. */
static void draw_text(cairo_t *cr, const char *s, double x, double y, double ax, double ay) {
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  double cap = fe.ascent * 0.75;
  cairo_move_to(cr, x - ax * text_width(cr, s), y + (1 - ay) * cap);
  cairo_show_text(cr, s);
}

static double max_text_width(cairo_t *cr, const ticks *t) {
  double w = 0;
  for (int i = 0; i < t->n; i++) w = fmax(w, text_width(cr, t->text[i]));
  return w;
}

static void set_rgba(cairo_t *cr, icl_rgba c) { cairo_set_source_rgba(cr, c.r, c.g, c.b, c.a); }

/* ---- frame and axes ------------------------------------------------------------------------------------ */

/* Places the plot area, leaving room for the title, labels, y tick labels and `right` extra pixels. */
static frame make_frame(cairo_t *cr, const icl_plot *p, const ticks *yt, double right) {
  set_font(cr, TICK_PX, 0);
  frame f;
  f.left = 14 + (p->ylabel ? LABEL_PX + 12 : 0) + max_text_width(cr, yt) + TICK_LEN + 6;
  f.top = p->title ? TITLE_PX + 28 : 20;
  double bottom = TICK_LEN + 8 + TICK_PX + (p->xlabel ? LABEL_PX + 14 : 0) + 14;
  f.w = fmax(10, p->width - f.left - 24 - right);
  f.h = fmax(10, p->height - f.top - bottom);
  return f;
}

static void draw_grid(cairo_t *cr, const frame *f, const ticks *xt, const ticks *yt) {
  cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
  cairo_set_line_width(cr, 1);
  for (int i = 0; i < xt->n; i++) {
    cairo_move_to(cr, map_x(f, xt->at[i]), f->top);
    cairo_line_to(cr, map_x(f, xt->at[i]), f->top + f->h);
  }
  for (int i = 0; i < yt->n; i++) {
    cairo_move_to(cr, f->left, map_y(f, yt->at[i]));
    cairo_line_to(cr, f->left + f->w, map_y(f, yt->at[i]));
  }
  cairo_stroke(cr);
}

static void draw_ticks(cairo_t *cr, const frame *f, const ticks *xt, const ticks *yt) {
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  set_font(cr, TICK_PX, 0);
  double base = f->top + f->h;
  for (int i = 0; i < xt->n; i++) {
    double x = map_x(f, xt->at[i]);
    cairo_move_to(cr, x, base);
    cairo_line_to(cr, x, base + TICK_LEN);
    cairo_stroke(cr);
    draw_text(cr, xt->text[i], x, base + TICK_LEN + 4, 0.5, 0);
  }
  for (int i = 0; i < yt->n; i++) {
    double y = map_y(f, yt->at[i]);
    cairo_move_to(cr, f->left, y);
    cairo_line_to(cr, f->left - TICK_LEN, y);
    cairo_stroke(cr);
    draw_text(cr, yt->text[i], f->left - TICK_LEN - 4, y, 1, 0.5);
  }
}

/* Title, axis labels and the frame around the plot area. */
static void draw_labels(cairo_t *cr, const icl_plot *p, const frame *f) {
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, f->left, f->top, f->w, f->h);
  cairo_stroke(cr);
  if (p->title) {
    set_font(cr, TITLE_PX, 1);
    draw_text(cr, p->title, f->left + f->w / 2, f->top - 14, 0.5, 1);
  }
  set_font(cr, LABEL_PX, 0);
  if (p->xlabel) draw_text(cr, p->xlabel, f->left + f->w / 2, p->height - 12, 0.5, 1);
  if (p->ylabel) {
    cairo_save(cr);
    cairo_translate(cr, 14 + LABEL_PX / 2.0, f->top + f->h / 2);
    cairo_rotate(cr, -M_PI / 2);
    draw_text(cr, p->ylabel, 0, 0, 0.5, 0.5);
    cairo_restore(cr);
  }
}

static void clip_frame(cairo_t *cr, const frame *f) {
  cairo_save(cr);
  cairo_rectangle(cr, f->left, f->top, f->w, f->h);
  cairo_clip(cr);
}

/* ---- scatter ---------------------------------------------------------------------------------------------- */

static void scatter_axes(const icl_plot *p, axis *ax, axis *ay) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (int64_t i = 0; i < p->n; i++) range_add(&x0, &x1, p->px[i]), range_add(&y0, &y1, p->py[i]);
  *ax = p->has_xlim ? make_axis(p->xlim[0], p->xlim[1], 0, 1) : make_axis(x0, x1, 0.1, 0);
  *ay = p->has_ylim ? make_axis(p->ylim[0], p->ylim[1], 0, 1) : make_axis(y0, y1, 0.1, 0);
}

static void draw_edges(cairo_t *cr, const icl_plot *p, const frame *f) {
  const double dash[2] = {5, 4};
  cairo_set_source_rgba(cr, 0.45, 0.45, 0.45, 0.8);
  cairo_set_line_width(cr, 1.2);
  cairo_set_dash(cr, dash, p->dashed ? 2 : 0, 0);
  for (int64_t k = 0; k < p->n_edges; k++) {
    int64_t i = p->edges[2 * k], j = p->edges[2 * k + 1];
    if (!isfinite(p->px[i] + p->py[i] + p->px[j] + p->py[j])) continue;
    cairo_move_to(cr, map_x(f, p->px[i]), map_y(f, p->py[i]));
    cairo_line_to(cr, map_x(f, p->px[j]), map_y(f, p->py[j]));
  }
  cairo_stroke(cr);
  cairo_set_dash(cr, dash, 0, 0);
}

static void draw_points(cairo_t *cr, const icl_plot *p, const frame *f) {
  cairo_set_line_width(cr, 1.5);
  for (int64_t i = 0; i < p->n; i++) {
    if (!isfinite(p->px[i] + p->py[i])) continue;
    cairo_new_path(cr);
    cairo_arc(cr, map_x(f, p->px[i]), map_y(f, p->py[i]), p->radius, 0, 2 * M_PI);
    set_rgba(cr, p->fill[i]);
    cairo_fill_preserve(cr);
    set_rgba(cr, p->border[i]);
    cairo_stroke(cr);
  }
}

static void draw_point_labels(cairo_t *cr, const icl_plot *p, const frame *f) {
  if (!p->labels) return;
  set_font(cr, TICK_PX, 0);
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  for (int64_t i = 0; i < p->n; i++) {
    if (!p->labels[i] || !isfinite(p->px[i] + p->py[i])) continue;
    double x = map_x(f, p->px[i]) + p->radius + 2, y = map_y(f, p->py[i]) - p->radius - 1;
    draw_text(cr, p->labels[i], x, y, 0, 1);
  }
}

/* ---- line ------------------------------------------------------------------------------------------------- */

static void line_axes(const icl_plot *p, axis *ax, axis *ay) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (int s = 0; s < p->n_series; s++) {
    const icl_plot_series *ser = &p->series[s];
    for (int64_t i = 0; i < ser->n; i++) {
      double sd = ser->std && isfinite(ser->std[i]) ? fabs(ser->std[i]) : 0;
      range_add(&x0, &x1, ser->x[i]);
      range_add(&y0, &y1, ser->y[i] - sd);
      range_add(&y0, &y1, ser->y[i] + sd);
    }
  }
  *ax = p->has_xlim ? make_axis(p->xlim[0], p->xlim[1], 0, 1) : make_axis(x0, x1, 0.0, 0);
  *ay = p->has_ylim ? make_axis(p->ylim[0], p->ylim[1], 0, 1) : make_axis(y0, y1, 0.05, 0);
}

static int finite_at(const icl_plot_series *s, int64_t i) {
  return isfinite(s->x[i]) && isfinite(s->y[i]) && (!s->std || isfinite(s->std[i]));
}

/* Fills the band y - std .. y + std over each run of finite points. */
static void draw_band(cairo_t *cr, const icl_plot_series *s, const frame *f) {
  icl_rgba c = s->color;
  c.a *= 0.2;
  set_rgba(cr, c);
  for (int64_t i = 0; i < s->n;) {
    int64_t j = i;
    while (j < s->n && finite_at(s, j)) j++;
    if (j > i) {
      for (int64_t k = i; k < j; k++) cairo_line_to(cr, map_x(f, s->x[k]), map_y(f, s->y[k] + s->std[k]));
      for (int64_t k = j - 1; k >= i; k--) cairo_line_to(cr, map_x(f, s->x[k]), map_y(f, s->y[k] - s->std[k]));
      cairo_close_path(cr);
      cairo_fill(cr);
    }
    i = j + 1;
  }
}

static void draw_series(cairo_t *cr, const icl_plot_series *s, const frame *f) {
  if (s->std) draw_band(cr, s, f);
  set_rgba(cr, s->color);
  cairo_set_line_width(cr, 2);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_new_path(cr);
  for (int64_t i = 0; i < s->n; i++) {
    if (!isfinite(s->x[i]) || !isfinite(s->y[i])) {
      cairo_new_sub_path(cr);
      continue;
    }
    cairo_line_to(cr, map_x(f, s->x[i]), map_y(f, s->y[i]));
  }
  cairo_stroke(cr);
}

static void draw_legend(cairo_t *cr, const icl_plot *p, const frame *f) {
  int n = 0;
  double w = 0;
  set_font(cr, TICK_PX, 0);
  for (int s = 0; s < p->n_series; s++)
    if (p->series[s].label) n++, w = fmax(w, text_width(cr, p->series[s].label));
  if (!p->legend || n == 0) return;
  double row = TICK_PX + 8, bw = w + 46, bh = n * row + 10, x = f->left + f->w - bw - 10, y = f->top + 10;
  cairo_rectangle(cr, x, y, bw, bh);
  cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  double yy = y + 5 + row / 2;
  for (int s = 0; s < p->n_series; s++) {
    if (!p->series[s].label) continue;
    set_rgba(cr, p->series[s].color);
    cairo_set_line_width(cr, 2.5);
    cairo_move_to(cr, x + 8, yy);
    cairo_line_to(cr, x + 32, yy);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    draw_text(cr, p->series[s].label, x + 38, yy, 0, 0.5);
    yy += row;
  }
}

/* ---- heatmap ---------------------------------------------------------------------------------------------- */

static const icl_rgba colormap_stops[5] = {{0.267, 0.004, 0.329, 1}, {0.231, 0.322, 0.545, 1},
                                           {0.129, 0.569, 0.549, 1}, {0.369, 0.788, 0.384, 1},
                                           {0.992, 0.906, 0.145, 1}};

/* Colour of t in [0, 1] on a perceptually ordered dark-blue-green-yellow scale (linear between 5 stops). */
static icl_rgba colormap(double t) {
  t = fmin(1, fmax(0, t)) * 4;
  int i = t >= 4 ? 3 : (int)t;
  double u = t - i;
  const icl_rgba *a = &colormap_stops[i], *b = &colormap_stops[i + 1];
  return (icl_rgba){a->r + u * (b->r - a->r), a->g + u * (b->g - a->g), a->b + u * (b->b - a->b), 1};
}

static void heat_range(const icl_plot *p, double *lo, double *hi) {
  *lo = INFINITY, *hi = -INFINITY;
  for (int64_t i = 0; i < p->rows * p->cols; i++) range_add(lo, hi, p->data[i]);
  if (p->has_vrange) *lo = p->vmin, *hi = p->vmax;
  if (!(*lo < *hi)) *hi = *lo + 1;
  if (!isfinite(*lo)) *lo = 0, *hi = 1;
}

/* Cells with edges on whole pixels and no antialiasing, so that no seams show between them. */
static void draw_cells(cairo_t *cr, const icl_plot *p, const frame *f, double lo, double hi) {
  double cw = f->w / (double)p->cols, ch = f->h / (double)p->rows;
  cairo_save(cr);
  cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
  for (int64_t r = 0; r < p->rows; r++) {
    double y0 = round(f->top + r * ch), y1 = round(f->top + (r + 1) * ch);
    for (int64_t c = 0; c < p->cols; c++) {
      double v = p->data[r * p->cols + c], x0 = round(f->left + c * cw), x1 = round(f->left + (c + 1) * cw);
      set_rgba(cr, isfinite(v) ? colormap((v - lo) / (hi - lo)) : (icl_rgba){0.8, 0.8, 0.8, 1});
      cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
      cairo_fill(cr);
    }
  }
  cairo_restore(cr);
}

static void draw_colorbar(cairo_t *cr, const frame *f, double lo, double hi) {
  double x = f->left + f->w + 18, w = 16;
  cairo_pattern_t *g = cairo_pattern_create_linear(0, f->top + f->h, 0, f->top);
  for (int i = 0; i < 5; i++)
    cairo_pattern_add_color_stop_rgb(g, i / 4.0, colormap_stops[i].r, colormap_stops[i].g, colormap_stops[i].b);
  cairo_rectangle(cr, x, f->top, w, f->h);
  cairo_set_source(cr, g);
  cairo_fill(cr);
  cairo_pattern_destroy(g);
  frame bar = {x, f->top, w, f->h, {0, 1}, {lo, hi}};
  ticks t;
  axis a = {lo, hi};
  numeric_ticks(&a, 5, &t);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, x, f->top, w, f->h);
  cairo_stroke(cr);
  set_font(cr, TICK_PX, 0);
  for (int i = 0; i < t.n; i++) {
    double y = map_y(&bar, t.at[i]);
    cairo_move_to(cr, x + w, y);
    cairo_line_to(cr, x + w + TICK_LEN, y);
    cairo_stroke(cr);
    draw_text(cr, t.text[i], x + w + TICK_LEN + 3, y, 0, 0.5);
  }
}

/* The smallest 1, 2 or 5 times a power of ten that is >= v (v >= 1). */
static int64_t nice_ceil(int64_t v) {
  static const int64_t m[3] = {1, 2, 5};
  for (int64_t mag = 1;; mag *= 10)
    for (int i = 0; i < 3; i++)
      if (m[i] * mag >= v) return m[i] * mag;
}

/* Index ticks, thinned so that labels keep apart (room: pixels along the axis). */
static void heat_ticks(cairo_t *cr, int64_t n, char *const *labels, double room, int along_x, ticks *t) {
  index_ticks(n, labels, 1, t);
  set_font(cr, TICK_PX, 0);
  double need = along_x ? max_text_width(cr, t) + 10 : TICK_PX + 6;
  int64_t every = (int64_t)ceil(need * (double)n / fmax(room, 1));
  if (every < 1) every = 1;
  if (every > 1) index_ticks(n, labels, every, t);
  if (!labels && every > 1) index_ticks(n, labels, nice_ceil(every), t);
}

/* ---- entry ------------------------------------------------------------------------------------------------ */

static void render_heatmap(const icl_plot *p, cairo_t *cr) {
  double lo, hi, right = p->colorbar ? 100 : 0;
  heat_range(p, &lo, &hi);
  ticks xt, yt;
  heat_ticks(cr, p->rows, p->row_labels, p->height - 120, 0, &yt);
  frame f = make_frame(cr, p, &yt, right);
  heat_ticks(cr, p->cols, p->col_labels, f.w, 1, &xt);
  f.x = (axis){-0.5, (double)p->cols - 0.5};
  f.y = (axis){(double)p->rows - 0.5, -0.5};
  draw_cells(cr, p, &f, lo, hi);
  draw_ticks(cr, &f, &xt, &yt);
  draw_labels(cr, p, &f);
  if (p->colorbar) draw_colorbar(cr, &f, lo, hi);
}

/* Widens the shorter of the two ranges (about its centre) so that both axes have the same scale in frame f. */
static void equalize(const frame *f, axis *ax, axis *ay) {
  double sx = (ax->hi - ax->lo) / f->w, sy = (ay->hi - ay->lo) / f->h;
  axis *a = sx < sy ? ax : ay;
  double len = sx < sy ? sy * f->w : sx * f->h, mid = (a->lo + a->hi) / 2;
  a->lo = mid - len / 2, a->hi = mid + len / 2;
}

static void render_xy(const icl_plot *p, cairo_t *cr) {
  axis ax, ay;
  if (p->kind == ICL_PLOT_SCATTER) scatter_axes(p, &ax, &ay);
  else line_axes(p, &ax, &ay);
  ticks xt, yt;
  numeric_ticks(&ay, 6, &yt);
  frame f = make_frame(cr, p, &yt, 0);
  if (p->equal) {
    equalize(&f, &ax, &ay);
    numeric_ticks(&ay, 6, &yt);
    f = make_frame(cr, p, &yt, 0);
    equalize(&f, &ax, &ay); /* the tick labels may have changed the frame's width */
  }
  numeric_ticks(&ax, 8, &xt);
  numeric_ticks(&ay, 6, &yt);
  f.x = ax, f.y = ay;
  draw_grid(cr, &f, &xt, &yt);
  clip_frame(cr, &f);
  if (p->kind == ICL_PLOT_SCATTER) {
    draw_edges(cr, p, &f);
    draw_points(cr, p, &f);
  } else {
    for (int s = 0; s < p->n_series; s++) draw_series(cr, &p->series[s], &f);
  }
  cairo_restore(cr);
  if (p->kind == ICL_PLOT_SCATTER) draw_point_labels(cr, p, &f);
  else draw_legend(cr, p, &f);
  draw_ticks(cr, &f, &xt, &yt);
  draw_labels(cr, p, &f);
}

void icl_plot_render(const icl_plot *p, cairo_t *cr) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  if (p->kind == ICL_PLOT_HEATMAP) render_heatmap(p, cr);
  else render_xy(p, cr);
}
