/* Buffers: one VkBuffer + VkDeviceMemory each. On UMA/CPU devices the memory is host-visible and
 * stays mapped (uploads are memcpy); on discrete GPUs it is device-local and uploads/readbacks
 * go through a host-visible staging buffer in chunks. */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define STAGING_BYTES ((size_t)32 << 20)
/* Tail padding: shaders fetch quant blocks as whole uvec4s, so reading the last block of a
 * buffer may touch up to 48 bytes past its end. */
#define TAIL_PAD 64

static int alloc_memory(vk_ctx *c, icl_buf *b, int host, icl_error *err) {
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(c->device, b->buffer, &req);
  uint32_t type;
  if (!vk_memory_choose(&c->memprops, req.memoryTypeBits, host, c->info.uma && !c->force_staging, &type))
    return icl_error_set(err, ICL_EDEVICE, "vulkan: no suitable memory type for a %zu-byte buffer", b->size);
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  VkResult r = vkAllocateMemory(c->device, &ai, NULL, &b->memory);
  if (r != VK_SUCCESS)
    return icl_error_set(err, icl_vk_result_code(r), "vulkan: allocating %zu bytes of device memory: %s", b->size,
                         icl_vk_result_name(r));
  VK_CHECK(vkBindBufferMemory(c->device, b->buffer, b->memory, 0));
  VkMemoryPropertyFlags flags = c->memprops.memoryTypes[type].propertyFlags;
  b->coherent = (flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
  if (host && (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
    VK_CHECK(vkMapMemory(c->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped));
  return ICL_OK;
}

int vk_buf_create(vk_ctx *c, size_t size, int usage, icl_buf **out, icl_error *err) {
  *out = NULL;
  if (c->info.max_alloc && size + TAIL_PAD > c->info.max_alloc)
    return icl_error_set(err, ICL_ENOMEM, "vulkan: a %zu-byte buffer exceeds maxMemoryAllocationSize (%llu)", size,
                         (unsigned long long)c->info.max_alloc);
  icl_buf *b = calloc(1, sizeof *b);
  if (!b) return icl_error_set(err, ICL_ENOMEM, "out of memory");
  b->size = size;
  b->alloc = (size + 15) / 16 * 16 + TAIL_PAD;
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = b->alloc;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
             VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vkCreateBuffer(c->device, &bi, NULL, &b->buffer);
  int host = (c->info.uma && !c->force_staging) || (usage & ICL_BUF_HOST_VISIBLE);
  int rc = r == VK_SUCCESS ? alloc_memory(c, b, host, err)
                           : icl_error_set(err, icl_vk_result_code(r), "vulkan: vkCreateBuffer(%zu): %s", size,
                                           icl_vk_result_name(r));
  if (rc) {
    vk_buf_destroy(c, b);
    return rc;
  }
  *out = b;
  return ICL_OK;
}

void vk_buf_destroy(vk_ctx *c, icl_buf *b) {
  if (!b) return;
  if (b->mapped) vkUnmapMemory(c->device, b->memory);
  if (b->buffer) vkDestroyBuffer(c->device, b->buffer, NULL);
  if (b->memory) vkFreeMemory(c->device, b->memory, NULL);
  free(b);
}

static int ensure_staging(vk_ctx *c, icl_error *err) {
  if (c->staging) return ICL_OK;
  return vk_buf_create(c, STAGING_BYTES, ICL_BUF_HOST_VISIBLE, &c->staging, err);
}

static int check_range(const icl_buf *b, size_t off, size_t n, icl_error *err) {
  if (off > b->size || n > b->size - off)
    return icl_error_set(err, ICL_EINVAL, "vulkan: bytes [%zu, %zu) outside a %zu-byte buffer", off, off + n,
                         b->size);
  return ICL_OK;
}

static int pending(const vk_ctx *c, const icl_buf *b) { return c->recording && b->batch == c->batch; }

int vk_buf_write(vk_ctx *c, icl_buf *b, size_t off, const void *src, size_t n, icl_error *err) {
  int rc = check_range(b, off, n, err);
  if (!rc && pending(c, b)) rc = vk_flush(c, err); /* recorded work may still read the old data */
  if (rc || n == 0) return rc;
  if (b->mapped) {
    memcpy((char *)b->mapped + off, src, n);
    VkMappedMemoryRange mr = {VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, NULL, b->memory, 0, VK_WHOLE_SIZE};
    if (!b->coherent) VK_CHECK(vkFlushMappedMemoryRanges(c->device, 1, &mr));
    return ICL_OK;
  }
  if ((rc = ensure_staging(c, err))) return rc;
  for (size_t done = 0; done < n && !rc; done += STAGING_BYTES) {
    size_t k = n - done < STAGING_BYTES ? n - done : STAGING_BYTES;
    memcpy(c->staging->mapped, (const char *)src + done, k);
    rc = vk_copy_now(c, c->staging->buffer, 0, b->buffer, off + done, k, err);
  }
  return rc;
}

int vk_buf_read(vk_ctx *c, icl_buf *b, size_t off, void *dst, size_t n, icl_error *err) {
  int rc = check_range(b, off, n, err);
  if (!rc) rc = vk_flush(c, err); /* a read waits for everything recorded before it */
  if (rc || n == 0) return rc;
  if (b->mapped) {
    VkMappedMemoryRange mr = {VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, NULL, b->memory, 0, VK_WHOLE_SIZE};
    if (!b->coherent) VK_CHECK(vkInvalidateMappedMemoryRanges(c->device, 1, &mr));
    memcpy(dst, (const char *)b->mapped + off, n);
    return ICL_OK;
  }
  if ((rc = ensure_staging(c, err))) return rc;
  for (size_t done = 0; done < n && !rc; done += STAGING_BYTES) {
    size_t k = n - done < STAGING_BYTES ? n - done : STAGING_BYTES;
    rc = vk_copy_now(c, b->buffer, off + done, c->staging->buffer, 0, k, err);
    if (!rc) memcpy((char *)dst + done, c->staging->mapped, k);
  }
  return rc;
}
