/* icl sweep merge DIR: every done task's summary.json into merged.json (the summaries, and per condition, the grid
 * minus the seed, the mean, standard error and count of every numeric field) and merged.csv (one row per task: its
 * flags, then every numeric field). Fields are named by their path in the summary ("energy_curve[2].raw"), in the
 * order they first appear; numbers are printed in the shortest form that reads back exactly, so the merge of the
 * same summaries is the same bytes whichever executor ran the tasks. Missing and failed tasks are named on stderr
 * and in merged.json, and make the exit status 1. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "sweep.h"

typedef struct fields {
  char **names;
  size_t n, cap;
  size_t *hash; /* open addressing: index + 1, 0 empty */
  size_t hcap;
} fields;

static size_t str_hash(const char *s) {
  size_t h = 1469598103934665603u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

/* The index of name, added when new; -1 when memory runs out. */
static long field_index(fields *f, const char *name) {
  if (2 * (f->n + 1) > f->hcap) {
    size_t cap = f->hcap ? 2 * f->hcap : 1024;
    size_t *h = calloc(cap, sizeof *h);
    if (!h) return -1;
    for (size_t i = 0; i < f->n; i++) {
      size_t k = str_hash(f->names[i]) & (cap - 1);
      while (h[k]) k = (k + 1) & (cap - 1);
      h[k] = i + 1;
    }
    free(f->hash);
    f->hash = h, f->hcap = cap;
  }
  size_t k = str_hash(name) & (f->hcap - 1);
  for (; f->hash[k]; k = (k + 1) & (f->hcap - 1))
    if (!strcmp(f->names[f->hash[k] - 1], name)) return (long)f->hash[k] - 1;
  if (f->n == f->cap) {
    size_t cap = f->cap ? 2 * f->cap : 256;
    char **p = realloc(f->names, cap * sizeof *p);
    if (!p) return -1;
    f->names = p, f->cap = cap;
  }
  if (!(f->names[f->n] = strdup(name))) return -1;
  f->hash[k] = ++f->n;
  return (long)f->n - 1;
}

/* The index of name, or -1 when no summary has it. */
static long field_find(const fields *f, const char *name) {
  if (!f->hcap) return -1;
  for (size_t k = str_hash(name) & (f->hcap - 1); f->hash[k]; k = (k + 1) & (f->hcap - 1))
    if (!strcmp(f->names[f->hash[k] - 1], name)) return (long)f->hash[k] - 1;
  return -1;
}

/* One task's numeric leaves: (field index, value) pairs. */
typedef struct leaves {
  long *idx;
  double *val;
  size_t n, cap;
} leaves;

static int add_leaf(leaves *l, long i, double v) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 256;
    long *a = realloc(l->idx, cap * sizeof *a);
    if (!a) return -1;
    l->idx = a;
    double *b = realloc(l->val, cap * sizeof *b);
    if (!b) return -1;
    l->val = b, l->cap = cap;
  }
  l->idx[l->n] = i, l->val[l->n++] = v;
  return 0;
}

static int walk(const cJSON *j, char *path, size_t len, size_t cap, fields *f, leaves *l) {
  if (cJSON_IsNumber(j)) {
    long i = field_index(f, path);
    return i < 0 ? -1 : add_leaf(l, i, j->valuedouble);
  }
  if (!cJSON_IsObject(j) && !cJSON_IsArray(j)) return 0;
  int k = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, j) {
    int w = cJSON_IsArray(j) ? snprintf(path + len, cap - len, "[%d]", k)
                             : snprintf(path + len, cap - len, "%s%s", len ? "." : "", c->string ? c->string : "");
    k++;
    if (w < 0 || (size_t)w >= cap - len) continue; /* a path too long to name: left out */
    if (walk(c, path, len + (size_t)w, cap, f, l)) return -1;
  }
  path[len] = 0;
  return 0;
}

/* The shortest %.Ng that reads back as v; "null" for NaN and infinities (JSON has neither). */
static void num(FILE *o, double v) {
  if (!isfinite(v)) {
    fputs("null", o);
    return;
  }
  char b[40];
  for (int p = 15; p <= 17; p++) {
    snprintf(b, sizeof b, "%.*g", p, v);
    if (strtod(b, NULL) == v) break;
  }
  fputs(b, o);
}

static void jstr(FILE *o, const char *s) {
  fputc('"', o);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(o, "\\%c", c);
    else if (c < 0x20) fprintf(o, "\\u%04x", c);
    else fputc(c, o);
  }
  fputc('"', o);
}

