/* Op definitions (inputs, wrapper call, float64 oracle) of the elementwise, row and data-movement
 * ops: add, mul, scale, silu, gelu, relu, swiglu, geglu, softmax, argmax, lse_select, convert,
 * copy2d, fill2d. */
#ifndef ICL_OPS_FWD_EW_H
#define ICL_OPS_FWD_EW_H

#include "ops_gen.h"

/* ---- add, mul: n = {d, rows, b_rows}; flag in_place -------------------------------------- */

static int g_binary(ot_case *c) {
  const int64_t *n = c->s->n;
  ot_in_f32(c, 0, n[0], n[1], 1, -3.0f, 3.0f);
  ot_in_f32(c, 1, n[0], n[2], 1, -3.0f, 3.0f);
  ot_out(c, 0, ICL_TYPE_F32, n[0], n[1], 1, c->s->flags & 1 ? 0 : -1);
  return 1;
}
static int r_add(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_add(be, in[0], in[1], out[0], err);
}
static int r_mul(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_mul(be, in[0], in[1], out[0], err);
}
static void o_binary(const ot_case *c, double *out[], int mul) {
  int64_t d = c->s->n[0], rows = c->s->n[1], brows = c->s->n[2];
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < d; i++) {
      double a = ot_f(c, 0)[r * d + i], b = ot_f(c, 1)[(brows == 1 ? 0 : r) * d + i];
      out[0][r * d + i] = mul ? a * b : a + b;
    }
}
static void o_add(const ot_case *c, double *out[]) { o_binary(c, out, 0); }
static void o_mul(const ot_case *c, double *out[]) { o_binary(c, out, 1); }
static const ot_op OP_ADD = {"add", "d,rows,b_rows", "in_place", g_binary, r_add, o_add, {OT_NMSE}, 0};
static const ot_op OP_MUL = {"mul", "d,rows,b_rows", "in_place", g_binary, r_mul, o_mul, {OT_NMSE}, 0};

/* ---- scale (f = factor), silu, gelu, relu: n = {elements}; flag in_place ------------------ */

static int g_unary(ot_case *c) {
  ot_in_f32(c, 0, c->s->n[0], 1, 1, -12.0f, 12.0f); /* wide enough for exp to saturate */
  ot_out(c, 0, ICL_TYPE_F32, c->s->n[0], 1, 1, c->s->flags & 1 ? 0 : -1);
  return 1;
}
static int r_scale(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  return icl_op_scale(be, in[0], (float)c->s->f, out[0], err);
}
static int r_silu(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_silu(be, in[0], out[0], err);
}
static int r_gelu(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_gelu(be, in[0], out[0], err);
}
static int r_relu(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_relu(be, in[0], out[0], err);
}
static double f_silu(double x) { return x / (1.0 + exp(-x)); }
static double f_gelu(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double f_relu(double x) { return x > 0.0 ? x : 0.0; }
static void o_map(const ot_case *c, double *out[], double (*f)(double)) {
  for (int64_t i = 0; i < c->s->n[0]; i++) out[0][i] = f(ot_f(c, 0)[i]);
}
static void o_scale(const ot_case *c, double *out[]) {
  for (int64_t i = 0; i < c->s->n[0]; i++) out[0][i] = (double)ot_f(c, 0)[i] * (double)(float)c->s->f;
}
static void o_silu(const ot_case *c, double *out[]) { o_map(c, out, f_silu); }
static void o_gelu(const ot_case *c, double *out[]) { o_map(c, out, f_gelu); }
static void o_relu(const ot_case *c, double *out[]) { o_map(c, out, f_relu); }
static const ot_op OP_SCALE = {"scale", "n,-,-,-,-,-,s", "in_place", g_unary, r_scale, o_scale, {OT_NMSE}, 0};
static const ot_op OP_SILU = {"silu", "n", "in_place", g_unary, r_silu, o_silu, {OT_NMSE}, 0};
static const ot_op OP_GELU = {"gelu", "n", "in_place", g_unary, r_gelu, o_gelu, {OT_NMSE}, 0};
static const ot_op OP_RELU = {"relu", "n", "in_place", g_unary, r_relu, o_relu, {OT_NMSE}, 0};

/* ---- swiglu, geglu: n = {elements}; flag y_is_gate --------------------------------------- */

static int g_glu(ot_case *c) {
  ot_in_f32(c, 0, c->s->n[0], 1, 1, -6.0f, 6.0f);
  ot_in_f32(c, 1, c->s->n[0], 1, 1, -2.0f, 2.0f);
  ot_out(c, 0, ICL_TYPE_F32, c->s->n[0], 1, 1, c->s->flags & 1 ? 0 : -1);
  return 1;
}
static int r_swiglu(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_swiglu(be, in[0], in[1], out[0], err);
}
static int r_geglu(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_geglu(be, in[0], in[1], out[0], err);
}
static void o_glu(const ot_case *c, double *out[], double (*f)(double)) {
  for (int64_t i = 0; i < c->s->n[0]; i++) out[0][i] = f(ot_f(c, 0)[i]) * ot_f(c, 1)[i];
}
static void o_swiglu(const ot_case *c, double *out[]) { o_glu(c, out, f_silu); }
static void o_geglu(const ot_case *c, double *out[]) { o_glu(c, out, f_gelu); }
static const ot_op OP_SWIGLU = {"swiglu", "n", "y_is_gate", g_glu, r_swiglu, o_swiglu, {OT_NMSE}, 0};
static const ot_op OP_GEGLU = {"geglu", "n", "y_is_gate", g_glu, r_geglu, o_geglu, {OT_NMSE}, 0};

/* ---- softmax: n = {d, rows}; flags in_place, neg_inf (every 11th entry -inf, row 1 all -inf) -- */

static int g_softmax(ot_case *c) {
  int64_t d = c->s->n[0], rows = c->s->n[1];
  float *x = ot_in_f32(c, 0, d, rows, 1, -20.0f, 20.0f);
  if (c->s->flags & 2) {
    for (int64_t i = 3; i < d * rows; i += 11) x[i] = -INFINITY;
    for (int64_t i = 0; rows > 1 && i < d; i++) x[d + i] = -INFINITY;
  }
  ot_out(c, 0, ICL_TYPE_F32, d, rows, 1, c->s->flags & 1 ? 0 : -1);
  return 1;
}
static int r_softmax(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_softmax(be, in[0], out[0], err);
}
static void o_softmax(const ot_case *c, double *out[]) {
  int64_t d = c->s->n[0];
  for (int64_t r = 0; r < c->s->n[1]; r++) {
    const float *x = ot_f(c, 0) + r * d;
    double mx = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < d; i++) mx = x[i] > mx ? x[i] : mx;
    for (int64_t i = 0; i < d; i++) sum += out[0][r * d + i] = mx == -INFINITY ? 0.0 : exp(x[i] - mx);
    for (int64_t i = 0; sum > 0.0 && i < d; i++) out[0][r * d + i] /= sum;
  }
}
static const ot_op OP_SOFTMAX = {"softmax", "d,rows", "in_place,neg_inf", g_softmax, r_softmax, o_softmax, {OT_NMSE}, 0};

