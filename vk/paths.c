/* Which kernels the backend gives a device: decided from the device's properties alone, so `icl devices` can
 * print them without making a device, and the backend uses the same rules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/devices.h"
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

void icl_vk_kernel_paths(const icl_device_info *d, char *buf, size_t cap) {
  if (!cap) return;
  int cpu = vk_shape_cpu_for(d);
  char attn[256];
  if (cpu) snprintf(attn, sizeof attn, "per query, heads sharing a kv head together (attention_cpu.comp)");
  else if (!vk_attn_flash_env()) snprintf(attn, sizeof attn, "per query and head (attention.comp; ICL_VK_ATTN=legacy)");
  else flash_line(d, attn, sizeof attn);
  snprintf(buf, cap,
           "kernel family: %s\n"
           "matmul, 1 token: %s\n"
           "matmul, several tokens: %s\n"
           "attention, several queries: %s\n"
           "attention, 1 query: %s\n"
           "cooperative matrices, integer dot: not used yet\n",
           cpu ? "CPU-shaped (ICL_VK_SHAPE=gpu for the GPU kernels)" : "GPU-shaped",
           cpu ? "rows per invocation, x in a uniform buffer (matvec_cpu.comp)"
               : "subgroup-reduced rows (matvec.comp)",
           cpu ? "8 x 8 register tiles, x windows in a uniform buffer (matmul_cpu.comp)"
               : "shared-memory tiles, register blocking (matmul.comp)",
           attn, cpu ? "attention_cpu.comp" : "per query and head (attention.comp)");
}
