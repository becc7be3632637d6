/* Vulkan-backend functions for the CLI, the bench and tests (beyond the backend.h contract). */
#ifndef ICL_VK_H
#define ICL_VK_H

#include "backend.h"
#include "icl/devices.h"

/* The device a Vulkan backend runs on (be must come from icl_vk_backend_new). */
const icl_device_info *icl_vk_backend_device(icl_backend *be);

/* The several-token matmul path the backend runs at precision p: "tiled", or at FAST "intdot" where the device
 * offers it or ICL_VK_MATMUL asks for it (vk/paths.c). */
const char *icl_vk_backend_matmul_path(icl_backend *be, int precision);

/* Measured ceilings of the device (see vk/ceiling.c). */
typedef struct icl_ceilings {
  double gbps;          /* best streaming read bandwidth, GB/s */
  double gbps_contig;   /* each invocation reading its own contiguous block */
  double gbps_strided;  /* neighbouring invocations reading neighbouring words */
  double gflops;        /* peak f32 multiply-add rate, GFLOP/s (2 flops per FMA) */
} icl_ceilings;

/* Runs the bandwidth and FMA kernels (quick: smaller buffers and fewer rounds). */
int icl_vk_ceilings(icl_backend *be, int quick, icl_ceilings *out, icl_error *err);

#endif
