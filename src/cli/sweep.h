/* icl sweep (docs/sweeps.md): the sweep folder, its tasks, the local and Slurm executors and the merge.
 * A sweep folder holds sweep.json (what to run), tasks.tsv (one row of flags per task), tasks/NNNN/ (a task's output,
 * renamed into place from tasks/NNNN.tmp when its summary.json is complete), logs/NNNN.{log,state,lock}, runs.log (one
 * line per task run: done, failed, skip), sweep.sbatch and merge.sbatch, run.conf (the executor and its options). */
#ifndef ICL_CLI_SWEEP_H
#define ICL_CLI_SWEEP_H

#include <stddef.h>
#include <sys/types.h>

typedef struct sweep_axis {
  char *name;    /* the flag without its dashes, as given: "graph", "seed" */
  char **values; /* as given on the command line */
  int n;
} sweep_axis;

typedef struct sweep {
  char *dir;        /* absolute */
  char *cwd;        /* absolute: tasks run there (the experiment and its models are relative to it) */
  char *icl;        /* absolute path of the icl binary */
  char *experiment; /* as given, relative to cwd or absolute */
  char **fixed;     /* the flags after -- */
  int n_fixed;
  sweep_axis *axes; /* the grid in the order given, then "seed" when --seeds was given: the last axis varies fastest */
  int n_axes;
  int seed_axis; /* index of the seed axis, -1 without --seeds */
  long n_tasks;
} sweep;

/* What a task is doing, as the files (and Slurm's queue) tell. */
typedef enum { TASK_MISSING, TASK_DONE, TASK_RUNNING, TASK_FAILED, TASK_QUEUED } task_state;

/* The executor and its options (run.conf). */
typedef struct sweep_run {
  char kind[16]; /* "local" or "slurm" */
  long jobs;     /* local: tasks at a time */
  char partition[128], gres[128];
  long cpus_per_task, max_parallel; /* 0: not given */
} sweep_run;

/* sweep_spec.c */
void sweep_free(sweep *sw);
/* The value of axis a in task t (mixed radix, last axis fastest). */
const char *sweep_value(const sweep *sw, long t, int a);
/* The task's folder name: "0003" (4 digits, more when the sweep has more tasks). */
void sweep_task_name(const sweep *sw, long t, char *buf, size_t cap);
/* path = dir/sub/name+suffix in buf; 0, or -1 when it does not fit. */
int sweep_path(const sweep *sw, char *buf, size_t cap, const char *sub, const char *name, const char *suffix);
/* The argv of one task's experiment run (NULL-terminated, malloc'd; free with sweep_free_argv). */
char **sweep_task_argv(const sweep *sw, long t, const char *out, int check_only);
void sweep_free_argv(char **argv);
/* "--graph grid --seed 1": the task's grid flags, for messages. */
void sweep_task_flags(const sweep *sw, long t, char *buf, size_t cap);
/* Writes sweep.json and tasks.tsv (atomically); an error message on stderr, -1. */
int sweep_save(const sweep *sw);
/* The text of sweep.json for sw (malloc'd). */
char *sweep_json_text(const sweep *sw);
/* Loads DIR/sweep.json into sw; -1 with a message on stderr. */
int sweep_load(const char *dir, sweep *sw);
/* run.conf */
int sweep_run_save(const sweep *sw, const sweep_run *run);
int sweep_run_load(const sweep *sw, sweep_run *run);
/* Writes text to path through a temporary file renamed over it; -1 with a message. */
int sweep_write_file(const char *path, const char *text, size_t len);
/* Appends one line to DIR/runs.log (one write: lines of concurrent tasks never interleave). */
void sweep_log_run(const sweep *sw, const char *line);
/* Takes DIR/.lock (flock, held until exit): -1 with "in use" on stderr when another icl sweep holds it. */
int sweep_lock(const char *dir);

/* sweep_proc.c: processes from argument vectors, never through a shell. */
/* Starts argv[0] (a path, or a name searched in PATH) with stdout and stderr appended to log (NULL: inherited),
 * stdin from /dev/null and env (NULL: this process's); -1 with a message on stderr. */
pid_t sweep_spawn(char *const argv[], const char *log, char *const env[]);
/* Waits for pid: its exit status, or 128 + the signal that ended it. */
int sweep_wait(pid_t pid);
/* Runs argv and collects stdout and stderr into out (NUL-terminated, truncated to cap); the exit status as sweep_wait,
 * or -1 when it could not start (127 in errno's place: the program is not there). */
int sweep_capture(char *const argv[], char *out, size_t cap);
/* The environment with NAME=VALUE set (malloc'd array of pointers into environ and one new string). */
char **sweep_env_with(const char *name, const char *value);
/* 1 when name is an executable file in PATH. */
int sweep_in_path(const char *name);

/* sweep_task.c */
/* icl sweep task DIR ID: runs one task (the runner both executors start). */
int sweep_task_main(int argc, char **argv);
/* The state of task t from its files. */
task_state sweep_task_state(const sweep *sw, long t);
/* The last n lines of the task's log into buf. */
void sweep_task_log_tail(const sweep *sw, long t, int n, char *buf, size_t cap);

/* sweep_local.c: runs the tasks not done, jobs at a time; 0 when all are done, 1 otherwise, 130 on Ctrl-C. */
int sweep_run_local(const sweep *sw, long jobs);

/* sweep_slurm.c */
/* The sbatch scripts (sweep.sbatch, merge.sbatch) for run's options; -1 with a message. */
int sweep_slurm_scripts(const sweep *sw, const sweep_run *run);
/* Submits the tasks of which[] (n of them) as job arrays (split at MaxArraySize) and a merge job after them. */
int sweep_slurm_submit(const sweep *sw, const sweep_run *run, const long *which, long n);
/* Marks in states[] the tasks Slurm still holds (pending or running) as TASK_QUEUED or TASK_RUNNING; 0, or -1 when
 * squeue could not be asked (a warning on stderr). */
int sweep_slurm_queued(const sweep *sw, task_state *states);

/* A curve figure of the merge: a numeric array field of the summaries; empty strings take defaults. Declared by an
 * experiment in its summary ("sweep_figures": ["field", {"field":, "title":, "xlabel":, "ylabel":}, ...]) or given
 * with icl sweep merge --figure FIELD. */
typedef struct sweep_figure_spec {
  char field[128], title[256], xlabel[256], ylabel[256];
} sweep_figure_spec;

/* sweep_merge.c: icl sweep merge DIR: merged.json, merged.csv and the figures of figs[] and of the summaries'
 * declarations; 0, or 1 when a task is missing or failed or a figure could not be drawn. */
int sweep_merge(const sweep *sw, const sweep_figure_spec *figs, int n_figs);

/* sweep_figure.c: the declarations of a summary's "sweep_figures" (a cJSON *, NULL when absent) into out[cap]: how
 * many, or -1 with a message when one is malformed. */
int sweep_figure_specs(const void *decl, sweep_figure_spec *out, int cap);
/* --figure FIELD into out; -1 with a message when FIELD is not a field name. */
int sweep_figure_arg(const char *field, sweep_figure_spec *out);
/* figures/FIELD.{png,svg}: per condition (first_task[c] names its flags) the curve mean[c][i] with a
 * band of ± se[c][i], i < n_points; -1 with a message. */
int sweep_figure(const sweep *sw, const sweep_figure_spec *spec, long n_cond, const long *first_task, long n_points,
                 const double *mean, const double *se);

#endif
