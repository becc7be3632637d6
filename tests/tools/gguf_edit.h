/* Test helper: copies a GGUF file with edits (a key replaced or dropped, an array element changed, a tensor
 * duplicated under a new name), to build the malformed models the hostile-input tests need. */
#ifndef ICL_TEST_GGUF_EDIT_H
#define ICL_TEST_GGUF_EDIT_H

#include <stdint.h>

#include "icl/gguf.h"

typedef struct t_edit {
  const char *key;  /* the key to change (or, with tensor_copy, the new tensor's name) */
  int type;         /* ICL_GGUF_U32, _I32, _F32, _STRING: the new value's type; -1: drop the key */
  int64_t index;    /* >= 0: change element index of the (integer) array key instead */
  int64_t ival;
  double fval;
  const char *sval;
  const char *tensor_copy; /* add tensor `key` with the data and shape of this tensor */
  int nan;                 /* 1: key names an F32 tensor whose element 0 becomes NaN (no key is changed) */
} t_edit;

/* Writes src with the edits applied to dst. */
int t_gguf_edit(const char *src, const char *dst, const t_edit *edits, int n, icl_error *err);

#endif
