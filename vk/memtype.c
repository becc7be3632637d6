/* Memory-type policy, pure functions of the driver's memory properties (tested with the layouts of
 * real devices in tests/ops/test_vk_memtype.c). The CPU must never read uncached device memory:
 * a discrete GPU with resizable BAR (an H200) shows all of its VRAM host-visible but write-combined,
 * and reading 275 MB of logits back from it took 11 s there. */
#include "vk_internal.h"

int vk_memory_uma(const VkPhysicalDeviceMemoryProperties *mp) {
  const VkMemoryPropertyFlags VC = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  int any_local = 0;
  for (uint32_t h = 0; h < mp->memoryHeapCount; h++) {
    if (!(mp->memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
    any_local = 1;
    int cached = 0;
    for (uint32_t t = 0; t < mp->memoryTypeCount; t++)
      if (mp->memoryTypes[t].heapIndex == h && (mp->memoryTypes[t].propertyFlags & VC) == VC) cached = 1;
    if (!cached) return 0;
  }
  return any_local;
}

static int find_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits, VkMemoryPropertyFlags want,
                     uint32_t *out) {
  for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
    if ((bits & (1u << i)) && (mp->memoryTypes[i].propertyFlags & want) == want) {
      *out = i;
      return 1;
    }
  return 0;
}

int vk_memory_choose(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits, int host, int uma, uint32_t *out) {
  const VkMemoryPropertyFlags L = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, V = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                              H = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, C = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  /* UMA: device memory the CPU reads through its caches. Staging (discrete): cached host memory first,
   * uncached host-visible memory only where the driver offers nothing else. */
  const VkMemoryPropertyFlags uma_pref[] = {L | V | H | C, L | V | C, V | H | C, V | C, V | H, V};
  const VkMemoryPropertyFlags staging_pref[] = {V | H | C, V | C, V | H, V};
  const VkMemoryPropertyFlags dev_pref[] = {L, 0};
#define N(a) (int)(sizeof a / sizeof a[0])
  const VkMemoryPropertyFlags *p = !host ? dev_pref : uma ? uma_pref : staging_pref;
  int n = !host ? N(dev_pref) : uma ? N(uma_pref) : N(staging_pref);
#undef N
  for (int i = 0; i < n; i++)
    if (find_type(mp, bits, p[i], out)) return 1;
  return 0;
}
