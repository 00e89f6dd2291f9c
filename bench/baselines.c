/* baselines.c — the libraries tessel is compared with, timed in this process:
 *
 *   bench_baselines sgemm M N K THREADS        OpenBLAS cblas_sgemm (row-major)
 *   bench_baselines conv N C H W K R S STRIDE PAD THREADS
 *                                             oneDNN direct convolution, f32,
 *                                             layouts chosen by oneDNN (format any;
 *                                             reorders not timed)
 *   bench_baselines softmax M N THREADS        oneDNN softmax over the last axis
 *   bench_baselines matmul_s8 M N K THREADS     oneDNN int8 matmul: s8 A (row-major)
 *                                             x s8 B (layout chosen by oneDNN, its
 *                                             reorder not timed) -> s32 C
 *   bench_baselines matmul_u8s8 M N K THREADS   the same with u8 A (vpdpbusd's own
 *                                             signedness; quantized activations)
 *   bench_baselines conv_u8s8 N C H W K R S STRIDE PAD THREADS
 *                                             oneDNN int8 convolution: u8 NHWC src x s8
 *                                             weights (layout chosen by oneDNN, reorder
 *                                             not timed) -> s32 NHWC dst (the int8
 *                                             conv tessel's conv2d_nhwc_u8s8 computes)
 *   bench_baselines peak_vnni                  this core's AVX-512 VNNI peak: independent
 *                                             vpdpbusd zmm chains (GOP/s, 128 per call)
 *   bench_baselines peak_pmaddwd               this core's AVX2 int8 peak through vpmaddwd (what
 *                                             tessel's x86.avx2.pmaddwd kernels issue): 7 chains
 *                                             of vpmaddwd ymm + vpaddd (GOP/s, 32 per vpmaddwd)
 *   bench_baselines peak_pmaddwd_mem           the same with vpmaddwd's i16 operand from memory (L1):
 *                                             what a .packed16 kernel's weight load costs
 *   bench_baselines peak_pmaddubsw             onnxruntime's (MLAS) AVX2 u8 x s8 sequence: 6 chains of
 *                                             vpmaddubsw (saturating i16 pairs) + vpmaddwd ones + vpaddd
 *                                             (GOP/s, 64 per group of three)
 *   bench_baselines peak_i8_tile TILE          an exact int8 register tile over L1-resident operands,
 *                                             TILE = b8_4x2 (bytes widened in the kernel, as .packed)
 *                                             or w16_RxC (weight stored as i16, as .packed16), or
 *                                             a16_RxC (that with A widened to u16 beforehand): GOP/s
 *   bench_baselines peak_fma THREADS           the fp32 FMA peak: 16 independent vfmadd231ps
 *                                             zmm chains per thread (GFLOP/s, 32 per FMA); on a
 *                                             CPU without AVX-512, 14 ymm chains (16 per FMA)
 *   bench_baselines read_bw THREADS            DRAM read bandwidth: each thread streams its
 *                                             slice of a 1 GiB buffer with zmm (or ymm) loads (GB/s)
 *   bench_baselines dwconv N C H W R S STRIDE PAD THREADS
 *                                             oneDNN depthwise convolution (groups = C),
 *                                             layouts chosen by oneDNN (format any)
 *   bench_baselines sgemv K N THREADS          OpenBLAS y[N] = x[K] . B[K,N] (cblas_sgemv,
 *                                             B row-major); prints GB/s of B read, seconds
 *
 * bench_baselines --cpu-time ... (any of the above, 1 thread): time with the calling thread's CPU
 * clock instead of the wall clock, for comparisons on a machine other jobs load.
 *
 * Prints one line: "<GFLOP/s> <median seconds>" (GB/s for read_bw and sgemv), FLOPs counted like tessel's
 * workloads (multiply-add = 2; softmax 5 per element). Timing: warm-up, then
 * the median of 7 repeats of at least 100 ms. Threads: openblas_set_num_threads
 * and omp_set_num_threads (oneDNN's OpenMP runtime). Never part of the tests. */
#include <cblas.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdbool.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime.h"

/* libgomp reads OMP_NUM_THREADS before main: set the count through its API. */
void omp_set_num_threads(int n);

typedef void (*run_fn)(void *ctx);

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The clock of median_seconds: wall time, or with --cpu-time the calling
 * thread's CPU time (1 thread only: the time a loaded machine's scheduler
 * gave the work, without the time it ran others). */
