/* icl devices: the Vulkan devices, their features and limits, and which backend icl would use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "icl/devices.h"

#define MAX_DEVICES 16

static const char *yes(int v) { return v ? "yes" : "no"; }

static void print_mib(const char *label, uint64_t bytes) {
  printf("    %-34s %.0f MiB\n", label, (double)bytes / 1048576.0);
}

static void print_device(const icl_device_info *d, int chosen) {
  printf("[%d] %s%s\n", d->index, d->name, chosen ? "  (chosen)" : "");
  printf("    %-34s %s\n", "type", d->type);
  printf("    %-34s %u.%u.%u\n", "Vulkan API", d->api_version >> 22, (d->api_version >> 12) & 0x3ff,
         d->api_version & 0xfff);
  printf("    %-34s %s\n", "driver", d->driver);
  printf("    %-34s %s, uuid GPU-", "PCI address", d->pci[0] ? d->pci : "none");
  for (int i = 0; i < 16; i++) printf("%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", d->uuid[i]);
  printf("\n");
  printf("    %-34s %u (compute arithmetic: %s)\n", "subgroup size", d->subgroup_size, yes(d->subgroup_arith));
  printf("    %-34s fp16 %s, int8 %s, 8-bit storage %s, 16-bit storage %s\n", "features", yes(d->fp16),
         yes(d->int8), yes(d->storage8), yes(d->storage16));
  print_mib("maxStorageBufferRange", d->max_storage_range);
  printf("    %-34s %llu bytes\n", "minStorageBufferOffsetAlignment", (unsigned long long)d->min_storage_align);
  printf("    %-34s %u KiB\n", "maxComputeSharedMemorySize", d->max_shared / 1024);
  printf("    %-34s %u, groups %u x %u x %u\n", "maxComputeWorkGroupInvocations", d->max_wg_invocations,
         d->max_wg_count[0], d->max_wg_count[1], d->max_wg_count[2]);
  printf("    %-34s %u KiB\n", "maxUniformBufferRange", d->max_uniform_range / 1024);
  print_mib("maxMemoryAllocationSize", d->max_alloc);
  for (int h = 0; h < d->n_heaps; h++)
    printf("    heap %d %27s %.0f MiB%s%s\n", h, "", (double)d->heaps[h].size / 1048576.0,
           d->heaps[h].device_local ? ", device-local" : "", d->heaps[h].host_visible ? ", host-visible" : "");
  printf("    %-34s %s\n", "UMA (mapped, no staging copies)", yes(d->uma));
  printf("    %-34s %s", "integer dot (4 x int8 packed)",
         d->int_dot ? (d->int_dot_fast ? "yes, accelerated" : "yes") : "no");
  printf("; cooperative matrices f16 x f16 -> f32:");
  for (int i = 0; i < d->n_coopmat; i++)
    printf("%s %ux%ux%u", i ? "," : "", d->coopmat[i][0], d->coopmat[i][1], d->coopmat[i][2]);
  printf("%s\n", d->n_coopmat ? " (M x N x K, subgroup scope)" : " none");
  if (!d->usable) {
    printf("    not usable by icl: needs Vulkan 1.2, compute subgroup arithmetic, 16-bit storage\n");
    return;
  }
  char paths[2048];
  icl_vk_kernel_paths(d, paths, sizeof paths);
  printf("    kernels:\n");
  for (char *line = strtok(paths, "\n"); line; line = strtok(NULL, "\n")) printf("      %s\n", line);
}

/* The backend line. Only Vulkan exists so far; the CPU backend will be weighed here (it is the
 * better choice when the only Vulkan device is a CPU device such as lavapipe). */
/* The rule of icl_backend_open (src/backend_select.c) for "auto", stated for the user. */
static void print_backend_choice(const icl_device_info *infos, int n, int chosen, const icl_error *err) {
  const char *env = getenv("ICL_BACKEND");
  int gpu = chosen >= 0 && chosen < n && strcmp(infos[chosen].type, "cpu") != 0;
  if (chosen >= 0 && chosen < n)
    printf("\nvulkan device: [%d] %s%s\n", chosen, infos[chosen].name, gpu ? "" : " (a CPU implementation)");
  else
    printf("\nvulkan device: none usable (%s)\n", err->msg[0] ? err->msg : "none matched");
  if (env && *env && strcmp(env, "auto") != 0)
    printf("default backend: %s (ICL_BACKEND)\n", env);
  else if (gpu)
    printf("default backend: vulkan (a GPU is present)\n");
  else
    printf("default backend: cpu (%s; --backend vulkan runs on it anyway, slowly)\n",
           chosen >= 0 ? "the only Vulkan device is a CPU implementation" : "no usable Vulkan device");
  printf("(override with --backend auto|cpu|vulkan, ICL_BACKEND, ICL_DEVICE=<index, gpu:N in PCI order, GPU-uuid or "
         "name substring>)\n");
}

int icl_cmd_devices(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: icl devices\n  lists the Vulkan devices, their features and limits, and the backend choice\n");
      return 0;
    }
    fprintf(stderr, "icl devices: unexpected argument '%s'\n", argv[i]);
    return 2;
  }
  icl_device_info infos[MAX_DEVICES];
  int n = 0, chosen = -1;
  icl_error err;
  icl_error_clear(&err);
  if (icl_vk_list_devices(infos, MAX_DEVICES, &n, &chosen, &err)) {
    fprintf(stderr, "icl devices: %s\n", err.msg);
    return 1;
  }
  for (int i = 0; i < n && i < MAX_DEVICES; i++) {
    if (i) printf("\n");
    print_device(&infos[i], i == chosen);
  }
  print_backend_choice(infos, n, chosen, &err);
  return 0;
}
