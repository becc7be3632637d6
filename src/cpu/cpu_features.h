/* x86 SIMD features a process may use: a CPUID flag is not permission. AVX and AVX-512 also need the OS to save
 * their register state (XCR0, read with XGETBV), AMX needs the tile state in XCR0 and, on Linux, a per-process
 * grant (arch_prctl ARCH_REQ_XCOMP_PERM). The decision is a pure function of the raw bits, so it is tested on
 * given bits; also compiled alone into scripts/bench-peers.sh's probe (no other icl code needed). */
#ifndef ICL_CPU_FEATURES_H
#define ICL_CPU_FEATURES_H

#include <stdint.h>

/* The raw bits the decision reads. */
typedef struct cpu_x86_bits {
  uint32_t leaf1_ecx;                       /* CPUID.1:ECX (FMA, OSXSAVE, AVX, F16C) */
  uint32_t leaf7_ebx, leaf7_ecx, leaf7_edx; /* CPUID.(7,0) (AVX2, BMI2, AVX-512 F/CD/BW/DQ/VL/VBMI/VNNI, AMX) */
  uint32_t leaf7_1_eax;                     /* CPUID.(7,1):EAX (AVX-VNNI, AVX512_BF16) */
  uint64_t xcr0;                            /* XGETBV(0): the register state the OS saves; 0 without OSXSAVE */
  int amx_granted;                          /* the kernel granted this process the AMX tile data state */
} cpu_x86_bits;

/* What may be used: each 1 only when the CPU has it and the OS enables its state. */
typedef struct cpu_x86_features {
  int avx, avx2, fma, f16c, bmi2, avx_vnni;      /* avx2 here also means FMA and F16C (the AVX2 kernels use them) */
  int avx512, avx512_vnni, avx512_vbmi, avx512_bf16; /* avx512: F, CD, BW, DQ and VL with the ZMM and mask state */
  int amx_tile, amx_int8, amx_bf16;               /* tile state in XCR0 and granted */
} cpu_x86_features;

/* The usable features from the raw bits (pure). */
cpu_x86_features cpu_x86_decide(const cpu_x86_bits *b);

/* Reads this machine's bits (zeros off x86). request_amx: ask the kernel for the AMX tile state (a lasting grant
 * for the process, what a program about to use AMX does); otherwise only ask whether it was granted. */
void cpu_x86_read(cpu_x86_bits *b, int request_amx);

#endif
