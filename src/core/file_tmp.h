/* Temporary files for atomic saves (write, then rename over the target). */
#ifndef ICL_FILE_TMP_H
#define ICL_FILE_TMP_H

#include <stddef.h>

#include "icl/icl.h"

/* Creates "<path>.tmp.<pid>" for writing (0644, O_EXCL|O_NOFOLLOW: a file or symbolic link already at that name is
 * removed, never written through) and returns its descriptor, its name in tmp[cap]; -1 with err set.
 * First removes the "<path>.tmp.<pid>" files of processes that no longer exist (a writer killed mid-save), so that
 * orphans of a target never pile up. */
int icl_tmp_create(const char *path, char *tmp, size_t cap, icl_error *err);

/* mkdir -p: creates dir and the directories above it; an error names the one that could not be made. */
int icl_make_dirs(const char *dir, icl_error *err);

#endif
