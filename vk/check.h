/* VK_CHECK: evaluates a Vulkan call; on failure logs the expression, the VkResult, file and line
 * to stderr and returns an icl error from the enclosing function (which must have an
 * `icl_error *err` in scope and return int). Never compiles out. */
#ifndef ICL_VK_CHECK_H
#define ICL_VK_CHECK_H

#include <stdio.h>

#include <vulkan/vulkan.h>

#include "icl/icl.h"

/* Returns the VkResult's enumerator name ("VK_ERROR_OUT_OF_DEVICE_MEMORY"). */
const char *icl_vk_result_name(VkResult r);

/* Maps a VkResult to an icl error code (ENOMEM for out-of-memory results, else EDEVICE). */
int icl_vk_result_code(VkResult r);

#define VK_CHECK(expr)                                                                          \
  do {                                                                                          \
    VkResult vk_check_r_ = (expr);                                                              \
    if (vk_check_r_ != VK_SUCCESS) {                                                            \
      fprintf(stderr, "icl: vulkan: %s failed: %s (%s:%d)\n", #expr,                            \
              icl_vk_result_name(vk_check_r_), __FILE__, __LINE__);                             \
      return icl_error_set(err, icl_vk_result_code(vk_check_r_), "vulkan: %s failed: %s (%s:%d)", \
                           #expr, icl_vk_result_name(vk_check_r_), __FILE__, __LINE__);         \
    }                                                                                           \
  } while (0)

#endif
