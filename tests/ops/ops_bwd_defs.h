/* The backward section's op definitions (CPU training op, float64 reference, float64 forward for
 * finite differences) and its table. Included by ops_bwd.h only. */
#ifndef ICL_OPS_BWD_DEFS_H
#define ICL_OPS_BWD_DEFS_H

/* ---- matmul: n = {K, rows, tokens}; dW, dx -------------------------------------------------- */

static void bg_matmul(ob_case *c) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  ob_in(c, R * K, -1, 1), ob_in(c, n * K, -1, 1), ob_dy(c, n * R);
  ob_out(c, "dW", R * K, 0), ob_out(c, "dx", n * K, 1);
}
static int br_matmul(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) {
  cpu_scratch ws = {0};
  int rc = tr_matmul_bwd(cb, &ws, c->in[0], c->s->n[0], c->s->n[1], c->in[1], c->s->n[2], c->dy, g[0], g[1], err);
  free(ws.p);
  return rc;
}
static void bo_matmul(const ob_case *c, double *xd[], double *g[]) {
  double *dy = ob_dyd(c);
  icl_refd_matmul_bwd(xd[0], c->s->n[0], c->s->n[1], xd[1], c->s->n[2], dy, g[0], NULL, g[1]);
  free(dy);
}
static void bf_matmul(const ob_case *c, double *xd[], double *y) {
  icl_refd_matmul(xd[0], NULL, c->s->n[0], c->s->n[1], xd[1], c->s->n[2], y);
}
static const ob_op OB_MATMUL = {"matmul_bwd", "K,rows,tokens", bg_matmul, br_matmul, bo_matmul, bf_matmul};

/* ---- layer_norm (dx, dw, db), rms_norm (dx, dw): n = {d, rows} -------------------------------- */

#define OB_EPS 1e-5
static void bg_norm(ob_case *c, int layer) {
  int64_t d = c->s->n[0], n = c->s->n[1];
  ob_in(c, d * n, -2, 3), ob_in(c, d, 0.5f, 1.5f), ob_dy(c, d * n);
  if (layer) ob_in(c, d, -1, 1);
  ob_out(c, "dx", d * n, 0), ob_out(c, "dw", d, 1);
  if (layer) ob_out(c, "db", d, 2);
}
static void bg_layer_norm(ob_case *c) { bg_norm(c, 1); }
static void bg_rms_norm(ob_case *c) { bg_norm(c, 0); }
static int br_norm(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err, int layer) {
  (void)err;
  int64_t d = c->s->n[0], n = c->s->n[1];
  float *stats = ot_xmalloc((size_t)(2 * n) * sizeof *stats);
  if (layer) tr_layer_norm_bwd(cb, c->in[0], c->in[1], d, n, (float)OB_EPS, c->dy, g[0], g[1], g[2], stats);
  else tr_rms_norm_bwd(cb, c->in[0], c->in[1], d, n, (float)OB_EPS, c->dy, g[0], g[1], stats);
  free(stats);
  return ICL_OK;
}
static int br_layer_norm(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) { return br_norm(cb, c, g, err, 1); }
static int br_rms_norm(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) { return br_norm(cb, c, g, err, 0); }
static void bo_layer_norm(const ob_case *c, double *xd[], double *g[]) {
  double *dy = ob_dyd(c);
  icl_refd_layer_norm_bwd(xd[0], xd[1], c->s->n[0], c->s->n[1], (double)(float)OB_EPS, dy, g[0], g[1], g[2]);
  free(dy);
}
static void bo_rms_norm(const ob_case *c, double *xd[], double *g[]) {
  double *dy = ob_dyd(c);
  icl_refd_rms_norm_bwd(xd[0], xd[1], c->s->n[0], c->s->n[1], (double)(float)OB_EPS, dy, g[0], g[1]);
  free(dy);
}
static void bf_layer_norm(const ob_case *c, double *xd[], double *y) {
  icl_refd_layer_norm(xd[0], xd[1], xd[2], c->s->n[0], c->s->n[1], (double)(float)OB_EPS, y);
}
static void bf_rms_norm(const ob_case *c, double *xd[], double *y) {
  icl_refd_rms_norm(xd[0], xd[1], c->s->n[0], c->s->n[1], (double)(float)OB_EPS, y);
}
static const ob_op OB_LAYER_NORM = {"layer_norm_bwd", "d,rows", bg_layer_norm, br_layer_norm, bo_layer_norm,
                                    bf_layer_norm};
