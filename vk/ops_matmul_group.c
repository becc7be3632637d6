/* matmul_group on one token: q, k and v (or gate and up) of one weight type as one dispatch of the grouped mat-vec
 * (matvec.comp / matvec_cpu.comp built with GROUP), each workgroup on one member's rows with the lone kernel's
 * arithmetic, so every output is bit-identical to its own matmul. Members of two types form a group where the pair has
 * a variant (MIX, mix_pairs below: each member decoded by its type's own decoder). Anything else (several tokens, other
 * mixes, a weight above one binding, four members) runs the matmuls in turn. rms_matmul_group / rms_matmul_glu fold the
 * RMS norm of x into the same dispatch (NORM): each workgroup recomputes the row's sum of squares in rms_norm.comp's
 * order (shaders/common/norm.glsl); where the group does not fit, rms_norm then the unfused ops. add_rms_matmul_group /
 * add_rms_matmul_glu fold a post-norm residual add before that norm (POST): each workgroup also recomputes o's sum of
 * squares and the new residual t = x + rms_norm(o) * pw itself; workgroup 0 alone stores t. t has a buffer of its
 * own (the caller's): the other workgroups still read x, so writing in place would race. */
#include "vk_ops.h"

enum { GROUP_MAX = 3 };

typedef struct group_pc { /* matvec.comp and matvec_cpu.comp with GROUP (x_len: the uniform x's vec4s, CPU only) */
  uint32_t cols, x_off, x_len;
  uint32_t rows[GROUP_MAX], w_off[GROUP_MAX], y_off[GROUP_MAX];
  uint32_t g_end0, g_end1;
  uint32_t nw_off, nw_len; /* NORM: the norm weight's word offset; vec4s bound (CPU only) */
  float eps;
  uint32_t tmask; /* MIX: bit i set where member i is of the pair's second type */
  uint32_t o_off, o_len, pw_off, pw_len, t_off; /* POST: word offsets of o, pw, t; vec4s bound of o, pw (CPU) */
} group_pc;
_Static_assert(sizeof(group_pc) <= VK_MAX_PUSH, "push constants");

/* The type pairs with a grouped variant (shaders/variants.txt lists the same): those quantizers mix within q/k/v
 * or gate/up (Gemma 3's Q5_0 q, k beside a Q8_0 v; the k-quant mixes). */
typedef struct mix_pair {
  uint32_t a, b;
  const char *gpu, *cpu;
} mix_pair;
static const mix_pair mix_pairs[] = {
    {ICL_TYPE_Q4_0, ICL_TYPE_Q8_0, "matvec_group_q4_0_q8_0", "matvec_cpu_group_q4_0_q8_0"},
    {ICL_TYPE_Q5_0, ICL_TYPE_Q8_0, "matvec_group_q5_0_q8_0", "matvec_cpu_group_q5_0_q8_0"},
    {ICL_TYPE_Q5_1, ICL_TYPE_Q8_0, "matvec_group_q5_1_q8_0", "matvec_cpu_group_q5_1_q8_0"},
    {ICL_TYPE_Q3_K, ICL_TYPE_Q4_K, "matvec_group_q3_k_q4_k", "matvec_cpu_group_q3_k_q4_k"},
    {ICL_TYPE_Q3_K, ICL_TYPE_Q5_K, "matvec_group_q3_k_q5_k", "matvec_cpu_group_q3_k_q5_k"},
    {ICL_TYPE_Q4_K, ICL_TYPE_Q6_K, "matvec_group_q4_k_q6_k", "matvec_cpu_group_q4_k_q6_k"},
    {ICL_TYPE_Q5_K, ICL_TYPE_Q6_K, "matvec_group_q5_k_q6_k", "matvec_cpu_group_q5_k_q6_k"},
};

/* The members' types: one type (*mix NULL), or two of a pair with a variant (*mix that pair, *tmask the members of
 * its second type). 0 where the types have no grouped variant. */
