/* icl sweep: one experiment over a grid of flags and seeds, run here (--run local -j N) or as Slurm job arrays
 * (--run slurm), then merged with error bars (docs/sweeps.md). Everything is checked before anything runs: the
 * experiment exists, --out is a folder (new, empty or this same sweep's), and the experiment accepts every task's
 * flags (icl script EXP FLAGS --check-args: it parses and checks them and stops before any work). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_common.h"
#include "file_tmp.h"
#include "file_tree.h"
#include "sweep.h"

static const char USAGE[] =
    "usage: icl sweep EXPERIMENT.lua [--grid NAME=V1,V2,...]... [--seeds N|A..B] [--out DIR]\n"
    "                 [--run local [-j N] | --run slurm [--partition P] [--cpus-per-task C] [--max-parallel M]\n"
    "                 [--gres gpu:1]] [-- FIXED FLAGS...]\n"
    "       icl sweep status DIR      done, running, queued, failed (with its log's last lines), missing\n"
    "       icl sweep resume DIR [-j N] [--run local|slurm]   runs exactly the failed and missing tasks\n"
    "       icl sweep merge DIR [--figure FIELD]...   merged.json and merged.csv: per condition mean, standard\n"
    "                                 error, count; figures/FIELD.{png,svg}: a curve field, mean ± SE per condition\n"
    "Tasks: every combination of the grid values times the seeds (--seeds 3: 1, 2, 3; --seeds 5..8), the last\n"
    "varying fastest; each runs icl script EXPERIMENT FIXED --NAME V ... --seed S --out DIR/tasks/NNNN.\n"
    "Without --run the folder is written (tasks.tsv, sweep.sbatch) and nothing runs.\n";

typedef struct opts {
  const char *experiment, *out, *seeds;
  const char **grid;
  int n_grid;
  char **fixed;
  int n_fixed;
  sweep_run run;
  int run_given;
} opts;

/* A refusal before anything runs: "icl sweep: MESSAGE", exit status 2. */
static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "icl sweep: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, " (icl sweep --help)\n");
  return 2;
}

