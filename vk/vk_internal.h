/* The Vulkan backend's internal state, shared by the files of vk/. Nothing here is public. */
#ifndef ICL_VK_INTERNAL_H
#define ICL_VK_INTERNAL_H

#include <stdint.h>

#include <vulkan/vulkan.h>

#include "backend.h"
#include "check.h"
#include "icl/devices.h"

#define VK_MAX_BINDINGS 12
#define VK_MAX_PUSH 128
#define VK_MAX_ACCESSES 64 /* buffer ranges tracked since the last barrier */
#define VK_SETS_PER_POOL 512

/* ---- instance (instance.c) ---- */
typedef struct vk_instance {
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger; /* VK_NULL_HANDLE without validation */
  int validation;                     /* the validation layer is enabled */
} vk_instance;

/* Creates the instance; with ICL_VALIDATION=1 enables the Khronos validation layer (warns once
 * if it is not installed) and a messenger that counts warnings and errors. */
int vk_instance_create(vk_instance *vi, icl_error *err);
void vk_instance_destroy(vk_instance *vi);

/* ---- physical devices (physdev.c) ---- */
/* Fills info from a physical device; index is its enumeration position. */
void vk_physdev_query(VkPhysicalDevice pd, VkInstance inst, int index, icl_device_info *info);
/* Picks a device: ICL_DEVICE (index or name substring) if set, else discrete > integrated >
 * virtual > cpu among usable devices; dev >= 0 forces an index. Returns the index or an error. */
int vk_physdev_choose(const icl_device_info *infos, int n, int dev, int *chosen, icl_error *err);

/* ---- memory-type policy (memtype.c) ---- */
/* 1 when every device-local heap has a host-visible, host-cached type: buffers are then mapped and read
 * by the CPU directly; else (discrete GPUs, resizable BAR included) they go through staging copies. */
int vk_memory_uma(const VkPhysicalDeviceMemoryProperties *mp);
/* Picks a memory type among bits: host-visible (host) or device-local, by the uma policy; 0 if none. */
int vk_memory_choose(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits, int host, int uma, uint32_t *out);

/* ---- buffers (memory.c) ---- */
struct icl_buf {
  VkBuffer buffer;
  VkDeviceMemory memory;
  size_t size;      /* bytes the caller asked for */
  size_t alloc;     /* bytes allocated (size plus tail padding so 4-byte loads past a block end stay in bounds) */
  void *mapped;     /* host pointer when the memory is host-visible and mapped */
  int coherent;     /* HOST_COHERENT: no flush/invalidate needed */
  uint64_t batch;   /* the batch number that last used the buffer (pending until it is submitted) */
};

/* ---- pipelines (pipeline.c) ---- */
typedef struct vk_kernel {
  const char *shader;      /* embedded SPIR-V name (shaders/<name>.comp or a variants.txt line) */
  uint32_t n_bindings;     /* buffers, bindings 0..n-1 of set 0 */
  uint32_t ubo_mask;       /* bit i: binding i is a uniform buffer (else a storage buffer) */
  uint32_t push_size;      /* bytes of the push-constant struct */
  uint32_t n_spec;         /* specialization constants 0..n_spec-1 (uint32 each) */
  uint32_t spec[8];
  int full_subgroups;      /* REQUIRE_FULL_SUBGROUPS (cooperative matrices in SPIR-V below 1.6 need it) */
} vk_kernel;

typedef struct vk_pipeline {
  vk_kernel key;
  VkShaderModule module;
  VkDescriptorSetLayout set_layout; /* owned by the context's layout cache */
  VkPipelineLayout layout;
  VkPipeline pipeline;
  struct vk_pipeline *next;
} vk_pipeline;

/* ---- one binding of a dispatch (bind.c) ---- */
typedef struct vk_binding {
  icl_buf *buf;
  VkDeviceSize offset; /* aligned to minStorageBufferOffsetAlignment */
  VkDeviceSize range;
  VkDeviceSize lo, hi; /* the bytes the op actually touches (for barrier tracking) */
  int write;           /* the dispatch writes it (for barrier tracking) */
  int ubo;             /* bound as a uniform buffer */
} vk_binding;

typedef struct vk_access {
  VkBuffer buffer;
  VkDeviceSize lo, hi;
  int write;
} vk_access;

