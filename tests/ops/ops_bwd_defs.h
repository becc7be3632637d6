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
static int br_matmul(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  ob_views v = {be};
  return ob_views_free(&v, icl_op_matmul_bwd(be, ob_f(&v, c->in[0], K, R), ob_f(&v, c->in[1], K, n),
                                             ob_f(&v, c->dy, R, n), ob_f(&v, g[0], K, R), ob_f(&v, g[1], K, n), 0, err));
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

/* ---- matmul_bwd_group (q, k, v on one input): n = {K, rows, tokens}; dW of each of 3 weights, dx; dy is the three
 * products' upstream gradients one after the other ---------------------------------------------- */

enum { OB_GROUP = 3 };
static void bg_matmul_group(ob_case *c) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  for (int i = 0; i < OB_GROUP; i++) ob_in(c, R * K, -1, 1);
  ob_in(c, n * K, -1, 1), ob_dy(c, OB_GROUP * n * R);
  ob_out(c, "dWq", R * K, 0), ob_out(c, "dWk", R * K, 1), ob_out(c, "dWv", R * K, 2), ob_out(c, "dx", n * K, 3);
}
static int br_matmul_group(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  ob_views v = {be};
  icl_dt w[OB_GROUP], dy[OB_GROUP], dw[OB_GROUP];
  for (int i = 0; i < OB_GROUP; i++)
    w[i] = *ob_f(&v, c->in[i], K, R), dy[i] = *ob_f(&v, c->dy + i * n * R, R, n), dw[i] = *ob_f(&v, g[i], K, R);
  return ob_views_free(&v, icl_op_matmul_bwd_group(be, OB_GROUP, w, ob_f(&v, c->in[OB_GROUP], K, n), dy, dw,
                                                   ob_f(&v, g[OB_GROUP], K, n), 0, err));
}
static void bo_matmul_group(const ob_case *c, double *xd[], double *g[]) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  double *dy = ob_dyd(c);
  for (int i = 0; i < OB_GROUP; i++)
    icl_refd_matmul_bwd(xd[i], K, R, xd[OB_GROUP], n, dy + i * n * R, g[i], NULL, g[OB_GROUP]);
  free(dy);
}
static void bf_matmul_group(const ob_case *c, double *xd[], double *y) {
  int64_t K = c->s->n[0], R = c->s->n[1], n = c->s->n[2];
  for (int i = 0; i < OB_GROUP; i++) icl_refd_matmul(xd[i], NULL, K, R, xd[OB_GROUP], n, y + i * n * R);
}
static const ob_op OB_MATMUL_GROUP = {"matmul_bwd_group", "K,rows,tokens", bg_matmul_group, br_matmul_group,
                                      bo_matmul_group, bf_matmul_group};

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
static int br_norm(icl_backend *be, const ob_case *c, float *g[], icl_error *err, int layer) {
  int64_t d = c->s->n[0], n = c->s->n[1];
  float *stats = ot_xmalloc((size_t)(2 * n) * sizeof *stats);
  ob_views v = {be};
  const icl_dt *x = ob_f(&v, c->in[0], d, n), *w = ob_f(&v, c->in[1], d, 1), *dy = ob_f(&v, c->dy, d, n);
  const icl_dt *dx = ob_f(&v, g[0], d, n), *dw = ob_f(&v, g[1], d, 1), *st = ob_f(&v, stats, 2, n);
  const icl_dt *db = layer ? ob_f(&v, g[2], d, 1) : NULL;
  int rc = icl_op_norm_bwd(be, !layer, x, w, (float)OB_EPS, dy, dx, dw, db, st, 0, err);
  free(stats);
  return ob_views_free(&v, rc);
}
static int br_layer_norm(icl_backend *be, const ob_case *c, float *g[], icl_error *err) { return br_norm(be, c, g, err, 1); }
static int br_rms_norm(icl_backend *be, const ob_case *c, float *g[], icl_error *err) { return br_norm(be, c, g, err, 0); }
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

/* ---- norm_fwd (the trainer's norm forward): y and each row's statistics (mean, 0 for rms; 1/sqrt(var + eps)) -- */

