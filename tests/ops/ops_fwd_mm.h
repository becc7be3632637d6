/* Op definitions (inputs, wrapper call, float64 oracle) of the weight and sequence ops: matmul,
 * get_rows, rms_norm, layer_norm, rope, attention. */
#ifndef ICL_OPS_FWD_MM_H
#define ICL_OPS_FWD_MM_H

#include "ops_gen.h"

/* ---- matmul: n = {K, rows, tokens} ------------------------------------------------------- */

static int g_matmul(ot_case *c) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  if (K % icl_type_block_elems(c->type)) return 0;
  ot_in_weights(c, 0, c->type, K, R);
  ot_in_f32(c, 1, K, n, 1, -1.0f, 1.0f);
  ot_out(c, 0, ICL_TYPE_F32, R, n, 1, -1);
  c->fast_rows = n;
  return 1;
}
static int r_matmul(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_matmul(be, in[0], in[1], out[0], err);
}
static void o_matmul(const ot_case *c, double *out[]) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  double *w = ot_weights_f64(c, 0);
  const float *x = ot_f(c, 1);
  for (int64_t t = 0; t < n; t++)
    for (int64_t r = 0; r < R; r++) {
      double s = 0.0;
      for (int64_t k = 0; k < K; k++) s += w[r * K + k] * x[t * K + k];
      out[0][t * R + r] = s;
    }
  free(w);
}
/* FAST: int8 decode below tile_min_tokens, the int8 gemm above it (levels with one): another path for every n */
static const ot_op OP_MATMUL = {"matmul", "K,rows,tokens", "", g_matmul, r_matmul, o_matmul, {OT_NMSE}, INT64_MAX};

/* ---- matmul_group: n = {K, rows0, tokens, rows1, rows2}: weights 0 and 1 of the case's type, weight 2 of another
 * (Q8_0, or Q4_0 beside Q8_0), as q, k and v of a layer may be; x is input 3 ------------------------------------ */

static uint32_t mg_type2(uint32_t t) { return t == ICL_TYPE_Q8_0 ? ICL_TYPE_Q4_0 : ICL_TYPE_Q8_0; }
static int g_matmul_group(ot_case *c) {
  const int64_t *n = c->s->n;
  if (n[0] % icl_type_block_elems(c->type)) return 0;
  for (int i = 0; i < 3; i++) {
    int64_t rows = n[i ? i + 2 : 1];
    ot_in_weights(c, i, i < 2 ? c->type : mg_type2(c->type), n[0], rows);
    ot_out(c, i, ICL_TYPE_F32, rows, n[2], 1, -1);
  }
  ot_in_f32(c, 3, n[0], n[2], 1, -1.0f, 1.0f);
  c->fast_rows = n[2];
  return 1;
}
static int r_matmul_group(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  icl_dt w[3] = {*in[0], *in[1], *in[2]}, y[3] = {*out[0], *out[1], *out[2]};
  return icl_op_matmul_group(be, 3, w, in[3], y, err);
}
/* x [tokens, K] in float64 (an f32 input widened exactly). */
static double *o_f64_rows(const float *x, int64_t n) {
  double *d = ot_xmalloc((size_t)n * sizeof *d);
  for (int64_t i = 0; i < n; i++) d[i] = x[i];
  return d;
}
/* matmul_group's three products of x [tokens, K] (the plain and the RMS-folded group share them). */
static void o_group_products(const ot_case *c, const double *x, double *out[]) {
  int64_t K = c->s->n[0], n = c->s->n[2];
  for (int i = 0; i < 3; i++) {
    int64_t R = c->s->n[i ? i + 2 : 1];
    double *w = ot_weights_f64(c, i);
    for (int64_t t = 0; t < n; t++)
      for (int64_t r = 0; r < R; r++) {
        double s = 0.0;
        for (int64_t k = 0; k < K; k++) s += w[r * K + k] * x[t * K + k];
        out[i][t * R + r] = s;
      }
    free(w);
  }
}
static void o_matmul_group(const ot_case *c, double *out[]) {
  double *x = o_f64_rows(ot_f(c, 3), c->s->n[0] * c->s->n[2]);
  o_group_products(c, x, out);
  free(x);
}
static const ot_op OP_MATMUL_GROUP = {"matmul_group", "K,rows0,tokens,rows1,rows2", "", g_matmul_group,
                                      r_matmul_group, o_matmul_group, {OT_NMSE, OT_NMSE, OT_NMSE}, INT64_MAX};

