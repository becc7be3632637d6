/* Physical devices: capability queries, the choice rule, and the public listing. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

static const char *type_name(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
  case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
  default: return "other";
  }
}

/* UMA: the CPU reads device memory through its caches (vk_memory_uma), or the device is the CPU
 * itself. Then buffers are mapped directly and uploads are plain memcpy. */
static void query_memory(VkPhysicalDevice pd, icl_device_info *info) {
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  info->n_heaps = (int)(mp.memoryHeapCount < ICL_DEVICE_MAX_HEAPS ? mp.memoryHeapCount : ICL_DEVICE_MAX_HEAPS);
  for (int h = 0; h < info->n_heaps; h++) {
    icl_device_heap *hp = &info->heaps[h];
    hp->size = mp.memoryHeaps[h].size;
    hp->device_local = (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
    for (uint32_t t = 0; t < mp.memoryTypeCount; t++)
      if (mp.memoryTypes[t].heapIndex == (uint32_t)h &&
          (mp.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
        hp->host_visible = 1;
  }
  info->uma = vk_memory_uma(&mp) || strcmp(info->type, "cpu") == 0;
}

static int has_extension(VkPhysicalDevice pd, const char *name) {
  uint32_t n = 0;
  int found = 0;
  if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0) return 0;
  VkExtensionProperties *ext = calloc(n, sizeof *ext);
  if (ext && vkEnumerateDeviceExtensionProperties(pd, NULL, &n, ext) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(ext[i].extensionName, name);
  free(ext);
  return found;
}

/* Integer dot products (the intdot matmul): the KHR extension, which the backend enables (its instance asks for
 * Vulkan 1.2, so the feature's 1.3 core form is not available to it). */
static void query_int_dot(VkPhysicalDevice pd, icl_device_info *info) {
  if (info->api_version < VK_API_VERSION_1_2 || !has_extension(pd, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME))
    return;
  VkPhysicalDeviceShaderIntegerDotProductFeatures f = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f};
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  VkPhysicalDeviceShaderIntegerDotProductProperties p = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &p};
  vkGetPhysicalDeviceProperties2(pd, &p2);
  info->int_dot = f.shaderIntegerDotProduct;
  info->int_dot_fast = p.integerDotProduct4x8BitPackedSignedAccelerated;
}

/* VK_KHR_cooperative_matrix, declared here: the Vulkan headers of Debian 12 (1.3.239) predate it (1.3.255). */
#define ICL_COOPMAT_EXT "VK_KHR_cooperative_matrix"
enum { ICL_STYPE_COOPMAT_PROPS = 1000506001, ICL_COMPONENT_F16 = 0, ICL_COMPONENT_F32 = 1, ICL_SCOPE_SUBGROUP = 3 };
typedef struct icl_coopmat_props {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize;
  int32_t AType, BType, CType, ResultType; /* VkComponentTypeKHR */
  VkBool32 saturatingAccumulation;
  int32_t scope; /* VkScopeKHR */
} icl_coopmat_props;
typedef VkResult(VKAPI_PTR *icl_coopmat_props_fn)(VkPhysicalDevice, uint32_t *, icl_coopmat_props *);

/* The f16 x f16 -> f32 subgroup shapes the driver lists for cooperative matrices (none without the extension). */
static void query_coopmat(VkPhysicalDevice pd, VkInstance inst, icl_device_info *info) {
  if (!inst || !has_extension(pd, ICL_COOPMAT_EXT) || !has_extension(pd, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME))
    return;
  /* the shader is SPIR-V 1.5 (Vulkan 1.2), so its pipelines need REQUIRE_FULL_SUBGROUPS */
  VkPhysicalDeviceSubgroupSizeControlFeaturesEXT ssc = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES_EXT};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &ssc};
  vkGetPhysicalDeviceFeatures2(pd, &f2);
  if (!ssc.computeFullSubgroups) return;
  icl_coopmat_props_fn get =
      (icl_coopmat_props_fn)vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  uint32_t n = 0;
  if (!get || get(pd, &n, NULL) != VK_SUCCESS || n == 0) return;
  icl_coopmat_props *props = calloc(n, sizeof *props);
  if (!props) return;
  for (uint32_t i = 0; i < n; i++) props[i].sType = (VkStructureType)ICL_STYPE_COOPMAT_PROPS;
  if (get(pd, &n, props) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && info->n_coopmat < ICL_DEVICE_MAX_COOPMAT; i++) {
      const icl_coopmat_props *q = &props[i];
      if (q->AType == ICL_COMPONENT_F16 && q->BType == ICL_COMPONENT_F16 && q->CType == ICL_COMPONENT_F32 &&
          q->ResultType == ICL_COMPONENT_F32 && q->scope == ICL_SCOPE_SUBGROUP) {
        uint32_t *m = info->coopmat[info->n_coopmat++];
        m[0] = q->MSize, m[1] = q->NSize, m[2] = q->KSize;
      }
    }
  free(props);
}

