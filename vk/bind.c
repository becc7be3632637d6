/* Descriptor ranges for views. A storage-buffer descriptor must start at a multiple of
 * minStorageBufferOffsetAlignment and span at most maxStorageBufferRange bytes, so a view is bound
 * from the aligned offset at or below it and the shader gets the remainder as a word index in
 * its push constants. Ops that can exceed the range (matmul, get_rows) split by rows first. */
#include "vk_internal.h"

size_t vk_view_bytes(const icl_dt *t) { return icl_type_row_bytes(t->type, t->ne[0]) * (size_t)icl_dt_nrows(t); }

size_t vk_bind_max(const vk_ctx *c) {
  /* worst case: the remainder below the view start plus the tail pad must also fit */
  size_t align = c->info.min_storage_align > 16 ? (size_t)c->info.min_storage_align : 16;
  return (size_t)(c->info.max_storage_range - align - 80) / 16 * 16;
}

int vk_bind(vk_ctx *c, icl_buf *b, size_t off, size_t n, int write, vk_binding *out, uint32_t *rem_bytes,
            icl_error *err) {
  /* at least 16: shaders read weights as uvec4 arrays */
  size_t align = c->info.min_storage_align > 16 ? (size_t)c->info.min_storage_align : 16;
  size_t base = off - off % align, rem = off - base;
  if (off % 2 || off > b->size || n > b->size - off)
    return icl_error_set(err, ICL_EINVAL, "vulkan: view bytes [%zu, +%zu) of a %zu-byte buffer (must be in bounds "
                         "and 2-byte aligned)", off, n, b->size);
  if (rem + n > c->info.max_storage_range)
    return icl_error_set(err, ICL_EUNSUPPORTED, "vulkan: a %zu-byte view exceeds maxStorageBufferRange (%llu) "
                         "for this op", n, (unsigned long long)c->info.max_storage_range);
  /* the range includes tail padding: quant decoders fetch whole uvec4s, up to 48 bytes past a
   * block's end (memory.c pads every buffer by as much) */
  size_t range = (rem + n + 15) / 16 * 16 + 64;
  if (range > b->alloc - base) range = b->alloc - base;
  if (range > c->info.max_storage_range) range = c->info.max_storage_range;
  out->buf = b;
  out->offset = base;
  out->range = range;
  out->lo = off;
  out->hi = off + n;
  out->write = write;
  out->ubo = 0;
  *rem_bytes = (uint32_t)rem;
  return ICL_OK;
}

int vk_bind_ubo(vk_ctx *c, icl_buf *b, size_t off, size_t n, vk_binding *out, uint32_t *rem_bytes, icl_error *err) {
  size_t align = c->info.min_uniform_align > 16 ? (size_t)c->info.min_uniform_align : 16;
  size_t base = off - off % align, rem = off - base;
  /* one vec4 of slack past the view (inside the buffer's tail pad) for unaligned vec4 reads */
  size_t range = (rem + n + 15) / 16 * 16 + 16;
  if (range > b->alloc - base) range = b->alloc - base;
  if (off > b->size || n > b->size - off || range > c->info.max_uniform_range)
    return icl_error_set(err, ICL_EINVAL, "vulkan: uniform view bytes [%zu, +%zu) of a %zu-byte buffer (limit %u)", off,
                         n, b->size, c->info.max_uniform_range);
  *out = (vk_binding){b, base, range, off, off + n, 0, 1};
  *rem_bytes = (uint32_t)rem;
  return ICL_OK;
}

int vk_bind_view(vk_ctx *c, const icl_dt *t, int write, vk_binding *out, uint32_t *word, icl_error *err) {
  uint32_t rem;
  int rc = vk_bind(c, t->buf, t->offset, vk_view_bytes(t), write, out, &rem, err);
  if (!rc && rem % 4)
    return icl_error_set(err, ICL_EINVAL, "vulkan: an activation view at byte offset %zu (must be 4-byte aligned)",
                         t->offset);
  *word = rem / 4;
  return rc;
}

void vk_grid(const vk_ctx *c, uint64_t groups, uint32_t *gx, uint32_t *gy) {
  uint64_t mx = c->info.max_wg_count[0] ? c->info.max_wg_count[0] : 65535;
  if (groups <= mx) {
    *gx = (uint32_t)groups;
    *gy = 1;
    return;
  }
  *gx = (uint32_t)mx;
  *gy = (uint32_t)((groups + mx - 1) / mx);
}