static double thread_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double (*clock_now)(void) = tsrt_now;

static double median_seconds(run_fn fn, void *ctx) {
  fn(ctx);
  int number = 1;
  for (;;) {
    double t0 = clock_now();
    for (int i = 0; i < number; i++) fn(ctx);
    double dt = clock_now() - t0;
    if (dt >= 0.1) break;
    number = dt > 0 ? (int)(number * 0.12 / dt) + 1 : number * 10;
  }
  double v[7];
  for (int r = 0; r < 7; r++) {
    double t0 = clock_now();
    for (int i = 0; i < number; i++) fn(ctx);
    v[r] = (clock_now() - t0) / number;
  }
  qsort(v, 7, sizeof v[0], cmp);
  return v[3];
}

/* ---- the machine's VNNI peak: 24 independent vpdpbusd chains (one core;
 * each vpdpbusd zmm is 64 multiply-adds = 128 ops) ---- */
#define PEAK_ITERS 4096
__attribute__((target("avx512f,avx512vnni"))) static void run_peak(void *p) {
  int *sink = p;
  __asm__ volatile("vpxord %%zmm0, %%zmm0, %%zmm0\n" ::: "xmm0");
  for (int i = 0; i < PEAK_ITERS; i++)
    __asm__ volatile(
        "vpdpbusd %%zmm30, %%zmm31, %%zmm0\n vpdpbusd %%zmm30, %%zmm31, %%zmm1\n"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm2\n vpdpbusd %%zmm30, %%zmm31, %%zmm3\n"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm4\n vpdpbusd %%zmm30, %%zmm31, %%zmm5\n"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm6\n vpdpbusd %%zmm30, %%zmm31, %%zmm7\n"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm8\n vpdpbusd %%zmm30, %%zmm31, %%zmm9\n"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm10\n vpdpbusd %%zmm30, %%zmm31, %%zmm11\n"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm12\n vpdpbusd %%zmm30, %%zmm31, %%zmm13\n"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm14\n vpdpbusd %%zmm30, %%zmm31, %%zmm15\n"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm16\n vpdpbusd %%zmm30, %%zmm31, %%zmm17\n"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm18\n vpdpbusd %%zmm30, %%zmm31, %%zmm19\n"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm20\n vpdpbusd %%zmm30, %%zmm31, %%zmm21\n"
        "vpdpbusd %%zmm30, %%zmm31, %%zmm22\n vpdpbusd %%zmm30, %%zmm31, %%zmm23\n" ::
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
              "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22",
              "xmm23");
  *sink += 1;
}

/* ---- the AVX2 int8 peak through vpmaddwd: without VNNI a multiply-accumulate
 * is vpmaddwd (16 i16 products summed in pairs into 8 i32) then vpaddd into the
 * accumulator, so the loop is 7 independent accumulator chains of that pair
 * (14 + 2 operand registers); each pair is 16 multiply-adds = 32 ops ---- */
#define PMADDWD_ITERS 4096
__attribute__((target("avx2"))) static void run_peak_pmaddwd(void *p) {
  int *sink = p;
  __asm__ volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n" ::: "xmm0");
  for (int i = 0; i < PMADDWD_ITERS; i++)
    __asm__ volatile(
        "vpmaddwd %%ymm14, %%ymm15, %%ymm7\n vpaddd %%ymm7, %%ymm0, %%ymm0\n"
        "vpmaddwd %%ymm14, %%ymm15, %%ymm8\n vpaddd %%ymm8, %%ymm1, %%ymm1\n"
        "vpmaddwd %%ymm14, %%ymm15, %%ymm9\n vpaddd %%ymm9, %%ymm2, %%ymm2\n"
        "vpmaddwd %%ymm14, %%ymm15, %%ymm10\n vpaddd %%ymm10, %%ymm3, %%ymm3\n"
        "vpmaddwd %%ymm14, %%ymm15, %%ymm11\n vpaddd %%ymm11, %%ymm4, %%ymm4\n"
        "vpmaddwd %%ymm14, %%ymm15, %%ymm12\n vpaddd %%ymm12, %%ymm5, %%ymm5\n"
        "vpmaddwd %%ymm14, %%ymm15, %%ymm13\n vpaddd %%ymm13, %%ymm6, %%ymm6\n" ::
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
              "xmm12", "xmm13");
  *sink += 1;
}

