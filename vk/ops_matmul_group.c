/* matmul_group on one token: q, k and v (or gate and up) of one weight type as one dispatch of the grouped mat-vec
 * (matvec.comp / matvec_cpu.comp built with GROUP), each workgroup on one member's rows with the lone kernel's
 * arithmetic, so every output is bit-identical to its own matmul. Members of two types form a group where the pair has
 * a variant (MIX, mix_pairs below: each member decoded by its type's own decoder). Anything else (several tokens, other
 * mixes, a weight above one binding, four members) runs the matmuls in turn. rms_matmul_group / rms_matmul_glu fold the
 * RMS norm of x into the same dispatch (NORM): each workgroup recomputes the row's sum of squares in rms_norm.comp's
 * order (shaders/common/norm.glsl); where the group does not fit, rms_norm then the unfused ops. */
#include "vk_ops.h"

enum { GROUP_MAX = 3 };

typedef struct group_pc { /* matvec.comp and matvec_cpu.comp with GROUP (x_len: the uniform x's vec4s, CPU only) */
  uint32_t cols, x_off, x_len;
  uint32_t rows[GROUP_MAX], w_off[GROUP_MAX], y_off[GROUP_MAX];
  uint32_t g_end0, g_end1;
  uint32_t nw_off, nw_len; /* NORM: the norm weight's word offset; vec4s bound (CPU only) */
  float eps;
  uint32_t tmask; /* MIX: bit i set where member i is of the pair's second type */
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
 * binding. */
static int group_fits(const vk_ctx *c, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y) {
  const mix_pair *mix;
  uint32_t tmask;
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

/* glu 0: each member's product into its y; 1 (silu) or 2 (gelu): y[0] = act(w[0] . x) * (w[1] . x), one workgroup
 * per row group of member 0 computing both members' rows. nw: NULL, or the products are of rms_norm(x, nw, eps). */
static int group_dispatch(vk_ctx *c, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y, uint32_t glu,
                          const icl_dt *nw, float eps, icl_error *err) {
  vk_binding b[8];
  uint32_t rows[GROUP_MAX], w_off[GROUP_MAX], y_off[GROUP_MAX], x_rem, spec[4], groups[GROUP_MAX] = {0};
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
  if (!rc) rc = cpu ? vk_bind_ubo(c, x->buf, x->offset, (size_t)cols * 4, &b[3], &x_rem, err)
                    : vk_bind(c, x->buf, x->offset, (size_t)cols * 4, 0, &b[3], &x_rem, err);
  /* without a norm, 16 bytes of x stand in for its weight (read by nothing) */
  const icl_dt *nv = nw ? nw : x;
  size_t nw_bytes = nw ? (size_t)cols * 4 : 16;
  uint32_t nw_rem = 0;
  if (!rc) rc = cpu ? vk_bind_ubo(c, nv->buf, nv->offset, nw_bytes, &b[7], &nw_rem, err)
                    : vk_bind(c, nv->buf, nv->offset, nw_bytes, 0, &b[7], &nw_rem, err);
  if (rc) return rc;
  uint32_t g_end0 = groups[0], g_end1 = groups[0] + groups[1], total = g_end1 + groups[2], gx, gy;
  vk_grid(c, total, &gx, &gy);
  const mix_pair *mix;
  uint32_t tmask;
  group_types(count, w, &mix, &tmask); /* group_fits has checked that they have a variant */
  group_pc pc = {(uint32_t)cols, x_rem / 4, cpu ? (uint32_t)(b[3].range / 16) : 0, {0}, {0}, {0}, g_end0, g_end1,
                 nw_rem / 4, cpu ? (uint32_t)(b[7].range / 16) : 0, eps, tmask};
  for (int i = 0; i < GROUP_MAX; i++) pc.rows[i] = rows[i], pc.w_off[i] = w_off[i], pc.y_off[i] = y_off[i];
  const char *shader = mix ? (cpu ? mix->cpu : mix->gpu) : vk_typed_shader(cpu ? "matvec_cpu_group" : "matvec_group",
                                                                             w[0].type);
  vk_kernel k = {.shader = shader,
                 .n_bindings = 8, .ubo_mask = cpu ? 1u << 3 | 1u << 7 : 0, .push_size = sizeof pc, .n_spec = 6,
                 .spec = {spec[0], spec[1], spec[2], spec[3], glu, nw != NULL}};
  return vk_dispatch(c, &k, b, 8, &pc, sizeof pc, gx, gy, 1, err);
}

int vk_op_matmul_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err) {
  vk_ctx *c = vk_of(be);
  if (group_fits(c, count, w, x, y)) return group_dispatch(c, count, w, x, y, 0, NULL, 0.0f, err);
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
    return group_dispatch(c, 2, w, x, (icl_dt[2]){*y, *y}, act == ICL_GLU_GELU ? 2 : 1, NULL, 0.0f, err);
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
  if (group_fits(c, count, w, x, y) && norm_fits(x, nw)) return group_dispatch(c, count, w, x, y, 0, nw, eps, err);
  int rc = vk_op_rms_norm(be, x, nw, eps, h, err);
  return rc ? rc : vk_op_matmul_group(be, count, w, h, y, err);
}

int vk_op_rms_matmul_glu(icl_backend *be, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h,
                         const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *y, const icl_dt *u, int act,
                         icl_error *err) {
  vk_ctx *c = vk_of(be);
  icl_dt w[2] = {*w_gate, *w_up}, ys[2] = {*y, *u};
  if (group_fits(c, 2, w, x, ys) && icl_dt_nrows(w_gate) == icl_dt_nrows(w_up) && norm_fits(x, nw))
    return group_dispatch(c, 2, w, x, (icl_dt[2]){*y, *y}, act == ICL_GLU_GELU ? 2 : 1, nw, eps, err);
  int rc = vk_op_rms_norm(be, x, nw, eps, h, err);
  return rc ? rc : vk_op_matmul_glu(be, w_gate, w_up, h, y, u, act, err);
}
