#!/bin/sh
# Builds and runs the CPU backend micro-benchmark (tests/ops/bench_cpu.c) with the compiler
# directly, independent of the CMake build. Arguments go to the benchmark: [threads] [type].
# BENCH_ONLY=matmul|forward|gemma limits it to one part; BENCH_PRECISION=fast runs FAST precision; BENCH_N=1|128|512 one token count of the gemma part.
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
out=${TMPDIR:-/tmp}/icl-bench-cpu
cc=${CC:-cc}
$cc -std=c11 -O2 -D_GNU_SOURCE -I"$root/include" -I"$root/src/base" -I"$root/src/core" \
  -I"$root/src/cpu" -I"$root/src/ref" -o "$out" "$root/tests/ops/bench_cpu.c" "$root"/src/cpu/*.c \
  "$root/src/ref/ref_ops.c" "$root/src/ref/ref_attention.c" "$root/src/ref/ref_backward.c" \
  "$root/src/ref/ref_quant.c" "$root/src/core/ops.c" "$root"/src/base/*.c -lm -lpthread
exec "$out" "$@"