/* ---- matmul_add: n = {K, rows, tokens}: y (input 2, written over) += x . w^T; input 3 is the scratch the wrapper
 * uses where the backend has no fused op (random: the fused path must not read it) ------------------------------ */

static int g_matmul_add(ot_case *c) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  if (!g_matmul(c)) return 0;
  ot_in_f32(c, 2, R, n, 1, -4.0f, 4.0f);
  ot_in_f32(c, 3, R, n, 1, -1.0f, 1.0f);
  ot_out(c, 0, ICL_TYPE_F32, R, n, 1, 2);
  (void)K;
  return 1;
}
static int r_matmul_add(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_matmul_add(be, in[0], in[1], in[3], out[0], err);
}
static void o_matmul_add(const ot_case *c, double *out[]) {
  int64_t R = c->s->n[1], n = c->s->n[2];
  o_matmul(c, out);
  for (int64_t i = 0; i < R * n; i++) out[0][i] += ot_f(c, 2)[i];
}
static const ot_op OP_MATMUL_ADD = {"matmul_add", "K,rows,tokens", "", g_matmul_add, r_matmul_add, o_matmul_add,
                                    {OT_NMSE}, INT64_MAX};

/* ---- matmul_glu: n = {K, rows, tokens}; flag gelu: y = act(x . w_gate^T) * (x . w_up^T), the gate and up
 * weights inputs 0 and 1, x input 2, input 3 the scratch for up (random: a fused path must not read it) --------- */

static int g_matmul_glu(ot_case *c) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  if (K % icl_type_block_elems(c->type)) return 0;
  ot_in_weights(c, 0, c->type, K, R);
  ot_in_weights(c, 1, c->type, K, R);
  ot_in_f32(c, 2, K, n, 1, -1.0f, 1.0f);
  ot_in_f32(c, 3, R, n, 1, -1.0f, 1.0f);
  ot_out(c, 0, ICL_TYPE_F32, R, n, 1, -1);
  c->fast_rows = n;
  return 1;
}
static int r_matmul_glu(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  return icl_op_matmul_glu(be, in[0], in[1], in[2], out[0], in[3], c->s->flags & 1 ? ICL_GLU_GELU : ICL_GLU_SILU,
                           err);
}
/* matmul_glu's act(x . w_gate^T) * (x . w_up^T) of x [tokens, K] (the plain and the RMS-folded GLU share it). */
static void o_glu_products(const ot_case *c, const double *x, double *out) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  double *wg = ot_weights_f64(c, 0), *wu = ot_weights_f64(c, 1);
  for (int64_t t = 0; t < n; t++)
    for (int64_t r = 0; r < R; r++) {
      double g = 0.0, u = 0.0;
      for (int64_t k = 0; k < K; k++) g += wg[r * K + k] * x[t * K + k], u += wu[r * K + k] * x[t * K + k];
      double a = c->s->flags & 1 ? 0.5 * g * (1.0 + tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)))
                                 : g / (1.0 + exp(-g));
      out[t * R + r] = a * u;
    }
  free(wg), free(wu);
}
static void o_matmul_glu(const ot_case *c, double *out[]) {
  double *x = o_f64_rows(ot_f(c, 2), c->s->n[0] * c->s->n[2]);
  o_glu_products(c, x, out[0]);
  free(x);
}
static const ot_op OP_MATMUL_GLU = {"matmul_glu", "K,rows,tokens", "gelu", g_matmul_glu, r_matmul_glu, o_matmul_glu,
                                    {OT_NMSE}, INT64_MAX};

/* ---- get_rows: n = {K, rows, ids}; ids include row 0 and the last row -------------------- */

