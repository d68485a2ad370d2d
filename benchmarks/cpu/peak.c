// The host core's arithmetic ceiling on one thread: f32 FMAs and, where the
// CPU has avx512_bf16, bf16 dot products (vdpbf16ps), each as 12
// independent accumulator chains (more than latency x throughput on the
// CPUs we run on), and where it has AMX, tdpbf16ps on 4 accumulator tiles
// from 4 operand tiles; best of 3. benchmarks/cpu/run.sh prints each
// matmul's rate as a fraction of the ceiling its path runs on.
// Prints "fma dot amx" in GFLOP/s ("-" for a ceiling the CPU lacks).
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__AMX_BF16__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

#if defined(__AMX_BF16__)
// Palette 1: 8 tiles of 16 rows x 64 bytes.
struct TileConfig {
  uint8_t palette, start;
  uint8_t reserved[14];
  uint16_t bytesPerRow[16];
  uint8_t rows[16];
};

static double amxRate(void) {
  // Linux gives a process the tile state only when asked (as the runtime
  // does); 0 where it refuses.
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */))
    return 0;
  struct TileConfig config;
  memset(&config, 0, sizeof config);
  config.palette = 1;
  for (int t = 0; t < 8; ++t) {
    config.bytesPerRow[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
  static uint16_t ones[16 * 32] __attribute__((aligned(64)));
  for (int i = 0; i < 16 * 32; ++i)
    ones[i] = 0x3f80;
  _tile_zero(0), _tile_zero(1), _tile_zero(2), _tile_zero(3);
  _tile_loadd(4, ones, 64), _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64), _tile_loadd(7, ones, 64);
  long steps = Iterations / 10;
  double start = seconds();
  for (long i = 0; i < steps; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  double elapsed = seconds() - start;
  _tile_release();
  // Each tdpbf16ps: 16 x 16 outputs, 32 products and sums each.
  return (double)steps * 4 * 16 * 16 * 32 * 2 / elapsed / 1e9;
}
#endif

int main(void) {
  double fma = 0, dot = 0, amx = 0;
  for (int r = 0; r < 3; ++r) {
    double f = fmaRate();
    fma = f > fma ? f : fma;
#if defined(__AVX512BF16__)
    double d = dotRate();
    dot = d > dot ? d : dot;
#endif
#if defined(__AMX_BF16__)
    double a = amxRate();
    amx = a > amx ? a : amx;
#endif
  }
  char dotText[32] = "-", amxText[32] = "-";
  if (dot > 0)
    snprintf(dotText, sizeof dotText, "%.1f", dot);
  if (amx > 0)
    snprintf(amxText, sizeof amxText, "%.1f", amx);
  printf("%.1f %s %s\n", fma, dotText, amxText);
  return sink == 12345.0f; // never: keeps the chains' results live
}
