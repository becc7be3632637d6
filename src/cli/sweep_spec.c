/* icl sweep: the sweep's description (sweep.json, tasks.tsv, run.conf), task names, flags and paths. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cli_common.h"
#include "file_tmp.h"
#include "sweep.h"

void sweep_free(sweep *sw) {
  free(sw->dir);
  free(sw->cwd);
  free(sw->icl);
  free(sw->experiment);
  for (int i = 0; i < sw->n_fixed; i++) free(sw->fixed[i]);
  free(sw->fixed);
  for (int a = 0; a < sw->n_axes; a++) {
    for (int i = 0; i < sw->axes[a].n; i++) free(sw->axes[a].values[i]);
    free(sw->axes[a].values);
    free(sw->axes[a].name);
  }
  free(sw->axes);
  memset(sw, 0, sizeof *sw);
}

const char *sweep_value(const sweep *sw, long t, int a) {
  long stride = 1;
  for (int b = sw->n_axes - 1; b > a; b--) stride *= sw->axes[b].n;
  return sw->axes[a].values[(t / stride) % sw->axes[a].n];
}

void sweep_task_name(const sweep *sw, long t, char *buf, size_t cap) {
  int width = 4; /* at most 8: n_tasks is bounded by 10^7 */
  for (long n = sw->n_tasks - 1; n >= 10000 && width < 8; n /= 10) width++;
  snprintf(buf, cap, "%0*ld", width & 15, t % 100000000);
}

int sweep_path(const sweep *sw, char *buf, size_t cap, const char *sub, const char *name, const char *suffix) {
  int n = snprintf(buf, cap, "%s%s%s%s%s%s", sw->dir, sub ? "/" : "", sub ? sub : "", name ? "/" : "", name ? name : "",
                   suffix ? suffix : "");
  return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static char *dashed(const char *name) {
  char *f = malloc(strlen(name) + 3);
  if (!f) return NULL;
  f[0] = f[1] = '-';
  strcpy(f + 2, name);
  return f;
}

char **sweep_task_argv(const sweep *sw, long t, const char *out, int check_only) {
  size_t n = 3 + (size_t)sw->n_fixed + 2 * (size_t)sw->n_axes + 3 + 1;
  char **v = calloc(n, sizeof *v);
  if (!v) return NULL;
  size_t k = 0;
  int ok = (v[k++] = strdup(sw->icl)) && (v[k++] = strdup("script")) && (v[k++] = strdup(sw->experiment));
  for (int i = 0; ok && i < sw->n_fixed; i++) ok = (v[k++] = strdup(sw->fixed[i])) != NULL;
  for (int a = 0; ok && a < sw->n_axes; a++)
    ok = (v[k++] = dashed(sw->axes[a].name)) && (v[k++] = strdup(sweep_value(sw, t, a)));
  if (ok) ok = (v[k++] = strdup("--out")) && (v[k++] = strdup(out));
  if (ok && check_only) ok = (v[k++] = strdup("--check-args")) != NULL;
  if (!ok) {
    sweep_free_argv(v);
    return NULL;
  }
  return v;
}

void sweep_free_argv(char **argv) {
  for (size_t i = 0; argv && argv[i]; i++) free(argv[i]);
  free(argv);
}

void sweep_task_flags(const sweep *sw, long t, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = 0;
  for (int a = 0; a < sw->n_axes && k < cap; a++) {
    int n = snprintf(buf + k, cap - k, "%s--%s %s", a ? " " : "", sw->axes[a].name, sweep_value(sw, t, a));
    if (n < 0) break;
    k += (size_t)n;
  }
}

/* A growing string. */
typedef struct sbuf {
  char *s;
  size_t n, cap;
  int bad;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
  if (b->bad) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p) {
      b->bad = 1;
      return;
    }
    b->s = p;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

/* A JSON string literal (quotes and escapes). */
static void sb_json_str(sbuf *b, const char *s) {
  sb_add(b, "\"", 1);
  for (; *s; s++) {
    char esc[8];
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      esc[0] = '\\', esc[1] = (char)c;
      sb_add(b, esc, 2);
    } else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      sb_add(b, esc, 6);
    } else {
      sb_add(b, s, 1);
    }
  }
  sb_add(b, "\"", 1);
}

static void sb_json_list(sbuf *b, char **v, int n) {
  sb_str(b, "[");
  for (int i = 0; i < n; i++) {
    if (i) sb_str(b, ", ");
    sb_json_str(b, v[i]);
  }
  sb_str(b, "]");
}