static int g_get_rows(ot_case *c) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  if (K % icl_type_block_elems(c->type)) return 0;
  ot_in_weights(c, 0, c->type, K, R);
  int32_t *ids = ot_in_i32(c, 1, n);
  uint64_t s = c->seed;
  for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(t_rand_u64(&s) % (uint64_t)R);
  ids[0] = (int32_t)R - 1, ids[n - 1] = (int32_t)R - 1;
  if (n > 2) ids[1] = 0;
  ot_out(c, 0, ICL_TYPE_F32, K, n, 1, -1);
  return 1;
}
static int r_get_rows(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_get_rows(be, in[0], in[1], out[0], err);
}
static void o_get_rows(const ot_case *c, double *out[]) {
  int64_t K = c->s->n[0], n = c->s->n[2];
  double *w = ot_weights_f64(c, 0);
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < K; k++) out[0][i * K + k] = w[ot_i(c, 1)[i] * K + k];
  free(w);
}
static const ot_op OP_GET_ROWS = {"get_rows", "K,rows,ids", "", g_get_rows, r_get_rows, o_get_rows, {OT_NMSE}, 0};

/* ---- rms_norm, layer_norm: n = {d, rows}; flags w (weights; layer_norm: and bias), in_place -- */

enum { NORM_W = 1, NORM_IN_PLACE = 2 };

static int g_norm(ot_case *c, float lo, float hi) {
  int64_t d = c->s->n[0], rows = c->s->n[1];
  ot_in_f32(c, 0, d, rows, 1, lo, hi);
  if (c->s->flags & NORM_W) ot_in_f32(c, 1, d, 1, 1, 0.5f, 1.5f), ot_in_f32(c, 2, d, 1, 1, -1.0f, 1.0f);
  else ot_in_none(c, 1), ot_in_none(c, 2);
  ot_out(c, 0, ICL_TYPE_F32, d, rows, 1, c->s->flags & NORM_IN_PLACE ? 0 : -1);
  return 1;
}
static int g_rms_norm(ot_case *c) { return g_norm(c, -2.0f, 3.0f); }
static int g_layer_norm(ot_case *c) { return g_norm(c, 1.0f, 3.0f); } /* mean far from 0 */

static int r_rms_norm(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_rms_norm(be, in[0], in[1], 1e-6f, out[0], err);
}
static int r_layer_norm(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_layer_norm(be, in[0], in[1], in[2], 1e-5f, out[0], err);
}

/* Both norms in float64: y = (x - mean*centre) / sqrt(var + eps) * w + b. */
static void o_norm(const ot_case *c, double *out[], int centre, double eps) {
  int64_t d = c->s->n[0], rows = c->s->n[1];
  const float *x = ot_f(c, 0), *w = ot_f(c, 1), *b = centre ? ot_f(c, 2) : NULL;
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * d;
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; centre && i < d; i++) mean += xr[i];
    mean /= (double)d;
    for (int64_t i = 0; i < d; i++) var += (xr[i] - mean) * (xr[i] - mean);
    double inv = 1.0 / sqrt(var / (double)d + eps);
    for (int64_t i = 0; i < d; i++)
      out[0][r * d + i] = (xr[i] - mean) * inv * (w ? w[i] : 1.0) + (b ? b[i] : 0.0);
  }
}
static void o_rms_norm(const ot_case *c, double *out[]) { o_norm(c, out, 0, (double)1e-6f); }
static void o_layer_norm(const ot_case *c, double *out[]) { o_norm(c, out, 1, (double)1e-5f); }

static const ot_op OP_RMS_NORM = {"rms_norm", "d,rows", "w,in_place", g_rms_norm, r_rms_norm, o_rms_norm, {OT_NMSE}, 0};
static const ot_op OP_LAYER_NORM = {"layer_norm", "d,rows", "w_b,in_place", g_layer_norm, r_layer_norm, o_layer_norm,
                                    {OT_NMSE}, 0};

/* ---- the folded norms: x RMS-normed (weight nw, eps 1e-6) into a mat-vec's input; the oracle rounds the normed
 * row to f32, as every backend keeps it (the op's definition: rms_norm into h, then the matmuls) ---------------- */

static double *o_rms_rows(const float *x, const float *w, int64_t d, int64_t rows) {
  double *h = ot_xmalloc((size_t)(d * rows) * sizeof *h);
  for (int64_t r = 0; r < rows; r++) {
    double ss = 0.0;
    for (int64_t i = 0; i < d; i++) ss += (double)x[r * d + i] * x[r * d + i];
    double inv = 1.0 / sqrt(ss / (double)d + (double)1e-6f);
    for (int64_t i = 0; i < d; i++) h[r * d + i] = (float)(x[r * d + i] * inv * w[i]);
  }
  return h;
}

