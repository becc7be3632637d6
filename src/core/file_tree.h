/* Folders without a shell: list, remove a tree without following symbolic links, ask what a path is. The file
 * functions scripts use (icl.fs), so that no path is ever pasted into a shell command. */
#ifndef ICL_FILE_TREE_H
#define ICL_FILE_TREE_H

#include <stddef.h>

#include "icl/icl.h"

/* The names in dir (without "." and ".."), sorted bytewise, in a malloc'd array of malloc'd strings (*names,
 * *n; free with icl_free_names); an error names the folder. */
int icl_list_dir(const char *dir, char ***names, size_t *n, icl_error *err);

/* Frees what icl_list_dir returned. */
void icl_free_names(char **names, size_t n);

/* Removes path: a file, a symbolic link (the link, never what it points to) or a folder with everything under it,
 * never descending through a symbolic link; an absent path is not an error (*removed = 0). Refuses "", "/", and
 * paths ending in "." or "..". An error names the entry that could not be removed. */
int icl_remove_tree(const char *path, int *removed, icl_error *err);

/* 1 when path is a directory (a symbolic link to one counts), 0 otherwise (absent included). */
int icl_is_dir(const char *path);

#endif
