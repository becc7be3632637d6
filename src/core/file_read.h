/* Opening files for reading: one place that refuses anything but a regular file without blocking on it
 * (a FIFO opened for reading waits for a writer forever; a directory "opens" and then fails to read). */
#ifndef ICL_FILE_READ_H
#define ICL_FILE_READ_H

#include <stdio.h>
#include <sys/stat.h>

#include "icl/icl.h"

/* Opens path read-only (non-blocking, then blocking again) and checks with fstat that it is a regular file;
 * fills *st when st is not NULL. Returns the descriptor, or -1 with err naming the path. */
int icl_file_open_read(const char *path, struct stat *st, icl_error *err);

/* The same as a stdio stream opened "rb"; NULL with err set. */
FILE *icl_file_fopen_read(const char *path, icl_error *err);

#endif