/* rms_matmul_group: n = {K, rows0, tokens, rows1, rows2}: three weights of the case's type (inputs 0..2), x input
 * 3, nw input 4, input 5 the scratch h (random: a fused path must not read it) */
static int g_rms_matmul_group(ot_case *c) {
  const int64_t *n = c->s->n;
  if (n[0] % icl_type_block_elems(c->type)) return 0;
  for (int i = 0; i < 3; i++) {
    int64_t rows = n[i ? i + 2 : 1];
    ot_in_weights(c, i, c->type, n[0], rows);
    ot_out(c, i, ICL_TYPE_F32, rows, n[2], 1, -1);
  }
  ot_in_f32(c, 3, n[0], n[2], 1, -2.0f, 3.0f);
  ot_in_f32(c, 4, n[0], 1, 1, 0.5f, 1.5f);
  ot_in_f32(c, 5, n[0], n[2], 1, -1.0f, 1.0f);
  c->fast_rows = n[2];
  return 1;
}
static int r_rms_matmul_group(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[],
                              icl_error *err) {
  (void)c;
  icl_dt w[3] = {*in[0], *in[1], *in[2]}, y[3] = {*out[0], *out[1], *out[2]};
  return icl_op_rms_matmul_group(be, in[3], in[4], 1e-6f, in[5], 3, w, y, err);
}
static void o_rms_matmul_group(const ot_case *c, double *out[]) {
  double *h = o_rms_rows(ot_f(c, 3), ot_f(c, 4), c->s->n[0], c->s->n[2]);
  o_group_products(c, h, out);
  free(h);
}
static const ot_op OP_RMS_MATMUL_GROUP = {"rms_matmul_group", "K,rows0,tokens,rows1,rows2", "", g_rms_matmul_group,
                                          r_rms_matmul_group, o_rms_matmul_group, {OT_NMSE, OT_NMSE, OT_NMSE},
                                          INT64_MAX};

/* rms_matmul_glu: n = {K, rows, tokens}; flag gelu: gate and up weights inputs 0 and 1, x input 2, nw input 3, the
 * scratch h and u inputs 4 and 5 */
static int g_rms_matmul_glu(ot_case *c) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  if (K % icl_type_block_elems(c->type)) return 0;
  ot_in_weights(c, 0, c->type, K, R);
  ot_in_weights(c, 1, c->type, K, R);
  ot_in_f32(c, 2, K, n, 1, -2.0f, 3.0f);
  ot_in_f32(c, 3, K, 1, 1, 0.5f, 1.5f);
  ot_in_f32(c, 4, K, n, 1, -1.0f, 1.0f);
  ot_in_f32(c, 5, R, n, 1, -1.0f, 1.0f);
  ot_out(c, 0, ICL_TYPE_F32, R, n, 1, -1);
  c->fast_rows = n;
  return 1;
}
static int r_rms_matmul_glu(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[],
                            icl_error *err) {
  return icl_op_rms_matmul_glu(be, in[2], in[3], 1e-6f, in[4], in[0], in[1], out[0], in[5],
                               c->s->flags & 1 ? ICL_GLU_GELU : ICL_GLU_SILU, err);
}
static void o_rms_matmul_glu(const ot_case *c, double *out[]) {
  double *h = o_rms_rows(ot_f(c, 2), ot_f(c, 3), c->s->n[0], c->s->n[2]);
  o_glu_products(c, h, out[0]);
  free(h);
}
static const ot_op OP_RMS_MATMUL_GLU = {"rms_matmul_glu", "K,rows,tokens", "gelu", g_rms_matmul_glu,
                                        r_rms_matmul_glu, o_rms_matmul_glu, {OT_NMSE}, INT64_MAX};

