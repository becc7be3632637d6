/* ICL_ASAN: 1 in builds under AddressSanitizer (GCC's __SANITIZE_ADDRESS__ or clang's __has_feature), whose
 * redzones need malloc'd blocks, so the allocators that map memory themselves fall back to malloc there. */
#ifndef ICL_ASAN_H
#define ICL_ASAN_H

#if defined(__SANITIZE_ADDRESS__)
#define ICL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ICL_ASAN 1
#endif
#endif
#ifndef ICL_ASAN
#define ICL_ASAN 0
#endif

#endif
