/* Folders without a shell (see file_tree.h). */
#include "file_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TREE_MAX_DEPTH 256 /* deeper folders are refused, not recursed into (each level holds a descriptor) */

void icl_free_names(char **names, size_t n) {
  for (size_t i = 0; names && i < n; i++) free(names[i]);
  free(names);
}

static int by_bytes(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Reads every name of the open folder d (closed here) into a sorted array; -1 on out of memory. */
static int read_names(DIR *d, char ***names, size_t *n) {
  char **v = NULL;
  size_t k = 0, cap = 0;
  int bad = 0;
  for (struct dirent *e; !bad && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (k == cap) {
      char **g = realloc(v, (cap = cap ? 2 * cap : 16) * sizeof *v);
      if (!g) { bad = 1; break; }
      v = g;
    }
    if (!(v[k] = strdup(e->d_name))) bad = 1; else k++;
  }
  closedir(d);
  if (bad) return icl_free_names(v, k), -1;
  if (k) qsort(v, k, sizeof *v, by_bytes);
  *names = v, *n = k;
  return 0;
}

int icl_list_dir(const char *dir, char ***names, size_t *n, icl_error *err) {
  *names = NULL, *n = 0;
  DIR *d = opendir(dir);
  if (!d) return icl_error_set(err, ICL_EIO, "%s: cannot list the folder: %s", dir, strerror(errno));
  if (read_names(d, names, n)) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory listing the folder", dir);
  return ICL_OK;
}

static int remove_at(int dirfd, const char *name, const char *shown, int depth, icl_error *err);

/* Removes everything inside the folder `name` of dirfd, opened without following a link. */
static int empty_dir(int dirfd, const char *name, const char *shown, int depth, icl_error *err) {
  if (depth >= TREE_MAX_DEPTH)
    return icl_error_set(err, ICL_EIO, "%s: more than %d nested folders, not removed", shown, TREE_MAX_DEPTH);
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    int e = errno;
    if (fd >= 0) close(fd);
    return icl_error_set(err, ICL_EIO, "%s: cannot open the folder: %s", shown, strerror(e));
  }
  int keep = dup(fd); /* read_names closes d (and fd with it); the entries are removed through keep */
  if (keep < 0) {
    int e = errno;
    closedir(d);
    return icl_error_set(err, ICL_EIO, "%s: %s", shown, strerror(e));
  }
  char **names;
  size_t n;
  if (read_names(d, &names, &n)) return close(keep), icl_error_set(err, ICL_ENOMEM, "%s: out of memory", shown);
  int rc = ICL_OK;
  for (size_t i = 0; i < n && !rc; i++) {
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", shown, names[i]);
    rc = remove_at(keep, names[i], sub, depth + 1, err);
  }
  icl_free_names(names, n);
  close(keep);
  return rc;
}

/* Removes the entry `name` of dirfd: a folder after its contents, anything else (links included) by unlink. */
static int remove_at(int dirfd, const char *name, const char *shown, int depth, icl_error *err) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return ICL_OK;
    return icl_error_set(err, ICL_EIO, "%s: %s", shown, strerror(errno));
  }
  int is_dir = S_ISDIR(st.st_mode);
  if (is_dir) {
    int rc = empty_dir(dirfd, name, shown, depth, err);
    if (rc) return rc;
  }
  if (unlinkat(dirfd, name, is_dir ? AT_REMOVEDIR : 0) != 0 && errno != ENOENT)
    return icl_error_set(err, ICL_EIO, "%s: cannot remove: %s", shown, strerror(errno));
  return ICL_OK;
}

int icl_remove_tree(const char *path, int *removed, icl_error *err) {
  char p[4096];
  size_t len = strlen(path);
  if (len >= sizeof p) return icl_error_set(err, ICL_EINVAL, "%.64s...: path too long", path);
  memcpy(p, path, len + 1);
  while (len > 1 && p[len - 1] == '/') p[--len] = '\0'; /* "dir/" would follow a link named dir */
  const char *base = strrchr(p, '/');
  base = base ? base + 1 : p;
  if (!*p || !strcmp(p, "/") || !strcmp(base, ".") || !strcmp(base, ".."))
    return icl_error_set(err, ICL_EINVAL, "'%s': refusing to remove it (empty, the root, . or ..)", path);
  struct stat st;
  if (removed) *removed = lstat(p, &st) == 0;
  return remove_at(AT_FDCWD, p, p, 0, err);
}

int icl_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