static const ob_op OB_RMS_NORM = {"rms_norm_bwd", "d,rows", bg_rms_norm, br_rms_norm, bo_rms_norm, bf_rms_norm};

/* ---- attention: n = {hd, heads, T, B}, f = scale (0: 1/sqrt(hd)); the pattern P (an input,
 * not differentiated) comes from the float64 forward; dq, dk, dv ------------------------------ */

static double ob_scale(const ob_case *c) { return c->s->f > 0 ? c->s->f : (double)(1.0f / sqrtf((float)c->s->n[0])); }
static void bg_attention(ob_case *c) {
  const int64_t *s = c->s->n;
  int64_t n = s[0] * s[1] * s[2] * s[3], np = s[2] * s[2] * s[1] * s[3];
  for (int i = 0; i < 3; i++) ob_in(c, n, -1, 1);
  double *d[3], *z = ot_xmalloc((size_t)n * sizeof *z), *P = ot_xmalloc((size_t)np * sizeof *P);
  for (int i = 0; i < 3; i++) {
    d[i] = ot_xmalloc((size_t)n * sizeof(double));
    for (int64_t k = 0; k < n; k++) d[i][k] = c->in[i][k];
  }
  icl_refd_attention(d[0], d[1], d[2], s[0], s[1], s[2], s[3], ob_scale(c), z, P);
  float *Pf = ob_in(c, np, 0, 1);
  for (int64_t k = 0; k < np; k++) Pf[k] = (float)P[k];
  for (int i = 0; i < 3; i++) free(d[i]);
  free(z), free(P);
  ob_dy(c, n);
  ob_out(c, "dq", n, 0), ob_out(c, "dk", n, 1), ob_out(c, "dv", n, 2);
}
static int br_attention(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) {
  const int64_t *s = c->s->n;
  return tr_attention_bwd(cb, c->in[0], c->in[1], c->in[2], c->in[3], c->dy, s[0], s[1], s[2], s[3],
                          (float)ob_scale(c), g[0], g[1], g[2], err);
}
static void bo_attention(const ob_case *c, double *xd[], double *g[]) {
  const int64_t *s = c->s->n;
  double *dy = ob_dyd(c);
  icl_refd_attention_bwd(xd[0], xd[1], xd[2], s[0], s[1], s[2], s[3], ob_scale(c), dy, g[0], g[1], g[2]);
  free(dy);
}
static void bf_attention(const ob_case *c, double *xd[], double *y) {
  const int64_t *s = c->s->n;
  icl_refd_attention(xd[0], xd[1], xd[2], s[0], s[1], s[2], s[3], ob_scale(c), y, NULL);
}
static const ob_op OB_ATTENTION = {"attention_bwd", "hd,heads,T,B,-,-,scale", bg_attention, br_attention, bo_attention,
                                   bf_attention};

/* ---- smeared key: n = {hd, heads, T, B}; forward (ks) and backward (dk, dalpha) ------------- */

static void bg_smear(ob_case *c, int bwd) {
  const int64_t *s = c->s->n;
  int64_t n = s[0] * s[1] * s[2] * s[3];
  ob_in(c, n, -1, 1), ob_in(c, s[1], -2, 2), ob_dy(c, n);
  if (bwd) ob_out(c, "dk", n, 0), ob_out(c, "dalpha", s[1], 1);
  else ob_out(c, "ks", n, -1);
}
static void bg_smear_bwd(ob_case *c) { bg_smear(c, 1); }
static void bg_smear_fwd(ob_case *c) { bg_smear(c, 0); }
static int br_smear_bwd(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) {
  (void)err;
  const int64_t *s = c->s->n;
  tr_smear_bwd(cb, c->in[0], c->in[1], s[0], s[1], s[2], s[3], c->dy, g[0], g[1]);
  return ICL_OK;
}
static int br_smear_fwd(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) {
  (void)err;
  const int64_t *s = c->s->n;
  tr_smear_fwd(cb, c->in[0], c->in[1], s[0], s[1], s[2], s[3], g[0]);
  return ICL_OK;
}
static void bo_smear_bwd(const ob_case *c, double *xd[], double *g[]) {
  const int64_t *s = c->s->n;
  double *dy = ob_dyd(c);
  icl_refd_smear_bwd(xd[0], xd[1], s[0], s[1], s[2], s[3], dy, g[0], g[1]);
  free(dy);
}
static void bf_smear(const ob_case *c, double *xd[], double *y) {
  const int64_t *s = c->s->n;
  icl_refd_smear(xd[0], xd[1], s[0], s[1], s[2], s[3], y);
}
static void bo_smear_fwd(const ob_case *c, double *xd[], double *g[]) { bf_smear(c, xd, g[0]); }
static const ob_op OB_SMEAR = {"smear_bwd", "hd,heads,T,B", bg_smear_bwd, br_smear_bwd, bo_smear_bwd, bf_smear};
static const ob_op OB_SMEAR_FWD = {"smear_fwd", "hd,heads,T,B", bg_smear_fwd, br_smear_fwd, bo_smear_fwd, NULL};