static void query_features(VkPhysicalDevice pd, icl_device_info *info) {
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f.pNext = &f11;
  f11.pNext = &f12;
  if (info->api_version < VK_API_VERSION_1_2) return; /* the 1.1/1.2 structs are not defined there */
  vkGetPhysicalDeviceFeatures2(pd, &f);
  info->fp16 = f12.shaderFloat16;
  info->int8 = f12.shaderInt8;
  info->storage8 = f12.storageBuffer8BitAccess;
  info->storage16 = f11.storageBuffer16BitAccess;
  info->memory_model = f12.vulkanMemoryModel;
}

static void query_properties(VkPhysicalDevice pd, icl_device_info *info) {
  VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p.pNext = &sg;
  sg.pNext = &m3;
  m3.pNext = &drv;
  vkGetPhysicalDeviceProperties2(pd, &p);
  const VkPhysicalDeviceLimits *l = &p.properties.limits;
  snprintf(info->name, sizeof info->name, "%s", p.properties.deviceName);
  info->type = type_name(p.properties.deviceType);
  info->api_version = p.properties.apiVersion;
  /* "name info", cut to fit (both are 256-byte fields) */
  size_t nl = strnlen(drv.driverName, 120);
  memcpy(info->driver, drv.driverName, nl);
  info->driver[nl] = ' ';
  snprintf(info->driver + nl + 1, sizeof info->driver - nl - 1, "%.120s", drv.driverInfo);
  info->subgroup_size = sg.subgroupSize;
  VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
  info->subgroup_arith = (sg.supportedOperations & need) == need && (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT);
  info->max_storage_range = l->maxStorageBufferRange;
  info->min_storage_align = l->minStorageBufferOffsetAlignment;
  info->max_shared = l->maxComputeSharedMemorySize;
  info->max_uniform_range = l->maxUniformBufferRange;
  info->max_stage_storage = l->maxPerStageDescriptorStorageBuffers;
  info->max_stage_uniform = l->maxPerStageDescriptorUniformBuffers;
  info->min_uniform_align = (uint32_t)l->minUniformBufferOffsetAlignment;
  info->max_wg_invocations = l->maxComputeWorkGroupInvocations;
  memcpy(info->max_wg_count, l->maxComputeWorkGroupCount, sizeof info->max_wg_count);
  info->max_alloc = m3.maxMemoryAllocationSize;
}

/* PCI address (when the driver offers VK_EXT_pci_bus_info) and device UUID: what ICL_DEVICE=gpu:N and GPU-<uuid>
 * match, so a cluster's GPU numbering (PCI order) picks the same card under Vulkan. */
static void query_ids(VkPhysicalDevice pd, icl_device_info *info) {
  if (info->api_version < VK_API_VERSION_1_1) return;
  VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDevicePCIBusInfoPropertiesEXT pci = {0};
  pci.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT;
  uint32_t n = 0;
  int has_pci = 0;
  if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) == VK_SUCCESS && n > 0) {
    VkExtensionProperties *ext = calloc(n, sizeof *ext);
    if (ext && vkEnumerateDeviceExtensionProperties(pd, NULL, &n, ext) == VK_SUCCESS)
      for (uint32_t i = 0; i < n && !has_pci; i++)
        has_pci = !strcmp(ext[i].extensionName, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
    free(ext);
  }
  VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id};
  if (has_pci) id.pNext = &pci;
  vkGetPhysicalDeviceProperties2(pd, &p);
  memcpy(info->uuid, id.deviceUUID, sizeof info->uuid);
  if (has_pci)
    snprintf(info->pci, sizeof info->pci, "%04x:%02x:%02x.%x", pci.pciDomain & 0xffff, pci.pciBus & 0xff,
             pci.pciDevice & 0x1f, pci.pciFunction & 0x7);
}

void vk_physdev_query(VkPhysicalDevice pd, VkInstance inst, int index, icl_device_info *info) {
  memset(info, 0, sizeof *info);
  info->index = index;
  query_properties(pd, info);
  query_ids(pd, info);
  query_features(pd, info);
  query_int_dot(pd, info);
  query_coopmat(pd, inst, info);
  query_memory(pd, info);
  info->usable = info->api_version >= VK_API_VERSION_1_2 && info->subgroup_arith && info->storage16 &&
                 info->max_wg_invocations >= 256 && info->max_shared >= 16384;
}

static int type_rank(const char *type) {
  static const char *order[] = {"discrete", "integrated", "virtual", "cpu"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(type, order[i])) return i;
  return 4;
}

/* "GPU-xxxxxxxx-xxxx-..." (hex digits, dashes ignored, any case) names uuid */
static int uuid_matches(const char *want, const uint8_t uuid[16]) {
  int nib = 0;
  for (const char *p = want + 4; *p; p++) {
    if (*p == '-') continue;
    int c = tolower((unsigned char)*p);
    int v = isdigit(c) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0 || nib >= 32 || v != ((uuid[nib / 2] >> (nib % 2 ? 0 : 4)) & 15)) return 0;
    nib++;
  }
  return nib == 32;
}

