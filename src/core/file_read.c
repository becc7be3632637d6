/* Opening files for reading, regular files only (see file_read.h). */
#include "file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  return "a special file";
}

int icl_file_open_read(const char *path, struct stat *st, icl_error *err) {
  struct stat s;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return icl_error_set(err, ICL_EIO, "%s: cannot open: %s", path, strerror(errno)), -1;
  if (fstat(fd, &s) != 0) {
    icl_error_set(err, ICL_EIO, "%s: cannot stat: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  if (!S_ISREG(s.st_mode)) {
    icl_error_set(err, ICL_EIO, "%s: not a regular file (%s)", path, kind_of(s.st_mode));
    close(fd);
    return -1;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (st) *st = s;
  return fd;
}

FILE *icl_file_fopen_read(const char *path, icl_error *err) {
  int fd = icl_file_open_read(path, NULL, err);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    icl_error_set(err, ICL_EIO, "%s: cannot open: %s", path, strerror(errno));
    close(fd);
  }
  return f;
}