/* ---- argmax: n = {d, rows}; row 0 has two equal maxima (the first must win) --------------- */

static int g_argmax(ot_case *c) {
  int64_t d = c->s->n[0], rows = c->s->n[1];
  float *x = ot_in_f32(c, 0, d, rows, 1, -20.0f, 20.0f);
  if (d >= 3) x[1] = x[d - 1] = 1000.0f;
  for (int64_t i = 3; i < d * rows; i += 11) x[i] = -INFINITY;
  ot_out(c, 0, ICL_TYPE_I32, rows, 1, 1, -1);
  return 1;
}
static int r_argmax(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_argmax(be, in[0], out[0], err);
}
static void o_argmax(const ot_case *c, double *out[]) {
  int64_t d = c->s->n[0];
  for (int64_t r = 0; r < c->s->n[1]; r++) {
    const float *x = ot_f(c, 0) + r * d;
    int64_t best = 0;
    for (int64_t i = 1; i < d; i++) best = x[i] > x[best] ? i : best;
    out[0][r] = (double)best;
  }
}
static const ot_op OP_ARGMAX = {"argmax", "d,rows", "", g_argmax, r_argmax, o_argmax, {OT_EXACT}, 0};

/* ---- lse_select: n = {d, rows, k}; every 13th entry -inf, row 1 all -inf when rows > 2 ----- */

static int g_lse_select(ot_case *c) {
  int64_t d = c->s->n[0], rows = c->s->n[1], k = c->s->n[2];
  float *x = ot_in_f32(c, 0, d, rows, 1, -30.0f, 30.0f);
  for (int64_t i = 5; i < d * rows; i += 13) x[i] = -INFINITY;
  for (int64_t i = 0; rows > 2 && i < d; i++) x[d + i] = -INFINITY;
  int32_t *ids = ot_in_i32(c, 1, k);
  for (int64_t j = 0; j < k; j++) ids[j] = (int32_t)((j * 7919 + (int64_t)c->seed) % d);
  ot_out(c, 0, ICL_TYPE_F32, k + 1, rows, 1, -1);
  return 1;
}
static int r_lse_select(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  return icl_op_lse_select(be, in[0], in[1], out[0], err);
}
static void o_lse_select(const ot_case *c, double *out[]) {
  int64_t d = c->s->n[0], k = c->s->n[2];
  for (int64_t r = 0; r < c->s->n[1]; r++) {
    const float *x = ot_f(c, 0) + r * d;
    double mx = -INFINITY, s = 0.0, *o = out[0] + r * (k + 1);
    for (int64_t i = 0; i < d; i++) mx = x[i] > mx ? x[i] : mx;
    for (int64_t i = 0; mx > -INFINITY && i < d; i++) s += exp(x[i] - mx);
    for (int64_t j = 0; j < k; j++) o[j] = x[ot_i(c, 1)[j]];
    o[k] = mx > -INFINITY ? mx + log(s) : -INFINITY;
  }
}
static const ot_op OP_LSE_SELECT = {"lse_select", "d,rows,k", "", g_lse_select, r_lse_select, o_lse_select, {OT_LSE}, 0};

