/* The memory-type policy (vk/memtype.c) on the layouts real drivers report: which devices count as
 * UMA (buffers mapped, read by the CPU directly) and which memory type each kind of buffer gets.
 * Needs no device. The NVIDIA H200 layout is the one its driver (580.159) reported with resizable BAR,
 * where picking the write-combined BAR type for readback made the CPU read logits at PCIe-uncached speed. */
#include "testutil.h"
#include "vk_internal.h"

enum { L = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, V = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
       H = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, C = VK_MEMORY_PROPERTY_HOST_CACHED_BIT };

typedef struct { uint32_t flags, heap; } mtype;

static VkPhysicalDeviceMemoryProperties layout(const int *heap_local, int nh, const mtype *t, int nt) {
  VkPhysicalDeviceMemoryProperties mp = {0};
  mp.memoryHeapCount = (uint32_t)nh;
  for (int h = 0; h < nh; h++) {
    mp.memoryHeaps[h].size = (VkDeviceSize)1 << 30;
    mp.memoryHeaps[h].flags = heap_local[h] ? VK_MEMORY_HEAP_DEVICE_LOCAL_BIT : 0;
  }
  mp.memoryTypeCount = (uint32_t)nt;
  for (int i = 0; i < nt; i++) {
    mp.memoryTypes[i].propertyFlags = t[i].flags;
    mp.memoryTypes[i].heapIndex = t[i].heap;
  }
  return mp;
}

/* The type chosen for a buffer: dev (device-local), host (mapped: UMA buffers and staging). */
static int pick(const VkPhysicalDeviceMemoryProperties *mp, int host, uint32_t bits) {
  uint32_t out = 99;
  return vk_memory_choose(mp, bits, host, vk_memory_uma(mp), &out) ? (int)out : -1;
}

int main(void) {
  const uint32_t ALL = 0xffffffffu;
  /* NVIDIA H200, resizable BAR: VRAM all host-visible but uncached -> not UMA; device buffers in plain
   * VRAM, staging in cached system memory, never the BAR type (4). */
  const int nv_heaps[] = {1, 0};
  const mtype nv[] = {{0, 1}, {L, 0}, {V | H, 1}, {V | H | C, 1}, {L | V | H, 0}};
  VkPhysicalDeviceMemoryProperties mp = layout(nv_heaps, 2, nv, 5);
  CHECK(vk_memory_uma(&mp) == 0);
  CHECK(pick(&mp, 0, ALL) == 1);
  CHECK(pick(&mp, 1, ALL) == 3);
  CHECK(pick(&mp, 1, ALL & ~(1u << 3)) == 2); /* cached not allowed for this buffer: coherent uncached */
  /* lavapipe (and other CPU devices): one local heap, everything cached -> UMA, mapped. */
  const int lp_heaps[] = {1};
  const mtype lp[] = {{L | V | H | C, 0}};
  mp = layout(lp_heaps, 1, lp, 1);
  CHECK(vk_memory_uma(&mp) == 1 && pick(&mp, 1, ALL) == 0 && pick(&mp, 0, ALL) == 0);
  /* Intel integrated (ANV): local types cached -> UMA. */
  const int in_heaps[] = {1};
  const mtype in[] = {{L, 0}, {L | V | H, 0}, {L | V | H | C, 0}};
  mp = layout(in_heaps, 1, in, 3);
  CHECK(vk_memory_uma(&mp) == 1 && pick(&mp, 1, ALL) == 2 && pick(&mp, 0, ALL) == 0);
  /* AMD integrated (RADV): the VRAM carve-out is visible only write-combined -> staging, cached GTT. */
  const int amd_heaps[] = {1, 0};
  const mtype amd[] = {{L, 0}, {V | H, 1}, {L | V | H, 0}, {V | H | C, 1}};
  mp = layout(amd_heaps, 2, amd, 4);
  CHECK(vk_memory_uma(&mp) == 0 && pick(&mp, 1, ALL) == 3 && pick(&mp, 0, ALL) == 0);
  /* A discrete GPU without resizable BAR: host memory only coherent -> staging takes it. */
  const mtype old[] = {{L, 0}, {V | H, 1}};
  mp = layout(nv_heaps, 2, old, 2);
  CHECK(vk_memory_uma(&mp) == 0 && pick(&mp, 1, ALL) == 1 && pick(&mp, 0, ALL) == 0);
  /* No host-visible type at all: no staging buffer can exist, and the choice says so. */
  const mtype none[] = {{L, 0}};
  mp = layout(nv_heaps, 2, none, 1);
  CHECK(pick(&mp, 1, ALL) == -1);
  return t_done();
}
