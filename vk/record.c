/* Command recording: many dispatches into one command buffer, a barrier only where a dispatch
 * touches a buffer range an earlier dispatch (since the last barrier) wrote, or writes a range
 * an earlier one read. Submission happens on read/sync (vk_flush). */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

int vk_set_layout(vk_ctx *c, uint32_t n, uint32_t ubo_mask, VkDescriptorSetLayout *out, icl_error *err) {
  for (int i = 0; i < c->n_set_layouts; i++)
    if (c->set_layouts[i].n == n && c->set_layouts[i].ubo_mask == ubo_mask) {
      *out = c->set_layouts[i].layout;
      return ICL_OK;
    }
  if (c->n_set_layouts == (int)(sizeof c->set_layouts / sizeof c->set_layouts[0]))
    return icl_error_set(err, ICL_EINVAL, "vulkan: too many descriptor-set layouts");
  VkDescriptorSetLayoutBinding b[VK_MAX_BINDINGS];
  for (uint32_t i = 0; i < n; i++)
    b[i] = (VkDescriptorSetLayoutBinding){
        i, (ubo_mask >> i) & 1 ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
        VK_SHADER_STAGE_COMPUTE_BIT, NULL};
  VkDescriptorSetLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = n;
  li.pBindings = b;
  VK_CHECK(vkCreateDescriptorSetLayout(c->device, &li, NULL, out));
  c->set_layouts[c->n_set_layouts].n = n;
  c->set_layouts[c->n_set_layouts].ubo_mask = ubo_mask;
  c->set_layouts[c->n_set_layouts++].layout = *out;
  return ICL_OK;
}

static int add_pool(vk_ctx *c, icl_error *err) {
  VkDescriptorPool *pools = realloc(c->pools, (size_t)(c->n_pools + 1) * sizeof *pools);
  if (!pools) return icl_error_set(err, ICL_ENOMEM, "out of memory");
  c->pools = pools;
  /* the CPU-shaped grouped mat-vecs bind up to 4 uniform buffers a set: room for that in every set */
  VkDescriptorPoolSize ps[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, VK_SETS_PER_POOL * VK_MAX_BINDINGS},
                                {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, VK_SETS_PER_POOL * 4}};
  VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pi.maxSets = VK_SETS_PER_POOL;
  pi.poolSizeCount = 2;
  pi.pPoolSizes = ps;
  VK_CHECK(vkCreateDescriptorPool(c->device, &pi, NULL, &c->pools[c->n_pools]));
  c->n_pools++;
  return ICL_OK;
}

int vk_record_init(vk_ctx *c, icl_error *err) {
  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = c->queue_family;
  VK_CHECK(vkCreateCommandPool(c->device, &pi, NULL, &c->cmd_pool));
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = c->cmd_pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VK_CHECK(vkAllocateCommandBuffers(c->device, &ai, &c->cmd));
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VK_CHECK(vkCreateFence(c->device, &fi, NULL, &c->fence));
  int rc = add_pool(c, err);
  c->batch = 1;
  return rc;
}

void vk_record_destroy(vk_ctx *c) {
  if (!c->device) return;
  for (int i = 0; i < c->n_pools; i++) vkDestroyDescriptorPool(c->device, c->pools[i], NULL);
  free(c->pools);
  c->pools = NULL;
  c->n_pools = 0;
  for (int i = 0; i < c->n_set_layouts; i++) vkDestroyDescriptorSetLayout(c->device, c->set_layouts[i].layout, NULL);
  c->n_set_layouts = 0;
  if (c->fence) vkDestroyFence(c->device, c->fence, NULL);
  if (c->cmd_pool) vkDestroyCommandPool(c->device, c->cmd_pool, NULL); /* frees c->cmd */
  c->fence = VK_NULL_HANDLE;
  c->cmd_pool = VK_NULL_HANDLE;
}

static int begin(vk_ctx *c, icl_error *err) {
  if (c->recording) return ICL_OK;
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_CHECK(vkBeginCommandBuffer(c->cmd, &bi));
  c->recording = 1;
  c->n_access = 0;
  c->n_dispatch = 0;
  return ICL_OK;
}

static void barrier(vk_ctx *c, VkPipelineStageFlags src, VkAccessFlags sa, VkPipelineStageFlags dst,
                    VkAccessFlags da) {
  VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, sa, da};
  vkCmdPipelineBarrier(c->cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
  c->n_access = 0;
  c->counts.barriers++;
}

/* Does this dispatch conflict with what happened since the last barrier? */
static int needs_barrier(const vk_ctx *c, const vk_binding *b, uint32_t nb) {
  if (c->n_access + (int)nb > VK_MAX_ACCESSES) return 1;
  for (uint32_t i = 0; i < nb; i++)
    for (int j = 0; j < c->n_access; j++) {
      const vk_access *a = &c->access[j];
      if (a->buffer == b[i].buf->buffer && a->lo < b[i].hi && b[i].lo < a->hi &&
          (a->write || b[i].write))
        return 1;
    }
  return 0;
}