static int group_types(int count, const icl_dt *w, const mix_pair **mix, uint32_t *tmask) {
  *mix = NULL, *tmask = 0;
  int one = 1;
  for (int i = 1; i < count; i++) one &= w[i].type == w[0].type;
  if (one) return 1;
  for (size_t p = 0; p < sizeof mix_pairs / sizeof mix_pairs[0]; p++) {
    uint32_t m = 0;
    int in = 1;
    for (int i = 0; i < count; i++) {
      in &= w[i].type == mix_pairs[p].a || w[i].type == mix_pairs[p].b;
      m |= (uint32_t)(w[i].type == mix_pairs[p].b) << i;
    }
    if (in) {
      *mix = &mix_pairs[p], *tmask = m;
      return 1;
    }
  }
  return 0;
}

/* One dispatch can take the group: one token, 2..3 weights of one type or of a pair with a variant, each within one
 * binding, and the device binds the grouped kernel's 11 buffers in one stage (4 of them uniform on CPU devices; the
 * spec's minimum is 4 storage buffers a stage, so a small device runs the ops in turn). */
static int group_fits(const vk_ctx *c, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y) {
  const mix_pair *mix;
  uint32_t tmask;
  int cpu = vk_cpu_shape(c);
  if (c->info.max_stage_storage < (cpu ? 7u : 11u) || (cpu && c->info.max_stage_uniform < 4)) return 0;
  if (count < 2 || count > GROUP_MAX || icl_dt_nrows(x) != 1 || x->offset % 4) return 0;
  if (vk_cpu_shape(c) && !vk_matvec_cpu_fits(c, w[0].ne[0])) return 0;
  if (!group_types(count, w, &mix, &tmask)) return 0;
  for (int i = 0; i < count; i++)
    if (vk_view_bytes(&w[i]) > vk_bind_max(c) || y[i].offset % 4) return 0;
  return 1;
}

/* Rows one workgroup covers, so that each workgroup stays within one member. */
static uint32_t rows_per_group(const vk_ctx *c, uint32_t spec[4]) {
  if (vk_cpu_shape(c)) {
    spec[0] = 8, spec[1] = 8, spec[2] = VK_UBO_VEC4S, spec[3] = 0; /* as vk_matvec_cpu */
    return spec[0] * spec[1];
  }
  vk_matvec_shape(c, &spec[0], &spec[1], &spec[2]);
  spec[3] = 0;
  return spec[0] / spec[1] * spec[2];
}

/* Binds f32 [cols] at v for reading: a uniform buffer on CPU devices, else a storage buffer; without v (a stand-in),
 * 16 bytes of `alt`, read by nothing. *len: the vec4s bound (CPU). */
static int bind_vec(vk_ctx *c, const icl_dt *v, const icl_dt *alt, int64_t cols, vk_binding *b, uint32_t *off,
                    uint32_t *len, icl_error *err) {
  const icl_dt *t = v ? v : alt;
  size_t bytes = v ? (size_t)cols * 4 : 16;
  uint32_t rem = 0;
  int cpu = vk_cpu_shape(c);
  int rc = cpu ? vk_bind_ubo(c, t->buf, t->offset, bytes, b, &rem, err)
               : vk_bind(c, t->buf, t->offset, bytes, 0, b, &rem, err);
  *off = rem / 4, *len = cpu ? (uint32_t)(b->range / 16) : 0;
  return rc;
}

/* glu 0: each member's product into its y; 1 (silu) or 2 (gelu): y[0] = act(w[0] . x) * (w[1] . x), one workgroup
 * per row group of member 0 computing both members' rows. nw: NULL, or the products are of rms_norm(x, nw, eps).
 * pa (with nw): NULL, or x is first replaced by t = x + rms_norm(pa->o, pa->w, eps), stored to pa->t. */
