/* Which kernels the backend gives a device: decided from the device's properties alone, so `icl devices` can
 * print them without making a device, and the backend uses the same rules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/devices.h"
#include "vk.h"
#include "vk_internal.h"

int vk_shape_cpu_for(const icl_device_info *d) {
  const char *shape = getenv("ICL_VK_SHAPE");
  return shape && *shape ? strcmp(shape, "cpu") == 0 : strcmp(d->type, "cpu") == 0;
}

int vk_attn_flash_env(void) {
  const char *attn = getenv("ICL_VK_ATTN");
  return !(attn && strcmp(attn, "legacy") == 0);
}

int vk_flash_tiles(const icl_device_info *d, uint32_t maxhd, uint32_t *bq, uint32_t *bk) {
  uint32_t q = 16, k = 32;
  if (d->max_wg_invocations < VK_FLASH_WG) return 0;
  while (q > 2 && q * maxhd / VK_FLASH_WG > 32) q /= 2; /* at most 32 accumulators per invocation */
  for (;;) {
    uint64_t bytes = 4ull * ((uint64_t)q * maxhd + (uint64_t)k * (maxhd + 1) + (uint64_t)q * k + 3ull * q);
    if (bytes <= d->max_shared) break;
    if (k > 8) k /= 2;
    else if (q > 2) q /= 2;
    else return 0;
  }
  if ((q * maxhd) % VK_FLASH_WG) return 0;
  *bq = q, *bk = k;
  return 1;
}

/* "hd N: BQ queries x BK keys" for the head sizes of the supported models, or why attention.comp runs */
static void flash_line(const icl_device_info *d, char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "query blocks (attention_flash.comp)");
  static const uint32_t hds[] = {64, 128, 256};
  for (size_t i = 0; i < sizeof hds / sizeof hds[0] && n < cap; i++) {
    uint32_t bq, bk;
    if (vk_flash_tiles(d, hds[i], &bq, &bk))
      n += (size_t)snprintf(buf + n, cap - n, "%s hd %u: %u x %u", i ? "," : ";", hds[i], bq, bk);
    else
      n += (size_t)snprintf(buf + n, cap - n, "%s hd %u: per query (shared memory too small)", i ? "," : ";", hds[i]);
  }
}

static const char *const MM_NAMES[] = {"tiled", "intdot", "coopmat"};

const char *vk_matmul_path_name(int path) { return path >= 0 && path <= VK_MM_COOPMAT ? MM_NAMES[path] : "?"; }

int vk_intdot_type(uint32_t t) {
  return t == ICL_TYPE_Q4_0 || t == ICL_TYPE_Q4_1 || t == ICL_TYPE_Q5_0 || t == ICL_TYPE_Q5_1 || t == ICL_TYPE_Q8_0 ||
         t == ICL_TYPE_Q3_K || t == ICL_TYPE_Q4_K || t == ICL_TYPE_Q5_K || t == ICL_TYPE_Q6_K;
}

const char *icl_vk_backend_matmul_path(icl_backend *be, int precision) {
  return vk_matmul_path_name(precision == ICL_PRECISION_FAST ? vk_of(be)->mm_fast : VK_MM_TILED);
}

#ifndef ICL_VK_COOPMAT_BUILT
#define ICL_VK_COOPMAT_BUILT 0
#endif
int vk_coopmat_built(void) { return ICL_VK_COOPMAT_BUILT; }

int vk_coopmat_shape(const icl_device_info *d, uint32_t shape[3]) {
  /* matmul_coopmat.comp: 4 subgroups, 26 KiB of shared memory, f16 arithmetic, the Vulkan memory model; each
   * dimension must divide its 32 x 32 quarter tile; 16 x 16 x 16 first (what NVIDIA lists) */
  if (!d->fp16 || !d->memory_model || d->max_shared < 32768 || d->max_wg_invocations < 4 * d->subgroup_size) return 0;
  int best = -1;
  for (int i = 0; i < d->n_coopmat; i++) {
    const uint32_t *m = d->coopmat[i];
    int fits = m[0] && m[1] && m[2] && 32 % m[0] == 0 && 32 % m[1] == 0 && 32 % m[2] == 0;
    if (fits && (best < 0 || (m[0] == 16 && m[1] == 16 && m[2] == 16))) best = i;
  }
  if (best < 0) return 0;
  memcpy(shape, d->coopmat[best], 3 * sizeof shape[0]);
  return 1;
}

/* what device d offers, as "tiled, intdot" */
static void offered(const icl_device_info *d, char *buf, size_t cap) {
  uint32_t s[3];
  snprintf(buf, cap, "tiled%s%s", d->int_dot ? ", intdot" : "",
           vk_coopmat_built() && vk_coopmat_shape(d, s) ? ", coopmat" : "");
}