char *sweep_json_text(const sweep *sw) {
  sbuf b = {0};
  sb_str(&b, "{\n  \"icl_sweep\": 1,\n  \"experiment\": ");
  sb_json_str(&b, sw->experiment);
  sb_str(&b, ",\n  \"cwd\": ");
  sb_json_str(&b, sw->cwd);
  sb_str(&b, ",\n  \"icl\": ");
  sb_json_str(&b, sw->icl);
  sb_str(&b, ",\n  \"fixed\": ");
  sb_json_list(&b, sw->fixed, sw->n_fixed);
  sb_str(&b, ",\n  \"grid\": [");
  for (int a = 0; a < sw->n_axes; a++) {
    sb_str(&b, a ? ",\n    {\"name\": " : "\n    {\"name\": ");
    sb_json_str(&b, sw->axes[a].name);
    sb_str(&b, ", \"values\": ");
    sb_json_list(&b, sw->axes[a].values, sw->axes[a].n);
    sb_str(&b, "}");
  }
  char tail[64];
  snprintf(tail, sizeof tail, "\n  ],\n  \"seed_axis\": %d,\n  \"tasks\": %ld\n}\n", sw->seed_axis, sw->n_tasks);
  sb_str(&b, tail);
  if (b.bad) {
    free(b.s);
    return NULL;
  }
  return b.s;
}