static void bg_norm_fwd(ob_case *c, int layer) {
  int64_t d = c->s->n[0], n = c->s->n[1];
  ob_in(c, d * n, -2, 3), ob_in(c, d, 0.5f, 1.5f);
  if (layer) ob_in(c, d, -1, 1);
  ob_out(c, "y", d * n, -1), ob_out(c, "stats", 2 * n, -1);
}
static void bg_layer_norm_fwd(ob_case *c) { bg_norm_fwd(c, 1); }
static void bg_rms_norm_fwd(ob_case *c) { bg_norm_fwd(c, 0); }
static int br_norm_fwd(icl_backend *be, const ob_case *c, float *g[], icl_error *err, int layer) {
  int64_t d = c->s->n[0], n = c->s->n[1];
  ob_views v = {be};
  return ob_views_free(&v, icl_op_norm_fwd(be, !layer, ob_f(&v, c->in[0], d, n), ob_f(&v, c->in[1], d, 1),
                                           layer ? ob_f(&v, c->in[2], d, 1) : NULL, (float)OB_EPS,
                                           ob_f(&v, g[0], d, n), ob_f(&v, g[1], 2, n), err));
}
static int br_layer_norm_fwd(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  return br_norm_fwd(be, c, g, err, 1);
}
static int br_rms_norm_fwd(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  return br_norm_fwd(be, c, g, err, 0);
}
static void bo_norm_fwd(const ob_case *c, double *xd[], double *g[], int layer) {
  int64_t d = c->s->n[0], n = c->s->n[1];
  if (layer) icl_refd_layer_norm(xd[0], xd[1], xd[2], d, n, (double)(float)OB_EPS, g[0]);
  else icl_refd_rms_norm(xd[0], xd[1], d, n, (double)(float)OB_EPS, g[0]);
  for (int64_t r = 0; r < n; r++) {
    const double *x = xd[0] + r * d;
    double m = 0.0, v = 0.0;
    for (int64_t j = 0; layer && j < d; j++) m += x[j];
    m /= (double)d;
    for (int64_t j = 0; j < d; j++) v += (x[j] - m) * (x[j] - m);
    g[1][2 * r] = m, g[1][2 * r + 1] = 1.0 / sqrt(v / (double)d + (double)(float)OB_EPS);
  }
}
static void bo_layer_norm_fwd(const ob_case *c, double *xd[], double *g[]) { bo_norm_fwd(c, xd, g, 1); }
static void bo_rms_norm_fwd(const ob_case *c, double *xd[], double *g[]) { bo_norm_fwd(c, xd, g, 0); }
static const ob_op OB_LAYER_NORM_FWD = {"layer_norm_fwd", "d,rows", bg_layer_norm_fwd, br_layer_norm_fwd,
                                        bo_layer_norm_fwd, NULL};