/* rms_norm_add: n = {d, rows}: y (input 2, written over) += rms_norm(x input 0, w input 1) */
static int g_rms_norm_add(ot_case *c) {
  int64_t d = c->s->n[0], rows = c->s->n[1];
  ot_in_f32(c, 0, d, rows, 1, -2.0f, 3.0f);
  ot_in_f32(c, 1, d, 1, 1, 0.5f, 1.5f);
  ot_in_f32(c, 2, d, rows, 1, -4.0f, 4.0f);
  ot_out(c, 0, ICL_TYPE_F32, d, rows, 1, 2);
  return 1;
}
static int r_rms_norm_add(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_rms_norm_add(be, in[0], in[1], 1e-6f, out[0], err);
}
static void o_rms_norm_add(const ot_case *c, double *out[]) {
  int64_t d = c->s->n[0], rows = c->s->n[1];
  const float *x = ot_f(c, 0), *w = ot_f(c, 1), *y = ot_f(c, 2);
  for (int64_t r = 0; r < rows; r++) {
    double ss = 0.0;
    for (int64_t i = 0; i < d; i++) ss += (double)x[r * d + i] * x[r * d + i];
    double inv = 1.0 / sqrt(ss / (double)d + (double)1e-6f);
    for (int64_t i = 0; i < d; i++) out[0][r * d + i] = y[r * d + i] + x[r * d + i] * inv * w[i];
  }
}
static const ot_op OP_RMS_NORM_ADD = {"rms_norm_add", "d,rows", "", g_rms_norm_add, r_rms_norm_add, o_rms_norm_add,
                                      {OT_NMSE}, 0};

/* ---- the post-norm add folded in before a folded norm (add_rms_matmul_group / glu): t = x + rms_norm(o, pw) (eps
 * 1e-6), then the folded norm of t. The oracle rounds t to f32 (the op's definition writes it) and takes the folded
 * norm's oracle from there; inputs 6 and 7 are o and pw, the last output t. ---- */

/* t = x + o * inv(o) * pw per row, in float64 into t64 and rounded into t32. */
static void o_post_add(const float *x, const float *o, const float *pw, int64_t d, int64_t rows, double *t64,
                       float *t32) {
  for (int64_t r = 0; r < rows; r++) {
    double ss = 0.0;
    for (int64_t i = 0; i < d; i++) ss += (double)o[r * d + i] * o[r * d + i];
    double inv = 1.0 / sqrt(ss / (double)d + (double)1e-6f);
    for (int64_t i = 0; i < d; i++) {
      t64[r * d + i] = x[r * d + i] + o[r * d + i] * inv * pw[i];
      t32[r * d + i] = (float)t64[r * d + i];
    }
  }
}

/* inputs o (6) and pw (7) beside x ([K, n]), the output t (index ti) */
static void g_post_add(ot_case *c, int64_t K, int64_t n, int ti) {
  ot_in_f32(c, 6, K, n, 1, -6.0f, 6.0f);
  ot_in_f32(c, 7, K, 1, 1, 0.5f, 1.5f);
  ot_out(c, ti, ICL_TYPE_F32, K, n, 1, -1);
}

/* add_rms_matmul_group: rms_matmul_group's case (n = {K, rows0, tokens, rows1, rows2}) with the post-add */
static int g_add_rms_matmul_group(ot_case *c) {
  if (!g_rms_matmul_group(c)) return 0;
  g_post_add(c, c->s->n[0], c->s->n[2], 3);
  return 1;
}
static int r_add_rms_matmul_group(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[],
                                  icl_error *err) {
  (void)c;
  icl_dt w[3] = {*in[0], *in[1], *in[2]}, y[3] = {*out[0], *out[1], *out[2]};
  icl_post_add pa = {in[6], in[7], out[3]};
  return icl_op_add_rms_matmul_group(be, in[3], &pa, in[4], 1e-6f, in[5], 3, w, y, err);
}
static void o_add_rms_matmul_group(const ot_case *c, double *out[]) {
  int64_t K = c->s->n[0], n = c->s->n[2];
  float *t = ot_xmalloc((size_t)(K * n) * sizeof *t);
  o_post_add(ot_f(c, 3), ot_f(c, 6), ot_f(c, 7), K, n, out[3], t);
  double *h = o_rms_rows(t, ot_f(c, 4), K, n);
  o_group_products(c, h, out);
  free(h), free(t);
}
static const ot_op OP_ADD_RMS_MATMUL_GROUP = {"add_rms_matmul_group", "K,rows0,tokens,rows1,rows2", "",
                                              g_add_rms_matmul_group, r_add_rms_matmul_group,
                                              o_add_rms_matmul_group, {OT_NMSE, OT_NMSE, OT_NMSE, OT_NMSE}, INT64_MAX};

