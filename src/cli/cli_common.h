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

/* 1 if stderr is a terminal (progress display). */
int cli_progress_enabled(void);

#endif