static const ob_op OB_RMS_NORM_FWD = {"rms_norm_fwd", "d,rows", bg_rms_norm_fwd, br_rms_norm_fwd, bo_rms_norm_fwd,
                                      NULL};

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
static int br_attention(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  const int64_t *s = c->s->n;
  ob_views v = {be};
  const icl_dt *t[7];
  const float *p[7] = {c->in[0], c->in[1], c->in[2], c->dy, g[0], g[1], g[2]};
  for (int i = 0; i < 7; i++) t[i] = ob_v(&v, p[i], ICL_TYPE_F32, s[0], s[1], s[2], s[3]);
  const icl_dt *P = ob_v(&v, c->in[3], ICL_TYPE_F32, s[2], s[2], s[1], s[3]);
  return ob_views_free(&v, icl_op_attention_bwd(be, t[0], t[1], t[2], P, t[3], (float)ob_scale(c), t[4], t[5], t[6], err));
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

/* ---- attention_seqs (forward): n = {hd, heads, T, B}; z and the pattern P of every sequence ------------- */

static void bg_attn_seqs(ob_case *c) {
  const int64_t *s = c->s->n;
  int64_t n = s[0] * s[1] * s[2] * s[3];
  for (int i = 0; i < 3; i++) ob_in(c, n, -1, 1);
  ob_dy(c, n), ob_out(c, "z", n, -1), ob_out(c, "P", s[2] * s[2] * s[1] * s[3], -1);
}
static int br_attn_seqs(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  const int64_t *s = c->s->n;
  ob_views v = {be};
  const icl_dt *t[4];
  const float *p[4] = {c->in[0], c->in[1], c->in[2], g[0]};
  for (int i = 0; i < 4; i++) t[i] = ob_v(&v, p[i], ICL_TYPE_F32, s[0], s[1], s[2], s[3]);
  icl_attn_params ap = {.scale = (float)ob_scale(c)};
  return ob_views_free(&v, icl_op_attention_seqs(be, t[0], t[1], t[2], &ap, t[3],
                                                 ob_v(&v, g[1], ICL_TYPE_F32, s[2], s[2], s[1], s[3]), err));
}
static void bo_attn_seqs(const ob_case *c, double *xd[], double *g[]) {
  const int64_t *s = c->s->n;
  icl_refd_attention(xd[0], xd[1], xd[2], s[0], s[1], s[2], s[3], ob_scale(c), g[0], g[1]);
}
static const ob_op OB_ATTN_SEQS = {"attention_seqs", "hd,heads,T,B,-,-,scale", bg_attn_seqs, br_attn_seqs,
                                   bo_attn_seqs, NULL};

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
static int br_smear_bwd(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  const int64_t *s = c->s->n;
  ob_views v = {be};
  return ob_views_free(&v, icl_op_smear_bwd(be, ob_v(&v, c->in[0], ICL_TYPE_F32, s[0], s[1], s[2], s[3]),
                                            ob_f(&v, c->in[1], s[1], 1), ob_v(&v, c->dy, ICL_TYPE_F32, s[0], s[1], s[2], s[3]),
                                            ob_v(&v, g[0], ICL_TYPE_F32, s[0], s[1], s[2], s[3]), ob_f(&v, g[1], s[1], 1), err));
}
static int br_smear_fwd(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  const int64_t *s = c->s->n;
  ob_views v = {be};
  return ob_views_free(&v, icl_op_smear(be, ob_v(&v, c->in[0], ICL_TYPE_F32, s[0], s[1], s[2], s[3]),
                                        ob_f(&v, c->in[1], s[1], 1), ob_v(&v, g[0], ICL_TYPE_F32, s[0], s[1], s[2], s[3]), err));
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
static int br_rope(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  const int64_t *s = c->s->n;
  int32_t *pos = ot_xmalloc((size_t)(s[2] * s[3]) * sizeof *pos);
  for (int64_t i = 0; i < s[2] * s[3]; i++) pos[i] = (int32_t)(i % s[2]);
  memcpy(g[0], c->dy, (size_t)c->ny * sizeof(float));
  ob_views v = {be};
  int rc = icl_op_rope_bwd(be, ob_v(&v, g[0], ICL_TYPE_F32, s[0], s[1], s[2] * s[3], 1),
                           ob_v(&v, pos, ICL_TYPE_I32, s[2] * s[3], 1, 1, 1), (int)s[4], (float)c->s->f, err);
  free(pos);
  return ob_views_free(&v, rc);
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
static int br_gelu(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  int64_t n = c->s->n[0];
  ob_views v = {be};
  return ob_views_free(&v, icl_op_gelu_bwd(be, ob_f(&v, c->in[0], n, 1), ob_f(&v, c->dy, n, 1), ob_f(&v, g[0], n, 1), err));
}
static int br_relu(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  int64_t n = c->s->n[0];
  ob_views v = {be};
  return ob_views_free(&v, icl_op_relu_bwd(be, ob_f(&v, c->in[1], n, 1), ob_f(&v, c->dy, n, 1), ob_f(&v, g[0], n, 1), err));
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
static int br_embed_bwd(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  int64_t d = c->s->n[0], rows = c->s->n[1], n = c->s->n[2];
  ob_views v = {be};
  return ob_views_free(&v, icl_op_embed_bwd(be, ob_v(&v, c->ids, ICL_TYPE_I32, n, 1, 1, 1), ob_f(&v, c->dy, d, n),
                                            ob_f(&v, g[0], d, rows), err));
}
static int br_embed_fwd(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  int64_t d = c->s->n[0], rows = c->s->n[1], n = c->s->n[2];
  ob_views v = {be};
  return ob_views_free(&v, icl_op_embed(be, ob_f(&v, c->in[0], d, rows), ob_v(&v, c->ids, ICL_TYPE_I32, n, 1, 1, 1),
                                        ob_f(&v, g[0], d, n), err));
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
static int br_xent(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  int64_t nv = c->s->n[0], n = c->s->n[1];
  float *probs = ot_xmalloc((size_t)(nv * n + n) * sizeof *probs);
  ob_views v = {be};
  double loss = 0.0;
  int rc = icl_op_xent(be, ob_f(&v, c->in[0], nv, n), ob_v(&v, c->ids, ICL_TYPE_I32, n, 1, 1, 1),
                       c->s->f > 0 ? ob_f(&v, c->in[1], n, 1) : NULL, ob_f(&v, probs, nv * n + n, 1), ob_f(&v, g[0], nv, n),
                       &loss, err);
  g[1][0] = (float)loss;
  free(probs);
  return ob_views_free(&v, rc);
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
static int br_sum_rows(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  const int64_t *s = c->s->n;
  ob_views v = {be};
  return ob_views_free(&v, icl_op_sum_rows(be, ob_v(&v, c->in[0], ICL_TYPE_F32, s[0], s[1], s[2], 1),
                                           ob_f(&v, g[0], s[0], s[1]), err));
}
static void bo_sum_rows(const ob_case *c, double *xd[], double *g[]) {
  int64_t dt = c->s->n[0] * c->s->n[1];
  for (int64_t b = 0; b < c->s->n[2]; b++)
    for (int64_t i = 0; i < dt; i++) g[0][i] += xd[0][b * dt + i];
}
static const ob_op OB_SUM_ROWS = {"sum_rows", "d,T,B", bg_sum_rows, br_sum_rows, bo_sum_rows, NULL};

/* ---- optim_update: n = {n}; f > 0: AdamW, else SGD with momentum; outputs the new w, m1, m2 --------------- */

static const icl_optim_args OB_OPT_ADAM = {.lr = 1e-2f, .wd = 0.1f, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f,
                                           .gscale = 0.5f, .c1 = 0.271f, .c2 = 0.00399f, .adam = 1};
static const icl_optim_args OB_OPT_SGD = {.lr = 1e-2f, .wd = 0.1f, .mom = 0.9f, .gscale = 0.5f};
static void bg_optim(ob_case *c) {
  int64_t n = c->s->n[0];
  ob_in(c, n, -1, 1), ob_in(c, n, -1, 1), ob_in(c, n, -0.1f, 0.1f), ob_in(c, n, 0.0f, 0.01f), ob_dy(c, n);
  ob_out(c, "w", n, -1), ob_out(c, "m1", n, -1), ob_out(c, "m2", n, -1);
}
static int br_optim(icl_backend *be, const ob_case *c, float *g[], icl_error *err) {
  int64_t n = c->s->n[0];
  memcpy(g[0], c->in[0], (size_t)n * 4), memcpy(g[1], c->in[2], (size_t)n * 4), memcpy(g[2], c->in[3], (size_t)n * 4);
  ob_views v = {be};
  return ob_views_free(&v, icl_op_optim_update(be, ob_f(&v, g[0], n, 1), ob_f(&v, c->in[1], n, 1), ob_f(&v, g[1], n, 1),
                                               ob_f(&v, g[2], n, 1), c->s->f > 0 ? &OB_OPT_ADAM : &OB_OPT_SGD, err));
}
static void bo_optim(const ob_case *c, double *xd[], double *g[]) {
  int64_t n = c->s->n[0];
  const icl_optim_args *a = c->s->f > 0 ? &OB_OPT_ADAM : &OB_OPT_SGD;
  memcpy(g[0], xd[0], (size_t)n * 8), memcpy(g[1], xd[2], (size_t)n * 8), memcpy(g[2], xd[3], (size_t)n * 8);
  icl_refd_optim_update(g[0], xd[1], g[1], g[2], n, a->adam, a->lr, a->wd, a->b1, a->b2, a->eps, a->mom, a->gscale,
                        a->c1, a->c2);
}
static const ob_op OB_OPTIM = {"optim_update", "n", bg_optim, br_optim, bo_optim, NULL};

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
static const ot_shape OBS_ATTN_SEQS[] = {{"few", {4, 2, 3, 5}}, {"meta", {128, 1, 9, 7}, 1.0},
                                         {"odd", {16, 3, 70, 3}}, {"long", {32, 2, 130, 2}}};
static const ot_shape OBS_OPTIM[] = {{"sgd", {1001}}, {"adamw", {1001}, 1.0}, {"adamw", {40000}, 1.0}};

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
    {&OB_SUM_ROWS, SH(OBS_SUM), OB_CPU, OB_FDT},      {&OB_OPTIM, SH(OBS_OPTIM), OB_CPU, OB_FDT},
    {&OB_ATTN_SEQS, SH(OBS_ATTN_SEQS), OB_CPU, OB_FDT}, {&OB_MATMUL_GROUP, SH(OBS_MATMUL), OB_CPU, OB_FDT},
    {&OB_LAYER_NORM_FWD, SH(OBS_NORM), OB_CPU, OB_FDT}, {&OB_RMS_NORM_FWD, SH(OBS_NORM), OB_CPU, OB_FDT},
};

#endif