/* add_rms_matmul_glu: rms_matmul_glu's case (n = {K, rows, tokens}; flag gelu) with the post-add */
static int g_add_rms_matmul_glu(ot_case *c) {
  if (!g_rms_matmul_glu(c)) return 0;
  g_post_add(c, c->s->n[0], c->s->n[2], 1);
  return 1;
}
static int r_add_rms_matmul_glu(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[],
                                icl_error *err) {
  icl_post_add pa = {in[6], in[7], out[1]};
  return icl_op_add_rms_matmul_glu(be, in[2], &pa, in[3], 1e-6f, in[4], in[0], in[1], out[0], in[5],
                                   c->s->flags & 1 ? ICL_GLU_GELU : ICL_GLU_SILU, err);
}
static void o_add_rms_matmul_glu(const ot_case *c, double *out[]) {
  int64_t K = c->s->n[0], n = c->s->n[2];
  float *t = ot_xmalloc((size_t)(K * n) * sizeof *t);
  o_post_add(ot_f(c, 2), ot_f(c, 6), ot_f(c, 7), K, n, out[1], t);
  double *h = o_rms_rows(t, ot_f(c, 3), K, n);
  o_glu_products(c, h, out[0]);
  free(h), free(t);
}
static const ot_op OP_ADD_RMS_MATMUL_GLU = {"add_rms_matmul_glu", "K,rows,tokens", "gelu", g_add_rms_matmul_glu,
                                            r_add_rms_matmul_glu, o_add_rms_matmul_glu, {OT_NMSE, OT_NMSE},
                                            INT64_MAX};

/* ---- rope: n = {head_dim, heads, tokens, n_rot, pos0}, f = base; flag neox --------------- */

static int g_rope(ot_case *c) {
  const int64_t *n = c->s->n;
  ot_in_f32(c, 0, n[0], n[1], n[2], -1.0f, 1.0f);
  int32_t *pos = ot_in_i32(c, 1, n[2]);
  for (int64_t i = 0; i < n[2]; i++) pos[i] = (int32_t)(n[4] + i);
  ot_out(c, 0, ICL_TYPE_F32, n[0], n[1], n[2], 0);
  return 1;
}
static int r_rope(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)out;
  return icl_op_rope(be, in[0], in[1], (int)c->s->n[3], (float)c->s->f, c->s->flags & 1, err);
}
static void o_rope(const ot_case *c, double *out[]) {
  const int64_t *n = c->s->n;
  int64_t hd = n[0], half = n[3] / 2, neox = c->s->flags & 1;
  const float *x = ot_f(c, 0);
  for (int64_t i = 0; i < hd * n[1] * n[2]; i++) out[0][i] = x[i];
  for (int64_t t = 0; t < n[2]; t++)
    for (int64_t h = 0; h < n[1]; h++)
      for (int64_t i = 0; i < half; i++) {
        double th = (double)ot_i(c, 1)[t] * pow((double)(float)c->s->f, -2.0 * (double)i / (double)n[3]);
        int64_t a = (t * n[1] + h) * hd + (neox ? i : 2 * i), b = a + (neox ? half : 1);
        double x0 = x[a], x1 = x[b];
        out[0][a] = x0 * cos(th) - x1 * sin(th), out[0][b] = x0 * sin(th) + x1 * cos(th);
      }
}
static const ot_op OP_ROPE = {"rope", "hd,heads,tokens,n_rot,pos0,-,base", "neox", g_rope, r_rope, o_rope, {OT_NMSE}, 0};

/* ---- rope_pair: n = {head_dim, heads, tokens, n_rot, pos0, k_heads}, f = base; flag neox: q is input 0, k input 2,
 * each rotated in place (outputs 0 and 1) as rope rotates it ------------------------------------------------------ */

