/* Input makers shared by the op definitions of the table-driven op test. */
#ifndef ICL_OPS_GEN_H
#define ICL_OPS_GEN_H

#include "ops_harness.h"
#include "ref.h"

/* Input i: f32 [n0, n1, n2] uniform in [lo, hi). */
static float *ot_in_f32(ot_case *c, int i, int64_t n0, int64_t n1, int64_t n2, float lo, float hi) {
  ot_host *h = &c->in[i];
  *h = (ot_host){.type = ICL_TYPE_F32, .ne = {n0, n1, n2, 1}, .alias = -1};
  h->data = ot_xmalloc((size_t)(n0 * n1 * n2) * sizeof(float));
  t_rand_fill(h->data, n0 * n1 * n2, c->seed + 7919 * (uint64_t)i, lo, hi);
  if (c->n_in <= i) c->n_in = i + 1;
  return h->data;
}

/* Input i: i32 [n] (filled by the caller). */
static int32_t *ot_in_i32(ot_case *c, int i, int64_t n) {
  ot_host *h = &c->in[i];
  *h = (ot_host){.type = ICL_TYPE_I32, .ne = {n, 1, 1, 1}, .alias = -1};
  h->data = ot_xmalloc((size_t)n * sizeof(int32_t));
  if (c->n_in <= i) c->n_in = i + 1;
  return h->data;
}

/* Input i: random valid weights of type t, [cols, rows]. */
static void ot_in_weights(ot_case *c, int i, uint32_t t, int64_t cols, int64_t rows) {
  ot_host *h = &c->in[i];
  *h = (ot_host){.type = t, .ne = {cols, rows, 1, 1}, .alias = -1};
  h->data = ot_xmalloc(ot_bytes(h));
  icl_ref_random_weights(t, h->data, cols * rows, c->seed + 31 * (uint64_t)i);
  if (c->n_in <= i) c->n_in = i + 1;
}

/* Input i absent (the op gets NULL). */
static void ot_in_none(ot_case *c, int i) {
  c->in[i] = (ot_host){.type = ICL_TYPE_F32, .ne = {1, 1, 1, 1}, .alias = -1};
  if (c->n_in <= i) c->n_in = i + 1;
}

/* Output i: type t [n0, n1, n2], or (alias >= 0) written over input alias. */
static void ot_out(ot_case *c, int i, uint32_t t, int64_t n0, int64_t n1, int64_t n2, int alias) {
  c->out[i] = (ot_host){.type = t, .ne = {n0, n1, n2, 1}, .alias = alias};
  if (c->n_out <= i) c->n_out = i + 1;
}

static const float *ot_f(const ot_case *c, int i) { return c->in[i].data; }
static const int32_t *ot_i(const ot_case *c, int i) { return c->in[i].data; }

/* A weight matrix in double (decoded by icl_ref_dequant, which test_ref_quant checks by hand). */
static double *ot_weights_f64(const ot_case *c, int i) {
  const ot_host *h = &c->in[i];
  int64_t n = ot_nelem(h);
  float *f = ot_xmalloc((size_t)n * sizeof *f);
  double *d = ot_xmalloc((size_t)n * sizeof *d);
  icl_ref_dequant(h->type, h->data, f, n);
  for (int64_t k = 0; k < n; k++) d[k] = f[k];
  free(f);
  return d;
}

#endif