typedef struct vk_prof_op {
  const char *name;
  double ms;
  uint64_t count;
} vk_prof_op;

/* ---- the backend ---- */
typedef struct vk_ctx {
  vk_instance inst;
  icl_device_info info;
  VkPhysicalDevice phys;
  VkDevice device;
  uint32_t queue_family;
  VkQueue queue;
  VkPhysicalDeviceMemoryProperties memprops;
  int force_staging;            /* ICL_VK_STAGING=1: use the discrete-GPU upload path even on UMA */

  VkCommandPool cmd_pool;
  VkCommandBuffer cmd;
  VkFence fence;
  int recording;                /* cmd is between begin and submit */
  uint64_t batch;               /* number of the batch being recorded (starts at 1) */
  uint64_t n_dispatch;          /* dispatches recorded in this batch */
  icl_be_counts counts;         /* since the backend was made (icl_backend_ops.counts) */

  struct { uint32_t n, ubo_mask; VkDescriptorSetLayout layout; } set_layouts[32]; /* created on demand */
  int n_set_layouts;
  VkDescriptorPool *pools;      /* descriptor pools, all reset after each submit */
  int n_pools, cur_pool;

  vk_pipeline *pipelines;       /* cache keyed by kernel (shader + spec constants) */

  vk_access access[VK_MAX_ACCESSES]; /* ranges touched since the last barrier */
  int n_access;

  icl_buf *staging;             /* host-visible bounce buffer for the staging path */

  /* profiling (ICL_PROFILE=1) */
  int profile;
  VkQueryPool query_pool;
  uint32_t n_queries, max_queries;
  const char **query_names;     /* op name per pair of queries */
  vk_prof_op *prof;
  int n_prof, cap_prof;
  float period_ns;              /* nanoseconds per timestamp tick */
  uint64_t untimed;             /* dispatches beyond the query pool */

  /* launch shapes for this device type */
  int cpu_shape;                /* CPU-device kernel shapes (see vk_cpu_shape in ops.h) */
  uint32_t wg;                  /* default workgroup size */
  int attn_flash;               /* prefill attention by query blocks (attention_flash.comp); ICL_VK_ATTN=legacy: off */
  int mm_fast;                  /* several-token matmul path at FAST precision (VK_MM_*; ICL_VK_MATMUL) */
  uint32_t coop[3];             /* coopmat: the cooperative-matrix shape M, N, K */
  icl_buf *q8;                  /* intdot: activations quantized per 32-block (grown on demand) */
  size_t q8_size;
  const char *cur_op;           /* op name for profiling */
} vk_ctx;

/* paths.c: which kernels a device gets (also for `icl devices`, before any device is made) */
/* attention_flash.comp's workgroup size, and its query and key tile for head size maxhd (a multiple of 64) on
 * device d: 1, or 0 when no tile fits the device's shared memory (attention.comp then runs). */
enum { VK_FLASH_WG = 128 };
int vk_flash_tiles(const icl_device_info *d, uint32_t maxhd, uint32_t *bq, uint32_t *bk);
/* The kernel family the backend picks for device d: 1 CPU-shaped, 0 GPU-shaped (ICL_VK_SHAPE overrides). */
int vk_shape_cpu_for(const icl_device_info *d);
/* ICL_VK_ATTN: 0 when set to legacy (query-block attention off). */
int vk_attn_flash_env(void);
/* The several-token matmul paths (ICL_VK_MATMUL). intdot and coopmat change results (int8 or f16 activations), so
 * they serve ICL_PRECISION_FAST only; EXACT always runs tiled (matmul.comp, or matmul_cpu.comp on CPU-shaped). */
enum { VK_MM_TILED = 0, VK_MM_INTDOT = 1, VK_MM_COOPMAT = 2 };
/* The FAST-precision path for device d given ICL_VK_MATMUL's value env (NULL or "": the best d offers, tiled for
 * the CPU-shaped family); an unknown value or one d does not offer is ICL_EINVAL naming the variable. */
