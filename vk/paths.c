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
  return t == ICL_TYPE_Q4_0 || t == ICL_TYPE_Q4_1 || t == ICL_TYPE_Q5_0 || t == ICL_TYPE_Q5_1 || t == ICL_TYPE_Q8_0;
}

const char *icl_vk_backend_matmul_path(icl_backend *be, int precision) {
  return vk_matmul_path_name(precision == ICL_PRECISION_FAST ? vk_of(be)->mm_fast : VK_MM_TILED);
}

/* what device d offers, as "tiled, intdot" */
static void offered(const icl_device_info *d, char *buf, size_t cap) {
  snprintf(buf, cap, "tiled%s", d->int_dot ? ", intdot" : "");
}

int vk_matmul_path_for(const icl_device_info *d, const char *env, int *path, icl_error *err) {
  char have[64];
  offered(d, have, sizeof have);
  if (!env || !*env) {
    /* lavapipe's CPU-shaped tiles beat its unaccelerated integer dots; GPUs get the fastest path they have */
    *path = !vk_shape_cpu_for(d) && d->int_dot ? VK_MM_INTDOT : VK_MM_TILED;
    return ICL_OK;
  }
  int want = -1;
  for (int i = 0; i <= VK_MM_COOPMAT; i++)
    if (!strcmp(env, MM_NAMES[i])) want = i;
  if (want < 0)
    return icl_error_set(err, ICL_EINVAL, "vulkan: ICL_VK_MATMUL='%s' is none of tiled, intdot, coopmat ('%s' offers %s)",
                         env, d->name, have);
  if (want == VK_MM_COOPMAT)
    return icl_error_set(err, ICL_EINVAL, "vulkan: ICL_VK_MATMUL=coopmat: no cooperative-matrix kernel in this build "
                         "yet (issue 38); '%s' offers %s", d->name, have);
  if (want == VK_MM_INTDOT && !d->int_dot)
    return icl_error_set(err, ICL_EINVAL, "vulkan: ICL_VK_MATMUL=intdot: '%s' lacks shaderIntegerDotProduct; it offers %s",
                         d->name, have);
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
  if (path == VK_MM_INTDOT)
    snprintf(buf, cap, "intdot: int8 activations per 32-block, integer dots (matmul_intdot.comp) for Q4_0, Q4_1, "
             "Q5_0, Q5_1, Q8_0; other types tiled (offers %s; ICL_VK_MATMUL)", have);
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
           "integer dot: %s; cooperative matrices: no kernel yet\n",
           cpu ? "CPU-shaped (ICL_VK_SHAPE=gpu for the GPU kernels)" : "GPU-shaped",
           cpu ? "rows per invocation, x in a uniform buffer (matvec_cpu.comp)"
               : "subgroup-reduced rows (matvec.comp)",
           cpu ? "8 x 8 register tiles, x windows in a uniform buffer (matmul_cpu.comp)"
               : "shared-memory tiles, register blocking (matmul.comp)",
           fast, attn, cpu ? "attention_cpu.comp" : "per query and head (attention.comp)",
           d->int_dot ? (d->int_dot_fast ? "yes, accelerated" : "yes, not accelerated") : "no");
}
