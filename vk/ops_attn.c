/* RoPE and causal attention. */
#include <math.h>

#include "vk_ops.h"

typedef struct rope_pc {
  uint32_t hd, nh, n, n_rot;
  float log2_base;
  uint32_t neox, x_off, pos_off;
} rope_pc;
_Static_assert(sizeof(rope_pc) <= VK_MAX_PUSH, "push constants");

typedef struct attn_pc {
  uint32_t hd, nh, nkvh, nq, nkv;
  int32_t n_past;
  float scale;
  int32_t window;
  float softcap;
  uint32_t has_mask, has_pattern;
  uint32_t q_off, k_off, v_off, m_off, o_off, p_off;
} attn_pc;
_Static_assert(sizeof(attn_pc) <= VK_MAX_PUSH, "push constants");

int vk_op_rope(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err) {
  vk_ctx *c = vk_of(be);
  int64_t hd = x->ne[0], nh = x->ne[1], n = x->ne[2] * x->ne[3];
  if (n_rot <= 0 || n_rot > hd || n_rot % 2)
    return icl_error_set(err, ICL_EINVAL, "vulkan: rope n_rot %d must be even and in (0, %lld]", n_rot, (long long)hd);
  vk_binding b[2];
  rope_pc pc = {(uint32_t)hd, (uint32_t)nh, (uint32_t)n, (uint32_t)n_rot, log2f(base), mode == ICL_ROPE_NEOX, 0, 0};
  int rc = vk_check_u32(icl_dt_nelem(x), "rope size", err);
  if (!rc) rc = vk_bind_view(c, x, 1, &b[0], &pc.x_off, err);
  if (!rc) rc = vk_bind_view(c, pos, 0, &b[1], &pc.pos_off, err);
  if (rc) return rc;
  vk_kernel k = {.shader = "rope", .n_bindings = 2, .push_size = sizeof pc, .n_spec = 1, .spec = {c->wg}};
  uint32_t gx, gy;
  vk_grid(c, ((uint64_t)(n_rot / 2) * (uint64_t)(nh * n) + c->wg - 1) / c->wg, &gx, &gy);
  return vk_dispatch(c, &k, b, 2, &pc, sizeof pc, gx, gy, 1, err);
}

typedef struct rope_pair_pc {
  rope_pc one;
  uint32_t nh2, x2_off;
} rope_pair_pc;
_Static_assert(sizeof(rope_pair_pc) <= VK_MAX_PUSH, "push constants");

int vk_op_rope_pair(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *pos, int n_rot, float base,
                    int mode, icl_error *err) {
  vk_ctx *c = vk_of(be);
  int64_t hd = q->ne[0], nh = q->ne[1], nh2 = k->ne[1], n = q->ne[2] * q->ne[3];
  if (n_rot <= 0 || n_rot > hd || n_rot % 2 || k->ne[0] != hd || k->ne[2] * k->ne[3] != n)
    return icl_error_set(err, ICL_EINVAL, "vulkan: rope_pair n_rot %d must be even and in (0, %lld], k shaped as q",
                         n_rot, (long long)hd);
  vk_binding b[3];
  rope_pair_pc pc = {{(uint32_t)hd, (uint32_t)nh, (uint32_t)n, (uint32_t)n_rot, log2f(base), mode == ICL_ROPE_NEOX, 0,
                      0}, (uint32_t)nh2, 0};
  int rc = vk_check_u32(icl_dt_nelem(q) + icl_dt_nelem(k), "rope_pair size", err);
  if (!rc) rc = vk_bind_view(c, q, 1, &b[0], &pc.one.x_off, err);
  if (!rc) rc = vk_bind_view(c, pos, 0, &b[1], &pc.one.pos_off, err);
  if (!rc) rc = vk_bind_view(c, k, 1, &b[2], &pc.x2_off, err);
  if (rc) return rc;
  vk_kernel kr = {.shader = "rope_pair", .n_bindings = 3, .push_size = sizeof pc, .n_spec = 1, .spec = {c->wg}};
  uint32_t gx, gy;
  vk_grid(c, ((uint64_t)(n_rot / 2) * (uint64_t)((nh + nh2) * n) + c->wg - 1) / c->wg, &gx, &gy);
  return vk_dispatch(c, &kr, b, 3, &pc, sizeof pc, gx, gy, 1, err);
}

