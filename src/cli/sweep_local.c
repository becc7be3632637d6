/* icl sweep --run local -j N: the tasks not yet done, N at a time on this machine, each through `icl sweep task`
 * with ICL_THREADS set to this machine's threads divided among the N. Progress on stderr; Ctrl-C (SIGINT or SIGTERM)
 * stops the running tasks and leaves the rest for `icl sweep resume`. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_common.h"
#include "sweep.h"

static volatile sig_atomic_t g_stop;

static void on_stop(int sig) { g_stop = sig; }

/* The threads to share: ICL_THREADS when set, else the CPUs this process may use. */
static long total_threads(void) {
  const char *env = getenv("ICL_THREADS");
  long n = env ? strtol(env, NULL, 10) : 0;
  if (n >= 1) return n;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? n : 1;
}

typedef struct slot {
  pid_t pid;
  long task;
  double t0;
} slot;

static pid_t start_task(const sweep *sw, long t, char **env) {
  char id[32];
  snprintf(id, sizeof id, "%ld", t);
  char *argv[] = {sw->icl, "sweep", "task", sw->dir, id, NULL};
  return sweep_spawn(argv, NULL, env);
}

/* Waits for one runner; its slot index, -1 when interrupted by a signal, -2 when no child is left. */
static int reap(slot *slots, long jobs, int *rc) {
  int st;
  pid_t pid = waitpid(-1, &st, 0);
  if (pid < 0) return errno == ECHILD ? -2 : -1;
  for (long i = 0; i < jobs; i++)
    if (slots[i].pid == pid) {
      *rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return (int)i;
    }
  return -1;
}

static void stop_all(slot *slots, long jobs, int sig) {
  for (long i = 0; i < jobs; i++)
    if (slots[i].pid > 0) kill(slots[i].pid, sig);
  for (long i = 0; i < jobs; i++)
    if (slots[i].pid > 0) sweep_wait(slots[i].pid), slots[i].pid = 0;
}

int sweep_run_local(const sweep *sw, long jobs) {
  long *todo = malloc((size_t)sw->n_tasks * sizeof *todo), n_todo = 0, done = 0, failed = 0;
  slot *slots = calloc((size_t)jobs, sizeof *slots);
  if (!todo || !slots) return free(todo), free(slots), 1;
  for (long t = 0; t < sw->n_tasks; t++) {
    task_state s = sweep_task_state(sw, t);
    if (s == TASK_DONE) done++;
    else if (s == TASK_RUNNING) fprintf(stderr, "icl sweep: task %ld is running in another process: left to it\n", t);
    else todo[n_todo++] = t;
  }
  long threads = total_threads() / jobs;
  char tv[32];
  snprintf(tv, sizeof tv, "%ld", threads < 1 ? 1 : threads);
  char **env = sweep_env_with("ICL_THREADS", tv);
  if (!env) return free(todo), free(slots), 1;
  fprintf(stderr, "icl sweep: %ld tasks, %ld done before, %ld to run, %ld at a time, ICL_THREADS=%s each\n",
          sw->n_tasks, done, n_todo, jobs, tv);
  struct sigaction sa = {0}, old_int, old_term;
  sa.sa_handler = on_stop; /* no SA_RESTART: waitpid returns on Ctrl-C */
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  long next = 0, running = 0;
  while ((next < n_todo || running > 0) && !g_stop) {
    for (long i = 0; i < jobs && next < n_todo && !g_stop; i++) {
      if (slots[i].pid > 0) continue;
      slots[i] = (slot){start_task(sw, todo[next], env), todo[next], cli_now()};
      if (slots[i].pid < 0) {
        slots[i].pid = 0;
        failed++;
      } else {
        running++;
      }
      next++;
    }
    int rc;
    int i = running ? reap(slots, jobs, &rc) : -1;
    if (i == -2) { /* cannot happen while slots hold runners; never spin on it */
      fprintf(stderr, "icl sweep: lost track of %ld running tasks\n", running);
      failed += running, running = 0;
      memset(slots, 0, (size_t)jobs * sizeof *slots);
    }
    if (i < 0) continue;
    char flags[512], name[32];
    sweep_task_flags(sw, slots[i].task, flags, sizeof flags);
    sweep_task_name(sw, slots[i].task, name, sizeof name);
    if (rc == 0) done++;
    else failed++;
    fprintf(stderr, "icl sweep: [%ld/%ld] task %s (%s) %s in %.0f s%s%s%s\n", done + failed, sw->n_tasks, name, flags,
            rc == 0 ? "done" : "FAILED", cli_now() - slots[i].t0, rc ? ": see " : "", rc ? sw->dir : "",
            rc ? "/logs/" : "");
    if (rc) fprintf(stderr, "            (log: logs/%s.log)\n", name);
    slots[i].pid = 0;
    running--;
  }
  int stopped = g_stop != 0;
  if (stopped) {
    fprintf(stderr, "icl sweep: interrupted: stopping %ld running tasks\n", running);
    stop_all(slots, jobs, SIGTERM);
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  size_t last = 0;
  while (env[last + 1]) last++;
  free(env[last]); /* the ICL_THREADS entry: the only string sweep_env_with made */
  free(env);
  free(todo);
  free(slots);
  long left = sw->n_tasks - done;
  if (stopped) {
    fprintf(stderr, "icl sweep: stopped with %ld of %ld tasks done; continue with: icl sweep resume %s\n", done,
            sw->n_tasks, sw->dir);
    return 130;
  }
  if (left)
    fprintf(stderr, "icl sweep: %ld of %ld tasks done, %ld failed: icl sweep status %s lists them\n", done,
            sw->n_tasks, left, sw->dir);
  else
    fprintf(stderr, "icl sweep: all %ld tasks done; next: icl sweep merge %s\n", sw->n_tasks, sw->dir);
  return left ? 1 : 0;
}