/* ---- what each AVX2 int8 kernel form can reach on this core (no VNNI):
 * onnxruntime's MLAS sequence (vpmaddubsw u8 x s8 pairs into a SATURATING
 * i16, vpmaddwd against ones, vpaddd: 32 multiply-adds per group, 64 ops),
 * vpmaddwd with its i16 operand from memory (the packed16 kernel's weight),
 * and register tiles of the two exact kernel forms over L1-resident
 * operands: R rows x C column vectors per k pair, the weight as bytes
 * widened in the kernel (vpmovsxbw, the .packed kernels) or stored as i16
 * (the .packed16 ones), A's pair broadcast and zero-extended per row. ---- */
__attribute__((target("avx2"))) static void run_peak_pmaddubsw(void *p) {
  int *sink = p;
  __asm__ volatile("vpcmpeqw %%ymm13, %%ymm13, %%ymm13\n vpsrlw $15, %%ymm13, %%ymm13\n" ::: "xmm13");
  for (int i = 0; i < PMADDWD_ITERS; i++)
    __asm__ volatile(
        "vpmaddubsw %%ymm15, %%ymm14, %%ymm6\n vpmaddwd %%ymm13, %%ymm6, %%ymm6\n vpaddd %%ymm6, %%ymm0, %%ymm0\n"
        "vpmaddubsw %%ymm15, %%ymm14, %%ymm7\n vpmaddwd %%ymm13, %%ymm7, %%ymm7\n vpaddd %%ymm7, %%ymm1, %%ymm1\n"
        "vpmaddubsw %%ymm15, %%ymm14, %%ymm8\n vpmaddwd %%ymm13, %%ymm8, %%ymm8\n vpaddd %%ymm8, %%ymm2, %%ymm2\n"
        "vpmaddubsw %%ymm15, %%ymm14, %%ymm9\n vpmaddwd %%ymm13, %%ymm9, %%ymm9\n vpaddd %%ymm9, %%ymm3, %%ymm3\n"
        "vpmaddubsw %%ymm15, %%ymm14, %%ymm10\n vpmaddwd %%ymm13, %%ymm10, %%ymm10\n vpaddd %%ymm10, %%ymm4, %%ymm4\n"
        "vpmaddubsw %%ymm15, %%ymm14, %%ymm11\n vpmaddwd %%ymm13, %%ymm11, %%ymm11\n"
        "vpaddd %%ymm11, %%ymm5, %%ymm5\n" ::
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11");
  *sink += 1;
}

static int16_t peak_mem[256] __attribute__((aligned(64)));
__attribute__((target("avx2"))) static void run_peak_pmaddwd_mem(void *p) {
  int *sink = p;
  const int16_t *w = peak_mem;
  for (int i = 0; i < PMADDWD_ITERS; i++)
    __asm__ volatile(
        "vpmaddwd 0(%0), %%ymm15, %%ymm7\n vpaddd %%ymm7, %%ymm0, %%ymm0\n"
        "vpmaddwd 32(%0), %%ymm15, %%ymm8\n vpaddd %%ymm8, %%ymm1, %%ymm1\n"
        "vpmaddwd 64(%0), %%ymm15, %%ymm9\n vpaddd %%ymm9, %%ymm2, %%ymm2\n"
        "vpmaddwd 96(%0), %%ymm15, %%ymm10\n vpaddd %%ymm10, %%ymm3, %%ymm3\n"
        "vpmaddwd 128(%0), %%ymm15, %%ymm11\n vpaddd %%ymm11, %%ymm4, %%ymm4\n"
        "vpmaddwd 160(%0), %%ymm15, %%ymm12\n vpaddd %%ymm12, %%ymm5, %%ymm5\n"
        "vpmaddwd 192(%0), %%ymm15, %%ymm13\n vpaddd %%ymm13, %%ymm6, %%ymm6\n" ::"r"(w)
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
          "xmm12", "xmm13", "memory");
  *sink += 1;
}

/* The AVX2 register-loop peaks by subcommand, with the ops (2 per
 * multiply-add) of one loop iteration. */
typedef struct avx2_peak {
  const char *name;
  run_fn fn;
  double ops;
} avx2_peak;
static const avx2_peak avx2_peaks[] = {
    {"peak_pmaddwd", run_peak_pmaddwd, 7.0 * 32},
    {"peak_pmaddwd_mem", run_peak_pmaddwd_mem, 7.0 * 32},
    {"peak_pmaddubsw", run_peak_pmaddubsw, 6.0 * 64},
};

/* The register-tile kernels: KP k pairs over an L1-resident weight panel
 * (C vectors per k pair; bytes widened in the kernel, or i16: W16) and A rows
 * (KP pairs each; bytes broadcast and zero-extended per row, or already
 * widened to u16 by a stage of their own, one vpbroadcastd: A16). */
#define TILE_KP 64
static uint8_t tile_a[8][2 * TILE_KP] __attribute__((aligned(64)));
static int16_t tile_w[TILE_KP * 8 * 16] __attribute__((aligned(64)));

#define UNROLL _Pragma("GCC unroll 16")
static uint16_t tile_a16[8][2 * TILE_KP] __attribute__((aligned(64)));

#define TILE_FN(NAME, R, C, W16, A16)                                                                            \
  __attribute__((target("avx2"))) static void NAME(void *p) {                                                    \
    int *sink = p;                                                                                               \
    __m256i acc[R][C];                                                                                           \
    UNROLL for (int r = 0; r < R; r++)                                                                           \
      UNROLL for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_si256();                                     \
    for (int it = 0; it < PMADDWD_ITERS / TILE_KP; it++)                                                         \
      for (int k = 0; k < TILE_KP; k++) {                                                                        \
        __m256i b[C];                                                                                            \
        UNROLL for (int c = 0; c < C; c++)                                                                       \
          b[c] = W16 ? _mm256_load_si256((const __m256i *)(tile_w + (k * C + c) * 16))                           \
                     : _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)((const int8_t *)tile_w +            \
                                                                               (k * C + c) * 16)));              \
        UNROLL for (int r = 0; r < R; r++) {                                                                     \
          __m256i a = A16 ? _mm256_set1_epi32(*(const int32_t *)&tile_a16[r][2 * k])                             \
                          : _mm256_cvtepu8_epi16(_mm_set1_epi16(*(const int16_t *)&tile_a[r][2 * k]));           \
          UNROLL for (int c = 0; c < C; c++) acc[r][c] = _mm256_add_epi32(acc[r][c], _mm256_madd_epi16(a, b[c])); \
        }                                                                                                        \
      }                                                                                                          \
    __m256i s = _mm256_setzero_si256();                                                                          \
    UNROLL for (int r = 0; r < R; r++)                                                                           \
      UNROLL for (int c = 0; c < C; c++) s = _mm256_xor_si256(s, acc[r][c]);                                     \
    *sink += _mm256_extract_epi32(s, 0);                                                                         \
  }
