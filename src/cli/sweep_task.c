/* icl sweep task DIR ID: one task, run the same way by both executors. The experiment writes into tasks/NNNN.tmp,
 * renamed over the empty tasks/NNNN once its summary.json is there, so a folder with a summary is always complete.
 * logs/NNNN.lock is held (flock) while the task runs: a second runner of the same task refuses to start, and
 * `icl sweep status` tells running from interrupted by it. logs/NNNN.state says running, done or failed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_common.h"
#include "file_tmp.h"
#include "file_tree.h"
#include "sweep.h"

static volatile sig_atomic_t g_child, g_signal;

/* Passes SIGINT / SIGTERM on to the experiment, whose exit then ends the task as failed. */
static void forward(int sig) {
  g_signal = sig;
  if (g_child > 0) kill((pid_t)g_child, sig);
}

static int file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void write_state(const sweep *sw, const char *name, const char *text) {
  char path[4096];
  if (!sweep_path(sw, path, sizeof path, "logs", name, ".state")) sweep_write_file(path, text, strlen(text));
}

task_state sweep_task_state(const sweep *sw, long t) {
  char name[32], path[4096], state[64] = "";
  sweep_task_name(sw, t, name, sizeof name);
  if (!sweep_path(sw, path, sizeof path, "tasks", name, "/summary.json") && file_exists(path)) return TASK_DONE;
  if (!sweep_path(sw, path, sizeof path, "logs", name, ".lock")) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      int busy = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
      close(fd);
      if (busy) return TASK_RUNNING;
    }
  }
  if (sweep_path(sw, path, sizeof path, "logs", name, ".state")) return TASK_MISSING;
  FILE *f = fopen(path, "r");
  if (!f) return TASK_MISSING;
  size_t n = fread(state, 1, sizeof state - 1, f);
  state[n] = 0;
  fclose(f);
  /* "running" with nobody holding the lock: the runner was killed (a node lost, SIGKILL): as failed */
  return !strncmp(state, "failed", 6) || !strncmp(state, "running", 7) ? TASK_FAILED : TASK_MISSING;
}

void sweep_task_log_tail(const sweep *sw, long t, int n, char *buf, size_t cap) {
  char name[32], path[4096];
  buf[0] = 0;
  sweep_task_name(sw, t, name, sizeof name);
  if (sweep_path(sw, path, sizeof path, "logs", name, ".log")) return;
  FILE *f = fopen(path, "r");
  if (!f) return;
  static char ring[16][512];
  int k = 0, total = 0;
  if (n > 16) n = 16;
  while (fgets(ring[k], sizeof ring[k], f)) {
    k = (k + 1) % n;
    total++;
  }
  fclose(f);
  size_t off = 0;
  for (int i = total < n ? 0 : k, c = 0; c < (total < n ? total : n); c++, i = (i + 1) % n) {
    int w = snprintf(buf + off, cap - off, "      %s", ring[i]);
    if (w < 0 || (size_t)w >= cap - off) break;
    off += (size_t)w;
  }
}

/* Holds logs/NAME.lock for the rest of this process and, inherited (no O_CLOEXEC), of the experiment it starts: a
 * runner killed while its experiment goes on still shows the task as running. -1 when another runner holds it. */
static int lock_task(const sweep *sw, const char *name) {
  char path[4096];
  if (sweep_path(sw, path, sizeof path, "logs", name, ".lock")) return -1;
  int fd = open(path, O_RDWR | O_CREAT, 0644);
  if (fd < 0) {
    fprintf(stderr, "icl sweep: %s: %s\n", path, strerror(errno));
    return -1;
  }
  int locked = 0; /* a status or merge holds it shared for an instant: a second of retries tells those from a runner */
  for (int i = 0; i < 20 && !(locked = flock(fd, LOCK_EX | LOCK_NB) == 0); i++) usleep(50000);
  if (!locked) {
    fprintf(stderr, "icl sweep: task %s is already running in another process (%s is locked)\n", name, path);
    close(fd);
    return -1;
  }
  return 0;
}

