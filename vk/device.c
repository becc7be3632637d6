/* Device bring-up and teardown: vk_device_create lists the create steps in order;
 * vk_device_destroy undoes them in reverse and is safe on a half-built context. */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

static int pick_physical(vk_ctx *c, int dev, icl_error *err) {
  uint32_t n = 0;
  VK_CHECK(vkEnumeratePhysicalDevices(c->inst.instance, &n, NULL));
  if (n == 0) return icl_error_set(err, ICL_EDEVICE, "vulkan: no devices");
  VkPhysicalDevice *pds = calloc(n, sizeof *pds);
  icl_device_info *infos = calloc(n, sizeof *infos);
  int rc = ICL_OK, chosen = -1;
  if (!pds || !infos) rc = icl_error_set(err, ICL_ENOMEM, "out of memory");
  if (!rc && vkEnumeratePhysicalDevices(c->inst.instance, &n, pds) != VK_SUCCESS)
    rc = icl_error_set(err, ICL_EDEVICE, "vulkan: vkEnumeratePhysicalDevices failed");
  for (uint32_t i = 0; !rc && i < n; i++) vk_physdev_query(pds[i], c->inst.instance, (int)i, &infos[i]);
  if (!rc) rc = vk_physdev_choose(infos, (int)n, dev, &chosen, err);
  if (!rc) {
    c->phys = pds[chosen];
    c->info = infos[chosen];
  }
  free(pds);
  free(infos);
  return rc;
}

static int pick_queue_family(vk_ctx *c, icl_error *err) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &n, NULL);
  VkQueueFamilyProperties props[32];
  if (n > 32) n = 32;
  vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &n, props);
  /* prefer a compute queue without graphics (dedicated compute engines on discrete GPUs) */
  int best = -1;
  for (uint32_t i = 0; i < n; i++) {
    if (!(props[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best < 0 || !(props[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = (int)i;
  }
  if (best < 0) return icl_error_set(err, ICL_EUNSUPPORTED, "vulkan: '%s' has no compute queue", c->info.name);
  c->queue_family = (uint32_t)best;
  return ICL_OK;
}

static int create_logical(vk_ctx *c, icl_error *err) {
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = c->queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  /* enable what the shaders may use and the device has */
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.shaderFloat16 = (VkBool32)c->info.fp16;
  f12.shaderInt8 = (VkBool32)c->info.int8;
  f12.storageBuffer8BitAccess = (VkBool32)c->info.storage8;
  VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  f11.storageBuffer16BitAccess = VK_TRUE;
  f11.pNext = &f12;
  VkPhysicalDeviceShaderIntegerDotProductFeatures fdot = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  /* VkPhysicalDeviceCooperativeMatrixFeaturesKHR, declared here: Debian 12's Vulkan headers predate it */
  struct {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
  } fcoop = {(VkStructureType)1000506000, NULL, VK_TRUE, VK_FALSE};
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT fssc = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT, .computeFullSubgroups = VK_TRUE};
  const char *exts[3];
  uint32_t n_ext = 0;
  void **tail = &f12.pNext;
  f12.vulkanMemoryModel = (VkBool32)c->info.memory_model;
  if (c->info.int_dot) { /* matmul_intdot.comp (FAST precision) */
    fdot.shaderIntegerDotProduct = VK_TRUE;
    *tail = &fdot, tail = &fdot.pNext;
    exts[n_ext++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
  }
  if (c->mm_fast == VK_MM_COOPMAT) { /* matmul_coopmat.comp, only when ICL_VK_MATMUL asks for it */
    *tail = &fcoop, tail = &fcoop.pNext;
    *tail = &fssc, tail = &fssc.pNext; /* REQUIRE_FULL_SUBGROUPS for its SPIR-V 1.5 pipelines */
    exts[n_ext++] = "VK_KHR_cooperative_matrix";
    exts[n_ext++] = VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME;
  }
  VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.pNext = &f11;
  ci.enabledExtensionCount = n_ext;
  ci.ppEnabledExtensionNames = n_ext ? exts : NULL;
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &qi;
  VK_CHECK(vkCreateDevice(c->phys, &ci, NULL, &c->device));
  vkGetDeviceQueue(c->device, c->queue_family, 0, &c->queue);
  vkGetPhysicalDeviceMemoryProperties(c->phys, &c->memprops);
  return ICL_OK;
}

static void choose_launch_shape(vk_ctx *c) {
  const char *s = getenv("ICL_VK_STAGING");
  c->force_staging = s && !strcmp(s, "1");
  /* CPU devices run a workgroup as a loop over SIMD-wide subgroups: small groups, each
   * invocation working on a contiguous block; GPUs want wide groups. */
  c->cpu_shape = vk_shape_cpu_for(&c->info);
  c->wg = c->cpu_shape ? 32 : 64;
  c->attn_flash = vk_attn_flash_env();
}

/* The FAST several-token matmul path (ICL_VK_MATMUL): before the device is made, which enables what it needs. */
static int choose_matmul_path(vk_ctx *c, icl_error *err) {
  if (!vk_coopmat_shape(&c->info, c->coop)) c->coop[0] = c->coop[1] = c->coop[2] = 0;
  return vk_matmul_path_for(&c->info, getenv("ICL_VK_MATMUL"), &c->mm_fast, err);
}

int vk_device_create(vk_ctx *c, int dev, icl_error *err) {
  int rc;
  if ((rc = vk_instance_create(&c->inst, err))) return rc;  /* 1. instance (+ validation)   */
  if ((rc = pick_physical(c, dev, err))) return rc;          /* 2. physical device, features */
  if ((rc = pick_queue_family(c, err))) return rc;           /* 3. a compute queue family    */
  if ((rc = choose_matmul_path(c, err))) return rc;          /* 4. FAST matmul path (features to enable) */
  if ((rc = create_logical(c, err))) return rc;              /* 5. device, queue, memory     */
  choose_launch_shape(c);                                    /* 6. per-device-type defaults  */
  if ((rc = vk_record_init(c, err))) return rc;              /* 7. command buffer, fence, descriptor layouts */
  if ((rc = vk_profile_init(c, err))) return rc;             /* 8. timestamp queries (ICL_PROFILE=1) */
  return ICL_OK;
}

void vk_device_destroy(vk_ctx *c) {
  if (c->device) vkDeviceWaitIdle(c->device);
  if (c->staging) vk_buf_destroy(c, c->staging);
  c->staging = NULL;
  if (c->q8) vk_buf_destroy(c, c->q8);
  c->q8 = NULL;
  vk_profile_destroy(c);   /* 8 */
  vk_pipelines_destroy(c); /* pipelines are created lazily after bring-up */
  vk_record_destroy(c);    /* 7 */
  if (c->device) vkDestroyDevice(c->device, NULL); /* 5 */
  c->device = VK_NULL_HANDLE;
  vk_instance_destroy(&c->inst); /* 1 */
}