static int group_dispatch(vk_ctx *c, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y, uint32_t glu,
                          const icl_dt *nw, float eps, const icl_post_add *pa, icl_error *err) {
  vk_binding b[11];
  uint32_t rows[GROUP_MAX], w_off[GROUP_MAX], y_off[GROUP_MAX], x_off = 0, spec[4], groups[GROUP_MAX] = {0};
  int64_t cols = w[0].ne[0];
  int cpu = vk_cpu_shape(c), rc = ICL_OK;
  uint32_t per = rows_per_group(c, spec);
  for (int i = 0; i < GROUP_MAX && !rc; i++) {
    /* a group of 2 binds 16 bytes of member 1 as member 2, which has no rows (nothing read, nothing counted) */
    int m = i < count ? i : count - 1;
    rows[i] = i < count ? (uint32_t)icl_dt_nrows(&w[m]) : 0;
    rc = vk_bind(c, w[m].buf, w[m].offset, i < count ? vk_view_bytes(&w[m]) : 16, 0, &b[i], &w_off[i], err);
    if (!rc) rc = vk_bind(c, y[m].buf, y[m].offset, i < count ? (size_t)rows[i] * 4 : 4, 1, &b[4 + i], &y_off[i], err);
    y_off[i] /= 4;
    groups[i] = glu && i > 0 ? 0 : (rows[i] + per - 1) / per;
  }
  uint32_t x_len = 0, nw_off = 0, nw_len = 0, o_off = 0, o_len = 0, pw_off = 0, pw_len = 0, t_off = 0;
  if (!rc) rc = bind_vec(c, x, x, cols, &b[3], &x_off, &x_len, err);
  /* without a norm or a post-add, 16 bytes of x stand in for their vectors (read by nothing) */
  if (!rc) rc = bind_vec(c, nw, x, cols, &b[7], &nw_off, &nw_len, err);
  if (!rc) rc = bind_vec(c, pa ? pa->o : NULL, x, cols, &b[8], &o_off, &o_len, err);
  if (!rc) rc = bind_vec(c, pa ? pa->w : NULL, x, cols, &b[9], &pw_off, &pw_len, err);
  const icl_dt *tv = pa ? pa->t : &y[0]; /* without a post-add, 4 bytes of y[0] stand in for t (written by nothing) */
  if (!rc) rc = vk_bind(c, tv->buf, tv->offset, pa ? (size_t)cols * 4 : 4, 1, &b[10], &t_off, err);
  t_off /= 4;
  if (rc) return rc;
  uint32_t g_end0 = groups[0], g_end1 = groups[0] + groups[1], total = g_end1 + groups[2], gx, gy;
  vk_grid(c, total, &gx, &gy);
  const mix_pair *mix;
  uint32_t tmask;
  group_types(count, w, &mix, &tmask); /* group_fits has checked that they have a variant */
  group_pc pc = {(uint32_t)cols, x_off, x_len, {0}, {0}, {0}, g_end0, g_end1, nw_off, nw_len, eps, tmask,
                 o_off, o_len, pw_off, pw_len, t_off};
  for (int i = 0; i < GROUP_MAX; i++) pc.rows[i] = rows[i], pc.w_off[i] = w_off[i], pc.y_off[i] = y_off[i];
  const char *shader = mix ? (cpu ? mix->cpu : mix->gpu) : vk_typed_shader(cpu ? "matvec_cpu_group" : "matvec_group",
                                                                             w[0].type);
  vk_kernel k = {.shader = shader,
                 .n_bindings = 11, .ubo_mask = cpu ? 1u << 3 | 1u << 7 | 1u << 8 | 1u << 9 : 0,
                 .push_size = sizeof pc, .n_spec = 7, .spec = {spec[0], spec[1], spec[2], spec[3], glu, nw != NULL,
                 pa != NULL}};
  return vk_dispatch(c, &k, b, 11, &pc, sizeof pc, gx, gy, 1, err);
}

int vk_op_matmul_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err) {
  vk_ctx *c = vk_of(be);
  if (group_fits(c, count, w, x, y)) return group_dispatch(c, count, w, x, y, 0, NULL, 0.0f, NULL, err);
  for (int i = 0; i < count; i++) {
    int rc = vk_op_matmul(be, &w[i], x, &y[i], err);
    if (rc) return rc;
  }
  return ICL_OK;
}

int vk_op_matmul_glu(icl_backend *be, const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *x, const icl_dt *y,
                     const icl_dt *u, int act, icl_error *err) {
  vk_ctx *c = vk_of(be);
  icl_dt w[2] = {*w_gate, *w_up}, ys[2] = {*y, *u};
  if (group_fits(c, 2, w, x, ys) && icl_dt_nrows(w_gate) == icl_dt_nrows(w_up))
    return group_dispatch(c, 2, w, x, (icl_dt[2]){*y, *y}, act == ICL_GLU_GELU ? 2 : 1, NULL, 0.0f, NULL, err);
  int rc = vk_op_matmul_group(be, 2, w, x, ys, err);
  if (rc) return rc;
  return act == ICL_GLU_GELU ? vk_op_geglu(be, y, u, y, err) : vk_op_swiglu(be, y, u, y, err);
}