int sweep_write_file(const char *path, const char *text, size_t len) {
  char tmp[4200];
  icl_error err = {0};
  int fd = icl_tmp_create(path, tmp, sizeof tmp, &err);
  if (fd < 0) {
    fprintf(stderr, "icl sweep: %s\n", err.msg);
    return -1;
  }
  size_t off = 0;
  while (off < len) {
    ssize_t w = write(fd, text + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += (size_t)w;
  }
  int ok = off == len && fsync(fd) == 0;
  if (close(fd) != 0) ok = 0;
  if (!ok || rename(tmp, path) != 0) {
    fprintf(stderr, "icl sweep: %s: cannot write (%s)\n", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  return 0;
}

int sweep_save(const sweep *sw) {
  char path[4096];
  char *json = sweep_json_text(sw);
  if (!json || sweep_path(sw, path, sizeof path, NULL, "sweep.json", NULL) ||
      sweep_write_file(path, json, strlen(json))) {
    free(json);
    return -1;
  }
  free(json);
  sbuf b = {0};
  sb_str(&b, "task");
  for (int a = 0; a < sw->n_axes; a++) sb_str(&b, "\t"), sb_str(&b, sw->axes[a].name);
  sb_str(&b, "\tout\n");
  for (long t = 0; t < sw->n_tasks; t++) {
    char name[32];
    sweep_task_name(sw, t, name, sizeof name);
    sb_str(&b, name);
    for (int a = 0; a < sw->n_axes; a++) sb_str(&b, "\t"), sb_str(&b, sweep_value(sw, t, a));
    sb_str(&b, "\ttasks/"), sb_str(&b, name), sb_str(&b, "\n");
  }
  int rc = b.bad || sweep_path(sw, path, sizeof path, NULL, "tasks.tsv", NULL) ? -1 : sweep_write_file(path, b.s, b.n);
  free(b.s);
  return rc;
}

static char *json_string(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

/* A list of strings; -1 when v is not one. */
static int json_strings(const cJSON *v, char ***out, int *n) {
  if (!cJSON_IsArray(v)) return -1;
  int k = cJSON_GetArraySize(v);
  *out = calloc((size_t)k + 1, sizeof **out);
  if (!*out) return -1;
  *n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, v) {
    if (!cJSON_IsString(e) || !((*out)[(*n)++] = strdup(e->valuestring))) return -1;
  }
  return 0;
}

static int load_fields(const cJSON *j, sweep *sw) {
  if (!(sw->experiment = json_string(j, "experiment")) || !(sw->cwd = json_string(j, "cwd")) ||
      !(sw->icl = json_string(j, "icl")))
    return -1;
  if (json_strings(cJSON_GetObjectItemCaseSensitive(j, "fixed"), &sw->fixed, &sw->n_fixed)) return -1;
  const cJSON *grid = cJSON_GetObjectItemCaseSensitive(j, "grid"), *ax;
  const cJSON *seed = cJSON_GetObjectItemCaseSensitive(j, "seed_axis");
  if (!cJSON_IsArray(grid) || !cJSON_IsNumber(seed)) return -1;
  sw->axes = calloc((size_t)cJSON_GetArraySize(grid) + 1, sizeof *sw->axes);
  if (!sw->axes) return -1;
  sw->n_tasks = 1;
  cJSON_ArrayForEach(ax, grid) {
    sweep_axis *a = &sw->axes[sw->n_axes++];
    if (!(a->name = json_string(ax, "name")) ||
        json_strings(cJSON_GetObjectItemCaseSensitive(ax, "values"), &a->values, &a->n) || a->n < 1)
      return -1;
    sw->n_tasks *= a->n;
  }
  sw->seed_axis = (int)seed->valuedouble;
  return sw->seed_axis < -1 || sw->seed_axis >= sw->n_axes ? -1 : 0;
}

int sweep_load(const char *dir, sweep *sw) {
  memset(sw, 0, sizeof *sw);
  char path[4096];
  snprintf(path, sizeof path, "%s/sweep.json", dir);
  icl_error err = {0};
  char *text = cli_read_file(path, NULL, &err);
  if (!text) {
    fprintf(stderr, "icl sweep: %s: not a sweep folder (%s)\n", dir, err.msg);
    return -1;
  }
  cJSON *j = cJSON_Parse(text);
  free(text);
  sw->dir = realpath(dir, NULL);
  int rc = j && sw->dir ? load_fields(j, sw) : -1;
  cJSON_Delete(j);
  if (rc) {
    fprintf(stderr, "icl sweep: %s: not a sweep description written by icl sweep (experiment, cwd, icl, fixed, grid, "
                    "seed_axis)\n", path);
    sweep_free(sw);
  }
  return rc;
}

int sweep_run_save(const sweep *sw, const sweep_run *run) {
  char path[4096], text[1024];
  int n = snprintf(text, sizeof text, "run=%s\njobs=%ld\npartition=%s\ngres=%s\ncpus_per_task=%ld\nmax_parallel=%ld\n",
                   run->kind, run->jobs, run->partition, run->gres, run->cpus_per_task, run->max_parallel);
  if (n < 0 || (size_t)n >= sizeof text || sweep_path(sw, path, sizeof path, NULL, "run.conf", NULL)) return -1;
  return sweep_write_file(path, text, (size_t)n);
}

int sweep_run_load(const sweep *sw, sweep_run *run) {
  char path[4096], line[512];
  memset(run, 0, sizeof *run);
  strcpy(run->kind, "local");
  run->jobs = 1;
  if (sweep_path(sw, path, sizeof path, NULL, "run.conf", NULL)) return -1;
  FILE *f = fopen(path, "r");
  if (!f) return 0; /* never run: the defaults */
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    char *eq = strchr(line, '=');
    if (!eq) continue;
    *eq++ = 0;
    if (!strcmp(line, "run")) snprintf(run->kind, sizeof run->kind, "%s", eq);
    else if (!strcmp(line, "jobs")) run->jobs = strtol(eq, NULL, 10);
    else if (!strcmp(line, "partition")) snprintf(run->partition, sizeof run->partition, "%s", eq);
    else if (!strcmp(line, "gres")) snprintf(run->gres, sizeof run->gres, "%s", eq);
    else if (!strcmp(line, "cpus_per_task")) run->cpus_per_task = strtol(eq, NULL, 10);
    else if (!strcmp(line, "max_parallel")) run->max_parallel = strtol(eq, NULL, 10);
  }
  fclose(f);
  if (run->jobs < 1) run->jobs = 1;
  return 0;
}

void sweep_log_run(const sweep *sw, const char *line) {
  char path[4096], buf[1024];
  if (sweep_path(sw, path, sizeof path, NULL, "runs.log", NULL)) return;
  int n = snprintf(buf, sizeof buf, "%s\n", line);
  if (n < 0 || (size_t)n >= sizeof buf) return;
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, buf, (size_t)n) != n) fprintf(stderr, "icl sweep: %s: cannot append (%s)\n", path, strerror(errno));
  close(fd);
}

int sweep_lock(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/.lock", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "icl sweep: %s: cannot open the lock (%s)\n", path, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = "";
    ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
    pid[n > 0 ? n : 0] = 0;
    pid[strcspn(pid, "\n")] = 0;
    fprintf(stderr, "icl sweep: %s is in use by another icl sweep (pid %s): wait for it to end, or choose another "
                    "--out\n", dir, pid[0] ? pid : "unknown");
    close(fd);
    return -1;
  }
  char pid[32];
  int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) { /* the pid is only for the message */
  }
  return 0; /* the descriptor stays open: the lock lasts until this process ends */
}
