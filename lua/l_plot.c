/* icl.plot: scatter, line and heatmap figures (src/plot.c draws them with cairo); fig:save(path) writes PNG or
 * SVG. The binding reads the option table into an icl_plot owned by the figure userdata, so that an error
 * raised halfway leaves nothing behind but garbage for the collector. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "icl_lua.h"
#include "l_seq.h"
#include "plot.h"

#define FIGURE_MT "icl.figure"

typedef struct figure {
  icl_plot *p; /* NULL once closed */
} figure;

static const char *const kind_names[] = {"scatter", "line", "heatmap"};

/* ---- the figure userdata ---------------------------------------------------------------------------------- */

static icl_plot *push_figure(lua_State *L, icl_plot_kind kind) {
  figure *f = lua_newuserdatauv(L, sizeof *f, 0);
  f->p = NULL;
  luaL_setmetatable(L, FIGURE_MT);
  f->p = icl_plot_new(kind);
  if (!f->p) luaL_error(L, "plot: out of memory");
  return f->p;
}

static figure *check_figure(lua_State *L) { return luaL_checkudata(L, 1, FIGURE_MT); }

static int fig_gc(lua_State *L) {
  figure *f = check_figure(L);
  icl_plot_free(f->p);
  f->p = NULL;
  return 0;
}

static int fig_tostring(lua_State *L) {
  figure *f = check_figure(L);
  if (!f->p) lua_pushliteral(L, "icl.figure (closed)");
  else lua_pushfstring(L, "icl.figure (%s, %dx%d)", kind_names[f->p->kind], f->p->width, f->p->height);
  return 1;
}