/* ---- rope (NEOX, positions 0..T-1 per sequence): n = {hd, heads, T, B, n_rot}, f = base; dx --- */

static void bg_rope(ob_case *c) {
  const int64_t *s = c->s->n;
  int64_t n = s[0] * s[1] * s[2] * s[3];
  ob_in(c, n, -1, 1), ob_dy(c, n), ob_out(c, "dx", n, 0);
}
static int br_rope(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) {
  (void)err;
  const int64_t *s = c->s->n;
  int32_t *pos = ot_xmalloc((size_t)(s[2] * s[3]) * sizeof *pos);
  for (int64_t i = 0; i < s[2] * s[3]; i++) pos[i] = (int32_t)(i % s[2]);
  memcpy(g[0], c->dy, (size_t)c->ny * sizeof(float));
  tr_rope_bwd(cb, g[0], s[0], s[1], s[2] * s[3], pos, (int)s[4], (float)c->s->f);
  free(pos);
  return ICL_OK;
}
static void bo_rope(const ob_case *c, double *xd[], double *g[]) {
  (void)xd;
  const int64_t *s = c->s->n;
  double *dy = ob_dyd(c);
  icl_refd_rope_bwd(dy, s[0], s[1], s[2], s[3], (int)s[4], c->s->f, g[0]);
  free(dy);
}
static void bf_rope(const ob_case *c, double *xd[], double *y) {
  const int64_t *s = c->s->n;
  icl_refd_rope(xd[0], s[0], s[1], s[2], s[3], (int)s[4], c->s->f, y);
}
static const ob_op OB_ROPE = {"rope_bwd", "hd,heads,T,B,n_rot,-,base", bg_rope, br_rope, bo_rope, bf_rope};

/* ---- gelu, relu: n = {elements}; dx (relu's backward reads the forward output y) -------------- */

static void bg_act(ob_case *c) {
  int64_t n = c->s->n[0];
  float *x = ob_in(c, n, -3, 3);
  for (int64_t i = 0; i < n; i++) x[i] = fabsf(x[i]) < 1e-3f ? 0.5f : x[i]; /* relu's kink is not differentiable */
  float *y = ob_in(c, n, 0, 1);
  for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0.0f;
  ob_dy(c, n), ob_out(c, "dx", n, 0);
}
static int br_gelu(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) {
  (void)err;
  tr_gelu_bwd(cb, c->in[0], c->dy, c->s->n[0], g[0]);
  return ICL_OK;
}
static int br_relu(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) {
  (void)err;
  tr_relu_bwd(cb, c->in[1], c->dy, c->s->n[0], g[0]);
  return ICL_OK;
}
static void bo_act(const ob_case *c, double *xd[], double *g[], int relu) {
  double *dy = ob_dyd(c);
  (relu ? icl_refd_relu_bwd : icl_refd_gelu_bwd)(xd[0], c->s->n[0], dy, g[0]);
  free(dy);
}
static void bo_gelu(const ob_case *c, double *xd[], double *g[]) { bo_act(c, xd, g, 0); }
static void bo_relu(const ob_case *c, double *xd[], double *g[]) { bo_act(c, xd, g, 1); }
static void bf_gelu(const ob_case *c, double *xd[], double *y) { icl_refd_gelu(xd[0], c->s->n[0], y); }
static void bf_relu(const ob_case *c, double *xd[], double *y) { icl_refd_relu(xd[0], c->s->n[0], y); }
static const ob_op OB_GELU = {"gelu_bwd", "n", bg_act, br_gelu, bo_gelu, bf_gelu};
static const ob_op OB_RELU = {"relu_bwd", "n", bg_act, br_relu, bo_relu, bf_relu};

/* ---- embedding: n = {d, rows, ids} (every 5th id -1 = no token); forward x, backward dE -------- */