TILE_FN(run_tile_b8_4x2, 4, 2, 0, 0)
TILE_FN(run_tile_w16_4x2, 4, 2, 1, 0)
TILE_FN(run_tile_w16_2x4, 2, 4, 1, 0)
TILE_FN(run_tile_w16_3x4, 3, 4, 1, 0)
TILE_FN(run_tile_w16_1x8, 1, 8, 1, 0)
TILE_FN(run_tile_w16_6x2, 6, 2, 1, 0)
TILE_FN(run_tile_a16_2x4, 2, 4, 1, 1)
TILE_FN(run_tile_a16_4x2, 4, 2, 1, 1)

typedef struct tile_entry {
  const char *name;
  run_fn fn;
  int r, c;
} tile_entry;
static const tile_entry tile_entries[] = {
    {"b8_4x2", run_tile_b8_4x2, 4, 2},   {"w16_4x2", run_tile_w16_4x2, 4, 2}, {"w16_2x4", run_tile_w16_2x4, 2, 4},
    {"w16_3x4", run_tile_w16_3x4, 3, 4}, {"w16_1x8", run_tile_w16_1x8, 1, 8}, {"w16_6x2", run_tile_w16_6x2, 6, 2},
    {"a16_2x4", run_tile_a16_2x4, 2, 4}, {"a16_4x2", run_tile_a16_4x2, 4, 2},
};

/* ---- the fp32 FMA peak and the read bandwidth, on THREADS pthreads ---- */
#define FMA_ITERS 4096
#define FMA_CALLS 64 /* per thread and call: about 2 ms */
/* The FLOPs of one FMA at the widest vector the CPU has (AVX-512: 32; AVX2: 16),
 * chosen once (use_avx512) so the peak is the machine's own, not a crash on a CPU
 * without AVX-512 (an AVX2-only EPYC runs this project too). */