/* fig:save(base, {"png", "svg"}): base.png and base.svg; true, or nil and the first failure's message. */
static int save_formats(lua_State *L, figure *f, const char *base) {
  lua_Unsigned n = lua_rawlen(L, 3);
  luaL_argcheck(L, n > 0 && n <= 8, 3, "expected a list of 1..8 formats (\"png\", \"svg\")");
  for (lua_Unsigned i = 1; i <= n; i++) {
    const char *ext = lua_rawgeti(L, 3, (lua_Integer)i) == LUA_TSTRING ? lua_tostring(L, -1) : "";
    if (strcasecmp(ext, "png") != 0 && strcasecmp(ext, "svg") != 0)
      luaL_argerror(L, 3, lua_pushfstring(L, "formats[%I]: expected \"png\" or \"svg\"", (lua_Integer)i));
    const char *path = lua_pushfstring(L, "%s.%s", base, ext);
    icl_error err;
    if (icl_plot_save(f->p, path, &err) != ICL_OK) {
      lua_pushnil(L);
      lua_pushstring(L, err.msg);
      return 2;
    }
    lua_pop(L, 2);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* fig:save(path): true, or nil and a message when the file cannot be written. */
static int fig_save(lua_State *L) {
  figure *f = check_figure(L);
  const char *path = luaL_checkstring(L, 2);
  luaL_argcheck(L, f->p != NULL, 1, "figure is closed");
  if (lua_istable(L, 3)) return save_formats(L, f, path);
  const char *dot = strrchr(path, '.');
  luaL_argcheck(L, dot && (strcasecmp(dot, ".png") == 0 || strcasecmp(dot, ".svg") == 0), 2,
                "path must end in .png or .svg");
  icl_error err;
  if (icl_plot_save(f->p, path, &err) != ICL_OK) {
    lua_pushnil(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* ---- reading options ------------------------------------------------------------------------------------ */

static void *xcalloc(lua_State *L, size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) luaL_error(L, "plot: out of memory");
  return p;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when it is not one (cairo rejects such text). */
static int utf8_seq(const unsigned char *s) {
  int n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
  if (n == 2 && s[0] < 0xc2) return 0; /* overlong */
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if (n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0; /* overlong, surrogate */
  if (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || s[0] > 0xf4 || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
  return n;
}

/* A copy of s in which invalid UTF-8 bytes and control characters become '?' (titles come from model files). */
static char *xstrdup(lua_State *L, const char *s) {
  size_t len = strlen(s);
  char *d = xcalloc(L, len + 1, 1);
  for (size_t i = 0; i < len;) {
    int n = utf8_seq((const unsigned char *)s + i);
    if (n == 0 || (n == 1 && ((unsigned char)s[i] < 0x20 || s[i] == 0x7f))) d[i++] = '?';
    else memcpy(d + i, s + i, (size_t)n), i += (size_t)n;
  }
  return d;
}

/* opts[name] as a malloc'd string, or NULL when absent. */
static char *opt_string(lua_State *L, int opts, const char *name) {
  int t = lua_getfield(L, opts, name);
  char *s = NULL;
  if (t != LUA_TNIL) {
    if (t != LUA_TSTRING && t != LUA_TNUMBER) luaL_error(L, "plot: option '%s' must be a string", name);
    s = xstrdup(L, lua_tostring(L, -1));
  }
  lua_pop(L, 1);
  return s;
}

static int opt_int(lua_State *L, int opts, const char *name, int def) {
  int t = lua_getfield(L, opts, name), ok = 1;
  lua_Integer v = t == LUA_TNIL ? def : lua_tointegerx(L, -1, &ok);
  if (!ok) luaL_error(L, "plot: option '%s' must be an integer", name);
  lua_pop(L, 1);
  return (int)v;
}

static int opt_bool(lua_State *L, int opts, const char *name, int def) {
  int t = lua_getfield(L, opts, name), v = t == LUA_TNIL ? def : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

static double opt_number(lua_State *L, int opts, const char *name, int *has) {
  int t = lua_getfield(L, opts, name), ok = 1;
  double v = t == LUA_TNIL ? 0 : lua_tonumberx(L, -1, &ok);
  if (!ok) luaL_error(L, "plot: option '%s' must be a number", name);
  *has = t != LUA_TNIL;
  lua_pop(L, 1);
  return v;
}

/* opts[name] = {lo, hi} into r; returns whether it was given. */
static int opt_range(lua_State *L, int opts, const char *name, double r[2]) {
  int t = lua_getfield(L, opts, name);
  if (t == LUA_TNIL) return lua_pop(L, 1), 0;
  if (t != LUA_TTABLE) luaL_error(L, "plot: option '%s' must be {lo, hi}", name);
  for (int i = 0; i < 2; i++) {
    lua_geti(L, -1, i + 1);
    int ok;
    r[i] = lua_tonumberx(L, -1, &ok);
    if (!ok) luaL_error(L, "plot: option '%s' must be {lo, hi}", name);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return 1;
}

/* The value at idx as numbers: a tensor (flattened) or a list of numbers; malloc'd array of *n. */
static double *read_numbers(lua_State *L, int idx, const char *what, int64_t *n) {
  icl_tensor *t = icl_lua_test_tensor(L, idx);
  if (t) {
    double *v = xcalloc(L, (size_t)t->numel, sizeof *v);
    for (int64_t i = 0; i < t->numel; i++) v[i] = t->data[i];
    *n = t->numel;
    return v;
  }
  if (!lua_istable(L, idx)) luaL_error(L, "plot: %s must be a tensor or a list of numbers", what);
  *n = icl_lua_seq_len(L, idx, 0, ICL_LUA_SEQ_MAX, what);
  double *v = xcalloc(L, (size_t)*n, sizeof *v);
  for (int64_t i = 0; i < *n; i++) {
    lua_geti(L, idx, i + 1);
    int ok;
    v[i] = lua_tonumberx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok) {
      free(v);
      luaL_error(L, "plot: %s[%d] is not a number", what, (int)(i + 1));
    }
  }
  return v;
}

/* A colour: a name or "#rrggbb" string, a 1-based palette index, or a table {r=, g=, b=[, a=]} in 0..1. */
static icl_rgba read_color(lua_State *L, int idx, const char *what) {
  icl_rgba c = {0, 0, 0, 1};
  if (lua_type(L, idx) == LUA_TSTRING) {
    if (icl_plot_parse_color(lua_tostring(L, idx), &c) != 0)
      luaL_error(L, "plot: %s: unknown colour '%s'", what, lua_tostring(L, idx));
  } else if (lua_isinteger(L, idx)) {
    c = icl_plot_palette((int)(lua_tointeger(L, idx) - 1));
  } else if (lua_istable(L, idx)) {
    const char *k[4] = {"r", "g", "b", "a"};
    double *ch[4] = {&c.r, &c.g, &c.b, &c.a};
    for (int i = 0; i < 4; i++) {
      int has = 0;
      double v = opt_number(L, lua_absindex(L, idx), k[i], &has);
      if (has) *ch[i] = fmin(1, fmax(0, v));
      else if (i < 3) luaL_error(L, "plot: %s: colour tables need r, g and b", what);
    }
  } else {
    luaL_error(L, "plot: %s must be a colour name, \"#rrggbb\", a palette index or {r=, g=, b=}", what);
  }
  return c;
}

/* opts[name] into *dst (n entries, owned by the figure): one colour for all n items, or a list of n colours (a
 * table without an `r` field). */
static void opt_colors(lua_State *L, int opts, const char *name, int64_t n, icl_rgba def, icl_rgba **dst) {
  icl_rgba *c = *dst = xcalloc(L, (size_t)n, sizeof *c);
  int t = lua_getfield(L, opts, name);
  int list = t == LUA_TTABLE && lua_getfield(L, -1, "r") == LUA_TNIL;
  if (t == LUA_TTABLE) lua_pop(L, 1);
  if (list && icl_lua_seq_len(L, -1, 0, ICL_LUA_SEQ_MAX, name) != n) luaL_error(L, "plot: %s must hold one colour per point (%d)", name, (int)n);
  icl_rgba one = t == LUA_TNIL ? def : list ? def : read_color(L, -1, name);
  for (int64_t i = 0; i < n; i++) {
    if (list) lua_geti(L, -1, i + 1);
    c[i] = list ? read_color(L, -1, name) : one;
    if (list) lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

/* opts[name] into *dst (owned by the figure) as a list of n strings (false or nil entries allowed); *dst stays
 * NULL when the option is absent. */
static void opt_labels(lua_State *L, int opts, const char *name, int64_t n, char ***dst) {
  if (lua_getfield(L, opts, name) == LUA_TNIL) return (void)lua_pop(L, 1);
  if (!lua_istable(L, -1)) luaL_error(L, "plot: %s must be a list of strings", name);
  char **s = *dst = xcalloc(L, (size_t)n, sizeof *s);
  for (int64_t i = 0; i < n; i++) {
    int t = lua_geti(L, -1, i + 1);
    if (t == LUA_TSTRING || t == LUA_TNUMBER) s[i] = xstrdup(L, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

static void read_common(lua_State *L, int opts, icl_plot *p) {
  p->title = opt_string(L, opts, "title");
  p->xlabel = opt_string(L, opts, "xlabel");
  p->ylabel = opt_string(L, opts, "ylabel");
  p->width = opt_int(L, opts, "width", p->width);
  p->height = opt_int(L, opts, "height", p->height);
  p->has_xlim = opt_range(L, opts, "xlim", p->xlim);
  p->has_ylim = opt_range(L, opts, "ylim", p->ylim);
}

static void check_plot(lua_State *L, const icl_plot *p) {
  icl_error err;
  if (icl_plot_check(p, &err) != ICL_OK) luaL_error(L, "%s", err.msg);
}

/* ---- scatter ---------------------------------------------------------------------------------------------- */

/* points: a tensor [n, >= 2] (columns 1 and 2), a list of {x, y} pairs, or a PCA result (its projections). */
static void read_points(lua_State *L, int opts, icl_plot *p) {
  int t = lua_getfield(L, opts, "points");
  if (t == LUA_TTABLE && lua_getfield(L, -1, "projections") != LUA_TNIL) lua_remove(L, -2);
  else if (t == LUA_TTABLE) lua_pop(L, 1);
  icl_tensor *x = icl_lua_test_tensor(L, -1);
  if (!x && !lua_istable(L, -1)) luaL_error(L, "plot.scatter: points must be a tensor [n, 2] or a list of {x, y}");
  if (x && (x->ndim != 2 || x->shape[1] < 2)) luaL_error(L, "plot.scatter: points must be a tensor [n, 2]");
  p->n = x ? x->shape[0] : icl_lua_seq_len(L, -1, 0, ICL_LUA_SEQ_MAX, "plot.scatter: points");
  p->px = xcalloc(L, (size_t)p->n, sizeof(double));
  p->py = xcalloc(L, (size_t)p->n, sizeof(double));
  for (int64_t i = 0; i < p->n; i++) {
    if (x) {
      p->px[i] = x->data[i * x->shape[1]], p->py[i] = x->data[i * x->shape[1] + 1];
      continue;
    }
    lua_geti(L, -1, i + 1);
    lua_geti(L, -1, 1);
    lua_geti(L, -2, 2);
    int okx, oky;
    p->px[i] = lua_tonumberx(L, -2, &okx), p->py[i] = lua_tonumberx(L, -1, &oky);
    if (!okx || !oky) luaL_error(L, "plot.scatter: points[%d] must be {x, y}", (int)(i + 1));
    lua_pop(L, 3);
  }
  lua_pop(L, 1);
}

static void read_edges(lua_State *L, int opts, icl_plot *p) {
  if (lua_getfield(L, opts, "edges") == LUA_TNIL) return (void)lua_pop(L, 1);
  if (!lua_istable(L, -1)) luaL_error(L, "plot.scatter: edges must be a list of {i, j}");
  p->n_edges = icl_lua_seq_len(L, -1, 0, ICL_LUA_SEQ_MAX, "plot.scatter: edges");
  p->edges = xcalloc(L, (size_t)(2 * p->n_edges), sizeof *p->edges);
  for (int64_t k = 0; k < p->n_edges; k++) {
    if (lua_geti(L, -1, k + 1) != LUA_TTABLE) luaL_error(L, "plot.scatter: edges[%d] must be {i, j}", (int)(k + 1));
    for (int s = 0; s < 2; s++) {
      lua_geti(L, -1, s + 1);
      int ok;
      lua_Integer v = lua_tointegerx(L, -1, &ok);
      if (!ok || v < 1 || v > p->n)
        luaL_error(L, "plot.scatter: edges[%d] must hold point numbers in [1, %d]", (int)(k + 1), (int)p->n);
      p->edges[2 * k + s] = v - 1;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

static int plot_scatter(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  icl_plot *p = push_figure(L, ICL_PLOT_SCATTER);
  read_common(L, 1, p);
  read_points(L, 1, p);
  read_edges(L, 1, p);
  opt_labels(L, 1, "labels", p->n, &p->labels);
  opt_colors(L, 1, "fill", p->n, icl_plot_palette(0), &p->fill);
  opt_colors(L, 1, "border", p->n, (icl_rgba){0.2, 0.2, 0.2, 1}, &p->border);
  p->dashed = opt_bool(L, 1, "dashed", 0);
  p->equal = opt_bool(L, 1, "equal", 0);
  int has;
  double size = opt_number(L, 1, "size", &has);
  if (has) p->radius = size;
  check_plot(L, p);
  return 1;
}

/* ---- line ------------------------------------------------------------------------------------------------- */

/* One series from the table at idx ({y = , x = , std = , label = , color = }). */
static void read_series(lua_State *L, int idx, int s, icl_plot_series *ser) {
  int64_t n, nx;
  if (lua_getfield(L, idx, "y") == LUA_TNIL) luaL_error(L, "plot.line: series %d has no y", s + 1);
  ser->y = read_numbers(L, -1, "y", &n);
  ser->n = n;
  lua_pop(L, 1);
  if (lua_getfield(L, idx, "x") != LUA_TNIL) {
    ser->x = read_numbers(L, -1, "x", &nx);
    if (nx != n) luaL_error(L, "plot.line: series %d: x has %d values, y has %d", s + 1, (int)nx, (int)n);
  } else {
    ser->x = xcalloc(L, (size_t)n, sizeof(double));
    for (int64_t i = 0; i < n; i++) ser->x[i] = (double)(i + 1);
  }
  lua_pop(L, 1);
  if (lua_getfield(L, idx, "std") != LUA_TNIL) {
    ser->std = read_numbers(L, -1, "std", &nx);
    if (nx != n) luaL_error(L, "plot.line: series %d: std has %d values, y has %d", s + 1, (int)nx, (int)n);
  }
  lua_pop(L, 1);
  ser->label = opt_string(L, idx, "label");
  ser->color = icl_plot_palette(s);
  if (lua_getfield(L, idx, "color") != LUA_TNIL) ser->color = read_color(L, -1, "color");
  lua_pop(L, 1);
}

static int plot_line(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  icl_plot *p = push_figure(L, ICL_PLOT_LINE);
  read_common(L, 1, p);
  p->legend = opt_bool(L, 1, "legend", 1);
  int t = lua_getfield(L, 1, "series");
  if (t == LUA_TNIL) { /* one series given by the option table itself */
    p->series = xcalloc(L, 1, sizeof *p->series);
    p->n_series = 1;
    read_series(L, 1, 0, &p->series[0]);
  } else {
    if (t != LUA_TTABLE) luaL_error(L, "plot.line: series must be a list of {x=, y=, std=, label=}");
    int n = (int)icl_lua_seq_len(L, -1, 0, 1 << 16, "plot.line: series");
    p->series = xcalloc(L, (size_t)n, sizeof *p->series);
    for (int s = 0; s < n; s++) {
      if (lua_geti(L, -1, s + 1) != LUA_TTABLE) luaL_error(L, "plot.line: series[%d] must be a table", s + 1);
      p->n_series = s + 1;
      read_series(L, lua_gettop(L), s, &p->series[s]);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  check_plot(L, p);
  return 1;
}

/* ---- heatmap ---------------------------------------------------------------------------------------------- */

/* data: a 2-d tensor or a table of equal-length rows. */
static void read_grid(lua_State *L, int opts, icl_plot *p) {
  lua_getfield(L, opts, "data");
  icl_tensor *t = icl_lua_test_tensor(L, -1);
  if (t) {
    if (t->ndim != 2) luaL_error(L, "plot.heatmap: data must be a 2-d tensor [rows, cols]");
    int64_t n;
    p->data = read_numbers(L, -1, "data", &n);
    p->rows = t->shape[0], p->cols = t->shape[1];
  } else {
    if (!lua_istable(L, -1)) luaL_error(L, "plot.heatmap: data must be a 2-d tensor or a table of rows");
    p->rows = icl_lua_seq_len(L, -1, 0, ICL_LUA_SEQ_MAX, "plot.heatmap: data");
    p->cols = p->rows > 0 && lua_geti(L, -1, 1) == LUA_TTABLE
                  ? icl_lua_seq_len(L, -1, 0, ICL_LUA_SEQ_MAX, "plot.heatmap: data row")
                  : 0;
    if (p->rows > 0) lua_pop(L, 1);
    p->data = xcalloc(L, (size_t)(p->rows * p->cols), sizeof *p->data);
    for (int64_t r = 0; r < p->rows; r++) {
      int64_t n;
      lua_geti(L, -1, r + 1);
      double *row = read_numbers(L, -1, "data row", &n);
      if (n == p->cols) memcpy(p->data + r * p->cols, row, (size_t)n * sizeof *row);
      free(row);
      if (n != p->cols) luaL_error(L, "plot.heatmap: data rows must have equal lengths");
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

static int plot_heatmap(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  icl_plot *p = push_figure(L, ICL_PLOT_HEATMAP);
  read_common(L, 1, p);
  read_grid(L, 1, p);
  opt_labels(L, 1, "row_labels", p->rows, &p->row_labels);
  opt_labels(L, 1, "col_labels", p->cols, &p->col_labels);
  p->colorbar = opt_bool(L, 1, "colorbar", 1);
  int has_lo, has_hi;
  p->vmin = opt_number(L, 1, "vmin", &has_lo);
  p->vmax = opt_number(L, 1, "vmax", &has_hi);
  if (has_lo != has_hi) luaL_error(L, "plot.heatmap: give both vmin and vmax, or neither");
  p->has_vrange = has_lo;
  check_plot(L, p);
  return 1;
}

/* ---- registration ---------------------------------------------------------------------------------------- */

static const luaL_Reg fig_methods[] = {{"save", fig_save}, {"close", fig_gc}, {NULL, NULL}};
static const luaL_Reg plot_funcs[] = {
    {"scatter", plot_scatter}, {"line", plot_line}, {"heatmap", plot_heatmap}, {NULL, NULL}};

int icl_lua_open_plot(lua_State *L) {
  if (luaL_newmetatable(L, FIGURE_MT)) {
    luaL_newlib(L, fig_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, fig_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, fig_gc);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, fig_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  luaL_newlib(L, plot_funcs);
  return 1;
}