static void bg_embed(ob_case *c, int bwd) {
  int64_t d = c->s->n[0], rows = c->s->n[1], n = c->s->n[2];
  ob_in(c, d * rows, -1, 1), ob_dy(c, d * n);
  c->ids = ot_xmalloc((size_t)n * sizeof *c->ids);
  uint64_t s = c->seed;
  for (int64_t i = 0; i < n; i++) c->ids[i] = i % 5 == 3 ? -1 : (int32_t)(t_rand_u64(&s) % (uint64_t)rows);
  if (bwd) ob_out(c, "dE", d * rows, 0);
  else ob_out(c, "x", d * n, -1);
}
static void bg_embed_bwd(ob_case *c) { bg_embed(c, 1); }
static void bg_embed_fwd(ob_case *c) { bg_embed(c, 0); }
static int br_embed_bwd(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) {
  (void)err;
  tr_embed_bwd(cb, c->ids, c->dy, c->s->n[0], c->s->n[2], g[0]);
  return ICL_OK;
}
static int br_embed_fwd(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) {
  (void)err;
  tr_embed_fwd(cb, c->in[0], c->s->n[0], c->ids, c->s->n[2], g[0]);
  return ICL_OK;
}
static void bo_embed_bwd(const ob_case *c, double *xd[], double *g[]) {
  (void)xd;
  double *dy = ob_dyd(c);
  icl_refd_embed_bwd(c->ids, dy, c->s->n[0], c->s->n[2], g[0]);
  free(dy);
}
static void bf_embed(const ob_case *c, double *xd[], double *y) { icl_refd_embed(xd[0], c->s->n[0], c->ids, c->s->n[2], y); }
static void bo_embed_fwd(const ob_case *c, double *xd[], double *g[]) { bf_embed(c, xd, g[0]); }
static const ob_op OB_EMBED = {"embed_bwd", "d,rows,ids", bg_embed_bwd, br_embed_bwd, bo_embed_bwd, bf_embed};
static const ob_op OB_EMBED_FWD = {"embed_fwd", "d,rows,ids", bg_embed_fwd, br_embed_fwd, bo_embed_fwd, NULL};

/* ---- cross-entropy: n = {vocab, rows}, f = 1 weighted; every 4th target -1 (not scored);
 * dlogits and the loss (loss = sum(y * dy) with y = [loss], dy = [1]) ------------------------- */

static void bg_xent(ob_case *c) {
  int64_t nv = c->s->n[0], n = c->s->n[1];
  ob_in(c, nv * n, -3, 3), ob_in(c, n, 0.1f, 2.0f);
  c->ids = ot_xmalloc((size_t)n * sizeof *c->ids);
  uint64_t s = c->seed;
  for (int64_t i = 0; i < n; i++) c->ids[i] = i % 4 == 1 ? -1 : (int32_t)(t_rand_u64(&s) % (uint64_t)nv);
  c->ny = 1, c->dy = ot_xmalloc(sizeof *c->dy), c->dy[0] = 1.0f;
  ob_out(c, "dlogits", nv * n, 0), ob_out(c, "loss", 1, -1);
}
static int br_xent(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) {
  (void)err;
  int64_t nv = c->s->n[0], n = c->s->n[1];
  float *probs = ot_xmalloc((size_t)(nv * n + n) * sizeof *probs);
  g[1][0] = (float)tr_xent(cb, c->in[0], nv, n, c->ids, c->s->f > 0 ? c->in[1] : NULL, probs, g[0]);
  free(probs);
  return ICL_OK;
}
static void bo_xent(const ob_case *c, double *xd[], double *g[]) {
  g[1][0] = icl_refd_xent(xd[0], c->s->n[0], c->s->n[1], c->ids, c->s->f > 0 ? xd[1] : NULL, g[0]);
}
static void bf_xent(const ob_case *c, double *xd[], double *y) {
  y[0] = icl_refd_xent(xd[0], c->s->n[0], c->s->n[1], c->ids, c->s->f > 0 ? xd[1] : NULL, NULL);
}
static const ob_op OB_XENT = {"xent", "vocab,rows,-,-,-,-,weighted", bg_xent, br_xent, bo_xent, bf_xent};

/* ---- sum_rows (bias and position-table gradients): n = {d, T, B}; dst[d, T] = sum over B ------- */

