/* icl sweep: child processes from argument vectors (posix_spawn), never a shell command line. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sweep.h"

extern char **environ;

int sweep_in_path(const char *name) {
  const char *path = getenv("PATH");
  if (strchr(name, '/')) return access(name, X_OK) == 0;
  if (!path) path = "/usr/bin:/bin";
  while (*path) {
    size_t n = strcspn(path, ":");
    char full[4096];
    if (snprintf(full, sizeof full, "%.*s/%s", (int)n, n ? path : ".", name) < (int)sizeof full) {
      struct stat st;
      if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0) return 1;
    }
    path += n + (path[n] == ':');
  }
  return 0;
}

/* Spawns with the file actions already set up; posix_spawnp searches PATH for a bare name. */
static pid_t spawn_with(char *const argv[], posix_spawn_file_actions_t *fa, char *const env[]) {
  pid_t pid;
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&at, &none);
  sigset_t dfl;
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGINT);
  sigaddset(&dfl, SIGTERM);
  sigaddset(&dfl, SIGPIPE);
  posix_spawnattr_setsigdefault(&at, &dfl);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  int rc = posix_spawnp(&pid, argv[0], fa, &at, argv, env ? env : environ);
  posix_spawnattr_destroy(&at);
  if (rc) {
    errno = rc;
    return -1;
  }
  return pid;
}

pid_t sweep_spawn(char *const argv[], const char *log, char *const env[]) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (log) {
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  }
  pid_t pid = spawn_with(argv, &fa, env);
  posix_spawn_file_actions_destroy(&fa);
  if (pid < 0) fprintf(stderr, "icl sweep: cannot start %s: %s\n", argv[0], strerror(errno));
  return pid;
}

int sweep_wait(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int sweep_capture(char *const argv[], char *out, size_t cap) {
  int p[2];
  out[0] = 0;
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_adddup2(&fa, p[1], 2);
  pid_t pid = spawn_with(argv, &fa, NULL);
  int spawn_errno = errno;
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  if (pid < 0) {
    close(p[0]);
    errno = spawn_errno;
    return -1;
  }
  size_t n = 0;
  char sink[512];
  for (;;) { /* read to the end (the child must never block on a full pipe), keep what fits */
    ssize_t r = n + 1 < cap ? read(p[0], out + n, cap - 1 - n) : read(p[0], sink, sizeof sink);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (n + 1 < cap) n += (size_t)r;
  }
  out[n] = 0;
  close(p[0]);
  return sweep_wait(pid);
}

char **sweep_env_with(const char *name, const char *value) {
  size_t n = 0, len = strlen(name);
  while (environ[n]) n++;
  char **env = calloc(n + 2, sizeof *env);
  char *kv = malloc(len + strlen(value) + 2);
  if (!env || !kv) {
    free(env);
    free(kv);
    return NULL;
  }
  sprintf(kv, "%s=%s", name, value);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], name, len) || environ[i][len] != '=') env[k++] = environ[i];
  env[k++] = kv; /* the one string this owns: the last entry */
  return env;
}
