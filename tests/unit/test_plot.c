/* The plotting core: each kind saved as PNG and SVG (signatures, sizes), colours, errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plot.h"
#include "testutil.h"

static char dir[] = "/tmp/icl_test_plot_XXXXXX";

static double *seq(int64_t n, double (*f)(int64_t)) {
  double *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = f(i);
  return v;
}
static double ring_x(int64_t i) { return cos(2 * M_PI * (double)i / 6); }
static double ring_y(int64_t i) { return sin(2 * M_PI * (double)i / 6); }
static double idx(int64_t i) { return (double)i; }
static double decay(int64_t i) { return 3 * exp(-(double)i / 20) + 0.5; }
static double spread(int64_t i) { return 0.2 + 0.002 * (double)i; }
static double grid(int64_t i) { return (double)(i % 7) * (double)(i / 7) / 10; }

/* Reads the first bytes of a file and its size. */
static long head_of(const char *path, unsigned char *buf, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t got = fread(buf, 1, n, f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  return got == n ? size : -1;
}

static void save_both(const icl_plot *p, const char *name) {
  char path[256];
  unsigned char b[24];
  icl_error err;
  snprintf(path, sizeof path, "%s/%s.png", dir, name);
  CHECKF(icl_plot_save(p, path, &err) == ICL_OK, "%s", err.msg);
  long size = head_of(path, b, sizeof b);
  CHECKF(size > 2000 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0, "%s: %ld bytes", path, size);
  CHECK(b[16] == 0 && b[17] == 0 && b[18] == 3 && b[19] == 0x20); /* IHDR width 800 */
  snprintf(path, sizeof path, "%s/%s.svg", dir, name);
  CHECKF(icl_plot_save(p, path, &err) == ICL_OK, "%s", err.msg);
  size = head_of(path, b, 5);
  CHECKF(size > 1000 && memcmp(b, "<?xml", 5) == 0, "%s: %ld bytes", path, size);
}

static void test_scatter(void) {
  icl_plot *p = icl_plot_new(ICL_PLOT_SCATTER);
  p->n = 6;
  p->px = seq(6, ring_x), p->py = seq(6, ring_y);
  p->fill = malloc(6 * sizeof *p->fill), p->border = malloc(6 * sizeof *p->border);
  p->labels = calloc(6, sizeof *p->labels);
  for (int i = 0; i < 6; i++) p->fill[i] = icl_plot_palette(i), p->border[i] = icl_plot_palette(7);
  p->labels[0] = strdup("apple"), p->labels[3] = strdup("bird");
  p->n_edges = 6;
  p->edges = malloc(12 * sizeof *p->edges);
  for (int i = 0; i < 6; i++) p->edges[2 * i] = i, p->edges[2 * i + 1] = (i + 1) % 6;
  p->dashed = 1;
  p->title = strdup("ring"), p->xlabel = strdup("PC 1"), p->ylabel = strdup("PC 2");
  save_both(p, "scatter");
  icl_error err;
  p->edges[3] = 6;
  CHECK(icl_plot_check(p, &err) == ICL_EINVAL && strstr(err.msg, "edge 2"));
  char path[256];
  snprintf(path, sizeof path, "%s/x.jpg", dir);
  CHECK(icl_plot_save(p, path, &err) == ICL_EINVAL);
  icl_plot_free(p);
}

static void test_line(void) {
  icl_plot *p = icl_plot_new(ICL_PLOT_LINE);
  p->n_series = 2;
  p->series = calloc(2, sizeof *p->series);
  for (int s = 0; s < 2; s++) {
    p->series[s].n = 100;
    p->series[s].x = seq(100, idx), p->series[s].y = seq(100, decay);
    p->series[s].color = icl_plot_palette(s);
  }
  for (int i = 0; i < 100; i++) p->series[1].y[i] += 0.5;
  p->series[0].std = seq(100, spread);
  p->series[0].label = strdup("accuracy"), p->series[1].label = strdup("shifted");
  p->title = strdup("loss"), p->xlabel = strdup("token"), p->ylabel = strdup("nats");
  save_both(p, "line");
  icl_plot_free(p);
}

static void test_heatmap(void) {
  icl_plot *p = icl_plot_new(ICL_PLOT_HEATMAP);
  p->rows = 30, p->cols = 7;
  p->data = seq(210, grid);
  p->data[5] = NAN;
  p->title = strdup("induction"), p->xlabel = strdup("head"), p->ylabel = strdup("layer");
  save_both(p, "heatmap");
  icl_plot_free(p);
}

static void test_colors(void) {
  icl_rgba c;
  CHECK(icl_plot_parse_color("#ff8000", &c) == 0 && c.r == 1 && fabs(c.g - 128 / 255.0) < 1e-12 && c.b == 0);
  CHECK(icl_plot_parse_color("#f00", &c) == 0 && c.r == 1 && c.g == 0 && c.a == 1);
  CHECK(icl_plot_parse_color("#00000080", &c) == 0 && fabs(c.a - 128 / 255.0) < 1e-12);
  CHECK(icl_plot_parse_color("SteelBlue", &c) == 0);
  CHECK(icl_plot_parse_color("#12345", &c) == -1 && icl_plot_parse_color("mauve", &c) == -1);
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  test_scatter();
  test_line();
  test_heatmap();
  test_colors();
  if (!getenv("ICL_KEEP")) {
    const char *names[] = {"scatter", "line", "heatmap"};
    char path[256];
    for (int i = 0; i < 6; i++) {
      snprintf(path, sizeof path, "%s/%s.%s", dir, names[i / 2], i % 2 ? "svg" : "png");
      unlink(path);
    }
    rmdir(dir);
  } else {
    printf("figures in %s\n", dir);
  }
  cairo_debug_reset_static_data(); /* so that leak checkers see cairo's font caches released */
  return t_done();
}