int vk_matmul_path_for(const icl_device_info *d, const char *env, int *path, icl_error *err) {
  char have[64];
  offered(d, have, sizeof have);
  if (!env || !*env) {
    /* lavapipe's CPU-shaped tiles beat its unaccelerated integer dots; GPUs get integer dots. coopmat only when
     * asked: it has not run on a GPU yet, and validation layers before 1.3.255 (the kit's) flag its extension */
    *path = !vk_shape_cpu_for(d) && d->int_dot ? VK_MM_INTDOT : VK_MM_TILED;
    return ICL_OK;
  }
  int want = -1;
  for (int i = 0; i <= VK_MM_COOPMAT; i++)
    if (!strcmp(env, MM_NAMES[i])) want = i;
  if (want < 0)
    return icl_error_set(err, ICL_EINVAL,
                         "vulkan: ICL_VK_MATMUL='%s' is none of tiled, intdot, coopmat ('%s' offers %s)", env, d->name,
                         have);
  uint32_t s[3];
  if (want == VK_MM_COOPMAT && !vk_coopmat_built())
    return icl_error_set(err, ICL_EINVAL,
                         "vulkan: ICL_VK_MATMUL=coopmat: this build has no cooperative-matrix kernel (its glslang "
                         "lacks GL_KHR_cooperative_matrix: configure with -DICL_GLSLANG_COOPMAT=<glslang >= 13.1>); "
                         "'%s' offers %s", d->name, have);
  if (want == VK_MM_COOPMAT && !vk_coopmat_shape(d, s))
    return icl_error_set(err, ICL_EINVAL,
                         "vulkan: ICL_VK_MATMUL=coopmat: '%s' lists no usable f16 x f16 -> f32 cooperative-matrix "
                         "shape (or lacks f16, vulkanMemoryModel, 32 KiB of shared memory); it offers %s",
                         d->name, have);
  if (want == VK_MM_INTDOT && !d->int_dot)
    return icl_error_set(err, ICL_EINVAL,
                         "vulkan: ICL_VK_MATMUL=intdot: '%s' lacks shaderIntegerDotProduct; it offers %s", d->name,
                         have);
  *path = want;
  return ICL_OK;
}

/* the several-token matmul at FAST precision, or why ICL_VK_MATMUL is refused */
static void fast_line(const icl_device_info *d, int cpu, char *buf, size_t cap) {
  icl_error err;
  int path;
  if (vk_matmul_path_for(d, getenv("ICL_VK_MATMUL"), &path, &err)) {
    snprintf(buf, cap, "error: %.300s", err.msg);
    return;
  }
  char have[64];
  offered(d, have, sizeof have);
  uint32_t sh[3];
  if (path == VK_MM_COOPMAT && vk_coopmat_shape(d, sh))
    snprintf(buf, cap, "coopmat: f16 x f16 -> f32 cooperative matrices %u x %u x %u, 64 x 64 tiles "
             "(matmul_coopmat.comp), every weight type (offers %s; ICL_VK_MATMUL)", sh[0], sh[1], sh[2], have);
  else if (path == VK_MM_INTDOT)
    snprintf(buf, cap, "intdot: int8 activations per 32-block, integer dots (matmul_intdot.comp) for Q4_0, Q4_1, "
             "Q5_0, Q5_1, Q8_0, Q3_K, Q4_K, Q5_K, Q6_K; other types tiled (offers %s; ICL_VK_MATMUL)", have);
  else
    snprintf(buf, cap, "tiled, as EXACT (%s; offers %s; ICL_VK_MATMUL)", cpu ? "matmul_cpu.comp" : "matmul.comp", have);
}

void icl_vk_kernel_paths(const icl_device_info *d, char *buf, size_t cap) {
  if (!cap) return;
  int cpu = vk_shape_cpu_for(d);
  char attn[256], fast[384];
  fast_line(d, cpu, fast, sizeof fast);
  if (cpu) snprintf(attn, sizeof attn, "per query, heads sharing a kv head together (attention_cpu.comp)");
  else if (!vk_attn_flash_env()) snprintf(attn, sizeof attn, "per query and head (attention.comp; ICL_VK_ATTN=legacy)");
  else flash_line(d, attn, sizeof attn);
  snprintf(buf, cap,
           "kernel family: %s\n"
           "matmul, 1 token: %s\n"
           "matmul, several tokens (EXACT precision): %s\n"
           "matmul, several tokens, FAST precision: %s\n"
           "attention, several queries: %s\n"
           "attention, 1 query: %s\n"
           "integer dot: %s; cooperative matrices: %s\n",
           cpu ? "CPU-shaped (ICL_VK_SHAPE=gpu for the GPU kernels)" : "GPU-shaped",
           cpu ? "rows per invocation, x in a uniform buffer (matvec_cpu.comp)"
               : "subgroup-reduced rows (matvec.comp)",
           cpu ? "8 x 8 register tiles, x windows in a uniform buffer (matmul_cpu.comp)"
               : "shared-memory tiles, register blocking (matmul.comp)",
           fast, attn, cpu ? "attention_cpu.comp" : "per query and head (attention.comp)",
           d->int_dot ? (d->int_dot_fast ? "yes, accelerated" : "yes, not accelerated") : "no",
           !d->n_coopmat ? "none listed" : vk_coopmat_built() ? "listed" : "listed, kernel not built (glslang)");
}