static int valid_name(const char *s, size_t n) {
  if (!n) return 0;
  for (size_t i = 0; i < n; i++)
    if (!(((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
      return 0;
  return 1;
}

/* The executor options shared by a new sweep and resume; 1 when argv[*i] was one (consumed), 0 when not, -1 bad. */
static int run_option(int argc, char **argv, int *i, sweep_run *run, int *run_given) {
  const char *a = argv[*i];
  int has = *i + 1 < argc;
  if (!strcmp(a, "--run") || !strcmp(a, "-j") || !strcmp(a, "--partition") || !strcmp(a, "--cpus-per-task") ||
      !strcmp(a, "--max-parallel") || !strcmp(a, "--gres")) {
    if (!has) return usage_error("%s needs a value", a), -1;
  } else {
    return 0;
  }
  const char *v = argv[++*i];
  if (!strcmp(a, "--run")) {
    if (strcmp(v, "local") && strcmp(v, "slurm")) return usage_error("--run %s: expected local or slurm", v), -1;
    snprintf(run->kind, sizeof run->kind, "%s", v);
    *run_given = 1;
  } else if (!strcmp(a, "-j")) {
    if (cli_int("sweep", "-j", v, 1, 4096, &run->jobs)) return -1;
  } else if (!strcmp(a, "--cpus-per-task")) {
    if (cli_int("sweep", "--cpus-per-task", v, 1, 65536, &run->cpus_per_task)) return -1;
  } else if (!strcmp(a, "--max-parallel")) {
    if (cli_int("sweep", "--max-parallel", v, 1, 1000000, &run->max_parallel)) return -1;
  } else {
    char *dst = !strcmp(a, "--partition") ? run->partition : run->gres;
    if (!*v || strlen(v) >= sizeof run->partition)
      return usage_error("%s: expected a value of 1..127 characters", a), -1;
    snprintf(dst, sizeof run->partition, "%s", v);
  }
  return 1;
}

static int parse(int argc, char **argv, opts *o) {
  o->grid = calloc((size_t)argc, sizeof *o->grid);
  if (!o->grid) return 1;
  strcpy(o->run.kind, "local");
  o->run.jobs = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int r = run_option(argc, argv, &i, &o->run, &o->run_given);
    if (r < 0) return 2;
    if (r) continue;
    if (!strcmp(a, "--")) {
      o->fixed = argv + i + 1;
      o->n_fixed = argc - i - 1;
      break;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return fputs(USAGE, stdout), -1;
    if (!strcmp(a, "--grid") || !strcmp(a, "--seeds") || !strcmp(a, "--out")) {
      if (i + 1 >= argc) return usage_error("%s needs a value", a);
      const char *v = argv[++i];
      if (!strcmp(a, "--grid")) o->grid[o->n_grid++] = v;
      else if (!strcmp(a, "--seeds")) o->seeds = v;
      else o->out = v;
    } else if (a[0] == '-' && a[1]) {
      return usage_error("unknown option %s (the experiment's own flags go after --)", a);
    } else if (o->experiment) {
      return usage_error("unexpected argument '%s' (one experiment; its flags go after --)", a);
    } else {
      o->experiment = a;
    }
  }
  if (!o->experiment) return usage_error("%s", "name an experiment script");
  return 0;
}

/* Splits "NAME=V1,V2" into an axis; an error names the --grid argument. */
static int grid_axis(const char *g, sweep_axis *ax) {
  const char *eq = strchr(g, '=');
  if (!eq || !valid_name(g, (size_t)(eq - g)))
    return usage_error("--grid %s: expected NAME=V1,V2,... with NAME of letters, digits, _ and -", g);
  ax->name = strndup(g, (size_t)(eq - g));
  ax->values = calloc(strlen(eq) + 1, sizeof *ax->values);
  if (!ax->name || !ax->values) return 1;
  for (const char *p = eq + 1;;) {
    size_t n = strcspn(p, ",");
    if (!n || memchr(p, '\t', n) || memchr(p, '\n', n))
      return usage_error("--grid %s: empty value, or a tab or newline in one", g);
    if (!(ax->values[ax->n++] = strndup(p, n))) return 1;
    for (int k = 0; k < ax->n - 1; k++)
      if (!strcmp(ax->values[k], ax->values[ax->n - 1])) return usage_error("--grid %s: a value given twice", g);
    if (!p[n]) break;
    p += n + 1;
  }
  return 0;
}

/* --seeds N (1..N) or A..B (inclusive), within the experiments' 0..2^31-1. */
static int seed_axis(const char *s, sweep_axis *ax) {
  long a = 1, b;
  char *end;
  const char *dots = strstr(s, "..");
  errno = 0;
  if (dots) {
    a = strtol(s, &end, 10);
    if (end != dots) a = -1;
    b = strtol(dots + 2, &end, 10);
  } else {
    b = strtol(s, &end, 10);
  }
  if (errno || *end || !*s || a < 0 || b < a || b > 0x7fffffffL || b - a >= 100000)
    return usage_error("--seeds %s: expected N (seeds 1..N) or A..B, integers in 0..2147483647, at most 100000", s);
  ax->name = strdup("seed");
  ax->values = calloc((size_t)(b - a + 1), sizeof *ax->values);
  if (!ax->name || !ax->values) return 1;
  for (long v = a; v <= b; v++) {
    char buf[24];
    snprintf(buf, sizeof buf, "%ld", v);
    if (!(ax->values[ax->n++] = strdup(buf))) return 1;
  }
  return 0;
}

/* The fixed flags may not set what the sweep sets: --out, a grid name, --seed with --seeds, --check-args. */
static int check_fixed(const sweep *sw) {
  for (int i = 0; i < sw->n_fixed; i++) {
    const char *f = sw->fixed[i];
    if (strncmp(f, "--", 2)) continue;
    if (!strcmp(f, "--out") || !strcmp(f, "--check-args"))
      return usage_error("fixed flag %s: the sweep sets it (--out DIR of icl sweep names the sweep's folder)", f);
    for (int a = 0; a < sw->n_axes; a++) {
      char *p = (char *)f + 2, *q = sw->axes[a].name;
      while (*p && *q && (*p == *q || ((*p == '-' || *p == '_') && (*q == '-' || *q == '_')))) p++, q++;
      if (!*p && !*q) return usage_error("fixed flag %s: the grid (or --seeds) sets it", f);
    }
  }
  return 0;
}

static char *absolute(const char *p) {
  if (p[0] == '/') return strdup(p);
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return NULL;
  char *r = malloc(strlen(cwd) + strlen(p) + 2);
  if (r) sprintf(r, "%s/%s", cwd, p);
  return r;
}

static int build(const opts *o, sweep *sw) {
  struct stat st;
  if (stat(o->experiment, &st) != 0 || !S_ISREG(st.st_mode))
    return usage_error("experiment %s: no such file (an experiment script, e.g. experiments/park_grid.lua)",
                       o->experiment);
  sw->axes = calloc((size_t)o->n_grid + 1, sizeof *sw->axes);
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (!sw->axes || n <= 0) return 1;
  exe[n] = 0;
  sw->seed_axis = -1;
  sw->n_tasks = 1;
  for (int g = 0; g < o->n_grid; g++) {
    int rc = grid_axis(o->grid[g], &sw->axes[sw->n_axes++]);
    if (rc) return rc;
    for (int a = 0; a < sw->n_axes - 1; a++)
      if (!strcmp(sw->axes[a].name, sw->axes[sw->n_axes - 1].name))
        return usage_error("--grid %s: named twice", o->grid[g]);
    if (!strcmp(sw->axes[sw->n_axes - 1].name, "out") || !strcmp(sw->axes[sw->n_axes - 1].name, "seed"))
      return usage_error("--grid %s: out is the sweep's, seeds go in --seeds", o->grid[g]);
  }
  if (o->seeds) {
    int rc = seed_axis(o->seeds, &sw->axes[sw->n_axes]);
    if (rc) return rc;
    sw->seed_axis = sw->n_axes++;
  }
  for (int a = 0; a < sw->n_axes; a++) {
    if (sw->n_tasks * sw->axes[a].n > 10000000) return usage_error("%s", "more than 10000000 tasks");
    sw->n_tasks *= sw->axes[a].n;
  }
  sw->fixed = calloc((size_t)o->n_fixed + 1, sizeof *sw->fixed);
  if (!sw->fixed || !(sw->experiment = strdup(o->experiment)) || !(sw->icl = strdup(exe))) return 1;
  for (int i = 0; i < o->n_fixed; i++)
    if (!(sw->fixed[sw->n_fixed++] = strdup(o->fixed[i]))) return 1;
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd) || !(sw->cwd = strdup(cwd))) return 1;
  char def[4200];
  const char *base = strrchr(o->experiment, '/') ? strrchr(o->experiment, '/') + 1 : o->experiment;
  snprintf(def, sizeof def, "out/sweep-%.*s", (int)strcspn(base, "."), base);
  if (!(sw->dir = absolute(o->out ? o->out : def))) return 1;
  return check_fixed(sw);
}

/* --out: absent (made), an empty folder, or a folder of this same sweep (a rerun); never a file. */
static int check_out_dir(const sweep *sw, const char *shown, int *rerun) {
  struct stat st;
  *rerun = 0;
  if (stat(sw->dir, &st) != 0) return errno == ENOENT ? 0 : usage_error("--out %s: cannot be used", shown);
  if (!S_ISDIR(st.st_mode))
    return usage_error("--out %s: is a file, expected a folder (new, empty, or a sweep's)", shown);
  char path[4200];
  snprintf(path, sizeof path, "%s/sweep.json", sw->dir);
  icl_error err = {0};
  char *old = cli_read_file(path, NULL, &err), *now = sweep_json_text(sw);
  if (old) {
    int same = now && !strcmp(old, now);
    free(old), free(now);
    if (!same)
      return usage_error("--out %s: holds a different sweep (its sweep.json): choose another folder, or remove it",
                         shown);
    *rerun = 1;
    return 0;
  }
  free(now);
  char **names;
  size_t n;
  if (icl_list_dir(sw->dir, &names, &n, &err)) return usage_error("--out %s: cannot be listed", shown);
  icl_free_names(names, n);
  return n ? usage_error("--out %s: a folder that holds other files and no sweep.json: choose a new or empty one",
                         shown)
           : 0;
}

/* Asks the experiment to parse every task's flags (--check-args), before anything is written: --out points into a
 * scratch folder, removed afterwards, so a script that writes before it stops leaves nothing in the sweep. */
static int check_one(const sweep *sw, long t, const char *scratch) {
  static char out[16384];
  char name[32], dir[4200], flags[1024];
  sweep_task_name(sw, t, name, sizeof name);
  snprintf(dir, sizeof dir, "%s/%s", scratch, name);
  char **argv = sweep_task_argv(sw, t, dir, 1);
  if (!argv) return 1;
  int rc = sweep_capture(argv, out, sizeof out);
  sweep_free_argv(argv);
  if (rc == 0 && strstr(out, "check-args: options accepted")) return 0;
  sweep_task_flags(sw, t, flags, sizeof flags);
  char *trace = strstr(out, "\nstack traceback:"); /* the experiment's message is what says what is wrong */
  if (trace) *trace = 0;
  size_t len = strlen(out);
  while (len && out[len - 1] == '\n') out[--len] = 0;
  fprintf(stderr, "icl sweep: task %s (%s): %s refuses its flags (exit %d):\n%s\n", name, flags, sw->experiment, rc,
          out[0] ? out : "(no output)");
  if (rc == 0)
    fprintf(stderr, "icl sweep: (it ran to the end without reaching icl.load, icl.train or a figure: does it parse "
                    "its flags with icl.experiment or icl.args?)\n");
  return 2;
}

static int check_tasks(const sweep *sw) {
  const char *tmp = getenv("TMPDIR");
  char scratch[4096];
  snprintf(scratch, sizeof scratch, "%s/icl-sweep-check.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(scratch)) return fprintf(stderr, "icl sweep: %s: %s\n", scratch, strerror(errno)), 1;
  int rc = 0;
  for (long t = 0; t < sw->n_tasks && !rc; t++) rc = check_one(sw, t, scratch);
  icl_error err = {0};
  if (icl_remove_tree(scratch, NULL, &err)) fprintf(stderr, "icl sweep: %s\n", err.msg);
  return rc;
}

/* tasks/NNNN and logs/: the task folders exist from the start, empty until their task is done. */
static int make_folders(const sweep *sw) {
  icl_error err = {0};
  char path[4200];
  snprintf(path, sizeof path, "%s/logs", sw->dir);
  if (icl_make_dirs(path, &err)) return fprintf(stderr, "icl sweep: %s\n", err.msg), 1;
  for (long t = 0; t < sw->n_tasks; t++) {
    char name[32];
    sweep_task_name(sw, t, name, sizeof name);
    snprintf(path, sizeof path, "%s/tasks/%s", sw->dir, name);
    if (icl_make_dirs(path, &err)) return fprintf(stderr, "icl sweep: %s\n", err.msg), 1;
  }
  return 0;
}

static int execute(const sweep *sw, const sweep_run *run);

static int cmd_new(int argc, char **argv) {
  opts o = {0};
  sweep sw = {0};
  int rc = parse(argc, argv, &o), rerun = 0;
  if (rc) return free(o.grid), rc < 0 ? 0 : rc;
  if (!strcmp(o.run.kind, "slurm") && !sweep_in_path("sbatch"))
    rc = usage_error("--run slurm: %s not found in PATH (install Slurm's client, or use --run local)", "sbatch");
  if (!rc && !(rc = build(&o, &sw)) && !(rc = check_out_dir(&sw, o.out ? o.out : sw.dir, &rerun)) &&
      !(rc = check_tasks(&sw))) {
    icl_error err = {0};
    if (icl_make_dirs(sw.dir, &err)) rc = (fprintf(stderr, "icl sweep: --out: %s\n", err.msg), 2);
    char *real = rc ? NULL : realpath(sw.dir, NULL);
    if (real) free(sw.dir), sw.dir = real;
    if (!rc && sweep_lock(sw.dir)) rc = 1;
    if (!rc && (make_folders(&sw) || (!rerun && sweep_save(&sw)))) rc = 1;
    if (!rc) {
      if (strcmp(o.run.kind, "slurm")) sweep_slurm_scripts(&sw, &o.run); /* for later by hand: best effort */
      printf("icl sweep: %s: %ld tasks (tasks.tsv)%s\n", sw.dir, sw.n_tasks, rerun ? ", the folder's own sweep" : "");
      rc = o.run_given ? execute(&sw, &o.run) : 0;
      if (!o.run_given) printf("run it with: icl sweep resume %s -j N, or --run slurm\n", sw.dir);
    }
  }
  sweep_free(&sw);
  free(o.grid);
  return rc;
}

static int execute(const sweep *sw, const sweep_run *run) {
  if (sweep_run_save(sw, run)) return 1;
  if (!strcmp(run->kind, "local")) return sweep_run_local(sw, run->jobs);
  task_state *st = calloc((size_t)sw->n_tasks, sizeof *st);
  long *which = calloc((size_t)sw->n_tasks, sizeof *which), n = 0;
  if (!st || !which) return free(st), free(which), 1;
  for (long t = 0; t < sw->n_tasks; t++) st[t] = sweep_task_state(sw, t);
  if (sweep_slurm_queued(sw, st)) { /* a rerun or resume never submits a task Slurm still holds */
    fprintf(stderr, "icl sweep: cannot tell which tasks Slurm still holds (squeue failed): nothing submitted\n");
    return free(st), free(which), 1;
  }
  for (long t = 0; t < sw->n_tasks; t++)
    if (st[t] == TASK_FAILED || st[t] == TASK_MISSING) which[n++] = t;
  int rc = n ? sweep_slurm_submit(sw, run, which, n) : 0;
  if (!n) fprintf(stderr, "icl sweep: no failed or missing task: nothing to submit\n");
  else if (!rc) fprintf(stderr, "icl sweep: %ld tasks submitted\n", n);
  free(st), free(which);
  return rc;
}

static int open_dir(int argc, char **argv, const char *what, sweep *sw) {
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: icl sweep %s DIR\n", what);
    return 2;
  }
  return sweep_load(argv[1], sw) ? 2 : 0;
}

/* "  done    0000-0003 0005": the done tasks as runs of consecutive numbers. */
static void print_done(const sweep *sw, const task_state *st) {
  int any = 0;
  for (long t = 0; t < sw->n_tasks;) {
    if (st[t] != TASK_DONE) {
      t++;
      continue;
    }
    long u = t;
    while (u + 1 < sw->n_tasks && st[u + 1] == TASK_DONE) u++;
    char a[32], b[32];
    sweep_task_name(sw, t, a, sizeof a);
    sweep_task_name(sw, u, b, sizeof b);
    printf(any ? " %s%s%s" : "  done    %s%s%s", a, u > t ? "-" : "", u > t ? b : "");
    any = 1;
    t = u + 1;
  }
  if (any) printf("\n");
}

static int cmd_status(int argc, char **argv) {
  sweep sw;
  if (open_dir(argc, argv, "status", &sw)) return 2;
  task_state *st = calloc((size_t)sw.n_tasks, sizeof *st);
  if (!st) return sweep_free(&sw), 1;
  long count[5] = {0};
  for (long t = 0; t < sw.n_tasks; t++) st[t] = sweep_task_state(&sw, t);
  sweep_slurm_queued(&sw, st);
  for (long t = 0; t < sw.n_tasks; t++) count[st[t]]++;
  printf("%s: %ld tasks: %ld done, %ld running, %ld queued, %ld failed, %ld missing\n", sw.dir, sw.n_tasks,
         count[TASK_DONE], count[TASK_RUNNING], count[TASK_QUEUED], count[TASK_FAILED], count[TASK_MISSING]);
  static const char *word[] = {[TASK_MISSING] = "missing", [TASK_DONE] = "done", [TASK_RUNNING] = "running",
                               [TASK_FAILED] = "failed", [TASK_QUEUED] = "queued"};
  print_done(&sw, st);
  static const task_state order[] = {TASK_RUNNING, TASK_QUEUED, TASK_FAILED, TASK_MISSING};
  for (int k = 0; k < 4; k++)
    for (long t = 0; t < sw.n_tasks; t++) {
      if (st[t] != order[k]) continue;
      char name[32], flags[512], tail[8192];
      sweep_task_name(&sw, t, name, sizeof name);
      sweep_task_flags(&sw, t, flags, sizeof flags);
      printf("  %-7s %s  %s\n", word[order[k]], name, flags);
      if (order[k] == TASK_FAILED) {
        sweep_task_log_tail(&sw, t, 5, tail, sizeof tail);
        printf("    last lines of logs/%s.log:\n%s", name, tail[0] ? tail : "      (empty)\n");
      }
    }
  if (count[TASK_FAILED] + count[TASK_MISSING]) printf("rerun the failed and missing: icl sweep resume %s\n", sw.dir);
  free(st);
  int rc = count[TASK_DONE] == sw.n_tasks ? 0 : 1;
  sweep_free(&sw);
  return rc;
}

static int cmd_resume(int argc, char **argv) {
  sweep sw;
  if (open_dir(argc, argv, "resume", &sw)) return 2;
  sweep_run run;
  sweep_run_load(&sw, &run);
  int given = 0;
  for (int i = 2; i < argc; i++) {
    int r = run_option(argc, argv, &i, &run, &given);
    if (r <= 0) {
      if (!r) usage_error("resume: unknown option %s", argv[i]);
      return sweep_free(&sw), 2;
    }
  }
  int rc = sweep_lock(sw.dir) ? 1 : 0;
  if (!rc && chdir(sw.cwd) != 0) rc = (fprintf(stderr, "icl sweep: %s: %s\n", sw.cwd, strerror(errno)), 1);
  if (!rc) rc = make_folders(&sw);
  if (!rc) rc = execute(&sw, &run);
  sweep_free(&sw);
  return rc;
}

static int cmd_merge(int argc, char **argv) {
  sweep_figure_spec figs[32];
  int n_figs = 0;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--figure") || i + 1 >= argc || n_figs == 32) {
      fprintf(stderr, "usage: icl sweep merge DIR [--figure FIELD]...   (at most 32)\n");
      return 2;
    }
    if (sweep_figure_arg(argv[++i], &figs[n_figs++])) return 2;
  }
  sweep sw;
  if (open_dir(argc, argv, "merge", &sw)) return 2;
  int rc = sweep_merge(&sw, figs, n_figs);
  sweep_free(&sw);
  return rc;
}

int icl_cmd_sweep(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "status")) return cmd_status(argc - 1, argv + 1);
  if (argc >= 2 && !strcmp(argv[1], "resume")) return cmd_resume(argc - 1, argv + 1);
  if (argc >= 2 && !strcmp(argv[1], "merge")) return cmd_merge(argc - 1, argv + 1);
  if (argc >= 2 && !strcmp(argv[1], "task")) return sweep_task_main(argc - 1, argv + 1);
  if (argc < 2) return fputs(USAGE, stderr), 2;
  return cmd_new(argc, argv);
}
