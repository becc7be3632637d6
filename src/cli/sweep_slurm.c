/* icl sweep --run slurm: sweep.sbatch (one task per array element, through `icl sweep task`), merge.sbatch (icl
 * sweep merge after the arrays: afterany), submission with sbatch --parsable (arrays split at MaxArraySize), and
 * the queue as squeue tells it (for status and resume: a queued task is neither missing nor run twice). Job ids go
 * to slurm.jobs ("JOBID OFFSET" a line: array element i is task OFFSET + i). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep.h"

/* Paths go into #SBATCH lines and a bash script: only characters that need no quoting there. */
static int safe_path(const char *what, const char *p) {
  for (const char *c = p; *c; c++)
    if (!(((*c | 32) >= 'a' && (*c | 32) <= 'z') || (*c >= '0' && *c <= '9') || strchr("/._-+,=@%:", *c))) {
      fprintf(stderr, "icl sweep: --run slurm: the %s %s holds '%c': sbatch scripts take paths of letters, digits and "
                      "/._-+,=@%%: only (move or link the folder)\n", what, p, *c);
      return -1;
    }
  return 0;
}


/* A GPU node: the first GPU Slurm gave the job, in the numbering the job sees (CUDA_VISIBLE_DEVICES, ROCm's
 * ROCR_VISIBLE_DEVICES): with ConstrainDevices only the job's own GPUs, numbered from 0, else the node's, both in
 * PCI order, which ICL_DEVICE=gpu:N follows; a GPU-<uuid> entry is passed as it is. SLURM_JOB_GPUS is not used:
 * it holds node-wide numbers even where the job sees only its own GPUs. An ICL_DEVICE already set wins. */
#define GPU_PICK                                                                                                    \
  "# a GPU node: the first GPU Slurm gave this job (docs/sweeps.md), unless ICL_DEVICE is already set\n"            \
  "gpu=${CUDA_VISIBLE_DEVICES:-${ROCR_VISIBLE_DEVICES:-}}\n"                                                         \
  "gpu=${gpu%%,*}\n"                                                                                                 \
  "if [ -n \"$gpu\" ] && [ -z \"${ICL_DEVICE:-}\" ]; then\n"                                                        \
  "  case $gpu in GPU-*) export ICL_DEVICE=$gpu ;; *) export ICL_DEVICE=gpu:$gpu ;; esac\n"                         \
  "fi\n"

static int write_script(const sweep *sw, const char *file, const char *text) {
  char path[4096];
  return sweep_path(sw, path, sizeof path, NULL, file, NULL) ? -1 : sweep_write_file(path, text, strlen(text));
}

int sweep_slurm_scripts(const sweep *sw, const sweep_run *run) {
  if (safe_path("sweep folder", sw->dir) || safe_path("working folder", sw->cwd) || safe_path("icl binary", sw->icl) ||
      safe_path("--partition", run->partition) || safe_path("--gres", run->gres))
    return -1;
  char opts[1024] = "", text[8192];
  size_t k = 0;
  if (run->partition[0]) k += (size_t)snprintf(opts + k, sizeof opts - k, "#SBATCH --partition=%s\n", run->partition);
  if (run->cpus_per_task > 0)
    k += (size_t)snprintf(opts + k, sizeof opts - k, "#SBATCH --cpus-per-task=%ld\n", run->cpus_per_task);
  if (run->gres[0]) k += (size_t)snprintf(opts + k, sizeof opts - k, "#SBATCH --gres=%s\n", run->gres);
  char array[64];
  if (run->max_parallel > 0) snprintf(array, sizeof array, "0-%ld%%%ld", sw->n_tasks - 1, run->max_parallel);
  else snprintf(array, sizeof array, "0-%ld", sw->n_tasks - 1);
  int n = snprintf(text, sizeof text,
                   "#!/bin/bash\n"
                   "# icl sweep: one task of %s per array element (docs/sweeps.md). icl sweep submits it with\n"
                   "# --array (split at MaxArraySize: then $1 is the offset of the first task); by hand:\n"
                   "#   sbatch %s/sweep.sbatch\n"
                   "#SBATCH --job-name=icl-sweep\n#SBATCH --array=%s\n#SBATCH --chdir=%s\n"
                   "#SBATCH --output=%s/logs/slurm-%%A_%%a.out\n%s"
                   "export ICL_THREADS=${SLURM_CPUS_PER_TASK:-${SLURM_CPUS_ON_NODE:-1}}\n"
                   "%s"
                   "exec %s sweep task %s $(( ${1:-0} + SLURM_ARRAY_TASK_ID ))\n",
                   sw->experiment, sw->dir, array, sw->cwd, sw->dir, opts,
                   run->gres[0] ? GPU_PICK : "",
                   sw->icl, sw->dir);
  if (n < 0 || (size_t)n >= sizeof text || write_script(sw, "sweep.sbatch", text)) return -1;
  char part[200] = "";
  if (run->partition[0]) snprintf(part, sizeof part, "#SBATCH --partition=%s\n", run->partition);
  n = snprintf(text, sizeof text,
               "#!/bin/bash\n# icl sweep: merges the tasks' summaries once the arrays are over (afterany).\n"
               "#SBATCH --job-name=icl-sweep-merge\n#SBATCH --chdir=%s\n#SBATCH --output=%s/logs/merge-%%j.out\n%s"
               "exec %s sweep merge %s\n",
               sw->cwd, sw->dir, part, sw->icl, sw->dir);
  return n < 0 || (size_t)n >= sizeof text ? -1 : write_script(sw, "merge.sbatch", text);
}

