/* icl info --check: every tensor scanned for non-finite values. */
#ifndef ICL_CLI_INFO_CHECK_H
#define ICL_CLI_INFO_CHECK_H

#include "icl/gguf.h"

/* Prints one "check:" line per tensor holding NaN or Inf (or one line saying all are finite); returns ICL_EFORMAT
 * naming the file and the count when any tensor is not finite. */
int cli_info_check(const icl_gguf *g, icl_error *err);

#endif
