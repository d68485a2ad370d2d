// The host core's arithmetic ceiling on one thread: f32 FMAs and, where the
// CPU has avx512_bf16, bf16 dot products (vdpbf16ps), each as 12
// independent accumulator chains (more than latency x throughput on the
// CPUs we run on), best of 3. benchmarks/cpu/run.sh prints each matmul's
// rate as a fraction of the ceiling its path runs on.
// Prints "fma GFLOP/s dot GFLOP/s" ("-" for a ceiling the CPU lacks).
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define SPLAT(x) _mm512_set1_ps(x)
#define FIRST(v) _mm512_cvtss_f32(v)
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define SPLAT(x) _mm256_set1_ps(x)
#define FIRST(v) _mm256_cvtss_f32(v)
#else
#error "peak.c needs AVX2 and FMA"
#endif

enum { Chains = 12, Iterations = 20000000 };

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// The empty asm keeps the chains in registers and the loop un-collapsed.
#define KEEP(a)                                                               \
  __asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]),      \
                   "+v"(a[4]), "+v"(a[5]), "+v"(a[6]), "+v"(a[7]),           \
                   "+v"(a[8]), "+v"(a[9]), "+v"(a[10]), "+v"(a[11]))

static float sink;

static double fmaRate(void) {
  vec a[Chains], b = SPLAT(1.0f), c = SPLAT(1e-7f);
  for (int j = 0; j < Chains; ++j)
    a[j] = SPLAT(j * 1e-3f);
  double start = seconds();
  for (long i = 0; i < Iterations; ++i) {
    for (int j = 0; j < Chains; ++j)
      a[j] = FMA(a[j], b, c);
    KEEP(a);
  }
  double elapsed = seconds() - start;
  sink += FIRST(a[0]);
  return (double)Iterations * Chains * LANES * 2 / elapsed / 1e9;
}

#if defined(__AVX512BF16__)
static double dotRate(void) {
  __m512 a[Chains];
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  for (int j = 0; j < Chains; ++j)
    a[j] = _mm512_set1_ps(j * 1e-3f);
  double start = seconds();
  for (long i = 0; i < Iterations; ++i) {
    for (int j = 0; j < Chains; ++j)
      a[j] = _mm512_dpbf16_ps(a[j], x, x);
    KEEP(a);
  }
  double elapsed = seconds() - start;
  sink += _mm512_cvtss_f32(a[0]);
  // 16 lanes, each a pair of products and their sum into the lane.
  return (double)Iterations * Chains * 16 * 4 / elapsed / 1e9;
}
#endif

int main(void) {
  double fma = 0, dot = 0;
  for (int r = 0; r < 3; ++r) {
    double f = fmaRate();
    fma = f > fma ? f : fma;
#if defined(__AVX512BF16__)
    double d = dotRate();
    dot = d > dot ? d : dot;
#endif
  }
  if (dot > 0)
    printf("%.1f %.1f\n", fma, dot);
  else
    printf("%.1f -\n", fma);
  return sink == 12345.0f; // never: keeps the chains' results live
}
