/* Helpers shared by the op implementations. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "vk_ops.h"

int vk_cpu_shape(const vk_ctx *c) { return c->cpu_shape; }

const char *vk_typed_shader(const char *base, uint32_t type) {
  /* names are built once per (base, type) and kept: kernels and profiles hold the pointers */
  static char names[16][ICL_TYPE_COUNT][32];
  static const char *bases[16];
  int slot = 0;
  while (slot < 16 && bases[slot] && strcmp(bases[slot], base) != 0) slot++;
  if (slot == 16 || type >= ICL_TYPE_COUNT) return base; /* not expected: the pipeline lookup then fails */
  bases[slot] = base;
  char *n = names[slot][type];
  if (!n[0]) {
    if (type == ICL_TYPE_F32) {
      snprintf(n, 32, "%s", base);
    } else {
      snprintf(n, 32, "%s_%s", base, icl_type_name(type));
      for (char *p = n; *p; p++) *p = (char)tolower((unsigned char)*p);
    }
  }
  return n;
}

int vk_check_u32(int64_t v, const char *what, icl_error *err) {
  if (v < 0 || v > (int64_t)UINT32_MAX)
    return icl_error_set(err, ICL_EUNSUPPORTED, "vulkan: %s = %lld does not fit 32-bit shader indices", what,
                         (long long)v);
  return ICL_OK;
}

uint32_t vk_elt_per(const vk_ctx *c) { return vk_cpu_shape(c) ? 8 : 1; }

void vk_elt_grid(const vk_ctx *c, uint64_t n, uint32_t *gx, uint32_t *gy) {
  uint64_t per_group = (uint64_t)c->wg * vk_elt_per(c);
  vk_grid(c, (n + per_group - 1) / per_group, gx, gy);
}
