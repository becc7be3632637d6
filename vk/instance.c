/* The Vulkan instance, with the Khronos validation layer and a counting messenger when
 * ICL_VALIDATION=1 (ctest sets it; tests assert the count stays 0). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

static atomic_int validation_count;

int icl_vk_validation_messages(void) { return atomic_load(&validation_count); }

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                  VkDebugUtilsMessageTypeFlagsEXT type,
                                                  const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
  (void)type;
  (void)user;
  if (sev & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) {
    atomic_fetch_add(&validation_count, 1);
    fprintf(stderr, "icl: vulkan validation %s: %s\n",
            (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error" : "warning",
            data && data->pMessage ? data->pMessage : "(no message)");
  }
  return VK_FALSE; /* never abort the call */
}

static int has_layer(const char *name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
  VkLayerProperties *props = calloc(n, sizeof *props);
  if (!props) return 0;
  int found = 0;
  if (vkEnumerateInstanceLayerProperties(&n, props) == VK_SUCCESS)
    for (uint32_t i = 0; i < n; i++) found |= strcmp(props[i].layerName, name) == 0;
  free(props);
  return found;
}

static int validation_wanted(void) {
  const char *v = getenv("ICL_VALIDATION");
  if (!v || !*v || !strcmp(v, "0")) return 0;
  if (has_layer("VK_LAYER_KHRONOS_validation")) return 1;
  static atomic_int warned;
  if (!atomic_exchange(&warned, 1))
    fprintf(stderr, "icl: warning: ICL_VALIDATION=1 but VK_LAYER_KHRONOS_validation is not installed "
                    "(Debian: vulkan-validationlayers); running without validation\n");
  return 0;
}

static VkDebugUtilsMessengerCreateInfoEXT messenger_info(void) {
  VkDebugUtilsMessengerCreateInfoEXT mi = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                   VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  mi.pfnUserCallback = on_message;
  return mi;
}

static int create_messenger(vk_instance *vi, icl_error *err) {
  PFN_vkCreateDebugUtilsMessengerEXT create =
      (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(vi->instance, "vkCreateDebugUtilsMessengerEXT");
  if (!create) return icl_error_set(err, ICL_EDEVICE, "vulkan: vkCreateDebugUtilsMessengerEXT missing");
  VkDebugUtilsMessengerCreateInfoEXT mi = messenger_info();
  VK_CHECK(create(vi->instance, &mi, NULL, &vi->messenger));
  return ICL_OK;
}

int vk_instance_create(vk_instance *vi, icl_error *err) {
  memset(vi, 0, sizeof *vi);
  vi->validation = validation_wanted();
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "icl";
  app.pEngineName = "icl";
  app.apiVersion = VK_API_VERSION_1_2;
  const char *layers[] = {"VK_LAYER_KHRONOS_validation"};
  const char *exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkDebugUtilsMessengerCreateInfoEXT mi = messenger_info(); /* also covers vkCreateInstance itself */
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  if (vi->validation) {
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = layers;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = exts;
    ci.pNext = &mi;
  }
  VkResult r = vkCreateInstance(&ci, NULL, &vi->instance);
  if (r != VK_SUCCESS)
    return icl_error_set(err, ICL_EDEVICE, "vulkan: cannot create an instance (%s): no Vulkan driver installed? "
                         "(Debian: mesa-vulkan-drivers for the CPU device lavapipe)", icl_vk_result_name(r));
  if (vi->validation) return create_messenger(vi, err);
  return ICL_OK;
}

void vk_instance_destroy(vk_instance *vi) {
  if (vi->messenger) {
    PFN_vkDestroyDebugUtilsMessengerEXT destroy =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(vi->instance, "vkDestroyDebugUtilsMessengerEXT");
    if (destroy) destroy(vi->instance, vi->messenger, NULL);
  }
  if (vi->instance) vkDestroyInstance(vi->instance, NULL);
  memset(vi, 0, sizeof *vi);
}

const char *icl_vk_result_name(VkResult r) {
  switch (r) {
#define R(x) case x: return #x;
    R(VK_SUCCESS) R(VK_NOT_READY) R(VK_TIMEOUT) R(VK_INCOMPLETE)
    R(VK_ERROR_OUT_OF_HOST_MEMORY) R(VK_ERROR_OUT_OF_DEVICE_MEMORY) R(VK_ERROR_INITIALIZATION_FAILED)
    R(VK_ERROR_DEVICE_LOST) R(VK_ERROR_MEMORY_MAP_FAILED) R(VK_ERROR_LAYER_NOT_PRESENT)
    R(VK_ERROR_EXTENSION_NOT_PRESENT) R(VK_ERROR_FEATURE_NOT_PRESENT) R(VK_ERROR_INCOMPATIBLE_DRIVER)
    R(VK_ERROR_TOO_MANY_OBJECTS) R(VK_ERROR_FORMAT_NOT_SUPPORTED) R(VK_ERROR_FRAGMENTED_POOL)
    R(VK_ERROR_OUT_OF_POOL_MEMORY) R(VK_ERROR_INVALID_SHADER_NV) R(VK_ERROR_UNKNOWN)
#undef R
  default: return "VK_ERROR_(other)";
  }
}

int icl_vk_result_code(VkResult r) {
  return (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_POOL_MEMORY)
             ? ICL_ENOMEM
             : ICL_EDEVICE;
}
