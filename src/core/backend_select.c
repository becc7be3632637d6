/* Backend choice: Vulkan on a real GPU, the native CPU backend otherwise (lavapipe is a correctness
 * target, far too slow to carry experiments). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

static int open_cpu(int n_threads, icl_backend **out, char *desc, size_t len, const char *why, icl_error *err) {
  int rc = icl_cpu_backend_new(n_threads, out, err);
  if (rc == ICL_OK && desc) snprintf(desc, len, "cpu (%s)", why);
  return rc;
}

int icl_backend_open(const char *name, int device, int n_threads, icl_backend **out, char *desc, size_t desc_len,
                     icl_error *err) {
  *out = NULL;
  if (!name || !*name) name = getenv("ICL_BACKEND");
  if (!name || !*name) name = "auto";
  if (!strcmp(name, "cpu")) return open_cpu(n_threads, out, desc, desc_len, "requested", err);
  if (!strcmp(name, "ref")) {
    if (desc) snprintf(desc, desc_len, "ref (requested; scalar reference ops, slow)");
    return icl_ref_backend_new(out, err);
  }
  if (!strcmp(name, "vulkan")) {
    int rc = icl_vk_backend_new(device, out, err);
    if (rc == ICL_OK && desc) snprintf(desc, desc_len, "vulkan (requested)");
    return rc;
  }
  if (strcmp(name, "auto") != 0)
    return icl_error_set(err, ICL_EINVAL, "unknown backend '%s' (expected auto, cpu, vulkan or ref)", name);

  icl_backend *vk = NULL;
  icl_error verr = {0};
  if (icl_vk_backend_new(device, &vk, &verr) != ICL_OK)
    return open_cpu(n_threads, out, desc, desc_len, "no usable Vulkan device", err);
  if (vk->is_cpu_device) {
    vk->ops->destroy(vk);
    return open_cpu(n_threads, out, desc, desc_len, "the only Vulkan device is a CPU implementation", err);
  }
  *out = vk;
  if (desc) snprintf(desc, desc_len, "vulkan (a GPU is present)");
  return ICL_OK;
}