static bool use_avx512(void) { return __builtin_cpu_supports("avx512f"); }
static double fma_flops(void) { return use_avx512() ? 32.0 : 16.0; }

__attribute__((target("avx512f"))) static void fma_loop512(int *sink) {
  __asm__ volatile("vpxord %%zmm0, %%zmm0, %%zmm0\n" ::: "xmm0");
  for (int i = 0; i < FMA_ITERS; i++)
    __asm__ volatile(
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm0\n vfmadd231ps %%zmm30, %%zmm31, %%zmm1\n"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm2\n vfmadd231ps %%zmm30, %%zmm31, %%zmm3\n"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm4\n vfmadd231ps %%zmm30, %%zmm31, %%zmm5\n"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm6\n vfmadd231ps %%zmm30, %%zmm31, %%zmm7\n"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm8\n vfmadd231ps %%zmm30, %%zmm31, %%zmm9\n"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm10\n vfmadd231ps %%zmm30, %%zmm31, %%zmm11\n"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm12\n vfmadd231ps %%zmm30, %%zmm31, %%zmm13\n"
        "vfmadd231ps %%zmm30, %%zmm31, %%zmm14\n vfmadd231ps %%zmm30, %%zmm31, %%zmm15\n" ::
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
              "xmm12", "xmm13", "xmm14", "xmm15");
  *sink += 1;
}

/* AVX2: 14 independent ymm chains (16 registers, two hold the operands). */
__attribute__((target("avx2,fma"))) static void fma_loop256(int *sink) {
  __asm__ volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n" ::: "xmm0");
  for (int i = 0; i < FMA_ITERS; i++)
    __asm__ volatile(
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm0\n vfmadd231ps %%ymm14, %%ymm15, %%ymm1\n"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm2\n vfmadd231ps %%ymm14, %%ymm15, %%ymm3\n"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm4\n vfmadd231ps %%ymm14, %%ymm15, %%ymm5\n"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm6\n vfmadd231ps %%ymm14, %%ymm15, %%ymm7\n"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm8\n vfmadd231ps %%ymm14, %%ymm15, %%ymm9\n"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm10\n vfmadd231ps %%ymm14, %%ymm15, %%ymm11\n"
        "vfmadd231ps %%ymm14, %%ymm15, %%ymm12\n vfmadd231ps %%ymm14, %%ymm15, %%ymm13\n" ::
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
              "xmm12", "xmm13");
  *sink += 1;
}
#define FMA_CHAINS (use_avx512() ? 16.0 : 14.0)

static void fma_loop(int *sink) {
  if (use_avx512()) fma_loop512(sink);
  else fma_loop256(sink);
}

#define BW_BYTES ((size_t)1 << 30)
typedef struct par_ctx {
  int threads, mode; /* mode 0: FMA loop, 1: read stream */
  const float *buf;
  float sums[64];
  int sink[64];
} par_ctx;
typedef struct par_arg {
  par_ctx *c;
  int t;
} par_arg;