static int g_rope_pair(ot_case *c) {
  const int64_t *n = c->s->n;
  g_rope(c);
  ot_in_f32(c, 2, n[0], n[5], n[2], -1.0f, 1.0f);
  ot_out(c, 1, ICL_TYPE_F32, n[0], n[5], n[2], 2);
  return 1;
}
static int r_rope_pair(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  return icl_op_rope_pair(be, out[0], out[1], in[1], (int)c->s->n[3], (float)c->s->f, c->s->flags & 1, err);
}
/* The rotation of rope's oracle on input xi with `heads` heads into out. */
static void o_rope_into(const ot_case *c, int xi, int64_t heads, double *out) {
  const int64_t *n = c->s->n;
  int64_t hd = n[0], half = n[3] / 2, neox = c->s->flags & 1;
  const float *x = ot_f(c, xi);
  for (int64_t i = 0; i < hd * heads * n[2]; i++) out[i] = x[i];
  for (int64_t t = 0; t < n[2]; t++)
    for (int64_t h = 0; h < heads; h++)
      for (int64_t i = 0; i < half; i++) {
        double th = (double)ot_i(c, 1)[t] * pow((double)(float)c->s->f, -2.0 * (double)i / (double)n[3]);
        int64_t a = (t * heads + h) * hd + (neox ? i : 2 * i), b = a + (neox ? half : 1);
        double x0 = x[a], x1 = x[b];
        out[a] = x0 * cos(th) - x1 * sin(th), out[b] = x0 * sin(th) + x1 * cos(th);
      }
}
static void o_rope_pair(const ot_case *c, double *out[]) {
  o_rope_into(c, 0, c->s->n[1], out[0]);
  o_rope_into(c, 2, c->s->n[5], out[1]);
}
static const ot_op OP_ROPE_PAIR = {"rope_pair", "hd,heads,tokens,n_rot,pos0,k_heads,base", "neox", g_rope_pair,
                                   r_rope_pair, o_rope_pair, {OT_NMSE, OT_NMSE}, 0};

/* ---- rms_rope_pair: rope_pair's n, f and flag; per-head RMS norms (eps 1e-6) of q (input 0, weight input 3) and k
 * (input 2, weight input 4) in place, then rope_pair. The oracle rounds each normed element to f32, as the op's
 * definition stores it (rms_norm, then rope) ---------------------------------------------------------------------- */

static int g_rms_rope_pair(ot_case *c) {
  g_rope_pair(c);
  ot_in_f32(c, 3, c->s->n[0], 1, 1, 0.5f, 1.5f);
  ot_in_f32(c, 4, c->s->n[0], 1, 1, 0.5f, 1.5f);
  return 1;
}
static int r_rms_rope_pair(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[],
                           icl_error *err) {
  return icl_op_rms_rope_pair(be, out[0], out[1], in[3], in[4], 1e-6f, in[1], (int)c->s->n[3], (float)c->s->f,
                              c->s->flags & 1, err);
}
static void o_rms_rope_into(const ot_case *c, int xi, int wi, int64_t heads, double *out) {
  const int64_t *n = c->s->n;
  int64_t hd = n[0], half = n[3] / 2, neox = c->s->flags & 1;
  double *h = o_rms_rows(ot_f(c, xi), ot_f(c, wi), hd, heads * n[2]);
  for (int64_t i = 0; i < hd * heads * n[2]; i++) out[i] = h[i];
  for (int64_t t = 0; t < n[2]; t++)
    for (int64_t hh = 0; hh < heads; hh++)
      for (int64_t i = 0; i < half; i++) {
        double th = (double)ot_i(c, 1)[t] * pow((double)(float)c->s->f, -2.0 * (double)i / (double)n[3]);
        int64_t a = (t * heads + hh) * hd + (neox ? i : 2 * i), b = a + (neox ? half : 1);
        out[a] = h[a] * cos(th) - h[b] * sin(th), out[b] = h[a] * sin(th) + h[b] * cos(th);
      }
  free(h);
}
static void o_rms_rope_pair(const ot_case *c, double *out[]) {
  o_rms_rope_into(c, 0, 3, c->s->n[1], out[0]);
  o_rms_rope_into(c, 2, 4, c->s->n[5], out[1]);
}
static const ot_op OP_RMS_ROPE_PAIR = {"rms_rope_pair", "hd,heads,tokens,n_rot,pos0,k_heads,base", "neox",
                                       g_rms_rope_pair, r_rms_rope_pair, o_rms_rope_pair, {OT_NMSE, OT_NMSE}, 0};

/* ---- attention: n = {hd, heads, kv_heads, queries, n_past, window}, f = softcap; flags mask
 * (random additive, every 7th -inf), masked_row (one query row of head 1 all -inf), pattern, scale4 */

enum { AT_MASK = 1, AT_MASKED_ROW = 2, AT_PATTERN = 4, AT_SCALE4 = 8 };

