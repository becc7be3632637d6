/* Temporary files for atomic saves (see file_tmp.h). */
#include "file_tmp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Removes "<path>.tmp.<pid>" files left by writers of the same target that died (kill -9, power loss): their
 * process no longer exists. Files of live processes, and anything else, are left alone. */
static void remove_stale_tmps(const char *path) {
  const char *slash = strrchr(path, '/');
  char dir[4096];
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
  const char *base = slash ? slash + 1 : path;
  size_t blen = strlen(base);
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    char *end;
    if (strncmp(e->d_name, base, blen) || strncmp(e->d_name + blen, ".tmp.", 5)) continue;
    long pid = strtol(e->d_name + blen + 5, &end, 10);
    if (end == e->d_name + blen + 5 || *end || pid <= 0 || pid == (long)getpid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    char p[8192];
    snprintf(p, sizeof p, "%s%s%s", dir, slash ? "" : "/", e->d_name);
    unlink(p);
  }
  if (d) closedir(d);
}

int icl_tmp_create(const char *path, char *tmp, size_t cap, icl_error *err) {
  if ((size_t)snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid()) >= cap)
    return icl_error_set(err, ICL_EINVAL, "%s: path too long", path), -1;
  remove_stale_tmps(path);
  /* Exclusive and never through a symbolic link: a link planted at the temporary name cannot redirect the write.
   * A name already there is ours (this pid: an earlier save that died half-way) or planted: it is removed, not
   * followed, and the file created afresh; a second clash (someone racing us) is an error. */
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = open(tmp, flags, 0644);
  if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) fd = open(tmp, flags, 0644);
  if (fd < 0) icl_error_set(err, ICL_EIO, "%s: cannot create: %s", tmp, strerror(errno));
  return fd;
}

int icl_make_dirs(const char *dir, icl_error *err) {
  char buf[4096];
  if ((size_t)snprintf(buf, sizeof buf, "%s/", dir) >= sizeof buf)
    return icl_error_set(err, ICL_EINVAL, "%s: path too long", dir);
  for (char *s = buf + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
      return icl_error_set(err, ICL_EIO, "%s: cannot create the directory %s: %s", dir, buf, strerror(errno));
    *s = '/';
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return icl_error_set(err, ICL_EIO, "%s: not a directory", dir);
  return ICL_OK;
}
