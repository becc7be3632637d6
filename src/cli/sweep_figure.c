/* icl sweep merge: a figure per curve field (a numeric array in the summaries: park_grid's accuracy_mean), one line
 * per condition at its mean over the seeds with a band of ± one standard error, saved as figures/FIELD.png and .svg
 * in the sweep folder. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_tmp.h"
#include "plot.h"
#include "sweep.h"

static char *dup_or_null(const char *s) { return s && *s ? strdup(s) : NULL; }

/* The condition's legend label: "graph=grid, n=4" (the grid without the seed). */
static char *condition_label(const sweep *sw, long first_task) {
  char buf[1024] = "";
  size_t k = 0;
  for (int a = 0; a < sw->n_axes && k < sizeof buf; a++) {
    if (a == sw->seed_axis) continue;
    int w = snprintf(buf + k, sizeof buf - k, "%s%s=%s", k ? ", " : "", sw->axes[a].name,
                     sweep_value(sw, first_task, a));
    if (w < 0) break;
    k += (size_t)w;
  }
  return strdup(k ? buf : "all tasks");
}

int sweep_figure(const sweep *sw, const sweep_figure_spec *spec, long n_cond, const long *first_task, long n_points,
                 const double *mean, const double *se) {
  icl_plot *p = icl_plot_new(ICL_PLOT_LINE);
  if (!p || !(p->series = calloc((size_t)n_cond, sizeof *p->series))) return icl_plot_free(p), -1;
  char title[512];
  snprintf(title, sizeof title, "%s: mean ± SE over seeds", spec->field);
  p->title = dup_or_null(spec->title[0] ? spec->title : title);
  p->xlabel = dup_or_null(spec->xlabel[0] ? spec->xlabel : "index");
  p->ylabel = dup_or_null(spec->ylabel[0] ? spec->ylabel : spec->field);
  for (long c = 0; c < n_cond; c++) {
    icl_plot_series *s = &p->series[p->n_series++];
    s->n = n_points;
    s->x = malloc((size_t)n_points * sizeof *s->x);
    s->y = malloc((size_t)n_points * sizeof *s->y);
    s->std = malloc((size_t)n_points * sizeof *s->std);
    s->label = condition_label(sw, first_task[c]);
    s->color = icl_plot_palette((int)c);
    if (!s->x || !s->y || !s->std || !s->label) return icl_plot_free(p), -1;
    for (long i = 0; i < n_points; i++) {
      s->x[i] = (double)i;
      s->y[i] = mean[c * n_points + i];
      s->std[i] = isfinite(se[c * n_points + i]) ? se[c * n_points + i] : 0; /* one seed: no band */
    }
  }
  char dir[4200], path[4400];
  icl_error err = {0};
  int rc = 0;
  snprintf(dir, sizeof dir, "%s/figures", sw->dir);
  if (icl_make_dirs(dir, &err)) rc = -1;
  for (int f = 0; !rc && f < 2; f++) {
    snprintf(path, sizeof path, "%s/%s.%s", dir, spec->field, f ? "svg" : "png");
    if (icl_plot_save(p, path, &err)) rc = -1;
  }
  if (rc) fprintf(stderr, "icl sweep merge: figure %s: %s\n", spec->field, err.msg);
  else printf("icl sweep merge: figures/%s.{png,svg}\n", spec->field);
  icl_plot_free(p);
  return rc;
}

/* A figure's field names a file: letters, digits, _ . and -, and not empty. */
static int field_ok(const char *f) {
  if (!*f || strlen(f) >= sizeof ((sweep_figure_spec *)0)->field) return 0;
  for (; *f; f++)
    if (!(((*f | 32) >= 'a' && (*f | 32) <= 'z') || (*f >= '0' && *f <= '9') || strchr("_.-", *f))) return 0;
  return 1;
}

static void copy_str(char *dst, size_t cap, const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  snprintf(dst, cap, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

int sweep_figure_specs(const void *decl, sweep_figure_spec *out, int cap) {
  const cJSON *d = decl, *e;
  int n = 0;
  if (!d) return 0;
  if (!cJSON_IsArray(d)) goto bad;
  cJSON_ArrayForEach(e, d) {
    if (n == cap) break;
    sweep_figure_spec *s = &out[n];
    memset(s, 0, sizeof *s);
    if (cJSON_IsString(e)) snprintf(s->field, sizeof s->field, "%s", e->valuestring);
    else if (cJSON_IsObject(e)) {
      copy_str(s->field, sizeof s->field, e, "field");
      copy_str(s->title, sizeof s->title, e, "title");
      copy_str(s->xlabel, sizeof s->xlabel, e, "xlabel");
      copy_str(s->ylabel, sizeof s->ylabel, e, "ylabel");
    }
    if (!field_ok(s->field)) goto bad;
    n++;
  }
  return n;
bad:
  fprintf(stderr, "icl sweep merge: summary.json's sweep_figures: expected a list of field names or {field =, title =, "
                  "xlabel =, ylabel =}, each field of letters, digits, _ . -\n");
  return -1;
}

/* Checks --figure FIELD of icl sweep merge; 0 or -1 with a message. */
int sweep_figure_arg(const char *field, sweep_figure_spec *out) {
  memset(out, 0, sizeof *out);
  if (!field_ok(field)) {
    fprintf(stderr, "icl sweep merge: --figure %s: expected the name of a numeric array field of the summaries "
                    "(letters, digits, _ . -)\n", field);
    return -1;
  }
  snprintf(out->field, sizeof out->field, "%s", field);
  return 0;
}