__attribute__((target("avx512f"))) static float read_slice512(const float *p, size_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

__attribute__((target("avx2"))) static float read_slice256(const float *p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  float t[8];
  _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

static float read_slice(const float *p, size_t n) {
  return use_avx512() ? read_slice512(p, n) : read_slice256(p, n);
}

static void *par_worker(void *p) {
  par_arg *a = p;
  par_ctx *c = a->c;
  if (c->mode == 0) {
    for (int k = 0; k < FMA_CALLS; k++) fma_loop(&c->sink[a->t]);
  } else {
    size_t n = BW_BYTES / sizeof(float) / (size_t)c->threads;
    c->sums[a->t] += read_slice(c->buf + n * (size_t)a->t, n);
  }
  return NULL;
}

/* One call: every thread runs its part once (threads started per call, as
 * a fork-join pool's cost is not what is measured: each part is >= 1 ms). */
static void run_par(void *p) {
  par_ctx *c = p;
  pthread_t th[64];
  par_arg args[64];
  for (int t = 0; t < c->threads; t++) {
    args[t] = (par_arg){c, t};
    if (t && pthread_create(&th[t], NULL, par_worker, &args[t])) exit(2);
  }
  par_worker(&args[0]);
  for (int t = 1; t < c->threads; t++) pthread_join(th[t], NULL);
}

/* ---- sgemm ---- */
typedef struct gemm_ctx {
  int M, N, K;
  float *A, *B, *C;
} gemm_ctx;

static void run_gemm(void *p) {
  gemm_ctx *c = p;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->M, c->N, c->K, 1.0f, c->A, c->K, c->B, c->N,
              0.0f, c->C, c->N);
}

typedef struct gemv_ctx {
  int K, N;
  float *x, *B, *y;
} gemv_ctx;

static void run_gemv(void *p) {
  gemv_ctx *c = p;
  cblas_sgemv(CblasRowMajor, CblasTrans, c->K, c->N, 1.0f, c->B, c->N, c->x, 1, 0.0f, c->y, 1);
}

/* ---- oneDNN ---- */
#define CHECK(call)                                                         \
  do {                                                                      \
    dnnl_status_t st_ = (call);                                             \
    if (st_ != dnnl_success) {                                              \
      fprintf(stderr, "bench_baselines: %s failed (%d)\n", #call, (int)st_); \
      exit(2);                                                              \
    }                                                                       \
  } while (0)

typedef struct dnnl_ctx {
  dnnl_primitive_t prim;
  dnnl_stream_t stream;
  int nargs;
  dnnl_exec_arg_t args[4];
} dnnl_ctx;

static void run_dnnl(void *p) {
  dnnl_ctx *c = p;
  dnnl_primitive_execute(c->prim, c->stream, c->nargs, c->args);
  dnnl_stream_wait(c->stream);
}

static dnnl_memory_t make_mem(const dnnl_memory_desc_t *md, dnnl_engine_t eng, uint64_t seed) {
  dnnl_memory_t m;
  CHECK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
  void *h = NULL;
  CHECK(dnnl_memory_get_data_handle(m, &h));
  size_t bytes = dnnl_memory_desc_get_size(md);
  tsrt_fill_random(TSRT_F32, h, (int64_t)(bytes / 4), seed);
  return m;
}

/* oneDNN's direct convolution of the given descriptors (format any is chosen
 * by oneDNN; the buffers take the primitive's own layouts, reorders untimed):
 * the median seconds of one run. */
static double time_conv(const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *dst,
                        int stride, int pad) {
  dnnl_engine_t eng;
  dnnl_stream_t stream;
  CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
  dnnl_dims_t st = {stride, stride}, pl = {pad, pad}, pr = {pad, pad};
  dnnl_convolution_desc_t cd;
  CHECK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, src, wei, NULL,
                                           dst, st, pl, pr));
  dnnl_primitive_desc_t pd;
  CHECK(dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL));
  dnnl_ctx c = {.stream = stream, .nargs = 3};
  c.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, make_mem(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), eng, 1)};
  c.args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS,
                                make_mem(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), eng, 2)};
  c.args[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, make_mem(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), eng, 3)};
  CHECK(dnnl_primitive_create(&c.prim, pd));
  return median_seconds(run_dnnl, &c);
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "--cpu-time")) {
    clock_now = thread_cpu_now;
    argv++;
    argc--;
  }
  if (argc < 2) goto usage;
  if (!strcmp(argv[1], "peak_vnni") && argc == 2) {
    int sink = 0;
    double t = median_seconds(run_peak, &sink);
    printf("%.2f %.6g\n", 24.0 * 128 * PEAK_ITERS / t * 1e-9, t);
    return 0;
  }
  for (size_t i = 0; i < sizeof avx2_peaks / sizeof avx2_peaks[0]; i++) {
    if (strcmp(argv[1], avx2_peaks[i].name) || argc != 2) continue;
    if (!__builtin_cpu_supports("avx2")) {
      fprintf(stderr, "%s: this CPU has no AVX2\n", argv[1]);
      return 2;
    }
    int sink = 0;
    double t = median_seconds(avx2_peaks[i].fn, &sink);
    printf("%.2f %.6g\n", avx2_peaks[i].ops * PMADDWD_ITERS / t * 1e-9, t);
    return 0;
  }
  if (!strcmp(argv[1], "peak_i8_tile") && argc == 3) {
    if (!__builtin_cpu_supports("avx2")) {
      fprintf(stderr, "peak_i8_tile: this CPU has no AVX2\n");
      return 2;
    }
    for (size_t i = 0; i < sizeof tile_entries / sizeof tile_entries[0]; i++) {
      if (strcmp(argv[2], tile_entries[i].name)) continue;
      int sink = 0;
      double t = median_seconds(tile_entries[i].fn, &sink);
      printf("%.2f %.6g\n", 32.0 * tile_entries[i].r * tile_entries[i].c * PMADDWD_ITERS / t * 1e-9, t);
      return 0;
    }
    fprintf(stderr, "peak_i8_tile: unknown tile '%s'; one of:", argv[2]);
    for (size_t i = 0; i < sizeof tile_entries / sizeof tile_entries[0]; i++)
      fprintf(stderr, " %s", tile_entries[i].name);
    fputc('\n', stderr);
    return 2;
  }
  if ((!strcmp(argv[1], "peak_fma") || !strcmp(argv[1], "read_bw")) && argc == 3) {
    par_ctx c = {.threads = atoi(argv[2]), .mode = !strcmp(argv[1], "read_bw")};
    if (c.threads < 1 || c.threads > 64) goto usage;
    if (c.mode) {
      float *b = aligned_alloc(64, BW_BYTES);
      if (!b) return 2;
      tsrt_fill_random(TSRT_F32, b, (int64_t)(BW_BYTES / sizeof(float)), 1);
      c.buf = b;
    }
    double t = median_seconds(run_par, &c);
    if (c.mode) printf("%.2f %.6g\n", (double)BW_BYTES / t * 1e-9, t);
    else printf("%.2f %.6g\n", c.threads * FMA_CHAINS * fma_flops() * FMA_ITERS * FMA_CALLS / t * 1e-9, t);
    return 0;
  }
  if (!strcmp(argv[1], "sgemv") && argc == 5) {
    int K = atoi(argv[2]), N = atoi(argv[3]);
    openblas_set_num_threads(atoi(argv[4]));
    gemv_ctx c = {K, N, aligned_alloc(64, sizeof(float) * (size_t)K + 64),
                  aligned_alloc(64, sizeof(float) * (size_t)K * (size_t)N + 64),
                  aligned_alloc(64, sizeof(float) * (size_t)N + 64)};
    tsrt_fill_random(TSRT_F32, c.x, K, 1);
    tsrt_fill_random(TSRT_F32, c.B, (int64_t)K * N, 2);
    double t = median_seconds(run_gemv, &c);
    printf("%.2f %.6g\n", 4.0 * K * N / t * 1e-9, t);
    return 0;
  }
  if (!strcmp(argv[1], "sgemm") && argc == 6) {
    gemm_ctx c = {atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), NULL, NULL, NULL};
    openblas_set_num_threads(atoi(argv[5]));
    c.A = aligned_alloc(64, sizeof(float) * (size_t)c.M * (size_t)c.K + 64);
    c.B = aligned_alloc(64, sizeof(float) * (size_t)c.K * (size_t)c.N + 64);
    c.C = aligned_alloc(64, sizeof(float) * (size_t)c.M * (size_t)c.N + 64);
    tsrt_fill_random(TSRT_F32, c.A, (int64_t)c.M * c.K, 1);
    tsrt_fill_random(TSRT_F32, c.B, (int64_t)c.K * c.N, 2);
    double t = median_seconds(run_gemm, &c);
    printf("%.2f %.6g\n", 2.0 * c.M * c.N * c.K / t * 1e-9, t);
    return 0;
  }
  bool dw = !strcmp(argv[1], "dwconv") && argc == 11;
  if ((!strcmp(argv[1], "conv") && argc == 12) || dw) {
    char **v = argv + 2; /* dwconv has no K: the channel count */
    int n = atoi(v[0]), ch = atoi(v[1]), h = atoi(v[2]), w = atoi(v[3]), k = dw ? ch : atoi(v[4]);
    if (dw) v--;
    int r = atoi(v[5]), s = atoi(v[6]), stride = atoi(v[7]), pad = atoi(v[8]);
    omp_set_num_threads(atoi(v[9]));
    int p = (h + 2 * pad - r) / stride + 1, q = (w + 2 * pad - s) / stride + 1;
    dnnl_memory_desc_t src, wei, dst;
    dnnl_dims_t sd = {n, ch, h, w}, wd = {k, ch, r, s}, dd = {n, k, p, q}, gwd = {ch, 1, 1, r, s};
    CHECK(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, dnnl_format_tag_any));
    if (dw) CHECK(dnnl_memory_desc_init_by_tag(&wei, 5, gwd, dnnl_f32, dnnl_format_tag_any));
    else CHECK(dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dnnl_format_tag_any));
    double t = time_conv(&src, &wei, &dst, stride, pad);
    printf("%.2f %.6g\n", 2.0 * n * k * p * q * (dw ? 1 : ch) * r * s / t * 1e-9, t);
    return 0;
  }
  if (!strcmp(argv[1], "conv_u8s8") && argc == 12) {
    int n = atoi(argv[2]), ch = atoi(argv[3]), h = atoi(argv[4]), w = atoi(argv[5]), k = atoi(argv[6]);
    int r = atoi(argv[7]), s = atoi(argv[8]), stride = atoi(argv[9]), pad = atoi(argv[10]);
    omp_set_num_threads(atoi(argv[11]));
    int p = (h + 2 * pad - r) / stride + 1, q = (w + 2 * pad - s) / stride + 1;
    dnnl_memory_desc_t src, wei, dst;
    dnnl_dims_t sd = {n, ch, h, w}, wd = {k, ch, r, s}, dd = {n, k, p, q};
    CHECK(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_u8, dnnl_nhwc));
    CHECK(dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_s8, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_s32, dnnl_nhwc));
    double t = time_conv(&src, &wei, &dst, stride, pad);
    printf("%.2f %.6g\n", 2.0 * n * k * p * q * ch * r * s / t * 1e-9, t);
    return 0;
  }
  if (!strcmp(argv[1], "softmax") && argc == 5) {
    int m = atoi(argv[2]), nn = atoi(argv[3]);
    omp_set_num_threads(atoi(argv[4]));
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {m, nn};
    CHECK(dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab));
    dnnl_softmax_desc_t sd;
    CHECK(dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference, &md, 1));
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_primitive_desc_create(&pd, &sd, NULL, eng, NULL));
    dnnl_ctx c = {.stream = stream, .nargs = 2};
    c.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, make_mem(&md, eng, 1)};
    c.args[1] = (dnnl_exec_arg_t){DNNL_ARG_DST, make_mem(&md, eng, 2)};
    CHECK(dnnl_primitive_create(&c.prim, pd));
    double t = median_seconds(run_dnnl, &c);
    printf("%.2f %.6g\n", 5.0 * m * nn / t * 1e-9, t);
    return 0;
  }
  if ((!strcmp(argv[1], "matmul_s8") || !strcmp(argv[1], "matmul_u8s8")) && argc == 6) {
    dnnl_data_type_t at = !strcmp(argv[1], "matmul_u8s8") ? dnnl_u8 : dnnl_s8;
    int m = atoi(argv[2]), nn = atoi(argv[3]), k = atoi(argv[4]);
    omp_set_num_threads(atoi(argv[5]));
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
    dnnl_memory_desc_t src, wei, dst;
    dnnl_dims_t sd = {m, k}, wd = {k, nn}, dd = {m, nn};
    CHECK(dnnl_memory_desc_init_by_tag(&src, 2, sd, at, dnnl_ab));
    CHECK(dnnl_memory_desc_init_by_tag(&wei, 2, wd, dnnl_s8, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_s32, dnnl_ab));
    dnnl_matmul_desc_t md;
    CHECK(dnnl_matmul_desc_init(&md, &src, &wei, NULL, &dst));
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL));
    dnnl_ctx c = {.stream = stream, .nargs = 3};
    c.args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, make_mem(&src, eng, 1)};
    c.args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS,
                                  make_mem(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), eng, 2)};
    c.args[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, make_mem(&dst, eng, 3)};
    CHECK(dnnl_primitive_create(&c.prim, pd));
    double t = median_seconds(run_dnnl, &c);
    printf("%.2f %.6g\n", 2.0 * m * nn * k / t * 1e-9, t);
    return 0;
  }
usage:
  fprintf(stderr, "usage: bench_baselines [--cpu-time] sgemm M N K THREADS | conv N C H W K R S STRIDE PAD THREADS | "
                  "softmax M N THREADS | matmul_s8 M N K THREADS | matmul_u8s8 M N K THREADS | "
                  "conv_u8s8 N C H W K R S STRIDE PAD THREADS | peak_vnni | peak_pmaddwd | peak_pmaddwd_mem | "
                  "peak_pmaddubsw | peak_i8_tile TILE | "
                  "peak_fma THREADS | read_bw THREADS | dwconv N C H W R S STRIDE PAD THREADS | sgemv K N THREADS\n");
  return 2;
}
