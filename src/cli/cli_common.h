/* Helpers shared by the CLI subcommands. */
#ifndef ICL_CLI_COMMON_H
#define ICL_CLI_COMMON_H

#include <stddef.h>

#include "icl/model.h"

/* Seconds from a monotonic clock. */
double cli_now(void);

/* Reads a whole file into a malloc'd NUL-terminated buffer; NULL with err set on failure. */
char *cli_read_file(const char *path, size_t *len, icl_error *err);

/* Parses an integer / float option value; prints "icl CMD: OPT: bad value" and returns nonzero on error. */
int cli_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int cli_float(const char *cmd, const char *opt, const char *s, double *out);

/* cli_float restricted to a finite number in [lo, hi] (NaN, infinities and values outside are refused). */
int cli_float_in(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);

/* Flushes stdout and checks it for errors (a full disk, a closed pipe): prints "icl CMD: cannot write the output"
 * and returns 2 when writing failed; otherwise rc. Every command's exit goes through it. */
int cli_finish_output(const char *cmd, int rc);

/* 1 if stderr is a terminal (progress display). */
int cli_progress_enabled(void);

#endif