/* MaxArraySize from scontrol show config (the largest index is one less); 1001 when it cannot be read. */
static long max_array_size(void) {
  static char out[65536];
  char *argv[] = {"scontrol", "show", "config", NULL};
  if (sweep_capture(argv, out, sizeof out) != 0) return 1001;
  const char *p = strstr(out, "MaxArraySize");
  if (!p || !(p = strchr(p, '='))) return 1001;
  long n = strtol(p + 1, NULL, 10);
  return n > 1 ? n : 1001;
}

/* "3,5-7" from sorted indices relative to off; 0, or -1 when it does not fit. */
static int array_spec(const long *which, long n, long off, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = 0;
  for (long i = 0; i < n;) {
    long j = i;
    while (j + 1 < n && which[j + 1] == which[j] + 1) j++;
    int w = j > i ? snprintf(buf + k, cap - k, "%s%ld-%ld", k ? "," : "", which[i] - off, which[j] - off)
                  : snprintf(buf + k, cap - k, "%s%ld", k ? "," : "", which[i] - off);
    if (w < 0 || (size_t)w >= cap - k) return -1;
    k += (size_t)w;
    i = j + 1;
  }
  return 0;
}

/* sbatch --parsable ARGS...: the job id, or -1 with sbatch's own words on stderr. */
static long sbatch(const sweep *sw, char **argv) {
  char out[4096];
  int rc = sweep_capture(argv, out, sizeof out);
  char *end;
  long id = rc == 0 ? strtol(out, &end, 10) : -1;
  if (rc != 0 || id <= 0) {
    fprintf(stderr, "icl sweep: sbatch failed (%s%d): %s%s", rc < 0 ? "could not start, errno " : "exit ", rc,
            out[0] ? out : "no output\n", out[0] && out[strlen(out) - 1] != '\n' ? "\n" : "");
    fprintf(stderr, "icl sweep: is Slurm up? (scontrol ping; sinfo) The sweep folder is kept: icl sweep resume %s "
                    "submits its tasks once Slurm answers\n", sw->dir);
    return -1;
  }
  return id;
}

static void record_job(const sweep *sw, long id, long off) {
  char path[4096];
  if (sweep_path(sw, path, sizeof path, NULL, "slurm.jobs", NULL)) return;
  FILE *f = fopen(path, "a");
  if (f) fprintf(f, "%ld %ld\n", id, off), fclose(f);
}

int sweep_slurm_submit(const sweep *sw, const sweep_run *run, const long *which, long n) {
  if (!sweep_in_path("sbatch")) {
    fprintf(stderr, "icl sweep: --run slurm: sbatch not found in PATH (install Slurm's client, or use --run local)\n");
    return 2;
  }
  if (sweep_slurm_scripts(sw, run)) return 2;
  long max = max_array_size();
  char script[4096], merge[4096], dep[65536] = "--dependency=afterany";
  if (sweep_path(sw, script, sizeof script, NULL, "sweep.sbatch", NULL) ||
      sweep_path(sw, merge, sizeof merge, NULL, "merge.sbatch", NULL))
    return 1;
  for (long i = 0; i < n;) { /* one array per block of MaxArraySize task ids */
    long off = which[i] / max * max, j = i;
    while (j < n && which[j] < off + max) j++;
    char spec[65536], array[65600], offs[32];
    if (array_spec(which + i, j - i, off, spec, sizeof spec)) return 1;
    if (run->max_parallel > 0) snprintf(array, sizeof array, "--array=%s%%%ld", spec, run->max_parallel);
    else snprintf(array, sizeof array, "--array=%s", spec);
    snprintf(offs, sizeof offs, "%ld", off);
    char *argv[] = {"sbatch", "--parsable", array, script, offs, NULL};
    long id = sbatch(sw, argv);
    if (id < 0) return 1;
    record_job(sw, id, off);
    size_t k = strlen(dep);
    snprintf(dep + k, sizeof dep - k, ":%ld", id);
    fprintf(stderr, "icl sweep: submitted job array %ld: %ld tasks (%s)\n", id, j - i, array + 8);
    i = j;
  }
  char *argv[] = {"sbatch", "--parsable", dep, merge, NULL};
  long id = sbatch(sw, argv);
  if (id < 0) return 1;
  fprintf(stderr, "icl sweep: merge job %ld runs after them (afterany); follow with: icl sweep status %s\n", id,
          sw->dir);
  return 0;
}

int sweep_slurm_queued(const sweep *sw, task_state *states) {
  char path[4096], line[128];
  long jobs[1024][2], n = 0;
  if (sweep_path(sw, path, sizeof path, NULL, "slurm.jobs", NULL)) return -1;
  FILE *f = fopen(path, "r");
  if (!f) return 0; /* never submitted */
  while (n < 1024 && fgets(line, sizeof line, f))
    if (sscanf(line, "%ld %ld", &jobs[n][0], &jobs[n][1]) == 2) n++;
  fclose(f);
  static char out[1 << 20];
  char *argv[] = {"squeue", "-h", "-r", "-o", "%F %K %T", NULL};
  if (sweep_capture(argv, out, sizeof out) != 0) {
    fprintf(stderr, "icl sweep: squeue failed, so queued tasks may show as missing: %s", out);
    return -1;
  }
  for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
    long job, idx;
    char st[64];
    if (sscanf(l, "%ld %ld %63s", &job, &idx, st) != 3) continue;
    for (long i = 0; i < n; i++) {
      long t = jobs[i][1] + idx;
      if (jobs[i][0] != job || t < 0 || t >= sw->n_tasks || states[t] == TASK_DONE) continue;
      states[t] = !strcmp(st, "RUNNING") || !strcmp(st, "COMPLETING") ? TASK_RUNNING : TASK_QUEUED;
    }
  }
  return 0;
}