static void track(vk_ctx *c, const vk_binding *b, uint32_t nb) {
  for (uint32_t i = 0; i < nb; i++) {
    c->access[c->n_access++] = (vk_access){b[i].buf->buffer, b[i].lo, b[i].hi, b[i].write};
    b[i].buf->batch = c->batch;
    if (!b[i].write) c->counts.bytes_read += b[i].hi - b[i].lo;
  }
}

static int alloc_set(vk_ctx *c, VkDescriptorSetLayout layout, VkDescriptorSet *set, icl_error *err) {
  for (;;) {
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = c->pools[c->cur_pool];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkResult r = vkAllocateDescriptorSets(c->device, &ai, set);
    if (r == VK_SUCCESS) return ICL_OK;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) VK_CHECK(r);
    c->cur_pool++; /* this pool is full: move on (pools are reset after the submit) */
    if (c->cur_pool == c->n_pools) {
      int rc = add_pool(c, err);
      if (rc) return rc;
    }
  }
}

static int write_set(vk_ctx *c, VkDescriptorSet set, const vk_binding *b, uint32_t nb, icl_error *err) {
  (void)err;
  VkDescriptorBufferInfo bi[VK_MAX_BINDINGS];
  VkWriteDescriptorSet w[VK_MAX_BINDINGS];
  for (uint32_t i = 0; i < nb; i++) {
    bi[i] = (VkDescriptorBufferInfo){b[i].buf->buffer, b[i].offset, b[i].range};
    w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w[i].dstSet = set;
    w[i].dstBinding = i;
    w[i].descriptorCount = 1;
    w[i].descriptorType = b[i].ubo ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w[i].pBufferInfo = &bi[i];
  }
  vkUpdateDescriptorSets(c->device, nb, w, 0, NULL);
  return ICL_OK;
}

int vk_dispatch(vk_ctx *c, const vk_kernel *k, const vk_binding *b, uint32_t nb, const void *push,
                uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz, icl_error *err) {
  /* the C side and the kernel description must agree, always (not only in debug builds) */
  uint32_t ubo_mask = 0;
  for (uint32_t i = 0; i < nb; i++) ubo_mask |= (uint32_t)(b[i].ubo != 0) << i;
  if (nb != k->n_bindings || push_size != k->push_size || ubo_mask != k->ubo_mask) {
    fprintf(stderr, "icl: vulkan: dispatch of '%s' with %u bindings (uniform mask %x)/%u push bytes, kernel has "
            "%u (%x)/%u\n", k->shader, nb, ubo_mask, push_size, k->n_bindings, k->ubo_mask, k->push_size);
    abort(); /* a programming error in vk/, never an input error */
  }
  if (gx == 0 || gy == 0 || gz == 0) return ICL_OK;
  vk_pipeline *p;
  VkDescriptorSet set;
  int rc = vk_pipeline_get(c, k, &p, err);
  if (!rc) rc = begin(c, err);
  if (!rc) rc = alloc_set(c, p->set_layout, &set, err);
  if (!rc) rc = write_set(c, set, b, nb, err);
  if (rc) return rc;
  if (needs_barrier(c, b, nb))
    barrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  track(c, b, nb);
  vkCmdBindPipeline(c->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
  vkCmdBindDescriptorSets(c->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, NULL);
  if (push_size) vkCmdPushConstants(c->cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
  vk_profile_begin(c, c->cur_op ? c->cur_op : k->shader);
  vkCmdDispatch(c->cmd, gx, gy, gz);
  vk_profile_end(c);
  c->n_dispatch++;
  c->counts.dispatches++;
  return ICL_OK;
}

int vk_flush(vk_ctx *c, icl_error *err) {
  if (!c->recording) return ICL_OK;
  /* make shader writes visible to the host once the fence signals */
  barrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
          VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT);
  c->recording = 0;
  c->batch++;
  VK_CHECK(vkEndCommandBuffer(c->cmd));
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &c->cmd;
  VK_CHECK(vkQueueSubmit(c->queue, 1, &si, c->fence));
  c->counts.submits++;
  VK_CHECK(vkWaitForFences(c->device, 1, &c->fence, VK_TRUE, UINT64_MAX));
  c->counts.host_waits++;
  VK_CHECK(vkResetFences(c->device, 1, &c->fence));
  VK_CHECK(vkResetCommandBuffer(c->cmd, 0));
  for (int i = 0; i <= c->cur_pool && i < c->n_pools; i++) VK_CHECK(vkResetDescriptorPool(c->device, c->pools[i], 0));
  c->cur_pool = 0;
  vk_profile_collect(c);
  return ICL_OK;
}

int vk_copy_now(vk_ctx *c, VkBuffer src, VkDeviceSize soff, VkBuffer dst, VkDeviceSize doff, VkDeviceSize n,
                icl_error *err) {
  int rc = vk_flush(c, err);
  if (!rc) rc = begin(c, err);
  if (rc) return rc;
  VkBufferCopy region = {soff, doff, n};
  vkCmdCopyBuffer(c->cmd, src, dst, 1, &region);
  barrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT);
  return vk_flush(c, err);
}
