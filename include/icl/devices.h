/* Vulkan devices as icl sees them: what `icl devices` prints and how the backend chooses. */
#ifndef ICL_DEVICES_H
#define ICL_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#include "icl/icl.h"

#define ICL_DEVICE_MAX_HEAPS 16
#define ICL_DEVICE_MAX_COOPMAT 8

/* One memory heap of a device. */
typedef struct icl_device_heap {
  uint64_t size;     /* bytes */
  int device_local;  /* VK_MEMORY_HEAP_DEVICE_LOCAL_BIT */
  int host_visible;  /* some memory type of this heap is HOST_VISIBLE */
} icl_device_heap;

/* The capabilities of one Vulkan physical device. */
typedef struct icl_device_info {
  int index;                 /* position in vkEnumeratePhysicalDevices order (the ICL_DEVICE index) */
  char name[256];
  const char *type;          /* "discrete", "integrated", "virtual", "cpu", "other" */
  uint32_t api_version;      /* VK_MAKE_API_VERSION packed */
  char driver[256];          /* driver name and info ("llvmpipe Mesa 22.3.6 (LLVM 15.0.6)") */
  uint32_t subgroup_size;
  int subgroup_arith;        /* compute shaders have subgroup basic + arithmetic operations */
  int fp16, int8;            /* shaderFloat16, shaderInt8 */
  int storage8, storage16;   /* storageBuffer8BitAccess, storageBuffer16BitAccess */
  int int_dot;               /* shaderIntegerDotProduct (Vulkan 1.3 or VK_KHR_shader_integer_dot_product) */
  int int_dot_fast;          /* integerDotProduct4x8BitPackedSignedAccelerated */
  int memory_model;          /* vulkanMemoryModel (the cooperative-matrix shader's SPIR-V memory model) */
  int n_coopmat;             /* VK_KHR_cooperative_matrix: f16 x f16 -> f32 subgroup shapes the driver lists */
  uint32_t coopmat[ICL_DEVICE_MAX_COOPMAT][3]; /* M, N, K of each */
  uint64_t max_storage_range;      /* maxStorageBufferRange (bytes) */
  uint64_t min_storage_align;      /* minStorageBufferOffsetAlignment (bytes) */
  uint32_t max_shared;             /* maxComputeSharedMemorySize (bytes) */
  uint32_t max_uniform_range;      /* maxUniformBufferRange (bytes) */
  uint32_t max_stage_storage;      /* maxPerStageDescriptorStorageBuffers */
  uint32_t max_stage_uniform;      /* maxPerStageDescriptorUniformBuffers */
  uint32_t min_uniform_align;      /* minUniformBufferOffsetAlignment (bytes) */
  uint32_t max_wg_invocations;     /* maxComputeWorkGroupInvocations */
  uint32_t max_wg_count[3];        /* maxComputeWorkGroupCount */
  uint64_t max_alloc;              /* maxMemoryAllocationSize (bytes) */
  int n_heaps;
  icl_device_heap heaps[ICL_DEVICE_MAX_HEAPS];
  int uma;                   /* device memory is host memory: map it instead of staging copies */
  char pci[16];              /* PCI address "dddd:bb:dd.f" (VK_EXT_pci_bus_info), "" when the device has none */
  uint8_t uuid[16];          /* VkPhysicalDeviceIDProperties.deviceUUID (NVIDIA: the GPU UUID nvidia-smi prints) */
  int usable;                /* meets icl's requirements (Vulkan 1.2, subgroup arithmetic, 16-bit storage) */
} icl_device_info;

/* Lists the Vulkan devices into out[0..cap) and sets *n to their count and *chosen to the index
 * the Vulkan backend would use (honouring ICL_DEVICE: an index in this list, gpu:N for the N-th GPU in PCI bus
 * order as nvidia-smi and Slurm number them, GPU-<uuid> as in CUDA_VISIBLE_DEVICES, or a name substring). When none would be chosen (nothing usable,
 * or ICL_DEVICE matches nothing) it still succeeds, with *chosen = -1 and the reason in err.
 * Fails with ICL_EDEVICE when there is no Vulkan driver or no device. */
int icl_vk_list_devices(icl_device_info *out, int cap, int *n, int *chosen, icl_error *err);

/* Writes into buf (cap bytes) which kernel paths the backend gives device d, one "name: path" line each
 * (kernel family, matmul, attention), honouring ICL_VK_SHAPE and ICL_VK_ATTN as the backend does. */
void icl_vk_kernel_paths(const icl_device_info *d, char *buf, size_t cap);

/* Number of validation-layer warnings and errors seen in this process (ICL_VALIDATION=1). */
int icl_vk_validation_messages(void);

#endif