/* ---- convert: n = {elements}; type T: f32 -> T -> T -> f32 (outputs a, b, y); values include
 * f16 overflow, subnormals and rounding ties' neighbours --------------------------------------- */

static int g_convert(ot_case *c) {
  int64_t n = c->s->n[0];
  float *x = ot_in_f32(c, 0, n, 1, 1, -70000.0f, 70000.0f);
  static const float special[] = {1e5f, -1e5f, 1e-8f, -3e-5f, 65519.0f, 0.1f, 65520.0f, 6.1e-5f};
  for (int64_t i = 0; i < n && i < 8; i++) x[i] = special[i];
  for (int64_t i = 8; i < n && i < 60; i++) x[i] *= 1e-9f;
  for (int i = 0; i < 3; i++) ot_out(c, i, i == 2 ? ICL_TYPE_F32 : c->type, n, 1, 1, -1);
  return 1;
}
static int r_convert(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)c;
  int rc = icl_op_convert(be, in[0], out[0], err);
  if (!rc) rc = icl_op_convert(be, out[0], out[1], err);
  return rc ? rc : icl_op_convert(be, out[1], out[2], err);
}
/* f16 by the compiler's _Float16 (IEEE round to nearest even, overflow to inf). */
static void o_convert(const ot_case *c, double *out[]) {
  for (int64_t i = 0; i < c->s->n[0]; i++) {
    float x = ot_f(c, 0)[i];
    double v = c->type == ICL_TYPE_F16 ? (double)(_Float16)x : (double)x;
    out[0][i] = out[1][i] = out[2][i] = v;
  }
}
static const ot_op OP_CONVERT = {"convert", "n", "", g_convert, r_convert, o_convert,
                                 {OT_EXACT, OT_EXACT, OT_EXACT}, 0};

/* ---- copy2d: n = {rows, cols, src_off, src_stride, dst_off, dst_stride} (strides 0 broadcast);
 * fill2d: n = {rows, cols, off, stride}, f = value. dst starts random, written in place ------ */

static int64_t span(int64_t off, int64_t stride, int64_t rows, int64_t cols) { return off + (rows - 1) * stride + cols + 5; }

static int g_copy2d(ot_case *c) {
  const int64_t *n = c->s->n;
  ot_in_f32(c, 0, span(n[2], n[3], n[0], n[1]), 1, 1, -1.0f, 1.0f);
  ot_in_f32(c, 1, span(n[4], n[5], n[0], n[1]), 1, 1, -1.0f, 1.0f);
  ot_out(c, 0, ICL_TYPE_F32, c->in[1].ne[0], 1, 1, 1);
  return 1;
}
static int r_copy2d(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  const int64_t *n = c->s->n;
  return icl_op_copy2d(be, in[0], n[2], n[3], out[0], n[4], n[5], n[0], n[1], err);
}
static void o_copy2d(const ot_case *c, double *out[]) {
  const int64_t *n = c->s->n;
  for (int64_t i = 0; i < c->in[1].ne[0]; i++) out[0][i] = ot_f(c, 1)[i];
  for (int64_t r = 0; r < n[0]; r++)
    for (int64_t k = 0; k < n[1]; k++) out[0][n[4] + r * n[5] + k] = ot_f(c, 0)[n[2] + r * n[3] + k];
}
static const ot_op OP_COPY2D = {"copy2d", "rows,cols,src_off,src_stride,dst_off,dst_stride", "", g_copy2d, r_copy2d,
                                o_copy2d, {OT_EXACT}, 0};

static int g_fill2d(ot_case *c) {
  const int64_t *n = c->s->n;
  ot_in_f32(c, 0, span(n[2], n[3], n[0], n[1]), 1, 1, -1.0f, 1.0f);
  ot_out(c, 0, ICL_TYPE_F32, c->in[0].ne[0], 1, 1, 0);
  return 1;
}
static int r_fill2d(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err) {
  (void)in;
  const int64_t *n = c->s->n;
  return icl_op_fill2d(be, out[0], n[2], n[3], n[0], n[1], (float)c->s->f, err);
}
static void o_fill2d(const ot_case *c, double *out[]) {
  const int64_t *n = c->s->n;
  for (int64_t i = 0; i < c->in[0].ne[0]; i++) out[0][i] = ot_f(c, 0)[i];
  for (int64_t r = 0; r < n[0]; r++)
    for (int64_t k = 0; k < n[1]; k++) out[0][n[2] + r * n[3] + k] = (double)(float)c->s->f;
}
static const ot_op OP_FILL2D = {"fill2d", "rows,cols,off,stride,-,-,value", "", g_fill2d, r_fill2d, o_fill2d,
                                {OT_EXACT}, 0};

#endif