typedef struct rms_rope_pc { /* rms_rope.comp */
  rope_pc one;
  uint32_t nh2, x2_off, w_off, w2_off;
  float eps;
} rms_rope_pc;
_Static_assert(sizeof(rms_rope_pc) <= VK_MAX_PUSH, "push constants");

int vk_op_rms_rope_pair(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *qw, const icl_dt *kw,
                        float eps, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err) {
  vk_ctx *c = vk_of(be);
  int64_t hd = q->ne[0], nh = q->ne[1], nh2 = k->ne[1], n = q->ne[2] * q->ne[3];
  if (n_rot <= 0 || n_rot > hd || n_rot % 2 || k->ne[0] != hd || k->ne[2] * k->ne[3] != n)
    return icl_error_set(err, ICL_EINVAL, "vulkan: rms_rope_pair n_rot %d must be even and in (0, %lld], k shaped "
                         "as q", n_rot, (long long)hd);
  vk_binding b[5];
  rms_rope_pc pc = {{(uint32_t)hd, (uint32_t)nh, (uint32_t)n, (uint32_t)n_rot, log2f(base), mode == ICL_ROPE_NEOX, 0,
                     0}, (uint32_t)nh2, 0, 0, 0, eps};
  int rc = vk_check_u32(icl_dt_nelem(q) + icl_dt_nelem(k), "rms_rope_pair size", err);
  if (!rc) rc = vk_bind_view(c, q, 1, &b[0], &pc.one.x_off, err);
  if (!rc) rc = vk_bind_view(c, pos, 0, &b[1], &pc.one.pos_off, err);
  if (!rc) rc = vk_bind_view(c, k, 1, &b[2], &pc.x2_off, err);
  if (!rc) rc = vk_bind_view(c, qw, 0, &b[3], &pc.w_off, err);
  if (!rc) rc = vk_bind_view(c, kw, 0, &b[4], &pc.w2_off, err);
  if (rc) return rc;
  vk_kernel kr = {.shader = "rms_rope", .n_bindings = 5, .push_size = sizeof pc, .n_spec = 1, .spec = {c->wg}};
  uint32_t gx, gy;
  vk_grid(c, (uint64_t)((nh + nh2) * n), &gx, &gy); /* a workgroup per head row */
  return vk_dispatch(c, &kr, b, 5, &pc, sizeof pc, gx, gy, 1, err);
}

static int attn_shape_ok(const vk_ctx *c, const icl_dt *q, const icl_dt *k, icl_error *err) {
  int64_t hd = q->ne[0], nh = q->ne[1], nkvh = k->ne[1];
  if (hd > 1024 || nkvh <= 0 || nh % nkvh)
    return icl_error_set(err, ICL_EUNSUPPORTED, "vulkan: attention with head_dim %lld, %lld heads, %lld kv heads",
                         (long long)hd, (long long)nh, (long long)nkvh);
  if (q->ne[2] > (int64_t)c->info.max_wg_count[0] || nh > (int64_t)c->info.max_wg_count[1])
    return icl_error_set(err, ICL_EUNSUPPORTED, "vulkan: attention over %lld queries in one call exceeds the "
                         "workgroup count limit", (long long)q->ne[2]);
  return ICL_OK;
}

static int attn_bind(vk_ctx *c, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_dt *mask,
                     const icl_dt *out, const icl_dt *pattern, vk_binding b[6], attn_pc *pc, icl_error *err) {
  int rc = vk_bind_view(c, q, 0, &b[0], &pc->q_off, err);
  if (!rc) rc = vk_bind_view(c, k, 0, &b[1], &pc->k_off, err);
  if (!rc) rc = vk_bind_view(c, v, 0, &b[2], &pc->v_off, err);
  if (!rc) rc = vk_bind_view(c, mask ? mask : q, 0, &b[3], &pc->m_off, err); /* q: unused stand-in */
  if (!rc) rc = vk_bind_view(c, out, 1, &b[4], &pc->o_off, err);
  if (!rc) rc = vk_bind_view(c, pattern ? pattern : q, pattern != NULL, &b[5], &pc->p_off, err);
  pc->has_mask = mask != NULL;
  pc->has_pattern = pattern != NULL;
  return rc;
}

/* CPU devices: attention_cpu.comp when rows are whole vec4s at 16-byte-aligned offsets. */
static int attn_cpu_fits(const vk_ctx *c, const attn_pc *pc) {
  return vk_cpu_shape(c) && pc->hd % 4 == 0 && pc->q_off % 4 == 0 && pc->k_off % 4 == 0 && pc->v_off % 4 == 0 &&
         pc->o_off % 4 == 0;
}

