/* The Vulkan backend: icl_vk_backend_new and the ops table (src/backend.h). */
#include <stdlib.h>
#include <string.h>

#include "vk_ops.h"
#include "vk.h"

static int be_buf_alloc(icl_backend *be, size_t size, int usage, icl_buf **out, icl_error *err) {
  return vk_buf_create(vk_of(be), size, usage, out, err);
}

static void be_buf_free(icl_backend *be, icl_buf *b) {
  vk_ctx *c = vk_of(be);
  icl_error err;
  if (b && c->recording && b->batch == c->batch && vk_flush(c, &err)) /* recorded work may still use it */
    fprintf(stderr, "icl: vulkan: %s\n", err.msg);
  vk_buf_destroy(c, b);
}

static int be_write(icl_backend *be, icl_buf *b, size_t off, const void *src, size_t n, icl_error *err) {
  return vk_buf_write(vk_of(be), b, off, src, n, err);
}

static int be_read(icl_backend *be, icl_buf *b, size_t off, void *dst, size_t n, icl_error *err) {
  return vk_buf_read(vk_of(be), b, off, dst, n, err);
}

static int be_sync(icl_backend *be, icl_error *err) { return vk_flush(vk_of(be), err); }

static void be_destroy(icl_backend *be) {
  if (!be) return;
  vk_ctx *c = vk_of(be);
  if (c) {
    icl_error err;
    if (c->device && vk_flush(c, &err)) fprintf(stderr, "icl: vulkan: %s\n", err.msg);
    vk_profile_print(c);
    vk_device_destroy(c);
    free(c);
  }
  free(be);
}

static void be_counts(icl_backend *be, icl_be_counts *out) { *out = vk_of(be)->counts; }

/* The ops every table has; the fused ones are added below. */
#define VK_OPS_COMMON \
  .name = "vulkan", \
  .buf_alloc = be_buf_alloc, \
  .buf_free = be_buf_free, \
  .write = be_write, \
  .read = be_read, \
  .sync = be_sync, \
  .destroy = be_destroy, \
  .get_rows = vk_op_get_rows, \
  .matmul = vk_op_matmul, \
  .rms_norm = vk_op_rms_norm, \
  .layer_norm = vk_op_layer_norm, \
  .rope = vk_op_rope, \
  .attention = vk_op_attention, \
  .add = vk_op_add, \
  .mul = vk_op_mul, \
  .scale = vk_op_scale, \
  .silu = vk_op_silu, \
  .gelu = vk_op_gelu, \
  .relu = vk_op_relu, \
  .swiglu = vk_op_swiglu, \
  .geglu = vk_op_geglu, \
  .softmax = vk_op_softmax, \
  .convert = vk_op_convert, \
  .argmax = vk_op_argmax, \
  .lse_select = vk_op_lse_select, \
  .copy2d = vk_op_copy2d, \
  .fill2d = vk_op_fill2d, \
  .counts = be_counts

static const icl_backend_ops VK_OPS = {VK_OPS_COMMON, .matmul_group = vk_op_matmul_group, .matmul_add = vk_op_matmul_add,
                                       .rope_pair = vk_op_rope_pair, .matmul_glu = vk_op_matmul_glu,
                                       .rms_matmul_group = vk_op_rms_matmul_group,
                                       .rms_matmul_glu = vk_op_rms_matmul_glu, .rms_norm_add = vk_op_rms_norm_add,
                                       .rms_rope_pair = vk_op_rms_rope_pair,
                                       .add_rms_matmul_group = vk_op_add_rms_matmul_group,
                                       .add_rms_matmul_glu = vk_op_add_rms_matmul_glu};

/* ICL_VK_FUSION=0: the same backend without its fused ops, so the forward pass records the unfused sequence
 * (the old path, for timing the two side by side and for bisecting) */
static const icl_backend_ops VK_OPS_UNFUSED = {VK_OPS_COMMON};

static const icl_backend_ops *vk_ops_table(void) {
  const char *f = getenv("ICL_VK_FUSION");
  return f && strcmp(f, "0") == 0 ? &VK_OPS_UNFUSED : &VK_OPS;
}

int icl_vk_backend_new(int dev, icl_backend **out, icl_error *err) {
  *out = NULL;
  icl_backend *be = calloc(1, sizeof *be);
  vk_ctx *c = calloc(1, sizeof *c);
  if (!be || !c) {
    free(be);
    free(c);
    return icl_error_set(err, ICL_ENOMEM, "out of memory");
  }
  be->ops = vk_ops_table();
  be->impl = c;
  int rc = vk_device_create(c, dev, err);
  if (rc) {
    be_destroy(be);
    return rc;
  }
  be->is_cpu_device = strcmp(c->info.type, "cpu") == 0;
  *out = be;
  return ICL_OK;
}

const icl_device_info *icl_vk_backend_device(icl_backend *be) { return &vk_of(be)->info; }