/* gpu:N: the index of the N-th non-CPU device in PCI bus order (devices without a PCI address after those with
 * one, in enumeration order), or -1 */
static int nth_gpu(const icl_device_info *infos, int n, long want) {
  for (int i = 0; i < n; i++) {
    if (!strcmp(infos[i].type, "cpu")) continue;
    long before = 0;
    for (int j = 0; j < n; j++) {
      if (j == i || !strcmp(infos[j].type, "cpu")) continue;
      int ip = infos[i].pci[0] != 0, jp = infos[j].pci[0] != 0;
      int c = ip && jp ? strcmp(infos[j].pci, infos[i].pci) : ip - jp; /* < 0: j comes first */
      if (c < 0 || (c == 0 && j < i)) before++;
    }
    if (before == want) return i;
  }
  return -1;
}

/* ICL_DEVICE=<index>, gpu:<N>, GPU-<uuid>, or a case-sensitive substring of the device name. */
static int choose_by_env(const icl_device_info *infos, int n, const char *want, int *chosen, icl_error *err) {
  char *end;
  long idx = strtol(want, &end, 10), gpu = -2;
  if (!strncmp(want, "gpu:", 4)) {
    long k = strtol(want + 4, &end, 10);
    if (end == want + 4 || *end || k < 0)
      return icl_error_set(err, ICL_EINVAL, "vulkan: ICL_DEVICE=%s: expected gpu:N with N a GPU number from 0", want);
    gpu = nth_gpu(infos, n, k);
  }
  int by_uuid = !strncmp(want, "GPU-", 4);
  for (int i = 0; i < n; i++)
    if (gpu != -2 ? gpu == i
        : by_uuid ? uuid_matches(want, infos[i].uuid)
                  : (*end == '\0' && idx == i) || (*end != '\0' && strstr(infos[i].name, want))) {
      if (!infos[i].usable)
        return icl_error_set(err, ICL_EUNSUPPORTED, "vulkan: ICL_DEVICE=%s selects '%s', which lacks Vulkan 1.2, "
                             "compute subgroup arithmetic or 16-bit storage", want, infos[i].name);
      *chosen = i;
      return ICL_OK;
    }
  return icl_error_set(err, ICL_EINVAL, "vulkan: ICL_DEVICE=%s matches none of the %d devices (see 'icl devices')",
                       want, n);
}

int vk_physdev_choose(const icl_device_info *infos, int n, int dev, int *chosen, icl_error *err) {
  *chosen = -1;
  if (dev >= 0) {
    char buf[32];
    snprintf(buf, sizeof buf, "%d", dev);
    return choose_by_env(infos, n, buf, chosen, err);
  }
  const char *want = getenv("ICL_DEVICE");
  if (want && *want) return choose_by_env(infos, n, want, chosen, err);
  for (int i = 0; i < n; i++)
    if (infos[i].usable && (*chosen < 0 || type_rank(infos[i].type) < type_rank(infos[*chosen].type))) *chosen = i;
  if (*chosen < 0) return icl_error_set(err, ICL_EUNSUPPORTED, "vulkan: none of the %d devices is usable", n);
  return ICL_OK;
}

int icl_vk_list_devices(icl_device_info *out, int cap, int *n, int *chosen, icl_error *err) {
  vk_instance vi;
  *n = 0;
  *chosen = -1;
  if (vk_instance_create(&vi, err)) return err->code;
  uint32_t count = 0;
  VkPhysicalDevice pds[64];
  VkResult r = vkEnumeratePhysicalDevices(vi.instance, &count, NULL);
  if (count > 64) count = 64;
  if (r == VK_SUCCESS) r = vkEnumeratePhysicalDevices(vi.instance, &count, pds);
  if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0) {
    vk_instance_destroy(&vi);
    return icl_error_set(err, ICL_EDEVICE, "vulkan: no devices (%s)", icl_vk_result_name(r));
  }
  icl_device_info *all = calloc(count, sizeof *all);
  if (!all) {
    vk_instance_destroy(&vi);
    return icl_error_set(err, ICL_ENOMEM, "out of memory");
  }
  for (uint32_t i = 0; i < count; i++) vk_physdev_query(pds[i], vi.instance, (int)i, &all[i]);
  int rc = vk_physdev_choose(all, (int)count, -1, chosen, err);
  for (int i = 0; i < (int)count && i < cap; i++) out[i] = all[i];
  *n = (int)count;
  free(all);
  vk_instance_destroy(&vi);
  return rc == ICL_EINVAL || rc == ICL_EUNSUPPORTED ? ICL_OK : rc; /* a bad ICL_DEVICE still lists */
}