static void bg_sum_rows(ob_case *c) {
  ob_in(c, c->s->n[0] * c->s->n[1] * c->s->n[2], -1, 1), ob_out(c, "dst", c->s->n[0] * c->s->n[1], -1);
}
static int br_sum_rows(cpu_backend *cb, const ob_case *c, float *g[], icl_error *err) {
  (void)err;
  tr_sum_rows(cb, c->in[0], c->s->n[0], c->s->n[1], c->s->n[2], g[0]);
  return ICL_OK;
}
static void bo_sum_rows(const ob_case *c, double *xd[], double *g[]) {
  int64_t dt = c->s->n[0] * c->s->n[1];
  for (int64_t b = 0; b < c->s->n[2]; b++)
    for (int64_t i = 0; i < dt; i++) g[0][i] += xd[0][b * dt + i];
}
static const ob_op OB_SUM_ROWS = {"sum_rows", "d,T,B", bg_sum_rows, br_sum_rows, bo_sum_rows, NULL};

/* ---- the backward table ------------------------------------------------------------------- */

static const ot_shape OBS_MATMUL[] = {{"tiny", {6, 5, 4}, 0, OB_FD}, {"odd", {33, 17, 9}}, {"tile", {70, 33, 50}},
                                      {"big", {256, 256, 300}}};
static const ot_shape OBS_NORM[] = {{"tiny", {12, 5}, 0, OB_FD}, {"odd", {97, 3}}, {"model", {200, 40}}};
static const ot_shape OBS_ATTN[] = {{"tiny", {4, 2, 5, 2}, 0, OB_FD}, {"tiny", {4, 2, 5, 2}, 1.0, OB_FD},
                                    {"odd", {16, 3, 70, 3}}, {"model", {64, 4, 33, 2}}};
static const ot_shape OBS_SMEAR[] = {{"tiny", {3, 2, 5, 2}, 0, OB_FD}, {"odd", {17, 3, 9, 2}}};
static const ot_shape OBS_ROPE[] = {{"tiny", {6, 2, 7, 2, 6}, 10000.0, OB_FD}, {"odd", {64, 3, 9, 2, 32}, 10000.0}};
static const ot_shape OBS_ACT[] = {{"tiny", {50}, 0, OB_FD}, {"tail", {1001}}};
static const ot_shape OBS_EMBED[] = {{"tiny", {6, 7, 9}, 0, OB_FD}, {"odd", {97, 50, 33}}};
static const ot_shape OBS_XENT[] = {{"tiny", {7, 9}, 0, OB_FD}, {"tiny", {7, 9}, 1.0, OB_FD}, {"odd", {1000, 7}, 1.0}};
static const ot_shape OBS_SUM[] = {{"tiny", {1, 1, 1}}, {"odd", {97, 3, 5}}, {"model", {576, 1, 300}}};

#define OB_CPU {2e-5, "f32 rounding over sums of up to a few hundred terms against float64: measured ~1e-7..3e-6"}
#define OB_FDT {1e-6, "central differences, h = 1e-5 in float64: truncation ~h^2 x the third derivative, ~1e-10..1e-8"}
#define OB_COPY {0, "copies and exact sums of copies"}
static const ob_entry OB_TABLE[] = {
    {&OB_MATMUL, SH(OBS_MATMUL), OB_CPU, OB_FDT},     {&OB_LAYER_NORM, SH(OBS_NORM), OB_CPU, OB_FDT},
    {&OB_RMS_NORM, SH(OBS_NORM), OB_CPU, OB_FDT},     {&OB_ATTENTION, SH(OBS_ATTN), OB_CPU, OB_FDT},
    {&OB_SMEAR, SH(OBS_SMEAR), OB_CPU, OB_FDT},       {&OB_SMEAR_FWD, SH(OBS_SMEAR), OB_CPU, OB_FDT},
    {&OB_ROPE, SH(OBS_ROPE), OB_CPU, OB_FDT},         {&OB_GELU, SH(OBS_ACT), OB_CPU, OB_FDT},
    {&OB_RELU, SH(OBS_ACT), OB_CPU, OB_FDT},          {&OB_EMBED, SH(OBS_EMBED), OB_CPU, OB_FDT},
    {&OB_EMBED_FWD, SH(OBS_EMBED), OB_COPY, OB_FDT},  {&OB_XENT, SH(OBS_XENT), OB_CPU, OB_FDT},
    {&OB_SUM_ROWS, SH(OBS_SUM), OB_CPU, OB_FDT},
};

#endif
