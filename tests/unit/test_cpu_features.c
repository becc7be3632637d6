/* x86 feature decisions (issue 44): a CPUID flag is not permission. From given CPUID and XCR0 bits: AVX-512 flags
 * with the ZMM state off in XCR0 (a VM or kernel that does not save it) give AVX2 only; without OSXSAVE or the YMM
 * state nothing above generic; AMX needs the tile state in XCR0 and the kernel's grant. And this machine's own
 * reading agrees with the kernel's view in /proc/cpuinfo (whose flags the kernel clears when it disables a state). */
#include <stdio.h>
#include <string.h>

#include "cpu_features.h"
#include "testutil.h"

#define B(n) (1u << (n))

/* A Sapphire Rapids: every flag, and XCR0 with SSE, AVX, AVX-512 and AMX state. */
static cpu_x86_bits spr(void) {
  cpu_x86_bits b = {0};
  b.leaf1_ecx = B(12) | B(27) | B(28) | B(29);                                 /* FMA OSXSAVE AVX F16C */
  b.leaf7_ebx = B(5) | B(8) | B(16) | B(17) | B(28) | B(30) | B(31);          /* AVX2 BMI2 F DQ CD BW VL */
  b.leaf7_ecx = B(1) | B(11);                                                   /* VBMI VNNI */
  b.leaf7_edx = B(22) | B(24) | B(25);                                          /* AMX-BF16 AMX-TILE AMX-INT8 */
  b.leaf7_1_eax = B(4) | B(5);                                                  /* AVX-VNNI AVX512_BF16 */
  b.xcr0 = 0x7 | 0xE0 | 0x60000;
  b.amx_granted = 1;
  return b;
}

static void test_everything_granted(void) {
  cpu_x86_bits b = spr();
  cpu_x86_features f = cpu_x86_decide(&b);
  CHECK(f.avx && f.avx2 && f.fma && f.f16c && f.bmi2 && f.avx_vnni);
  CHECK(f.avx512 && f.avx512_vnni && f.avx512_vbmi && f.avx512_bf16);
  CHECK(f.amx_tile && f.amx_int8 && f.amx_bf16);
}

static void test_amx_not_granted(void) {
  cpu_x86_bits b = spr();
  b.amx_granted = 0; /* the VM of issue 44: the flags are there, the kernel does not grant the tile state */
  cpu_x86_features f = cpu_x86_decide(&b);
  CHECK(!f.amx_tile && !f.amx_int8 && !f.amx_bf16);
  CHECK(f.avx512 && f.avx512_bf16); /* the rest stays */
  b = spr();
  b.xcr0 &= ~0x60000ull; /* tile state not enabled in XCR0: a grant cannot help */
  f = cpu_x86_decide(&b);
  CHECK(!f.amx_tile && f.avx512);
}

static void test_zmm_state_off(void) {
  cpu_x86_bits b = spr();
  b.xcr0 = 0x7; /* the OS saves YMM but not the AVX-512 state */
  cpu_x86_features f = cpu_x86_decide(&b);
  CHECK(f.avx2 && !f.avx512 && !f.avx512_vnni && !f.avx512_bf16 && !f.avx512_vbmi);
  b.xcr0 = 0x7 | 0x60; /* opmask and ZMM_Hi256 but not Hi16_ZMM: still no AVX-512 */
  CHECK(!cpu_x86_decide(&b).avx512);
}

static void test_ymm_state_off(void) {
  cpu_x86_bits b = spr();
  b.xcr0 = 0x3; /* SSE only */
  cpu_x86_features f = cpu_x86_decide(&b);
  CHECK(!f.avx && !f.avx2 && !f.fma && !f.avx512 && !f.amx_tile);
  b = spr();
  b.leaf1_ecx &= ~B(27); /* no OSXSAVE: XCR0 cannot be trusted (nor read) */
  f = cpu_x86_decide(&b);
  CHECK(!f.avx && !f.avx2 && !f.avx512 && !f.amx_tile);
  CHECK(f.bmi2); /* a scalar instruction needs no register state */
}

static void test_partial_flags(void) {
  cpu_x86_bits b = spr();
  b.leaf1_ecx &= ~B(29); /* no F16C: the AVX2 kernels use it */
  CHECK(!cpu_x86_decide(&b).avx2 && !cpu_x86_decide(&b).avx512);
  b = spr();
  b.leaf7_ebx &= ~B(30); /* no AVX512BW */
  cpu_x86_features f = cpu_x86_decide(&b);
  CHECK(f.avx2 && !f.avx512 && !f.avx512_vnni);
  b = spr();
  b.leaf7_ecx &= ~B(11);
  f = cpu_x86_decide(&b);
  CHECK(f.avx512 && !f.avx512_vnni);
}

/* Whether /proc/cpuinfo's first flags line lists flag (the kernel clears flags of states it does not enable). */
static int cpuinfo_has(const char *flag) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return -1;
  char line[8192];
  int has = -1;
  while (has < 0 && fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5)) continue;
    has = 0;
    char want[64];
    snprintf(want, sizeof want, " %s", flag);
    for (char *p = strstr(line, want); p && !has; p = strstr(p + 1, want)) {
      char end = p[strlen(want)];
      has = end == ' ' || end == '\n' || end == '\0';
    }
  }
  fclose(f);
  return has;
}

static void test_this_machine(void) {
#if defined(__x86_64__) || defined(__i386__)
  cpu_x86_bits b;
  cpu_x86_read(&b, 0);
  cpu_x86_features f = cpu_x86_decide(&b);
  int avx2 = cpuinfo_has("avx2"), a512 = cpuinfo_has("avx512f");
  if (avx2 < 0) return; /* no /proc/cpuinfo: nothing to compare with */
  CHECKF(f.avx2 == (avx2 && cpuinfo_has("fma") && cpuinfo_has("f16c")), "avx2 %d, cpuinfo %d", f.avx2, avx2);
  CHECKF(!f.avx512 || a512, "avx512 usable (%d) implies the kernel lists avx512f (%d)", f.avx512, a512);
  printf("this machine: avx2 %d avx512 %d (vnni %d, bf16 %d) amx %d; xcr0 %#llx\n", f.avx2, f.avx512, f.avx512_vnni,
         f.avx512_bf16, f.amx_tile, (unsigned long long)b.xcr0);
#endif
}

int main(void) {
  test_everything_granted();
  test_amx_not_granted();
  test_zmm_state_off();
  test_ymm_state_off();
  test_partial_flags();
  test_this_machine();
  return t_done();
}