static void csv_str(FILE *o, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, o);
    return;
  }
  fputc('"', o);
  for (; *s; s++) {
    if (*s == '"') fputc('"', o);
    fputc(*s, o);
  }
  fputc('"', o);
}

typedef struct merge_ctx {
  const sweep *sw;
  task_state *states;
  cJSON **summary; /* per task, NULL unless done */
  double *vals;    /* [task][field], NaN when absent */
  fields f;
} merge_ctx;

/* The condition of task t: its index among the grid's combinations without the seed. */
static long condition_of(const sweep *sw, long t) {
  if (sw->seed_axis < 0) return t;
  long stride = 1;
  for (int b = sw->n_axes - 1; b > sw->seed_axis; b--) stride *= sw->axes[b].n;
  long n = sw->axes[sw->seed_axis].n;
  return t / (stride * n) * stride + t % stride;
}

static void flags_json(FILE *o, const sweep *sw, long t, int with_seed) {
  fputc('{', o);
  for (int a = 0, k = 0; a < sw->n_axes; a++) {
    if (a == sw->seed_axis && !with_seed) continue;
    fputs(k++ ? ", " : "", o);
    jstr(o, sw->axes[a].name);
    fputs(": ", o);
    jstr(o, sweep_value(sw, t, a));
  }
  fputc('}', o);
}

static const char *state_word(task_state s) {
  static const char *w[] = {"missing", "done", "running", "failed", "queued"};
  return w[s];
}

/* A summary's own copy of a grid flag ("seed", "graph"): a column already, never averaged. */
static int is_axis(const sweep *sw, const char *field) {
  for (int a = 0; a < sw->n_axes; a++)
    if (!strcmp(sw->axes[a].name, field)) return 1;
  return 0;
}

/* Field i over condition c's done tasks: mean, standard error (NaN for one value) and count (0: no value). */
static long stat_of(const merge_ctx *m, long c, size_t i, double *mean, double *se) {
  const sweep *sw = m->sw;
  double s = 0, ss = 0;
  long cnt = 0;
  for (long t = 0; t < sw->n_tasks; t++) {
    double v = m->vals[(size_t)t * m->f.n + i];
    if (condition_of(sw, t) == c && isfinite(v)) s += v, cnt++;
  }
  if (!cnt) return 0;
  *mean = s / (double)cnt;
  for (long t = 0; t < sw->n_tasks; t++) {
    double v = m->vals[(size_t)t * m->f.n + i];
    if (condition_of(sw, t) == c && isfinite(v)) ss += (v - *mean) * (v - *mean);
  }
  *se = cnt > 1 ? sqrt(ss / (double)(cnt - 1) / (double)cnt) : NAN;
  return cnt;
}

static long n_conditions(const sweep *sw) {
  return sw->seed_axis < 0 ? sw->n_tasks : sw->n_tasks / sw->axes[sw->seed_axis].n;
}

/* The first task of condition c (its flags name the condition). */
static long first_task(const sweep *sw, long c) {
  for (long t = 0; t < sw->n_tasks; t++)
    if (condition_of(sw, t) == c) return t;
  return 0;
}

static void write_conditions(FILE *o, merge_ctx *m) {
  const sweep *sw = m->sw;
  fputs("  \"conditions\": [", o);
  for (long c = 0; c < n_conditions(sw); c++) {
    long n = 0;
    for (long t = 0; t < sw->n_tasks; t++) n += condition_of(sw, t) == c && m->summary[t];
    fputs(c ? ",\n    {\"flags\": " : "\n    {\"flags\": ", o);
    flags_json(o, sw, first_task(sw, c), 0);
    fprintf(o, ", \"n\": %ld, \"fields\": {", n);
    for (size_t i = 0, k = 0; i < m->f.n; i++) {
      double mean, se;
      long cnt = is_axis(sw, m->f.names[i]) ? 0 : stat_of(m, c, i, &mean, &se);
      if (!cnt) continue;
      fputs(k++ ? ",\n      " : "\n      ", o);
      jstr(o, m->f.names[i]);
      fputs(": {\"mean\": ", o);
      num(o, mean);
      fputs(", \"se\": ", o);
      num(o, se);
      fprintf(o, ", \"n\": %ld}", cnt);
    }
    fputs("}}", o);
  }
  fputs("\n  ],\n", o);
}

