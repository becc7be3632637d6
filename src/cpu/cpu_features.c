/* x86 SIMD features a process may use (see cpu_features.h). */
#include "cpu_features.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define BIT(x, n) (((x) >> (n)) & 1u)

/* XCR0 state components: SSE and AVX (YMM upper halves); AVX-512 opmask, ZMM upper halves, ZMM16-31; AMX. */
#define XCR0_AVX 0x6ull
#define XCR0_AVX512 0xE0ull
#define XCR0_AMX 0x60000ull
#define XFEATURE_XTILEDATA 18
#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023

cpu_x86_features cpu_x86_decide(const cpu_x86_bits *b) {
  cpu_x86_features f;
  memset(&f, 0, sizeof f);
  /* AVX state saved by the OS: OSXSAVE set and XCR0 holding SSE and YMM */
  int ymm = BIT(b->leaf1_ecx, 27) && (b->xcr0 & XCR0_AVX) == XCR0_AVX;
  int zmm = ymm && (b->xcr0 & XCR0_AVX512) == XCR0_AVX512;
  int tiles = BIT(b->leaf1_ecx, 27) && (b->xcr0 & XCR0_AMX) == XCR0_AMX && b->amx_granted;
  f.avx = ymm && BIT(b->leaf1_ecx, 28);
  f.fma = f.avx && BIT(b->leaf1_ecx, 12);
  f.f16c = f.avx && BIT(b->leaf1_ecx, 29);
  f.avx2 = f.fma && f.f16c && BIT(b->leaf7_ebx, 5);
  f.bmi2 = BIT(b->leaf7_ebx, 8);
  f.avx_vnni = f.avx2 && BIT(b->leaf7_1_eax, 4);
  f.avx512 = zmm && f.avx2 && BIT(b->leaf7_ebx, 16) && BIT(b->leaf7_ebx, 17) && BIT(b->leaf7_ebx, 28) &&
             BIT(b->leaf7_ebx, 30) && BIT(b->leaf7_ebx, 31);
  f.avx512_vbmi = f.avx512 && BIT(b->leaf7_ecx, 1);
  f.avx512_vnni = f.avx512 && BIT(b->leaf7_ecx, 11);
  f.avx512_bf16 = f.avx512 && BIT(b->leaf7_1_eax, 5);
  f.amx_tile = tiles && BIT(b->leaf7_edx, 24);
  f.amx_int8 = f.amx_tile && BIT(b->leaf7_edx, 25);
  f.amx_bf16 = f.amx_tile && BIT(b->leaf7_edx, 22);
  return f;
}

#if defined(__x86_64__) || defined(__i386__)
static uint64_t read_xcr0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}
#endif

/* Whether the kernel grants (or, asked, granted) this process the AMX tile data state. */
static int amx_grant(int request) {
#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__)) && defined(SYS_arch_prctl)
  if (request) return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
  unsigned long mask = 0;
  return syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &mask) == 0 && BIT(mask, XFEATURE_XTILEDATA);
#else
  (void)request;
  return 0;
#endif
}

void cpu_x86_read(cpu_x86_bits *b, int request_amx) {
  memset(b, 0, sizeof *b);
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, bx, c, d;
  if (__get_cpuid_count(1, 0, &a, &bx, &c, &d)) b->leaf1_ecx = c;
  if (__get_cpuid_count(7, 0, &a, &bx, &c, &d)) {
    b->leaf7_ebx = bx, b->leaf7_ecx = c, b->leaf7_edx = d;
    if (a >= 1 && __get_cpuid_count(7, 1, &a, &bx, &c, &d)) b->leaf7_1_eax = a;
  }
  if (BIT(b->leaf1_ecx, 27)) b->xcr0 = read_xcr0(); /* XGETBV faults unless the OS set OSXSAVE */
  if (BIT(b->leaf7_edx, 24) && (b->xcr0 & XCR0_AMX) == XCR0_AMX) b->amx_granted = amx_grant(request_amx);
#else
  (void)request_amx;
#endif
}
