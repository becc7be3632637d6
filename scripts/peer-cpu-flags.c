/* scripts/bench-peers.sh's probe: the ggml build options for what this machine lets a process run. Compiled with
 * src/cpu/cpu_features.c (the same decision icl's CPU backend makes): a CPUID flag is not permission; AVX-512 needs
 * its state in XCR0 and AMX the kernel's grant, asked for here as ggml asks for it at start-up.
 *   cc -O1 -Isrc -o probe scripts/peer-cpu-flags.c src/cpu/cpu_features.c && ./probe
 * prints "native" when every instruction the CPU reports is usable (GGML_NATIVE=ON is then safe), otherwise the
 * -DGGML_...=ON/OFF options of a non-native build of the usable ones, and on stderr what was left out and why. */
#include <stdio.h>

#include "cpu_features.h"

#define BIT(x, n) (((x) >> (n)) & 1u)

int main(void) {
  cpu_x86_bits b;
  cpu_x86_read(&b, 1);
  cpu_x86_features f = cpu_x86_decide(&b);
  int amx_flags = BIT(b.leaf7_edx, 24), avx512_flags = BIT(b.leaf7_ebx, 16);
  int native = (!amx_flags || f.amx_tile) && (!avx512_flags || f.avx512);
  if (native) {
    puts("native");
    return 0;
  }
  if (amx_flags && !f.amx_tile)
    fprintf(stderr, "peer-cpu-flags: the CPU reports AMX but the tile state is not granted (XCR0 %#llx): AMX off\n",
            (unsigned long long)b.xcr0);
  if (avx512_flags && !f.avx512)
    fprintf(stderr, "peer-cpu-flags: the CPU reports AVX-512 but the OS does not enable its state: AVX-512 off\n");
  const struct { const char *name; int on; } opt[] = {
      {"AVX", f.avx},           {"AVX2", f.avx2},           {"FMA", f.fma},
      {"F16C", f.f16c},         {"BMI2", f.bmi2},           {"AVX_VNNI", f.avx_vnni},
      {"AVX512", f.avx512},     {"AVX512_VBMI", f.avx512_vbmi}, {"AVX512_VNNI", f.avx512_vnni},
      {"AVX512_BF16", f.avx512_bf16}, {"AMX_TILE", f.amx_tile}, {"AMX_INT8", f.amx_int8},
      {"AMX_BF16", f.amx_bf16}};
  printf("-DGGML_NATIVE=OFF");
  for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) printf(" -DGGML_%s=%s", opt[i].name, opt[i].on ? "ON" : "OFF");
  printf("\n");
  return 0;
}