/* One figure: FIELD[0], FIELD[1], ... per condition; -1 when the summaries hold no such array. */
static int draw_figure(const merge_ctx *m, const sweep_figure_spec *spec) {
  const sweep *sw = m->sw;
  long n_cond = n_conditions(sw), n = 0;
  char name[256];
  for (;; n++) {
    snprintf(name, sizeof name, "%s[%ld]", spec->field, n);
    if (field_find(&m->f, name) < 0) break;
  }
  if (!n) {
    fprintf(stderr, "icl sweep merge: figure %s: the summaries hold no numeric array %s\n", spec->field, spec->field);
    return -1;
  }
  double *mean = malloc((size_t)(n_cond * n) * sizeof *mean), *se = malloc((size_t)(n_cond * n) * sizeof *se);
  long *first = malloc((size_t)n_cond * sizeof *first);
  int rc = -1;
  if (mean && se && first) {
    for (long c = 0; c < n_cond; c++) {
      first[c] = first_task(sw, c);
      for (long i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s[%ld]", spec->field, i);
        if (!stat_of(m, c, (size_t)field_find(&m->f, name), &mean[c * n + i], &se[c * n + i]))
          mean[c * n + i] = se[c * n + i] = NAN;
      }
    }
    rc = sweep_figure(sw, spec, n_cond, first, n, mean, se);
  }
  free(mean), free(se), free(first);
  return rc;
}

/* The figures asked for on the command line and those the first summary declares. */
static int draw_figures(const merge_ctx *m, const sweep_figure_spec *figs, int n_figs) {
  sweep_figure_spec decl[32];
  int n_decl = 0, rc = 0;
  for (long t = 0; t < m->sw->n_tasks && !n_decl; t++)
    if (m->summary[t]) {
      n_decl = sweep_figure_specs(cJSON_GetObjectItemCaseSensitive(m->summary[t], "sweep_figures"), decl, 32);
      break;
    }
  if (n_decl < 0) rc = -1, n_decl = 0;
  for (int i = 0; i < n_figs + n_decl; i++)
    if (draw_figure(m, i < n_figs ? &figs[i] : &decl[i - n_figs])) rc = -1;
  return rc;
}

static void write_json(FILE *o, merge_ctx *m) {
  const sweep *sw = m->sw;
  fputs("{\n  \"experiment\": ", o);
  jstr(o, sw->experiment);
  fputs(",\n  \"fixed\": [", o);
  for (int i = 0; i < sw->n_fixed; i++) fputs(i ? ", " : "", o), jstr(o, sw->fixed[i]);
  fputs("],\n  \"grid\": {", o);
  for (int a = 0; a < sw->n_axes; a++) {
    fputs(a ? ", " : "", o);
    jstr(o, sw->axes[a].name);
    fputs(": [", o);
    for (int i = 0; i < sw->axes[a].n; i++) fputs(i ? ", " : "", o), jstr(o, sw->axes[a].values[i]);
    fputc(']', o);
  }
  fputs("},\n", o);
  write_conditions(o, m);
  fputs("  \"tasks\": [", o);
  for (long t = 0; t < sw->n_tasks; t++) {
    char name[32];
    sweep_task_name(sw, t, name, sizeof name);
    fprintf(o, "%s\n    {\"task\": \"%s\", \"flags\": ", t ? "," : "", name);
    flags_json(o, sw, t, 1);
    fprintf(o, ", \"status\": \"%s\"", state_word(m->states[t]));
    if (m->summary[t]) {
      char *s = cJSON_PrintUnformatted(m->summary[t]);
      fprintf(o, ", \"summary\": %s", s ? s : "null");
      free(s);
    }
    fputc('}', o);
  }
  fputs("\n  ]\n}\n", o);
}

static void write_csv(FILE *o, merge_ctx *m) {
  const sweep *sw = m->sw;
  fputs("task", o);
  for (int a = 0; a < sw->n_axes; a++) fputc(',', o), csv_str(o, sw->axes[a].name);
  for (size_t i = 0; i < m->f.n; i++)
    if (!is_axis(sw, m->f.names[i])) fputc(',', o), csv_str(o, m->f.names[i]);
  fputc('\n', o);
  for (long t = 0; t < sw->n_tasks; t++) {
    if (!m->summary[t]) continue;
    char name[32];
    sweep_task_name(sw, t, name, sizeof name);
    fputs(name, o);
    for (int a = 0; a < sw->n_axes; a++) fputc(',', o), csv_str(o, sweep_value(sw, t, a));
    for (size_t i = 0; i < m->f.n; i++) {
      double v = m->vals[(size_t)t * m->f.n + i];
      if (is_axis(sw, m->f.names[i])) continue;
      fputc(',', o);
      if (isfinite(v)) num(o, v);
    }
    fputc('\n', o);
  }
}

