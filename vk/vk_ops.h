/* The Vulkan implementations of the backend ops (see src/backend.h for their contracts). Each
 * op binds its views, fills a push-constant struct mirrored from its shader (sizes checked with
 * _Static_assert here and against the kernel at every dispatch) and records dispatches. */
#ifndef ICL_VK_OPS_H
#define ICL_VK_OPS_H

#include "vk_internal.h"

/* ops_matmul.c */
int vk_op_get_rows(icl_backend *be, const icl_dt *w, const icl_dt *ids, const icl_dt *out, icl_error *err);
int vk_op_matmul(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err);
int vk_op_matmul_add(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err);
/* ops_matmul_group.c: the gated FFN's gate, up and activation in one dispatch on one token */
int vk_op_matmul_glu(icl_backend *be, const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *x, const icl_dt *y,
                     const icl_dt *u, int act, icl_error *err);
/* ops_matmul_group.c: the RMS norm folded into the grouped mat-vec (q, k, v; gate, up with the activation) */
int vk_op_rms_matmul_group(icl_backend *be, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h, int count,
                           const icl_dt *w, const icl_dt *y, icl_error *err);
int vk_op_rms_matmul_glu(icl_backend *be, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h,
                         const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *y, const icl_dt *u, int act,
                         icl_error *err);
/* ops_matmul_group.c: Gemma's post-norm residual add folded in before those norms (t = x + rms_norm(o, pw)) */
int vk_op_add_rms_matmul_group(icl_backend *be, const icl_dt *x, const icl_post_add *pa, const icl_dt *nw, float eps,
                               const icl_dt *h, int count, const icl_dt *w, const icl_dt *y, icl_error *err);
int vk_op_add_rms_matmul_glu(icl_backend *be, const icl_dt *x, const icl_post_add *pa, const icl_dt *nw, float eps,
                             const icl_dt *h, const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *y,
                             const icl_dt *u, int act, icl_error *err);
/* ops_rows.c: y += rms_norm(x, w, eps) (Gemma's post-norms with the residual add) */
int vk_op_rms_norm_add(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, icl_error *err);
/* ops_attn.c: Gemma's per-head q/k RMS norms with RoPE of both in one dispatch */
int vk_op_rms_rope_pair(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *qw, const icl_dt *kw,
                        float eps, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err);
/* ops_attn.c: RoPE of queries and keys in one dispatch */
int vk_op_rope_pair(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *pos, int n_rot, float base,
                    int mode, icl_error *err);

/* Push constants of matmul.comp and matmul_cpu.comp. */
typedef struct matmul_pc {
  uint32_t cols, rows, row0, n;
  uint32_t w_off, x_off, y_off;
  uint32_t y_stride;
  uint32_t x_len; /* matmul_cpu: vec4s in the x window */
} matmul_pc;
_Static_assert(sizeof(matmul_pc) <= VK_MAX_PUSH, "push constants");

/* The x uniform-buffer block of the CPU-device kernels is declared with a fixed size (VK_UBO_VEC4S vec4s, 64 KiB)
 * so one pipeline serves every window; bound ranges are smaller and the shaders clamp to x_len. */
#define VK_UBO_VEC4S 4096u

/* ops_matmul_group.c: up to 3 weights of one type on one token in one dispatch; otherwise the matmuls in turn */
int vk_op_matmul_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err);
/* Launch shape of the GPU-shaped mat-vec (matvec.comp): workgroup size, threads per row group, rows per group. */
void vk_matvec_shape(const vk_ctx *c, uint32_t *wg, uint32_t *tpr, uint32_t *nr);

/* ops_matmul_cpu.c: CPU-device matmul paths. b[0] = w rows [r0, r1) (w_off: their byte offset in
 * the binding), b[2] = y columns [t0, t1) (y_rem: byte offset of column t0); b[1] is rebound; acc = 1 adds the
 * product to y (matmul_add). */
