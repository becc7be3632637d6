/* The Vulkan entry points of a build configured with -DICL_VULKAN=OFF: each reports that Vulkan support was not
 * built, so `--backend vulkan`, `icl devices` and icl.devices() fail with that message and "auto" picks the CPU. */
#include <stddef.h>
#include <stdio.h>

#include "vk.h"

#define NOT_BUILT "Vulkan support was not built (configure with -DICL_VULKAN=ON; needs the Vulkan SDK and glslang)"

int icl_vk_backend_new(int dev, icl_backend **out, icl_error *err) {
  (void)dev;
  *out = NULL;
  return icl_error_set(err, ICL_EUNSUPPORTED, NOT_BUILT);
}

int icl_vk_list_devices(icl_device_info *out, int cap, int *n, int *chosen, icl_error *err) {
  (void)out, (void)cap;
  *n = 0;
  *chosen = -1;
  return icl_error_set(err, ICL_EUNSUPPORTED, NOT_BUILT);
}

void icl_vk_kernel_paths(const icl_device_info *d, char *buf, size_t cap) {
  (void)d;
  if (cap) snprintf(buf, cap, "%s\n", NOT_BUILT);
}

int icl_vk_validation_messages(void) { return 0; }

const char *icl_vk_backend_matmul_path(icl_backend *be, int precision) {
  (void)be, (void)precision;
  return "tiled";
}

const icl_device_info *icl_vk_backend_device(icl_backend *be) {
  (void)be;
  return NULL;
}

int icl_vk_ceilings(icl_backend *be, int quick, icl_ceilings *out, icl_error *err) {
  (void)be, (void)quick, (void)out;
  return icl_error_set(err, ICL_EUNSUPPORTED, NOT_BUILT);
}