/* Writes out through a memory stream, then atomically; -1 on failure. */
static int write_out(const sweep *sw, const char *file, void (*fn)(FILE *, merge_ctx *), merge_ctx *m) {
  char *buf = NULL, path[4096];
  size_t len = 0;
  FILE *o = open_memstream(&buf, &len);
  if (!o) return -1;
  fn(o, m);
  int rc = fclose(o) || sweep_path(sw, path, sizeof path, NULL, file, NULL) ? -1 : sweep_write_file(path, buf, len);
  free(buf);
  return rc;
}

/* Reads the done tasks' summaries and their numeric leaves; -1 on a summary that does not parse. */
static int read_tasks(merge_ctx *m, leaves *lv) {
  const sweep *sw = m->sw;
  int bad = 0;
  for (long t = 0; t < sw->n_tasks; t++) {
    if (m->states[t] != TASK_DONE) continue;
    char name[32], path[4096], key[4096] = "";
    sweep_task_name(sw, t, name, sizeof name);
    icl_error err = {0};
    char *text =
        sweep_path(sw, path, sizeof path, "tasks", name, "/summary.json") ? NULL : cli_read_file(path, NULL, &err);
    m->summary[t] = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!m->summary[t]) {
      fprintf(stderr, "icl sweep merge: %s: %s\n", path, err.msg[0] ? err.msg : "not valid JSON");
      m->states[t] = TASK_FAILED;
      bad = 1;
      continue;
    }
    if (walk(m->summary[t], key, 0, sizeof key, &m->f, &lv[t])) return -1;
  }
  return bad;
}

int sweep_merge(const sweep *sw, const sweep_figure_spec *figs, int n_figs) {
  merge_ctx m = {.sw = sw};
  long n = sw->n_tasks;
  m.states = calloc((size_t)n, sizeof *m.states);
  m.summary = calloc((size_t)n, sizeof *m.summary);
  leaves *lv = calloc((size_t)n, sizeof *lv);
  int rc = 1;
  if (!m.states || !m.summary || !lv) goto out;
  for (long t = 0; t < n; t++) m.states[t] = sweep_task_state(sw, t);
  sweep_slurm_queued(sw, m.states);
  if (read_tasks(&m, lv) < 0) goto out;
  m.vals = malloc((size_t)n * (m.f.n ? m.f.n : 1) * sizeof *m.vals);
  if (!m.vals) goto out;
  for (size_t i = 0; i < (size_t)n * m.f.n; i++) m.vals[i] = NAN;
  for (long t = 0; t < n; t++)
    for (size_t k = 0; k < lv[t].n; k++) m.vals[(size_t)t * m.f.n + (size_t)lv[t].idx[k]] = lv[t].val[k];
  if (write_out(sw, "merged.json", write_json, &m) || write_out(sw, "merged.csv", write_csv, &m)) goto out;
  int figs_bad = draw_figures(&m, figs, n_figs) != 0;
  long done = 0;
  for (long t = 0; t < n; t++) {
    if (m.states[t] == TASK_DONE) {
      done++;
      continue;
    }
    char name[32], flags[512];
    sweep_task_name(sw, t, name, sizeof name);
    sweep_task_flags(sw, t, flags, sizeof flags);
    fprintf(stderr, "icl sweep merge: task %s (%s) is %s: left out\n", name, flags, state_word(m.states[t]));
  }
  printf("icl sweep merge: %ld of %ld tasks, %zu numeric fields: %s/merged.json, %s/merged.csv\n", done, n, m.f.n,
         sw->dir, sw->dir);
  if (done < n)
    fprintf(stderr, "icl sweep merge: %ld tasks missing or failed: icl sweep resume %s\n", n - done, sw->dir);
  rc = done < n || figs_bad ? 1 : 0;
out:
  for (long t = 0; m.summary && t < n; t++) cJSON_Delete(m.summary[t]);
  for (long t = 0; lv && t < n; t++) free(lv[t].idx), free(lv[t].val);
  for (size_t i = 0; i < m.f.n; i++) free(m.f.names[i]);
  free(m.f.names), free(m.f.hash), free(m.vals), free(m.summary), free(m.states), free(lv);
  return rc;
}
