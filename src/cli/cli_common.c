/* Helpers shared by the CLI subcommands. */
#include "cli_common.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "file_read.h"

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

char *cli_read_file(const char *path, size_t *len, icl_error *err) {
  FILE *f = icl_file_fopen_read(path, err); /* regular files only: a FIFO would block, a directory not read */
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char *nb = realloc(buf, 2 * cap + 1);
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  int bad = ferror(f);
  fclose(f);
  if (!buf || bad) {
    free(buf);
    icl_error_set(err, bad ? ICL_EIO : ICL_ENOMEM, "%s: cannot read: %s", path,
                  bad ? strerror(errno) : "out of memory");
    return NULL;
  }
  buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

int cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = s ? strtol(s, &end, 10) : 0;
  if (!s || errno || *end || v < lo || v > hi) {
    fprintf(stderr, "icl %s: %s: bad value '%s' (expected an integer in %ld..%ld)\n", cmd, opt, s ? s : "", lo, hi);
    return 1;
  }
  *out = v;
  return 0;
}

int cli_float(const char *cmd, const char *opt, const char *s, double *out) {
  char *end;
  errno = 0;
  double v = s ? strtod(s, &end) : 0;
  if (!s || errno || *end) {
    fprintf(stderr, "icl %s: %s: bad value '%s' (expected a number)\n", cmd, opt, s ? s : "");
    return 1;
  }
  *out = v;
  return 0;
}

int cli_float_in(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out) {
  double v;
  if (cli_float(cmd, opt, s, &v)) return 1;
  if (!isfinite(v) || v < lo || v > hi) {
    fprintf(stderr, "icl %s: %s: bad value '%s' (expected a number in [%g, %g])\n", cmd, opt, s, lo, hi);
    return 1;
  }
  *out = v;
  return 0;
}

int cli_finish_output(const char *cmd, int rc) {
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
  fprintf(stderr, "icl %s: cannot write the output: %s\n", cmd, errno ? strerror(errno) : "write error");
  return 2;
}

int cli_progress_enabled(void) { return isatty(2); }