int vk_matmul_path_for(const icl_device_info *d, const char *env, int *path, icl_error *err);
/* "tiled", "intdot" or "coopmat". */
const char *vk_matmul_path_name(int path);
/* Whether the intdot kernel serves weight type t (the 32-element block types); others run tiled. */
int vk_intdot_type(uint32_t t);
/* Whether this build has matmul_coopmat.comp (a glslang with GL_KHR_cooperative_matrix, cmake/shaders.cmake). */
int vk_coopmat_built(void);
/* The M, N, K cooperative-matrix shape matmul_coopmat.comp uses on device d: 1, or 0 when none fits. */
int vk_coopmat_shape(const icl_device_info *d, uint32_t shape[3]);

/* device.c */
int vk_device_create(vk_ctx *c, int dev, icl_error *err);
void vk_device_destroy(vk_ctx *c);

/* memory.c */
int vk_buf_create(vk_ctx *c, size_t size, int usage, icl_buf **out, icl_error *err);
void vk_buf_destroy(vk_ctx *c, icl_buf *b);
int vk_buf_write(vk_ctx *c, icl_buf *b, size_t off, const void *src, size_t n, icl_error *err);
int vk_buf_read(vk_ctx *c, icl_buf *b, size_t off, void *dst, size_t n, icl_error *err);

/* pipeline.c */
int vk_pipeline_get(vk_ctx *c, const vk_kernel *k, vk_pipeline **out, icl_error *err);
void vk_pipelines_destroy(vk_ctx *c);

/* record.c */
int vk_record_init(vk_ctx *c, icl_error *err);
/* The descriptor-set layout for n buffers of which ubo_mask are uniform buffers (cached). */
int vk_set_layout(vk_ctx *c, uint32_t n, uint32_t ubo_mask, VkDescriptorSetLayout *out, icl_error *err);
void vk_record_destroy(vk_ctx *c);
/* Records one dispatch; asserts that nb and push_size match the kernel. */
int vk_dispatch(vk_ctx *c, const vk_kernel *k, const vk_binding *b, uint32_t nb, const void *push,
                uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz, icl_error *err);
/* Submits what was recorded and waits for it (no-op when nothing is pending). */
int vk_flush(vk_ctx *c, icl_error *err);
/* Runs a one-off copy between buffers (flushes first). */
int vk_copy_now(vk_ctx *c, VkBuffer src, VkDeviceSize soff, VkBuffer dst, VkDeviceSize doff, VkDeviceSize n,
                icl_error *err);

/* profile.c */
int vk_profile_init(vk_ctx *c, icl_error *err);
void vk_profile_begin(vk_ctx *c, const char *name);
void vk_profile_end(vk_ctx *c);
void vk_profile_collect(vk_ctx *c);
void vk_profile_print(vk_ctx *c);
void vk_profile_destroy(vk_ctx *c);

/* bind.c */
/* Binds bytes [off, off+n) of b (off even): descriptor offset aligned down, *rem_bytes receives
 * off's byte offset inside the binding. Fails if the range exceeds maxStorageBufferRange. */
int vk_bind(vk_ctx *c, icl_buf *b, size_t off, size_t n, int write, vk_binding *out, uint32_t *rem_bytes,
            icl_error *err);
/* Binds bytes [off, off+n) as a uniform buffer (minUniformBufferOffsetAlignment,
 * maxUniformBufferRange); the range extends 16-31 bytes past the view, into the buffer's pad. */
int vk_bind_ubo(vk_ctx *c, icl_buf *b, size_t off, size_t n, vk_binding *out, uint32_t *rem_bytes, icl_error *err);
/* Binds a whole 4-byte-aligned view; *word receives its start as a 4-byte word index. */
int vk_bind_view(vk_ctx *c, const icl_dt *t, int write, vk_binding *out, uint32_t *word, icl_error *err);
/* Largest byte span that can be bound starting at any offset (range minus alignment slack). */
size_t vk_bind_max(const vk_ctx *c);
/* Bytes of a view's elements (rows for weight types). */
size_t vk_view_bytes(const icl_dt *t);

/* 2-D grid for a 1-D count of workgroups (workgroup count limits are 65535 on many devices). */
void vk_grid(const vk_ctx *c, uint64_t groups, uint32_t *gx, uint32_t *gy);

static inline vk_ctx *vk_of(icl_backend *be) { return (vk_ctx *)be->impl; }

#endif