/* Runs the experiment into tmp with its output appended to log: its exit status (128 + signal). */
static int run_experiment(const sweep *sw, long t, const char *tmp, const char *log) {
  char **argv = sweep_task_argv(sw, t, tmp, 0);
  if (!argv) return 1;
  FILE *f = fopen(log, "a");
  if (f) {
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    const char *threads = getenv("ICL_THREADS");
    fprintf(f, "== icl sweep task on %s, pid %ld, ICL_THREADS=%s:", host, (long)getpid(),
            threads ? threads : "(unset)");
    for (size_t i = 1; argv[i]; i++) fprintf(f, " %s", argv[i]);
    fprintf(f, "\n");
    fclose(f);
  }
  struct sigaction sa = {0};
  sa.sa_handler = forward;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  pid_t pid = sweep_spawn(argv, log, NULL);
  sweep_free_argv(argv);
  if (pid < 0) return 127;
  g_child = pid;
  if (g_signal) kill(pid, g_signal);
  int rc = sweep_wait(pid);
  g_child = 0;
  return rc;
}

/* Moves the finished tmp folder over the (empty) task folder. */
static int put_in_place(const char *tmp, const char *final) {
  if (rename(tmp, final) == 0) return 0;
  fprintf(stderr, "icl sweep: cannot rename %s to %s: %s%s\n", tmp, final, strerror(errno),
          errno == ENOTEMPTY || errno == EEXIST ? " (the task folder is not empty: remove what is in it)" : "");
  return -1;
}

static int run_task(const sweep *sw, long t) {
  char name[32], final[4096], tmp[4096], log[4096], summary[4200], line[256];
  sweep_task_name(sw, t, name, sizeof name);
  if (sweep_path(sw, final, sizeof final, "tasks", name, NULL) ||
      sweep_path(sw, tmp, sizeof tmp, "tasks", name, ".tmp") ||
      sweep_path(sw, log, sizeof log, "logs", name, ".log"))
    return 1;
  if (lock_task(sw, name)) return 1;
  snprintf(summary, sizeof summary, "%s/summary.json", final);
  if (file_exists(summary)) { /* done by an earlier run: never twice */
    snprintf(line, sizeof line, "%s skip", name);
    sweep_log_run(sw, line);
    return 0;
  }
  char host[200] = "?", state[300];
  gethostname(host, sizeof host - 1);
  snprintf(state, sizeof state, "running %s %ld\n", host, (long)getpid());
  write_state(sw, name, state);
  icl_error err = {0};
  if (icl_remove_tree(tmp, NULL, &err) || icl_make_dirs(final, &err) || mkdir(tmp, 0755) != 0) {
    fprintf(stderr, "icl sweep: task %s: %s\n", name, err.msg[0] ? err.msg : strerror(errno));
    write_state(sw, name, "failed setup\n");
    return 1;
  }
  int rc = run_experiment(sw, t, tmp, log);
  snprintf(summary, sizeof summary, "%s/summary.json", tmp);
  if (rc == 0 && !file_exists(summary)) {
    FILE *f = fopen(log, "a");
    if (f) fprintf(f, "icl sweep: the experiment exited 0 but wrote no %s\n", summary), fclose(f);
    rc = 1;
  }
  if (rc == 0 && put_in_place(tmp, final) == 0) {
    write_state(sw, name, "done\n");
    snprintf(line, sizeof line, "%s done %s", name, host);
    sweep_log_run(sw, line);
    return 0;
  }
  snprintf(state, sizeof state, "failed %d\n", rc ? rc : 1);
  write_state(sw, name, state);
  snprintf(line, sizeof line, "%s failed %d %s", name, rc ? rc : 1, host);
  sweep_log_run(sw, line);
  return rc ? rc : 1;
}

int sweep_task_main(int argc, char **argv) {
  long t;
  if (argc != 3) {
    fprintf(stderr, "usage: icl sweep task DIR ID   (what the executors run for one task)\n");
    return 2;
  }
  sweep sw;
  if (sweep_load(argv[1], &sw)) return 2;
  if (cli_int("sweep task", "ID", argv[2], 0, sw.n_tasks - 1, &t)) {
    sweep_free(&sw);
    return 2;
  }
  if (chdir(sw.cwd) != 0) {
    fprintf(stderr, "icl sweep: the sweep's working folder %s: %s\n", sw.cwd, strerror(errno));
    sweep_free(&sw);
    return 1;
  }
  int rc = run_task(&sw, t);
  sweep_free(&sw);
  return rc;
}
