/* Test helper: GGUF copies with edits (see gguf_edit.h). */
#include "gguf_edit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const t_edit *find_edit(const t_edit *e, int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (!e[i].tensor_copy && !e[i].nan && !strcmp(e[i].key, key)) return &e[i];
  return NULL;
}

static int put_value(icl_gguf_writer *w, const t_edit *e, icl_error *err) {
  if (e->type == ICL_GGUF_STRING) return icl_gguf_w_str(w, e->key, e->sval, err);
  if (e->type == ICL_GGUF_F32) return icl_gguf_w_f32(w, e->key, (float)e->fval, err);
  if (e->type == ICL_GGUF_I32) return icl_gguf_w_i32(w, e->key, (int32_t)e->ival, err);
  return icl_gguf_w_u32(w, e->key, (uint32_t)e->ival, err);
}

/* An integer array copied as i32 with element e->index replaced. */
static int put_array_edit(icl_gguf_writer *w, const icl_gguf *g, int64_t i, const t_edit *e, icl_error *err) {
  uint64_t n = icl_gguf_arr_len(g, i);
  int32_t *v = malloc((n ? n : 1) * sizeof *v);
  if (!v) return icl_error_set(err, ICL_ENOMEM, "out of memory");
  for (uint64_t j = 0; j < n; j++) {
    int64_t x = 0;
    icl_gguf_arr_int(g, i, j, &x);
    v[j] = (uint64_t)e->index == j ? (int32_t)e->ival : (int32_t)x;
  }
  int rc = icl_gguf_w_arr(w, e->key, ICL_GGUF_I32, n, v, err);
  free(v);
  return rc;
}

static int copy_kv(icl_gguf_writer *w, const icl_gguf *g, int64_t i, icl_error *err) {
  const char *k = icl_gguf_key(g, i);
  icl_gguf_vtype t = icl_gguf_kv_type(g, i);
  if (t == ICL_GGUF_STRING) return icl_gguf_w_str(w, k, icl_gguf_kv_str(g, i, NULL), err);
  if (t == ICL_GGUF_ARRAY) {
    uint64_t n = icl_gguf_arr_len(g, i);
    if (icl_gguf_arr_type(g, i) != ICL_GGUF_STRING)
      return icl_gguf_w_arr(w, k, (icl_gguf_vtype)icl_gguf_arr_type(g, i), n, icl_gguf_arr_data(g, i), err);
    const char **s = malloc((n ? n : 1) * sizeof *s);
    if (!s) return icl_error_set(err, ICL_ENOMEM, "out of memory");
    for (uint64_t j = 0; j < n; j++) s[j] = icl_gguf_arr_str(g, i, j, NULL);
    int rc = icl_gguf_w_arr_str(w, k, n, s, err);
    free(s);
    return rc;
  }
  if (t == ICL_GGUF_F32 || t == ICL_GGUF_F64) {
    double v;
    icl_gguf_kv_float(g, i, &v);
    return icl_gguf_w_f32(w, k, (float)v, err);
  }
  int64_t v;
  icl_gguf_kv_int(g, i, &v);
  return t == ICL_GGUF_BOOL ? icl_gguf_w_bool(w, k, (int)v, err) : icl_gguf_w_u32(w, k, (uint32_t)v, err);
}

static int copy_tensors(icl_gguf_writer *w, const icl_gguf *g, const t_edit *edits, int n, icl_error *err) {
  int rc = ICL_OK;
  for (int64_t i = 0; i < icl_gguf_n_tensors(g) && !rc; i++) {
    const icl_gguf_tensor *t = icl_gguf_tensor_at(g, i);
    int poison = 0;
    for (int k = 0; k < n; k++) poison |= edits[k].nan && !strcmp(edits[k].key, t->name);
    float *copy = poison ? malloc(t->nbytes) : NULL;
    if (copy) memcpy(copy, t->data, t->nbytes), copy[0] = NAN;
    rc = icl_gguf_w_tensor(w, t->name, t->type, t->n_dims, t->ne, copy ? copy : t->data, t->nbytes, err);
    free(copy);
  }
  for (int k = 0; k < n && !rc; k++) {
    const icl_gguf_tensor *t =
        edits[k].tensor_copy ? icl_gguf_find_tensor(g, edits[k].tensor_copy) : NULL;
    if (t) rc = icl_gguf_w_tensor(w, edits[k].key, t->type, t->n_dims, t->ne, t->data, t->nbytes, err);
  }
  return rc;
}

int t_gguf_edit(const char *src, const char *dst, const t_edit *edits, int n, icl_error *err) {
  icl_gguf *g = NULL;
  int rc = icl_gguf_open(src, &g, err);
  if (rc) return rc;
  icl_gguf_writer *w = icl_gguf_writer_new();
  for (int64_t i = 0; i < icl_gguf_n_kv(g) && !rc; i++) {
    const t_edit *e = find_edit(edits, n, icl_gguf_key(g, i));
    if (!e) rc = copy_kv(w, g, i, err);
    else if (e->index >= 0) rc = put_array_edit(w, g, i, e, err);
    else if (e->type >= 0) rc = put_value(w, e, err);
  }
  for (int k = 0; k < n && !rc; k++) /* keys the source lacks are added */
    if (!edits[k].tensor_copy && !edits[k].nan && edits[k].type >= 0 && edits[k].index < 0 && icl_gguf_find_key(g, edits[k].key) < 0)
      rc = put_value(w, &edits[k], err);
  if (!rc) rc = copy_tensors(w, g, edits, n, err);
  if (!rc) rc = icl_gguf_writer_save(w, dst, err);
  icl_gguf_writer_free(w);
  icl_gguf_close(g);
  return rc;
}