static int g_attention(ot_case *c) {
  const int64_t *n = c->s->n;
  int64_t hd = n[0], nh = n[1], nkvh = n[2], nq = n[3], nkv = n[4] + nq;
  ot_in_f32(c, 0, hd, nh, nq, -1.0f, 1.0f);
  ot_in_f32(c, 1, hd, nkvh, nkv, -1.0f, 1.0f);
  ot_in_f32(c, 2, hd, nkvh, nkv, -1.0f, 1.0f);
  if (c->s->flags & (AT_MASK | AT_MASKED_ROW)) {
    float *m = ot_in_f32(c, 3, nkv, nq, nh, -1.0f, 1.0f);
    for (int64_t i = 0; i < nkv * nq * nh; i += 7) m[i] = -INFINITY;
    if (c->s->flags & AT_MASKED_ROW)
      for (int64_t j = 0; j < nkv; j++) m[((nh > 1 ? nq : 0) + nq / 2) * nkv + j] = -INFINITY;
  } else ot_in_none(c, 3);
  ot_out(c, 0, ICL_TYPE_F32, hd, nh, nq, -1);
  if (c->s->flags & AT_PATTERN) ot_out(c, 1, ICL_TYPE_F32, nkv, nq, nh, -1);
  float scale = 1.0f / sqrtf((float)hd) * (c->s->flags & AT_SCALE4 ? 4.0f : 1.0f);
  c->attn = (icl_attn_params){(int32_t)n[4], scale, (int32_t)n[5], (float)c->s->f};
  c->fast_rows = nq;
  return 1;
}
static int r_attention(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  return icl_op_attention(be, in[0], in[1], in[2], &c->attn, in[3], out[0], c->n_out > 1 ? out[1] : NULL, err);
}

/* Softmaxed scores of query i of head h over nkv keys into p (zeros for a fully masked row). */
static void o_attn_row(const ot_case *c, int64_t h, int64_t i, double *p) {
  const int64_t *n = c->s->n;
  int64_t hd = n[0], nh = n[1], nkvh = n[2], nq = n[3], nkv = n[4] + nq, kvh = h / (nh / nkvh), qpos = n[4] + i;
  const float *q = ot_f(c, 0) + (i * nh + h) * hd, *mask = ot_f(c, 3);
  double mx = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j < nkv; j++) {
    double s = -INFINITY;
    if (j <= qpos && !(n[5] > 0 && qpos - j >= n[5])) {
      const float *k = ot_f(c, 1) + (j * nkvh + kvh) * hd;
      s = 0.0;
      for (int64_t d = 0; d < hd; d++) s += (double)q[d] * k[d];
      s *= c->attn.scale;
      if (c->attn.softcap > 0.0f) s = c->attn.softcap * tanh(s / c->attn.softcap);
      if (mask) s += mask[(h * nq + i) * nkv + j];
    }
    p[j] = s, mx = s > mx ? s : mx;
  }
  for (int64_t j = 0; j < nkv; j++) sum += p[j] = mx == -INFINITY ? 0.0 : exp(p[j] - mx);
  for (int64_t j = 0; j < nkv; j++) p[j] = sum > 0.0 ? p[j] / sum : 0.0;
}
static void o_attention(const ot_case *c, double *out[]) {
  const int64_t *n = c->s->n;
  int64_t hd = n[0], nh = n[1], nkvh = n[2], nq = n[3], nkv = n[4] + nq;
  double *p = ot_xmalloc((size_t)nkv * sizeof *p);
  for (int64_t h = 0; h < nh; h++)
    for (int64_t i = 0; i < nq; i++) {
      o_attn_row(c, h, i, p);
      double *o = out[0] + (i * nh + h) * hd;
      for (int64_t d = 0; d < hd; d++) o[d] = 0.0;
      for (int64_t j = 0; j < nkv; j++) {
        if (c->n_out > 1) out[1][(h * nq + i) * nkv + j] = p[j];
        const float *v = ot_f(c, 2) + (j * nkvh + h / (nh / nkvh)) * hd;
        for (int64_t d = 0; p[j] != 0.0 && d < hd; d++) o[d] += p[j] * v[d];
      }
    }
  free(p);
}
static const ot_op OP_ATTENTION = {"attention", "hd,heads,kv_heads,queries,n_past,window,softcap",
                                   "mask,masked_row,pattern,scale4", g_attention, r_attention, o_attention,
                                   {OT_NMSE, OT_PATTERN}, INT64_MAX};

#endif
