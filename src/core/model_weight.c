/* A weight by its GGUF name, dequantized to f32 on the model's backend (get_rows, which decodes every weight type
 * as the embedding lookup does) and read back in row chunks, so interpretability code reads exactly the values the
 * forward pass multiplies by. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/tensor.h"
#include "icl/types.h"
#include "model_internal.h"
#include "ops.h"

static const struct { const char *suffix; size_t off; } LAYER[] = {
    {"attn_norm.weight", offsetof(icl_layer, attn_norm)},
    {"attn_q.weight", offsetof(icl_layer, wq)},
    {"attn_k.weight", offsetof(icl_layer, wk)},
    {"attn_v.weight", offsetof(icl_layer, wv)},
    {"attn_output.weight", offsetof(icl_layer, wo)},
    {"ffn_norm.weight", offsetof(icl_layer, ffn_norm)},
    {"ffn_gate.weight", offsetof(icl_layer, w_gate)},
    {"ffn_up.weight", offsetof(icl_layer, w_up)},
    {"ffn_down.weight", offsetof(icl_layer, w_down)},
    {"attn_q.bias", offsetof(icl_layer, bq)},
    {"attn_k.bias", offsetof(icl_layer, bk)},
    {"attn_v.bias", offsetof(icl_layer, bv)},
    {"attn_q_norm.weight", offsetof(icl_layer, q_norm)},
    {"attn_k_norm.weight", offsetof(icl_layer, k_norm)},
    {"post_attention_norm.weight", offsetof(icl_layer, post_attn_norm)},
    {"post_ffw_norm.weight", offsetof(icl_layer, post_ffn_norm)},
};

/* The model's view of name, or NULL (an unknown name, or a tensor this model has not). */
static const icl_dt *lookup(const icl_model *m, const char *name) {
  const icl_dt *t = NULL;
  int il, n = 0;
  if (!strcmp(name, "token_embd.weight")) t = &m->tok_embd;
  else if (!strcmp(name, "output_norm.weight")) t = &m->output_norm;
  else if (!strcmp(name, "output.weight")) t = &m->output; /* tied: the embedding, as the LM head uses it */
  else if (sscanf(name, "blk.%d.%n", &il, &n) == 1 && n > 0 && il >= 0 && il < m->hp.n_layer && m->layers)
    for (size_t i = 0; i < sizeof LAYER / sizeof LAYER[0]; i++)
      if (!strcmp(name + n, LAYER[i].suffix)) t = (const icl_dt *)((const char *)&m->layers[il] + LAYER[i].off);
  return t && t->buf ? t : NULL;
}

/* Decodes the listed rows of w (all rows when sel is NULL) into t, in chunks of at most 16 MiB of f32. */
static int read_rows(icl_model *m, const icl_dt *w, int64_t rows, const int64_t *sel, int64_t n, icl_tensor *t,
                     icl_error *err) {
  icl_backend *be = m->be;
  int64_t cols = w->ne[0], chunk = (int64_t)((16u << 20) / (size_t)(cols * 4)); /* rows per 16 MiB of f32 */
  if (chunk < 1) chunk = 1;
  if (chunk > n) chunk = n;
  icl_buf *buf = NULL, *idb = NULL;
  int32_t *ids = malloc((size_t)chunk * sizeof *ids);
  icl_dt w2 = *w;
  w2.ne[1] = rows, w2.ne[2] = w2.ne[3] = 1;
  int rc = ids ? ICL_OK : icl_error_set(err, ICL_ENOMEM, "out of host memory");
  if (!rc) rc = be->ops->buf_alloc(be, (size_t)(chunk * cols) * 4, ICL_BUF_ACT, &buf, err);
  if (!rc) rc = be->ops->buf_alloc(be, (size_t)chunk * sizeof *ids, ICL_BUF_ACT, &idb, err);
  for (int64_t r0 = 0; !rc && r0 < n; r0 += chunk) {
    int64_t nr = n - r0 < chunk ? n - r0 : chunk;
    for (int64_t i = 0; i < nr; i++) ids[i] = (int32_t)(sel ? sel[r0 + i] : r0 + i);
    icl_dt idv = {.buf = idb, .type = ICL_TYPE_I32, .ne = {nr, 1, 1, 1}};
    icl_dt dst = {.buf = buf, .type = ICL_TYPE_F32, .ne = {cols, nr, 1, 1}};
    rc = be->ops->write(be, idb, 0, ids, (size_t)nr * sizeof *ids, err);
    if (!rc) rc = icl_op_get_rows(be, &w2, &idv, &dst, err);
    if (!rc) rc = be->ops->read(be, buf, 0, t->data + r0 * cols, (size_t)(nr * cols) * 4, err);
  }
  free(ids);
  if (idb) be->ops->buf_free(be, idb);
  if (buf) be->ops->buf_free(be, buf);
  return rc;
}

int icl_model_weight_rows(icl_model *m, const char *name, const int64_t *sel, int64_t n_sel, icl_tensor **out,
                          icl_error *err) {
  *out = NULL;
  const icl_dt *w = name ? lookup(m, name) : NULL;
  if (!w)
    return icl_error_set(err, ICL_EINVAL, "%s: no weight '%s' (expected a GGUF tensor name this model has: "
                         "token_embd.weight, output_norm.weight, output.weight, blk.N.attn_q.weight, ... with N in "
                         "0..%d)", m->path, name ? name : "(null)", m->hp.n_layer - 1);
  int64_t cols = w->ne[0], rows = w->ne[1] * w->ne[2] * w->ne[3];
  if (rows > INT32_MAX) return icl_error_set(err, ICL_EUNSUPPORTED, "%s: weight %s has %lld rows", m->path, name,
                                            (long long)rows);
  if (sel && n_sel < 1) return icl_error_set(err, ICL_EINVAL, "%s: weight %s: an empty row list", m->path, name);
  for (int64_t i = 0; sel && i < n_sel; i++)
    if (sel[i] < 0 || sel[i] >= rows)
      return icl_error_set(err, ICL_EINVAL, "%s: weight %s: row %lld (entry %lld) out of range 0..%lld", m->path,
                           name, (long long)sel[i], (long long)i + 1, (long long)rows - 1);
  int64_t n = sel ? n_sel : rows;
  int vec = !sel && rows == 1;
  int64_t shape[2] = {vec ? cols : n, cols};
  icl_tensor *t = icl_tensor_new(vec ? 1 : 2, shape);
  if (!t) return icl_error_set(err, ICL_ENOMEM, "%s: no host memory for %s (%lld x %lld f32)", m->path, name,
                               (long long)n, (long long)cols);
  if (read_rows(m, w, rows, sel, n, t, err)) {
    icl_tensor_free(t);
    return icl_error_wrap(err, "%s: reading weight %s", m->path, name);
  }
  *out = t;
  return ICL_OK;
}

int icl_model_weight(icl_model *m, const char *name, icl_tensor **out, icl_error *err) {
  return icl_model_weight_rows(m, name, NULL, 0, out, err);
}