static int attn_cpu(vk_ctx *c, const vk_binding *b, const attn_pc *gpu_pc, int64_t nq, int64_t nh, icl_error *err) {
  attn_pc pc = *gpu_pc;
  pc.q_off /= 4, pc.k_off /= 4, pc.v_off /= 4, pc.o_off /= 4; /* in vec4s */
  /* heads per workgroup: the largest of 4..1 that divides the heads sharing a kv head */
  uint32_t group = pc.nh / pc.nkvh, g = 4;
  while (group % g) g--;
  vk_kernel k = {.shader = "attention_cpu", .n_bindings = 6, .push_size = sizeof pc, .n_spec = 3,
                 .spec = {c->info.subgroup_size, pc.hd / 4, g}};
  return vk_dispatch(c, &k, b, 6, &pc, sizeof pc, (uint32_t)nq, (uint32_t)(nh / g), 1, err);
}

/* GPU-shaped devices, many queries: attention_flash.comp, BQ queries per workgroup sharing each K/V tile. Tiles
 * shrink (keys first) until they fit the device's shared memory; 0 when none fits. A captured pattern comes from a
 * second pass of attention.comp that writes only the pattern, so capturing never changes the output. */
static int attn_gpu(vk_ctx *c, const vk_binding *b, const attn_pc *pc, int64_t nq, int64_t nh, int pattern_only,
                    icl_error *err) {
  uint32_t wg = c->wg, dpt = (pc->hd + wg - 1) / wg, maxhd = (pc->hd + 63) / 64 * 64;
  vk_kernel kern = {.shader = "attention", .n_bindings = 6, .push_size = sizeof *pc, .n_spec = 5,
                    .spec = {wg, vk_cpu_shape(c) ? 1u : 0u, dpt, maxhd, (uint32_t)pattern_only}};
  return vk_dispatch(c, &kern, b, 6, pc, sizeof *pc, (uint32_t)nq, (uint32_t)nh, 1, err);
}

static int attn_flash(vk_ctx *c, const vk_binding *b, const attn_pc *pc, int64_t nq, int64_t nh, int *done,
                      icl_error *err) {
  uint32_t maxhd = (pc->hd + 63) / 64 * 64, bq, bk;
  *done = 0;
  if (!c->attn_flash || vk_cpu_shape(c) || nq < 2 || !vk_flash_tiles(&c->info, maxhd, &bq, &bk)) return ICL_OK;
  vk_kernel k = {.shader = "attention_flash", .n_bindings = 5, .push_size = sizeof *pc, .n_spec = 5,
                 .spec = {VK_FLASH_WG, bq, bk, maxhd, bq * maxhd / VK_FLASH_WG}};
  *done = 1;
  int rc = vk_dispatch(c, &k, b, 5, pc, sizeof *pc, (uint32_t)((nq + bq - 1) / bq), (uint32_t)nh, 1, err);
  return rc || !pc->has_pattern ? rc : attn_gpu(c, b, pc, nq, nh, 1, err);
}

int vk_op_attention(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                    const icl_dt *mask, const icl_dt *out, const icl_dt *pattern, icl_error *err) {
  vk_ctx *c = vk_of(be);
  int64_t hd = q->ne[0], nh = q->ne[1], nq = q->ne[2], nkvh = k->ne[1], nkv = k->ne[2];
  vk_binding b[6];
  attn_pc pc = {(uint32_t)hd, (uint32_t)nh, (uint32_t)nkvh, (uint32_t)nq, (uint32_t)nkv, p->n_past, p->scale,
                p->window, p->softcap, 0, 0, 0, 0, 0, 0, 0, 0};
  int rc = attn_shape_ok(c, q, k, err);
  if (!rc) rc = vk_check_u32(nkv * nq * nh, "attention pattern size", err);
  if (!rc) rc = attn_bind(c, q, k, v, mask, out, pattern, b, &pc, err);
  if (rc || nq == 0) return rc;
  if (attn_cpu_fits(c, &pc)) return attn_cpu(c, b, &pc, nq, nh, err);
  int done;
  rc = attn_flash(c, b, &pc, nq, nh, &done, err);
  if (rc || done) return rc;
  return attn_gpu(c, b, &pc, nq, nh, 0, err);
}
