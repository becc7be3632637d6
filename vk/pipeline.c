/* Compute pipelines from the embedded SPIR-V, created on first use and cached by kernel
 * (shader name + binding count + push size + specialization constants). */
#include <stdlib.h>
#include <string.h>

#include "shaders_table.h"
#include "vk_internal.h"

static int same_kernel(const vk_kernel *a, const vk_kernel *b) {
  return strcmp(a->shader, b->shader) == 0 && a->n_bindings == b->n_bindings && a->ubo_mask == b->ubo_mask &&
         a->push_size == b->push_size && a->n_spec == b->n_spec && a->full_subgroups == b->full_subgroups &&
         memcmp(a->spec, b->spec, a->n_spec * sizeof a->spec[0]) == 0;
}

static int find_shader(const char *name, const uint32_t **code, size_t *size) {
  for (size_t i = 0; icl_shader_table[i].name; i++)
    if (strcmp(icl_shader_table[i].name, name) == 0) {
      *code = icl_shader_table[i].code;
      *size = icl_shader_size_at(i);
      return 1;
    }
  return 0;
}

static int create_layout(vk_ctx *c, vk_pipeline *p, icl_error *err) {
  VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, p->key.push_size};
  int rc = vk_set_layout(c, p->key.n_bindings, p->key.ubo_mask, &p->set_layout, err);
  if (rc) return rc;
  VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  li.setLayoutCount = 1;
  li.pSetLayouts = &p->set_layout;
  li.pushConstantRangeCount = p->key.push_size ? 1 : 0;
  li.pPushConstantRanges = &pr;
  VK_CHECK(vkCreatePipelineLayout(c->device, &li, NULL, &p->layout));
  return ICL_OK;
}

static int create_pipeline(vk_ctx *c, vk_pipeline *p, icl_error *err) {
  const uint32_t *code;
  size_t size;
  if (!find_shader(p->key.shader, &code, &size))
    return icl_error_set(err, ICL_EUNSUPPORTED, "vulkan: no embedded shader '%s'", p->key.shader);
  VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = size;
  mi.pCode = code;
  VK_CHECK(vkCreateShaderModule(c->device, &mi, NULL, &p->module));
  int rc = create_layout(c, p, err);
  if (rc) return rc;
  VkSpecializationMapEntry entries[8];
  for (uint32_t i = 0; i < p->key.n_spec; i++) entries[i] = (VkSpecializationMapEntry){i, i * 4, 4};
  VkSpecializationInfo si = {p->key.n_spec, entries, p->key.n_spec * 4, p->key.spec};
  VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  if (p->key.full_subgroups) ci.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
  ci.stage.module = p->module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = p->key.n_spec ? &si : NULL;
  ci.layout = p->layout;
  VK_CHECK(vkCreateComputePipelines(c->device, VK_NULL_HANDLE, 1, &ci, NULL, &p->pipeline));
  return ICL_OK;
}

static void pipeline_free(vk_ctx *c, vk_pipeline *p) {
  if (p->pipeline) vkDestroyPipeline(c->device, p->pipeline, NULL);
  if (p->layout) vkDestroyPipelineLayout(c->device, p->layout, NULL);
  if (p->module) vkDestroyShaderModule(c->device, p->module, NULL);
  free(p);
}

int vk_pipeline_get(vk_ctx *c, const vk_kernel *k, vk_pipeline **out, icl_error *err) {
  for (vk_pipeline *p = c->pipelines; p; p = p->next)
    if (same_kernel(&p->key, k)) {
      *out = p;
      return ICL_OK;
    }
  if (k->n_bindings > VK_MAX_BINDINGS || k->push_size > VK_MAX_PUSH || k->n_spec > 8)
    return icl_error_set(err, ICL_EINVAL, "vulkan: kernel '%s' exceeds binding/push/spec limits", k->shader);
  vk_pipeline *p = calloc(1, sizeof *p);
  if (!p) return icl_error_set(err, ICL_ENOMEM, "out of memory");
  p->key = *k;
  int rc = create_pipeline(c, p, err);
  if (rc) {
    pipeline_free(c, p);
    return icl_error_wrap(err, "creating pipeline '%s'", k->shader);
  }
  p->next = c->pipelines;
  c->pipelines = p;
  *out = p;
  return ICL_OK;
}

void vk_pipelines_destroy(vk_ctx *c) {
  while (c->pipelines) {
    vk_pipeline *p = c->pipelines;
    c->pipelines = p->next;
    pipeline_free(c, p);
  }
}
