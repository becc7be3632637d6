/* icl info --check: scans every tensor of a GGUF file for NaN and Inf values (dequantized as the model would see
 * them), so that a poisoned or corrupted file is found before a run prints garbage. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"
#include "icl/types.h"
#include "info_check.h"
#include "ref.h"
#include "text_safe.h"

#define CHUNK_BLOCKS 4096

typedef struct scan {
  int64_t bad, first; /* non-finite count and the first one's element index (-1: none) */
  float first_value;
} scan;

/* Counts the non-finite elements of tensor t (a float or quantized type). */
static int scan_tensor(const icl_gguf_tensor *t, float *buf, scan *s) {
  int64_t be = icl_type_block_elems(t->type);
  size_t bb = icl_type_block_bytes(t->type);
  *s = (scan){0, -1, 0};
  if (be <= 0 || bb == 0) return 0;
  int64_t blocks = (int64_t)(t->nbytes / bb);
  const unsigned char *p = t->data;
  for (int64_t b = 0; b < blocks; b += CHUNK_BLOCKS) {
    int64_t nb = blocks - b < CHUNK_BLOCKS ? blocks - b : CHUNK_BLOCKS;
    icl_ref_dequant(t->type, p + (size_t)b * bb, buf, nb * be);
    for (int64_t i = 0; i < nb * be; i++) {
      if (isfinite(buf[i])) continue;
      if (s->first < 0) s->first = b * be + i, s->first_value = buf[i];
      s->bad++;
    }
  }
  return 1;
}

typedef struct check_args {
  const icl_gguf *g;
  int64_t n_bad;
} check_args;

static int check_all(void *ud, icl_error *err) {
  check_args *a = ud;
  size_t cap = 0;
  for (int64_t i = 0; i < icl_gguf_n_tensors(a->g); i++) {
    size_t c = (size_t)CHUNK_BLOCKS * (size_t)icl_type_block_elems(icl_gguf_tensor_at(a->g, i)->type);
    cap = c > cap ? c : cap;
  }
  float *buf = malloc((cap ? cap : 1) * sizeof *buf);
  if (!buf) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory for the check", icl_gguf_name(a->g));
  for (int64_t i = 0; i < icl_gguf_n_tensors(a->g); i++) {
    const icl_gguf_tensor *t = icl_gguf_tensor_at(a->g, i);
    scan s;
    if (!(icl_type_is_weight(t->type) || t->type == ICL_TYPE_F32) || !scan_tensor(t, buf, &s) || !s.bad) continue;
    char name[256];
    icl_text_display(t->name, strlen(t->name), name, sizeof name);
    printf("check: tensor '%s' (%s) holds %lld non-finite values (first: element %lld = %s)\n", name,
           icl_type_name(t->type), (long long)s.bad, (long long)s.first, isnan(s.first_value) ? "nan" : "inf");
    a->n_bad++;
  }
  free(buf);
  return ICL_OK;
}

int cli_info_check(const icl_gguf *g, icl_error *err) {
  check_args a = {g, 0};
  int rc = icl_gguf_guarded(g, check_all, &a, err);
  if (rc) return rc;
  if (a.n_bad)
    return icl_error_set(err, ICL_EFORMAT, "%s: %lld of %lld tensors hold NaN or Inf values", icl_gguf_name(g),
                         (long long)a.n_bad, (long long)icl_gguf_n_tensors(g));
  printf("check: all %lld tensors hold finite values\n", (long long)icl_gguf_n_tensors(g));
  return ICL_OK;
}