int vk_matvec_cpu_fits(const vk_ctx *c, int64_t cols);
int vk_matvec_cpu(vk_ctx *c, const icl_dt *w, const icl_dt *x, vk_binding *b, uint32_t w_off, uint32_t y_rem,
                  int64_t r0, int64_t r1, int64_t t0, uint32_t acc, icl_error *err);
/* Columns of x (cols wide) per uniform-buffer window; 0 when the CPU path does not apply. */
int64_t vk_matmul_cpu_window(const vk_ctx *c, int64_t cols);
int vk_matmul_cpu(vk_ctx *c, const icl_dt *w, const icl_dt *x, vk_binding *b, uint32_t w_off, uint32_t y_rem,
                  int64_t r0, int64_t r1, int64_t t0, int64_t t1, uint32_t acc, icl_error *err);

/* ops_matmul_intdot.c: columns [t0, t1) of the FAST integer-dot path (w a 32-element block type), rstep weight
 * rows per dispatch; acc = 1 adds the product to y. */
int vk_matmul_intdot(vk_ctx *c, const icl_dt *w, const icl_dt *x, const icl_dt *y, int64_t t0, int64_t t1,
                     int64_t rstep, uint32_t acc, icl_error *err);

/* ops_matmul_coopmat.c: columns [t0, t1) of the FAST cooperative-matrix path (any weight type). */
int vk_matmul_coopmat(vk_ctx *c, const icl_dt *w, const icl_dt *x, const icl_dt *y, int64_t t0, int64_t t1,
                      int64_t rstep, uint32_t acc, icl_error *err);

/* ops_rows.c */
int vk_op_rms_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, icl_error *err);
int vk_op_layer_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps, const icl_dt *y,
                     icl_error *err);
int vk_op_softmax(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int vk_op_argmax(icl_backend *be, const icl_dt *x, const icl_dt *out, icl_error *err);
int vk_op_lse_select(icl_backend *be, const icl_dt *x, const icl_dt *ids, const icl_dt *out, icl_error *err);

/* ops_attn.c */
int vk_op_rope(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err);
int vk_op_attention(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                    const icl_dt *mask, const icl_dt *out, const icl_dt *pattern, icl_error *err);

/* ops_elem.c */
int vk_op_add(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err);
int vk_op_mul(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err);
int vk_op_scale(icl_backend *be, const icl_dt *x, float s, const icl_dt *y, icl_error *err);
int vk_op_silu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int vk_op_gelu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int vk_op_relu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int vk_op_swiglu(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err);
int vk_op_geglu(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err);

/* ops_copy.c */
int vk_op_convert(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int vk_op_copy2d(icl_backend *be, const icl_dt *src, int64_t src_off, int64_t src_stride, const icl_dt *dst,
                 int64_t dst_off, int64_t dst_stride, int64_t rows, int64_t cols, icl_error *err);
int vk_op_fill2d(icl_backend *be, const icl_dt *dst, int64_t off, int64_t stride, int64_t rows, int64_t cols,
                 float value, icl_error *err);

/* helpers (ops_common.c) */
/* Whether kernels take their CPU-device shapes (lavapipe: contiguous runs per invocation, x in
 * uniform buffers) rather than GPU shapes; the device type decides, ICL_VK_SHAPE=cpu|gpu overrides
 * (tests run the GPU-shaped kernels on lavapipe this way). */
int vk_cpu_shape(const vk_ctx *c);
/* "<base>" for F32, else "<base>_<type in lower case>" (a variants.txt name), in a static table. */
const char *vk_typed_shader(const char *base, uint32_t type);
/* Checks that a count fits the 32-bit indices the shaders use. */
int vk_check_u32(int64_t v, const char *what, icl_error *err);
/* Elementwise launch: PER elements per invocation and the workgroup grid for n elements. */
uint32_t vk_elt_per(const vk_ctx *c);
void vk_elt_grid(const vk_ctx *c, uint64_t n, uint32_t *gx, uint32_t *gy);

#endif