/* The norm weight can join the dispatch: f32, as long as x (CPU devices: it fits a uniform buffer as x does). */
static int norm_fits(const icl_dt *x, const icl_dt *nw) {
  return nw->type == ICL_TYPE_F32 && icl_dt_nelem(nw) == x->ne[0] && nw->offset % 4 == 0;
}

int vk_op_rms_matmul_group(icl_backend *be, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h, int count,
                           const icl_dt *w, const icl_dt *y, icl_error *err) {
  vk_ctx *c = vk_of(be);
  if (group_fits(c, count, w, x, y) && norm_fits(x, nw))
    return group_dispatch(c, count, w, x, y, 0, nw, eps, NULL, err);
  int rc = vk_op_rms_norm(be, x, nw, eps, h, err);
  return rc ? rc : vk_op_matmul_group(be, count, w, h, y, err);
}

int vk_op_rms_matmul_glu(icl_backend *be, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h,
                         const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *y, const icl_dt *u, int act,
                         icl_error *err) {
  vk_ctx *c = vk_of(be);
  icl_dt w[2] = {*w_gate, *w_up}, ys[2] = {*y, *u};
  if (group_fits(c, 2, w, x, ys) && icl_dt_nrows(w_gate) == icl_dt_nrows(w_up) && norm_fits(x, nw))
    return group_dispatch(c, 2, w, x, (icl_dt[2]){*y, *y}, act == ICL_GLU_GELU ? 2 : 1, nw, eps, NULL, err);
  int rc = vk_op_rms_norm(be, x, nw, eps, h, err);
  return rc ? rc : vk_op_matmul_glu(be, w_gate, w_up, h, y, u, act, err);
}

/* The post-add's vectors can join the dispatch: o and t f32 like x (t 4-byte aligned), pw as a norm weight. */
static int post_fits(const icl_dt *x, const icl_post_add *pa) {
  return norm_fits(x, pa->w) && pa->o->offset % 4 == 0 && pa->t->offset % 4 == 0;
}

/* rms_norm(o) in place, add(x, o, t): the post-add where the dispatch cannot take it (what the wrapper does). */
static int post_add_unfused(icl_backend *be, const icl_dt *x, const icl_post_add *pa, float eps, icl_error *err) {
  int rc = vk_op_rms_norm(be, pa->o, pa->w, eps, pa->o, err);
  return rc ? rc : vk_op_add(be, x, pa->o, pa->t, err);
}

int vk_op_add_rms_matmul_group(icl_backend *be, const icl_dt *x, const icl_post_add *pa, const icl_dt *nw, float eps,
                               const icl_dt *h, int count, const icl_dt *w, const icl_dt *y, icl_error *err) {
  vk_ctx *c = vk_of(be);
  if (group_fits(c, count, w, x, y) && norm_fits(x, nw) && post_fits(x, pa))
    return group_dispatch(c, count, w, x, y, 0, nw, eps, pa, err);
  int rc = post_add_unfused(be, x, pa, eps, err);
  return rc ? rc : vk_op_rms_matmul_group(be, pa->t, nw, eps, h, count, w, y, err);
}

int vk_op_add_rms_matmul_glu(icl_backend *be, const icl_dt *x, const icl_post_add *pa, const icl_dt *nw, float eps,
                             const icl_dt *h, const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *y,
                             const icl_dt *u, int act, icl_error *err) {
  vk_ctx *c = vk_of(be);
  icl_dt w[2] = {*w_gate, *w_up}, ys[2] = {*y, *u};
  if (group_fits(c, 2, w, x, ys) && icl_dt_nrows(w_gate) == icl_dt_nrows(w_up) && norm_fits(x, nw) &&
      post_fits(x, pa))
    return group_dispatch(c, 2, w, x, (icl_dt[2]){*y, *y}, act == ICL_GLU_GELU ? 2 : 1, nw, eps, pa, err);
  int rc = post_add_unfused(be, x, pa, eps, err);
  return rc ? rc : vk_op_rms_matmul_glu(be, pa->t, nw, eps, h, w_gate, w_up, y, u, act, err);
}
