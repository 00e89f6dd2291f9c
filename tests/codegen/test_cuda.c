/* test_cuda.c — the CUDA backend without a GPU: CUDA C emission
 * (codegen/cuda.c) for GPU-scheduled functions, NVRTC compilation of what it
 * writes (skipped, saying so, when tessel is built without CUDA), structural
 * checks on the text (barrier placement, launch bounds and configuration,
 * vector accesses, unroll pragmas, warp shuffles), refusals with reasons, and
 * the GPU runtime (runtime/cuda_rt.c), which reports "no GPU" cleanly
 * where libcuda.so.1 is absent.
 *
 * Every scheduled function here is also checked against the unscheduled one
 * in the reference interpreter (tu_equivalent), so the schedules themselves
 * are legal; the emitted text is what NVRTC has to accept. */
#include <check.h>
#include <dlfcn.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "codegen/gpu_check.h"
#include "cuda_rt.h"
#include "ir/interp.h"
#include "ir/ir.h"
#include "ir/parse.h"
#include "ir/schedule/schedule.h"
#include "ir/workloads/workloads.h"
#include "ir/schedule/trace.h"
#include "schedule/util.h"
#include "util/f16_funcs.h"
#include "search/search.h"
#include "cublas.h"
#include "tuner/build.h"
#include "tuner/library.h"

static ts_diag D;

static cg_target cuda_target(void) {
  cg_target t;
  ts_diag_clear(&D);
  ck_assert_msg(cg_target_parse("cuda -arch=sm_90", &t, &D) == TS_OK, "%s", D.msg);
  return t;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* Emits f and, when NVRTC is present, compiles it to a cubin for sm_90. */
static void emit_compile(const ir_func *f, cg_cuda_module *m, const char *what) {
  cg_target t = cuda_target();
  ts_diag_clear(&D);
  ts_status st = cg_cuda_emit(f, &t, NULL, m, &D);
  ck_assert_msg(st == TS_OK, "%s: emit: %s", what, D.msg);
  ck_assert(m->source != NULL);
  if (getenv("TESSEL_TEST_DUMP_CUDA")) fprintf(stderr, "---- %s\n%s\n", what, m->source);
  if (!cg_nvrtc_available()) return;
  cg_cuda_binary bin;
  ts_diag_clear(&D);
  st = cg_nvrtc_compile(m->source, "sm_90", true, &bin, &D);
  ck_assert_msg(st == TS_OK, "%s: nvrtc: %s\n%s", what, D.msg, m->source);
  ck_assert(bin.ptx && bin.ptx_size > 0);
  ck_assert(bin.cubin && bin.cubin_size > 16);
  ck_assert(memcmp(bin.cubin, "\x7f" "ELF", 4) == 0);
  if (m->nkernels) ck_assert(strstr(bin.ptx, ".entry tessel_kernel0") != NULL);
  cg_cuda_binary_fini(&bin);
}

/* ---- schedules -------------------------------------------------------------- */

static const ir_stmt *find_realize(const ir_stmt *s, const char *name) {
  if (!s) return NULL;
  switch (s->kind) {
  case IR_BLOCK_REALIZE: {
    const ir_block *b = s->u.realize.block;
    if (strcmp(b->name, name) == 0) return s;
    const ir_stmt *r = find_realize(b->init, name);
    return r ? r : find_realize(b->body, name);
  }
  case IR_FOR: return find_realize(s->u.loop.body, name);
  case IR_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) {
      const ir_stmt *r = find_realize(s->u.seq.stmts[i], name);
      if (r) return r;
    }
    return NULL;
  case IR_IF: {
    const ir_stmt *r = find_realize(s->u.ifs.then_s, name);
    return r ? r : find_realize(s->u.ifs.else_s, name);
  }
  case IR_LET: return find_realize(s->u.let.body, name);
  default: return NULL;
  }
}

/* Leading loops of block `name` that bind only spatial iter vars. */
static int spatial_prefix(sch_state *s, const char *name, const sch_loop *loops, int n) {
  const ir_stmt *r = find_realize(sch_func(s)->body, name);
  ck_assert(r != NULL);
  const ir_block *b = r->u.realize.block;
  int k = 0;
  for (; k < n; k++) {
    bool red = false;
    for (int i = 0; i < b->niter; i++)
      if (b->iters[i].type != IR_ITER_S && ir_expr_uses_var(r->u.realize.iter_values[i], loops[k].var))
        red = true;
    if (red) break;
  }
  return k;
}

/* The fallback GPU schedule of the tests (in the spirit of dlight's): per
 * top-level block, the leading spatial loops fused, split by `threads` and
 * bound to blockIdx.x / threadIdx.x; reductions stay serial per thread. */
static void gpu_fallback(sch_state *s, int64_t threads) {
  sch_block root;
  tu_ok(sch_get_block(s, "root", &root, &D), &D);
  sch_block *kids;
  int nk;
  tu_ok(sch_get_child_blocks(s, root, &kids, &nk, &D), &D);
  char names[32][64];
  ck_assert(nk <= 32);
  for (int i = 0; i < nk; i++) snprintf(names[i], sizeof names[i], "%s", kids[i].name);
  for (int i = 0; i < nk; i++) {
    sch_loop loops[16];
    int n = tu_loops(s, names[i], loops, 16);
    int k = spatial_prefix(s, names[i], loops, n);
    if (k == 0) continue;
    sch_loop fused = loops[0];
    if (k > 1) tu_ok(sch_fuse(s, k, loops, &fused, &D), &D);
    sch_loop parts[2];
    int64_t fac[2] = {-1, threads};
    tu_ok(sch_split(s, fused, 2, fac, parts, &D), &D);
    tu_ok(sch_bind(s, parts[0], "blockIdx.x", &D), &D);
    tu_ok(sch_bind(s, parts[1], "threadIdx.x", &D), &D);
  }
}

/* A cooperative fetch: the copy block's loops fused, split into
 * [-1, ty, tx, vec], bound and vectorized. */
static void coop_fetch(sch_state *s, const char *name, sch_loop at, int64_t ty, int64_t tx, int64_t vec) {
  sch_loop loops[16];
  int n = tu_loops(s, name, loops, 16);
  /* the copy's own loops are the ones below the compute_at loop */
  int first = -1;
  for (int k = 0; k < n; k++)
    if (loops[k].var == at.var) first = k + 1;
  ck_assert_int_ge(first, 1);
  int nown = 0;
  sch_loop own[8];
  for (int k = first; k < n; k++) own[nown++] = loops[k];
  ck_assert(nown >= 1);
  sch_loop fused = own[0];
  if (nown > 1) tu_ok(sch_fuse(s, nown, own, &fused, &D), &D);
  sch_loop parts[4];
  int64_t fac[4] = {-1, ty, tx, vec};
  tu_ok(sch_split(s, fused, 4, fac, parts, &D), &D);
  tu_ok(sch_bind(s, parts[1], "threadIdx.y", &D), &D);
  tu_ok(sch_bind(s, parts[2], "threadIdx.x", &D), &D);
  if (vec > 1) tu_ok(sch_vectorize(s, parts[3], &D), &D);
}

/* A tiled matmul (TVM's SSSRRSRS in small): 2-d blocks of (ty*4) x (tx*4),
 * A and B cached in shared memory per k-tile with vectorized cooperative
 * fetches, the accumulator in registers, the inner k loop unrolled. */
static sch_state *tiled_matmul(ts_arena *a, const char *spec, ir_func **orig, int64_t ty, int64_t tx,
                               int64_t kt) {
  sch_state *s = tu_schedule(a, spec, orig);
  sch_block c;
  tu_ok(sch_get_block(s, "C", &c, &D), &D);
  sch_block cl;
  tu_ok(sch_cache_write(s, c, 0, "local", 0, NULL, &cl, &D), &D);
  sch_loop l[3];
  ck_assert_int_eq(tu_loops(s, "C", l, 3), 3);
  sch_loop i[3], j[3], k[2];
  int64_t fi[3] = {-1, ty, 4}, fj[3] = {-1, tx, 4}, fk[2] = {-1, kt};
  tu_ok(sch_split(s, l[0], 3, fi, i, &D), &D);
  tu_ok(sch_split(s, l[1], 3, fj, j, &D), &D);
  tu_ok(sch_split(s, l[2], 2, fk, k, &D), &D);
  sch_loop order[8] = {i[0], j[0], i[1], j[1], k[0], k[1], i[2], j[2]};
  tu_ok(sch_reorder(s, 8, order, &D), &D);
  tu_ok(sch_bind(s, i[0], "blockIdx.y", &D), &D);
  tu_ok(sch_bind(s, j[0], "blockIdx.x", &D), &D);
  tu_ok(sch_bind(s, i[1], "threadIdx.y", &D), &D);
  tu_ok(sch_bind(s, j[1], "threadIdx.x", &D), &D);
  tu_ok(sch_reverse_compute_at(s, cl, j[1], true, -1, &D), &D);
  tu_ok(sch_unroll(s, k[1], &D), &D);
  sch_block as, bs;
  tu_ok(sch_get_block(s, "C", &c, &D), &D);
  tu_ok(sch_cache_read(s, c, 0, "shared", 0, NULL, &as, &D), &D);
  tu_ok(sch_compute_at(s, as, k[0], true, -1, &D), &D);
  tu_ok(sch_get_block(s, "C", &c, &D), &D);
  tu_ok(sch_cache_read(s, c, 1, "shared", 0, NULL, &bs, &D), &D);
  tu_ok(sch_compute_at(s, bs, k[0], true, -1, &D), &D);
  char an[64], bn[64];
  snprintf(an, sizeof an, "%s", as.name);
  snprintf(bn, sizeof bn, "%s", bs.name);
  coop_fetch(s, an, k[0], ty, tx, 4);
  coop_fetch(s, bn, k[0], ty, tx, 4);
  return s;
}


/* ---- running the emitted CUDA on the CPU -------------------------------------
 * No GPU here, so the generated code's semantics (launch configuration,
 * guards, barriers, index math, module buffers, multi-kernel order) are
 * checked by compiling the CUDA C as C++ against a small emulation of the
 * CUDA execution model: one block at a time, one pthread per thread of the
 * block, __syncthreads() a pthread barrier, __shared__ a static (one block
 * at a time), a warp shuffle a meeting at a per-warp barrier, __half g++'s
 * _Float16. Kernels with bf16 or WMMA are not emulated. */
static const char emu_header[] =
    "#include <math.h>\n#include <pthread.h>\n#include <string.h>\n#include <stdlib.h>\n"
    "struct uint3 { unsigned x, y, z; };\n"
    "static thread_local uint3 threadIdx, blockIdx;\n"
    "static pthread_barrier_t emu_bar;\n"
    "#define __global__\n#define __device__\n#define __forceinline__ inline\n"
    "#define __launch_bounds__(n)\n#define __align__(n) __attribute__((aligned(n)))\n#define __shared__ static\n"
    "static inline void __syncthreads(void) { pthread_barrier_wait(&emu_bar); }\n"
    "static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }\n"
    "#define __expf(x) expf(x)\n#define __logf(x) logf(x)\n#define __powf(x, y) powf(x, y)\n"
    "static inline float __fdividef(float x, float y) { return x / y; }\n"
    "static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }\n"
    "struct alignas(16) float4 { float x, y, z, w; }; struct alignas(8) float2 { float x, y; };\n"
    "struct alignas(16) int4 { int x, y, z, w; }; struct alignas(8) int2 { int x, y; };\n"
    "static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }\n"
    "static inline float2 make_float2(float a, float b) { return {a, b}; }\n"
    "static inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }\n"
    "static inline int2 make_int2(int a, int b) { return {a, b}; }\n"
    "static pthread_barrier_t emu_wbar[32];\n"
    "static thread_local unsigned emu_tid;\n"
    "static double emu_slot[1024];\n"
    "static unsigned emu_nthreads;\n"
    "static inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)mask; pthread_barrier_wait(&emu_wbar[emu_tid / 32]); }\n"
    "/* a warp's threads meet at their own barrier: write, meet, read, meet; a\n"
    "   lane outside the mask or past the block yields NaN (undefined on a GPU) */\n"
    "template <typename T> static T __shfl_down_sync(unsigned mask, T v, int off, int width = 32) {\n"
    "  unsigned lane = emu_tid % 32, seg = lane / width * width;\n"
    "  if (!((mask >> lane) & 1u)) abort(); /* the caller must be in the mask */\n"
    "  for (unsigned l = 0; l < 32; l++) /* and every lane of the mask must exist */\n"
    "    if (((mask >> l) & 1u) && emu_tid / 32 * 32 + l >= emu_nthreads) abort();\n"
    "  emu_slot[emu_tid] = (double)v;\n"
    "  pthread_barrier_wait(&emu_wbar[emu_tid / 32]);\n"
    "  bool ok = lane + off < 32 && ((mask >> (lane + off)) & 1u) && emu_tid + off < emu_nthreads;\n"
    "  T r = lane + off < seg + width ? (ok ? (T)emu_slot[emu_tid + off] : (T)NAN) : v;\n"
    "  pthread_barrier_wait(&emu_wbar[emu_tid / 32]);\n"
    "  return r;\n"
    "}\n"
    "typedef _Float16 __half;\n"
    "struct alignas(4) __half2 { __half x, y; };\n"
    "static inline float __half2float(__half h) { return (float)h; }\n"
    "static inline __half __float2half(float f) { return (__half)f; }\n"
    "static inline __half2 __halves2half2(__half a, __half b) { return {a, b}; }\n"
    "typedef void (*emu_body)(void **);\n"
    "struct emu_launch { emu_body fn; void **args; unsigned grid[3], block[3]; unsigned tid; };\n"
    "static void *emu_thread(void *p) {\n"
    "  emu_launch *L = (emu_launch *)p;\n"
    "  unsigned t = L->tid;\n"
    "  emu_tid = t;\n"
    "  threadIdx.x = t % L->block[0]; threadIdx.y = t / L->block[0] % L->block[1];\n"
    "  threadIdx.z = t / (L->block[0] * L->block[1]);\n"
    "  for (unsigned z = 0; z < L->grid[2]; z++) for (unsigned y = 0; y < L->grid[1]; y++)\n"
    "    for (unsigned x = 0; x < L->grid[0]; x++) {\n"
    "      blockIdx.x = x; blockIdx.y = y; blockIdx.z = z;\n"
    "      L->fn(L->args);\n"
    "      pthread_barrier_wait(&emu_bar); /* the block ends for every thread */\n"
    "    }\n"
    "  return 0;\n"
    "}\n"
    "static int emu_run(emu_body fn, void **args, const long long *launch) {\n"
    "  unsigned n = (unsigned)(launch[3] * launch[4] * launch[5]);\n"
    "  emu_nthreads = n;\n"
    "  pthread_barrier_init(&emu_bar, 0, n);\n"
    "  for (unsigned w = 0; w * 32 < n; w++) pthread_barrier_init(&emu_wbar[w], 0, n - w * 32 < 32 ? n - w * 32 : 32);\n"
    "  pthread_t *th = (pthread_t *)calloc(n, sizeof *th);\n"
    "  emu_launch *L = (emu_launch *)calloc(n, sizeof *L);\n"
    "  for (unsigned i = 0; i < n; i++) {\n"
    "    L[i].fn = fn; L[i].args = args; L[i].tid = i;\n"
    "    for (int d = 0; d < 3; d++) { L[i].grid[d] = (unsigned)launch[d]; L[i].block[d] = (unsigned)launch[3 + d]; }\n"
    "    if (pthread_create(&th[i], 0, emu_thread, &L[i])) return -1;\n"
    "  }\n"
    "  for (unsigned i = 0; i < n; i++) pthread_join(th[i], 0);\n"
    "  pthread_barrier_destroy(&emu_bar);\n"
    "  for (unsigned w = 0; w * 32 < n; w++) pthread_barrier_destroy(&emu_wbar[w]);\n"
    "  free(th); free(L);\n"
    "  return 0;\n"
    "}\n";

/* WMMA on the CPU (tensor-core kernels, search/rules/gpu_tensor_core.c): every
 * lane of a warp holds the whole 16x16 tile and does the whole warp-wide
 * operation itself (the lanes compute the same values, so their duplicate
 * stores are benign); fragment element [r][c] is row r, column c of the
 * operand (k x n for matrix_b). */
static const char emu_wmma[] =
    "typedef __half half;\n"
    "namespace nvcuda { namespace wmma {\n"
    "struct matrix_a {}; struct matrix_b {}; struct accumulator {}; struct row_major {}; struct col_major {};\n"
    "enum layout_t { mem_row_major, mem_col_major };\n"
    "template <typename U, int M, int N, int K, typename T, typename L = void> struct fragment { T x[256]; };\n"
    "template <typename L> struct emu_col { enum { v = 0 }; };\n"
    "template <> struct emu_col<col_major> { enum { v = 1 }; };\n"
    "template <typename U, typename T, typename L> static void fill_fragment(fragment<U, 16, 16, 16, T, L> &f, T v) {\n"
    "  for (int i = 0; i < 256; i++) f.x[i] = v; }\n"
    "template <typename U, typename T, typename L> static void load_matrix_sync(fragment<U, 16, 16, 16, T, L> &f,\n"
    "    const T *p, unsigned ldm) {\n"
    "  bool col = emu_col<L>::v;\n"
    "  for (int r = 0; r < 16; r++) for (int c = 0; c < 16; c++) f.x[r * 16 + c] = col ? p[c * ldm + r] : p[r * ldm + c]; }\n"
    "template <typename TA, typename LA, typename TB, typename LB>\n"
    "static void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, TA, LA> &a,\n"
    "    const fragment<matrix_b, 16, 16, 16, TB, LB> &b, const fragment<accumulator, 16, 16, 16, float> &c) {\n"
    "  float t[256];\n"
    "  for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) {\n"
    "    float s = c.x[i * 16 + j];\n"
    "    for (int k = 0; k < 16; k++) s += (float)a.x[i * 16 + k] * (float)b.x[k * 16 + j];\n"
    "    t[i * 16 + j] = s; }\n"
    "  for (int i = 0; i < 256; i++) d.x[i] = t[i]; }\n"
    "template <typename T> static void store_matrix_sync(T *p, const fragment<accumulator, 16, 16, 16, T> &f,\n"
    "    unsigned ldm, layout_t l) {\n"
    "  for (int r = 0; r < 16; r++) for (int c = 0; c < 16; c++)\n"
    "    (l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * 16 + c]; }\n"
    "} }\n";

/* Compiles m's source with the emulation and a launcher for f's params; runs
 * it on seeded inputs and compares every output with the interpreter on
 * orig. Returns false (with why) on a mismatch; skips (true, *ran false)
 * kernels it does not emulate. */
static bool emu_check(const ir_func *orig, const cg_cuda_module *m, char *why, size_t whyn, bool *ran) {
  *ran = false;
  const char *src = m->source;
  if (strstr(src, "__nv_bfloat16")) return true;
  char dir[] = "/tmp/tessel-cuda-emu-XXXXXX";
  ck_assert(mkdtemp(dir) != NULL);
  char cpp[128], so[128], cmd[512];
  snprintf(cpp, sizeof cpp, "%s/k.cpp", dir);
  snprintf(so, sizeof so, "%s/k.so", dir);
  FILE *f = fopen(cpp, "w");
  ck_assert(f != NULL);
  fputs(emu_header, f);
  if (strstr(src, "nvcuda::wmma")) fputs(emu_wmma, f);
  /* the source without its CUDA includes */
  for (const char *p = src; *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p + 1) : strlen(p);
    if (strncmp(p, "#include <cuda_", 15) != 0 && strncmp(p, "#include <mma.h>", 16) != 0) fwrite(p, 1, len, f);
    p += len;
  }
  /* the launcher: each kernel over its launch, in order */
  fprintf(f, "\n");
  for (int k = 0; k < m->nkernels; k++) {
    fprintf(f, "static void emu_k%d(void **a) { tessel_kernel%d(", k, k);
    for (int i = 0; i < orig->nparams; i++) {
      int code = orig->params[i]->dtype.code;
      const char *t = code == IR_F32 ? "float" : code == IR_I32 ? "int" : code == IR_I8 ? "signed char"
                      : code == IR_U8 ? "unsigned char" : code == IR_F16 ? "__half" : "float";
      fprintf(f, "%s(%s%s *)a[%d]", i ? ", " : "", i < orig->ninputs ? "const " : "", t, i);
    }
    fprintf(f, "); }\n");
  }
  fprintf(f, "extern \"C\" int emu_main(void **a) {\n");
  for (int k = 0; k < m->nkernels; k++)
    fprintf(f, "  if (emu_run(emu_k%d, a, tessel_launch + %d)) return -1;\n", k, 7 * k);
  fprintf(f, "  return 0;\n}\n");
  fclose(f);
  snprintf(cmd, sizeof cmd, "g++ -std=c++17 -O1 -w -shared -fPIC -pthread -o %s %s 2>%s/err.txt", so, cpp, dir);
  if (system(cmd) != 0) {
    char buf[2048] = "";
    snprintf(cmd, sizeof cmd, "%s/err.txt", dir);
    FILE *ef = fopen(cmd, "r");
    if (ef) {
      size_t n = fread(buf, 1, sizeof buf - 1, ef);
      buf[n] = 0;
      fclose(ef);
    }
    snprintf(why, whyn, "g++ could not compile the emulated kernel: %.1500s", buf);
    return false;
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(h != NULL, "%s", dlerror());
  int (*run)(void **) = (int (*)(void **))dlsym(h, "emu_main");
  ck_assert(run != NULL);
  int np = orig->nparams;
  ir_tensor ref[16], got[16];
  ck_assert(np <= 16);
  ts_diag d;
  ts_diag_clear(&d);
  ck_assert(ir_tensors_for_func(orig, NULL, ref, &d) == TS_OK);
  ck_assert(ir_tensors_for_func(orig, NULL, got, &d) == TS_OK);
  void *args[16];
  for (int i = 0; i < np; i++) {
    if (i < orig->ninputs) {
      ir_tensor_fill_random(&ref[i], 7 + (uint64_t)i);
      ir_tensor_fill_random(&got[i], 7 + (uint64_t)i);
    }
    args[i] = got[i].data;
  }
  ck_assert(ir_interp_run(orig, ref, &d) == TS_OK);
  bool ok = run(args) == 0;
  if (!ok) snprintf(why, whyn, "the emulated launch failed");
  for (int i = orig->ninputs; i < np && ok; i++) {
    double err = 0;
    if (!ir_tensor_allclose(&got[i], &ref[i], 1e-4, 1e-5, &err)) {
      snprintf(why, whyn, "output %s differs from the interpreter (max abs err %g)", orig->params[i]->name, err);
      ok = false;
    }
  }
  for (int i = 0; i < np; i++) {
    ir_tensor_free(&ref[i]);
    ir_tensor_free(&got[i]);
  }
  dlclose(h);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "[cuda] could not remove %s\n", dir);
  *ran = true;
  return ok;
}

static void emu_assert(const ir_func *orig, const cg_cuda_module *m, const char *what) {
  char why[2048] = "";
  bool ran = false;
  bool ok = emu_check(orig, m, why, sizeof why, &ran);
  if (!ok) fprintf(stderr, "---- %s (emulation failed)\n%s\n", what, m->source);
  ck_assert_msg(ok, "%s: %.800s", what, why);
  if (ran) fprintf(stderr, "[cuda] %-18s emulated on the CPU: outputs match the interpreter\n", what);
}

/* ---- tests -------------------------------------------------------------------------- */

START_TEST(test_every_workload_fallback) {
  int n = ir_workload_count();
  for (int w = 0; w < n; w++) {
    const ir_workload *wl = ir_workload_at(w);
    ts_arena *a = ts_arena_new();
    ir_func *orig;
    sch_state *s = tu_schedule(a, wl->name, &orig);
    gpu_fallback(s, 64);
    tu_assert_equivalent(orig, sch_func(s));
    cg_cuda_module m;
    emit_compile(sch_func(s), &m, wl->name);
    ck_assert_int_ge(m.nkernels, 1);
    ck_assert_int_eq(count(m.source, "__global__"), m.nkernels);
    ck_assert_int_eq(count(m.source, "__launch_bounds__("), m.nkernels);
    /* every kernel is launched with the bound extents */
    bool any_threads = false;
    for (int k = 0; k < m.nkernels; k++) any_threads |= m.kernels[k].block[0] == 64;
    ck_assert_msg(any_threads, "%s: no kernel has 64 threads", wl->name);
    fprintf(stderr, "[cuda] %-18s kernels %d, first grid %lld x block %lld%s\n", wl->name, m.nkernels,
            (long long)m.kernels[0].grid[0], (long long)m.kernels[0].block[0],
            cg_nvrtc_available() ? ", nvrtc ok" : " (nvrtc: built without CUDA, compile skipped)");
    cg_cuda_module_fini(&m);
    sch_free(s);
    ts_arena_free(a);
  }
}
END_TEST

/* The default GPU schedule of `tessel build --target cuda` (tuner/build_gpu.c)
 * for every workload at sizes that leave remainders: emitted, compiled by
 * NVRTC, and run on the CPU emulation against the interpreter. */
START_TEST(test_default_gpu_schedule_runs) {
  static const char *const extra[] = {"matmul:m=37,n=29,k=13", "softmax:m=7,n=300", "layernorm:m=5,n=129",
                                      "conv2d_nchw:n=1,c=3,h=9,w=11,k=5,r=3,s=3,stride=2,pad=1"};
  cg_target t = cuda_target();
  int n = ir_workload_count();
  for (int w = 0; w < n + 4; w++) {
    const char *spec = w < n ? ir_workload_at(w)->name : extra[w - n];
    ts_arena *a = ts_arena_new();
    ir_func *orig = tu_workload(a, spec);
    ts_diag_clear(&D);
    sch_traced *tr = sch_traced_new(orig, 1, &D);
    ck_assert_msg(tr != NULL, "%s", D.msg);
    tu_ok(tun_default_schedule(tr, &t, &D), &D);
    tu_assert_equivalent(orig, sch_traced_func(tr));
    cg_cuda_module m;
    emit_compile(sch_traced_func(tr), &m, spec);
    emu_assert(orig, &m, spec);
    cg_cuda_module_fini(&m);
    sch_traced_free(tr);
    ts_arena_free(a);
  }
}
END_TEST

START_TEST(test_tiled_matmul) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tiled_matmul(a, "matmul:m=64,n=64,k=32", &orig, 4, 8, 8);
  tu_assert_equivalent(orig, sch_func(s));
  cg_cuda_module m;
  emit_compile(sch_func(s), &m, "tiled matmul");
  emu_assert(orig, &m, "tiled matmul");
  const char *src = m.source;
  ck_assert_int_eq(m.nkernels, 1);
  /* launch: blocks of (4*4) x (8*4) -> grid 2 x 4, block 8 x 4 */
  ck_assert_int_eq(m.kernels[0].grid[0], 2);
  ck_assert_int_eq(m.kernels[0].grid[1], 4);
  ck_assert_int_eq(m.kernels[0].block[0], 8);
  ck_assert_int_eq(m.kernels[0].block[1], 4);
  ck_assert(strstr(src, "__launch_bounds__(32)") != NULL);
  ck_assert(strstr(src, "__shared__") != NULL);
  ck_assert_int_eq(count(src, "__shared__"), 2);
  ck_assert_int_eq(m.kernels[0].shared_bytes, (16 * 8 + 8 * 32) * 4);
  /* barriers: one after the fetches (RAW), one before the next k-tile's
   * fetch overwrites what this one reads (WAR) — exactly two */
  ck_assert_int_eq(m.nsyncs, 2);
  ck_assert_int_eq(count(src, "__syncthreads();"), 2);
  /* the first barrier comes after both shared stores and before the first
   * shared read in the compute */
  const char *s1 = strstr(src, "__syncthreads();");
  const char *s2 = strstr(s1 + 1, "__syncthreads();");
  const char *firstw = strstr(src, "_shared_");
  ck_assert(firstw != NULL);
  ck_assert_ptr_nonnull(s2);
  ck_assert(s1 < s2);
  /* the vectorized cooperative fetch reads global memory as float4 */
  ck_assert_int_ge(m.nvector, 2);
  ck_assert(strstr(src, "float4") != NULL);
  ck_assert(strstr(src, "#pragma unroll") != NULL);
  ck_assert(strstr(src, "blockIdx.y") && strstr(src, "threadIdx.y"));
  cg_cuda_module_fini(&m);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* the fp16 GEMM (f16 inputs, f32 accumulation) with the same schedule:
 * half loads, half2 vector accesses into shared memory */
START_TEST(test_tiled_matmul_f16) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tiled_matmul(a, "matmul_f16:m=64,n=64,k=32", &orig, 4, 8, 8);
  tu_assert_equivalent(orig, sch_func(s));
  cg_cuda_module m;
  emit_compile(sch_func(s), &m, "tiled matmul_f16");
  emu_assert(orig, &m, "tiled matmul_f16");
  ck_assert(strstr(m.source, "const __half *__restrict__ A") != NULL);
  ck_assert(strstr(m.source, "__half2") != NULL);
  ck_assert(strstr(m.source, "__half2float") != NULL);
  ck_assert_int_eq(m.nsyncs, 2);
  ck_assert_int_eq(m.kernels[0].shared_bytes, (16 * 8 + 8 * 32) * 2);
  cg_cuda_module_fini(&m);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* the barrier positions, checked by reading the kernel in order: W W sync R
 * within the k loop, and a sync at the top of the k loop body before W */
START_TEST(test_sync_order) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tiled_matmul(a, "matmul:m=32,n=32,k=64", &orig, 2, 4, 16);
  cg_cuda_module m;
  emit_compile(sch_func(s), &m, "sync order");
  emu_assert(orig, &m, "sync order");
  /* walk the source lines: record the sequence of events on shared buffers */
  char seq[256];
  int ns = 0;
  const char *p = m.source;
  while (*p && ns < 250) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)(len < 1023 ? len : 1023), p);
    if (strstr(line, "__syncthreads")) seq[ns++] = 'S';
    else if (strstr(line, "__shared__")) seq[ns++] = 'A';
    else if (strstr(line, "for (") && strstr(line, "k_0")) seq[ns++] = 'K';
    else if (strstr(line, "_shared_")) {
      const char *eq = strstr(line, " = ");
      const char *sh = strstr(line, "_shared_");
      seq[ns++] = (eq && sh < eq) ? 'W' : 'R';
    }
    if (!e) break;
    p = e + 1;
  }
  seq[ns] = 0;
  /* after the allocations: K (k-tile loop), S (WAR barrier), W.. , S, R.. */
  const char *k = strchr(seq, 'K');
  ck_assert_msg(k != NULL, "no k loop in %s\n%s", seq, m.source);
  const char *after = k + 1;
  ck_assert_msg(after[0] == 'S', "barrier at the top of the k loop expected: %s", seq);
  const char *w = strchr(after, 'W'), *s2 = strchr(after + 1, 'S'), *r = strchr(after, 'R');
  ck_assert_msg(w && s2 && r && w < s2 && s2 < r, "W...S...R expected: %s", seq);
  ck_assert_msg(strchr(s2 + 1, 'S') == NULL, "no third barrier: %s", seq);
  cg_cuda_module_fini(&m);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* Row reduction with the reduction loop bound to threadIdx.x: warp shuffles
 * (32 threads) and shuffles + shared memory across warps (128 threads). */
static void cross_thread_sum(int64_t threads, const char *spec) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, spec, &orig);
  sch_loop l[2];
  ck_assert_int_eq(tu_loops(s, "Y", l, 2), 2);
  sch_loop n[2];
  int64_t f[2] = {-1, threads};
  tu_ok(sch_split(s, l[1], 2, f, n, &D), &D);
  sch_loop order[2] = {n[1], n[0]};
  tu_ok(sch_reorder(s, 2, order, &D), &D);
  tu_ok(sch_bind(s, l[0], "blockIdx.x", &D), &D);
  tu_ok(sch_bind(s, n[1], "threadIdx.x", &D), &D);
  sch_block y, init;
  tu_ok(sch_get_block(s, "Y", &y, &D), &D);
  tu_ok(sch_decompose_reduction(s, y, n[1], &init, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
  cg_cuda_module m;
  emit_compile(sch_func(s), &m, spec);
  emu_assert(orig, &m, spec);
  ck_assert_int_eq(m.nshuffle, 1);
  ck_assert(strstr(m.source, "__shfl_down_sync") != NULL);
  ck_assert(strstr(m.source, "if (threadIdx.x == 0)") != NULL);
  ck_assert_int_eq(m.kernels[0].block[0], threads);
  if (threads > 32) ck_assert(strstr(m.source, "_redw") != NULL);
  cg_cuda_module_fini(&m);
  sch_free(s);
  ts_arena_free(a);
}
START_TEST(test_cross_thread_reduction) {
  cross_thread_sum(32, "reduce_sum:m=8,n=256");
  cross_thread_sum(128, "reduce_sum:m=8,n=512");
}
END_TEST

/* fp16 and fast math: a softmax-like exp in f16 through the float
 * intrinsics; a vectorized f16 copy as half2 */
START_TEST(test_fp16_and_fast_math) {
  static const char *src = "kernel h(A: f16[64, 64]) -> B: f16[64, 64] {\n"
                           "  B[i, j] = exp(A[i, j]) * A[i, j]\n"
                           "}\n";
  (void)src;
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "softmax:m=16,n=128", &orig);
  gpu_fallback(s, 16);
  cg_cuda_module m;
  emit_compile(sch_func(s), &m, "softmax fast math");
  ck_assert(strstr(m.source, "__expf(") != NULL);
  cg_cuda_module_fini(&m);
  cg_target t = cuda_target();
  cg_cuda_opts precise = {.precise_math = true};
  tu_ok(cg_cuda_emit(sch_func(s), &t, &precise, &m, &D), &D);
  ck_assert(strstr(m.source, "__expf(") == NULL);
  ck_assert(strstr(m.source, "expf(") != NULL);
  cg_cuda_module_fini(&m);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* WMMA: the four tessel.wmma.* calls over fragment buffers, one warp
 * (docs/TENSORIZE.md's conventions), emitted as nvcuda::wmma and compiled */
START_TEST(test_wmma_calls) {
  static const char *text =
      "func wm(A: f16[32, 16], B: f16[16, 16]) -> C: f32[32, 16] {\n"
      "  block root() {\n"
      "    for t in thread(0, 2, \"blockIdx.x\") {\n"
      "      for w in thread(0, 32, \"threadIdx.x\") {\n"
      "        block tile() {\n"
      "          alloc Af: f16[16, 16] scope(\"wmma.matrix_a\")\n"
      "          alloc Bf: f16[16, 16] scope(\"wmma.matrix_b\")\n"
      "          alloc Cf: f32[16, 16] scope(\"wmma.accumulator\")\n"
      "          eval call_extern(\"tessel.wmma.fill_fragment\", handle, access_ptr(Cf, 0, 2), 16, 16, 16, 0, 0.0f32)\n"
      "          eval call_extern(\"tessel.wmma.load_matrix_sync\", handle, access_ptr(Af, 0, 2), 16, 16, 16, 0, "
      "access_ptr(A, t * 256, 1), 16, \"row_major\")\n"
      "          eval call_extern(\"tessel.wmma.load_matrix_sync\", handle, access_ptr(Bf, 0, 2), 16, 16, 16, 0, "
      "access_ptr(B, 0, 1), 16, \"col_major\")\n"
      "          eval call_extern(\"tessel.wmma.mma_sync\", handle, access_ptr(Cf, 0, 3), 0, access_ptr(Af, 0, 1), 0, "
      "access_ptr(Bf, 0, 1), 0, access_ptr(Cf, 0, 3), 0)\n"
      "          eval call_extern(\"tessel.wmma.store_matrix_sync\", handle, access_ptr(Cf, 0, 1), 16, 16, 16, 0, "
      "access_ptr(C, t * 256, 2), 16, \"row_major\")\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule_text(a, text, &orig);
  cg_cuda_module m;
  emit_compile(sch_func(s), &m, "wmma");
  const char *src = m.source;
  ck_assert_int_eq(m.nwmma, 5);
  ck_assert(strstr(src, "#include <mma.h>") != NULL);
  ck_assert(strstr(src, "nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major>"));
  ck_assert(strstr(src, "nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::col_major>"));
  ck_assert(strstr(src, "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>"));
  ck_assert(strstr(src, "nvcuda::wmma::mma_sync(") && strstr(src, "nvcuda::wmma::store_matrix_sync("));
  ck_assert(strstr(src, "nvcuda::wmma::mem_row_major") != NULL);
  ck_assert_int_eq(m.kernels[0].block[0], 32);
  ck_assert_int_eq(m.kernels[0].grid[0], 2);
  cg_cuda_module_fini(&m);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* Tensor cores end to end without a GPU: candidates of the search's
 * tensor-core sketch (search/rules/gpu_tensor_core.c; shared tiles and
 * fragments compacted by lowering, access_ptr placed by the block regions,
 * tile-major fragment indexing, ldm from tessel.buffer_stride) emitted as
 * nvcuda::wmma, compiled by NVRTC and run on the CPU emulation (WMMA
 * emulated per lane) against the interpreter. */
START_TEST(test_tensor_core_candidates_run) {
  static const char *const specs[] = {"matmul_f16:m=48,n=32,k=64", "matmul_f16:m=64,n=96,k=32", "batch", "dense"};
  cg_target t = cuda_target();
  int ran = 0;
  for (size_t w = 0; w < sizeof specs / sizeof specs[0]; w++) {
    ts_arena *a = ts_arena_new();
    ir_func *orig;
    if (strcmp(specs[w], "batch") == 0 || strcmp(specs[w], "dense") == 0) {
      sch_state *s0 = tu_schedule_text(a, strcmp(specs[w], "batch") == 0 ? BATCH_F16 : DENSE_F16, &orig);
      sch_free(s0);
    } else {
      orig = tu_workload(a, specs[w]);
    }
    sch_trace **sk = NULL;
    int nsk = 0;
    ts_diag_clear(&D);
    tu_ok(srch_sketches(orig, &t, NULL, &sk, &nsk, &D), &D);
    int ntc = 0;
    for (int k = 0; k < nsk; k++) {
      bool tc = false;
      for (int i = 0; i < sch_trace_len(sk[k]); i++)
        tc |= sch_trace_inst(sk[k], i)->kind == SCH_I_TENSORIZE;
      if (!tc) continue;
      ntc++;
      for (uint64_t seed = 1; seed <= 4; seed++) {
        ts_diag_clear(&D);
        sch_traced *ts = srch_instantiate(sk[k], orig, &t, true, seed, &D);
        ck_assert_msg(ts != NULL, "%s seed %llu: %s", specs[w], (unsigned long long)seed, D.msg);
        char what[96];
        snprintf(what, sizeof what, "%s tc %llu", specs[w], (unsigned long long)seed);
        cg_cuda_module m;
        emit_compile(sch_traced_func(ts), &m, what);
        ck_assert(strstr(m.source, "nvcuda::wmma::mma_sync(") && strstr(m.source, "nvcuda::wmma::load_matrix_sync(") &&
                  strstr(m.source, "nvcuda::wmma::store_matrix_sync("));
        emu_assert(orig, &m, what);
        ran++;
        cg_cuda_module_fini(&m);
        sch_traced_free(ts);
      }
    }
    ck_assert_int_eq(ntc, 1);
    for (int k = 0; k < nsk; k++) sch_trace_free(sk[k]);
    ts_free(sk);
    ts_arena_free(a);
  }
  ck_assert_int_eq(ran, 16);
}
END_TEST

/* The emulation can fail: the same kernel launched over half its grid
 * leaves outputs unwritten, and the comparison says so. */
START_TEST(test_emulation_detects_wrong_code) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tiled_matmul(a, "matmul:m=64,n=64,k=32", &orig, 4, 8, 8);
  cg_cuda_module m;
  emit_compile(sch_func(s), &m, "tiled matmul (mutated)");
  char *p = strstr(m.source, "tessel_launch[7] = {2, 4,");
  ck_assert(p != NULL);
  p[strlen("tessel_launch[7] = {")] = '1'; /* grid.x 2 -> 1 */
  char why[2048] = "";
  bool ran = false;
  ck_assert(!emu_check(orig, &m, why, sizeof why, &ran));
  ck_assert_msg(strstr(why, "differs from the interpreter") != NULL, "%s", why);
  cg_cuda_module_fini(&m);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* Refusals with reasons on hand-written thread bindings: a barrier needed
 * inside a guarded (divergent) thread loop, and a loop bound to the tag of an
 * enclosing loop whose var it uses. */
START_TEST(test_refusals_bindings) {
  static const char *divergent =
      "func dv(A: f32[64]) -> B: f32[64] {\n"
      "  block root() {\n"
      "    for b in thread(0, 1, \"blockIdx.x\") {\n"
      "      block blk() {\n"
      "        alloc S: f32[64] scope(\"shared\")\n"
      "        for t in thread(0, 64, \"threadIdx.x\") {\n"
      "          block w(vt: S(0, 64) = t) {\n"
      "            reads A[vt]\n"
      "            writes S[vt]\n"
      "            S[vt] = A[vt]\n"
      "          }\n"
      "        }\n"
      "        for u in thread(0, 64, \"threadIdx.x\") {\n"
      "          if u < 32 {\n"
      "            block w2(vu: S(0, 64) = u) {\n"
      "              reads A[vu]\n"
      "              writes S[vu + 32]\n"
      "              S[vu + 32] = A[vu]\n"
      "            }\n"
      "            block r2(vu: S(0, 64) = u) {\n"
      "              reads S[63 - vu]\n"
      "              writes B[vu]\n"
      "              B[vu] = S[63 - vu]\n"
      "            }\n"
      "          }\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  static const char *nested =
      "func ns(A: f32[4, 4]) -> B: f32[4, 4] {\n"
      "  block root() {\n"
      "    for t in thread(0, 4, \"threadIdx.x\") {\n"
      "      for u in thread(0, 4, \"threadIdx.x\") {\n"
      "        block c(vt: S(0, 4) = t, vu: S(0, 4) = u) {\n"
      "          reads A[vt, vu]\n"
      "          writes B[vt, vu]\n"
      "          B[vt, vu] = A[vt, vu]\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  cg_target t = cuda_target();
  cg_cuda_module m;
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule_text(a, divergent, &orig);
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_cuda_emit(sch_func(s), &t, NULL, &m, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "__syncthreads") && strstr(D.msg, "divergent"), "%s", D.msg);
  sch_free(s);
  s = tu_schedule_text(a, nested, &orig);
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_cuda_emit(sch_func(s), &t, NULL, &m, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "same thread") && strstr(D.msg, "uses t"), "%s", D.msg);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

START_TEST(test_refusals) {
  cg_target t = cuda_target();
  cg_cuda_module m;
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  /* binding a reduction loop is refused by the schedule itself */
  sch_state *s = tu_schedule(a, "matmul:m=16,n=16,k=16", &orig);
  sch_loop l[3];
  tu_loops(s, "C", l, 3);
  ts_diag_clear(&D);
  ck_assert_int_ne(sch_bind(s, l[2], "blockIdx.x", &D), TS_OK);
  sch_free(s);
  /* parallel loops cannot run on cuda (cg_check's reason) */
  s = tu_schedule(a, "matmul:m=16,n=16,k=16", &orig);
  tu_loops(s, "C", l, 3);
  tu_ok(sch_parallel(s, l[0], &D), &D);
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_cuda_emit(sch_func(s), &t, NULL, &m, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "parallel"), "%s", D.msg);
  sch_free(s);
  /* too many threads per block */
  s = tu_schedule(a, "matmul:m=64,n=64,k=4", &orig);
  tu_loops(s, "C", l, 3);
  tu_ok(sch_bind(s, l[0], "threadIdx.y", &D), &D);
  tu_ok(sch_bind(s, l[1], "threadIdx.x", &D), &D);
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_cuda_emit(sch_func(s), &t, NULL, &m, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "4096") && strstr(D.msg, "1024"), "%s", D.msg);
  sch_free(s);
  /* a non-cuda target */
  cg_target llvm;
  tu_ok(cg_target_parse("llvm", &llvm, &D), &D);
  s = tu_schedule(a, "matmul:m=16,n=16,k=16", &orig);
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_cuda_emit(sch_func(s), &llvm, NULL, &m, &D), TS_EINVAL);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

START_TEST(test_odd_extents) {
  /* prime extents: splits leave predicates, guards stay correct */
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "matmul:m=13,n=17,k=7", &orig);
  gpu_fallback(s, 32);
  tu_assert_equivalent(orig, sch_func(s));
  cg_cuda_module m;
  emit_compile(sch_func(s), &m, "odd matmul");
  emu_assert(orig, &m, "odd matmul");
  ck_assert_int_eq(m.kernels[0].grid[0], (13 * 17 + 31) / 32);
  ck_assert(strstr(m.source, " < 221") != NULL); /* the split's predicate */
  cg_cuda_module_fini(&m);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

START_TEST(test_nvrtc_error_quotes_line) {
  if (!cg_nvrtc_available()) {
    fprintf(stderr, "[cuda] SKIP nvrtc error test: tessel was built without CUDA\n");
    cg_cuda_binary b;
    ts_diag_clear(&D);
    ck_assert_int_eq(cg_nvrtc_compile("x", "sm_90", true, &b, &D), TS_EUNSUPPORTED);
    ck_assert(strstr(D.msg, "built without CUDA") != NULL);
    return;
  }
  const char *src = "extern \"C\" __global__ void k(float *a) {\n"
                    "  a[0] = undefined_thing_42;\n"
                    "}\n";
  cg_cuda_binary b;
  ts_diag_clear(&D);
  ck_assert_int_ne(cg_nvrtc_compile(src, "sm_90", true, &b, &D), TS_OK);
  ck_assert_msg(strstr(D.msg, "undefined_thing_42") && strstr(D.msg, "2 |"), "%s", D.msg);
  cg_cuda_binary_fini(&b);
  /* PTX only for a virtual architecture */
  ts_diag_clear(&D);
  tu_ok(cg_nvrtc_compile("extern \"C\" __global__ void k(float *a) { a[0] = 1; }\n", "sm_80", false, &b, &D),
        &D);
  ck_assert(b.ptx && strstr(b.ptx, ".target sm_80"));
  ck_assert(b.cubin == NULL);
  cg_cuda_binary_fini(&b);
}
END_TEST

START_TEST(test_runtime_without_gpu) {
  tsrt_cuda_info info;
  ts_diag err = {0};
  int rc = tsrt_cuda_probe(&info, &err);
  if (rc != 0) {
    fprintf(stderr, "[cuda] SKIP GPU runtime tests: %s\n", err.msg);
    ck_assert(strstr(err.msg, "no GPU") != NULL);
    return;
  }
  fprintf(stderr, "[cuda] GPU: %s, %d SMs, cc %d.%d\n", info.name, info.sm_count, info.cc_major,
          info.cc_minor);
  ck_assert_int_gt(info.sm_count, 0);
  ck_assert_int_ge(info.max_threads_per_block, 1024);
}
END_TEST

/* The search's GPU sketches (search/rules/gpu_*.c) with sampled decisions:
 * every candidate the postprocessors accept is emitted, compiled by NVRTC
 * and, where emulated, run against the interpreter (suite 'slow'). */
START_TEST(test_sampled_gpu_candidates_run) {
  static const char *const specs[] = {"matmul:m=128,n=128,k=64", "batch_matmul:b=2,m=64,n=96,k=32",
                                      "conv2d_nchw:n=1,c=16,h=14,w=14,k=32", "softmax:m=8,n=128",
                                      "dense:m=64,n=96,k=40", "transpose:m=64,n=96",
                                      "reduce_sum:m=8,n=512", "layernorm:m=4,n=256"};
  cg_target t = cuda_target();
  int emitted = 0, rejected = 0;
  for (size_t w = 0; w < sizeof specs / sizeof specs[0]; w++) {
    ts_arena *a = ts_arena_new();
    ir_func *orig = tu_workload(a, specs[w]);
    sch_trace **sk = NULL;
    int nsk = 0;
    ts_diag_clear(&D);
    tu_ok(srch_sketches(orig, &t, NULL, &sk, &nsk, &D), &D);
    for (int k = 0; k < nsk; k++)
      for (uint64_t seed = 1, ok = 0; seed <= 12 && ok < 2; seed++) {
        ts_diag_clear(&D);
        sch_traced *tr = srch_instantiate(sk[k], orig, &t, true, seed * 7919 + (uint64_t)k, &D);
        if (!tr) {
          if (getenv("TESSEL_TEST_VERBOSE")) fprintf(stderr, "[cuda] %s sketch %d rejected: %s\n", specs[w], k, D.msg);
          rejected++;
          continue;
        }
        char what[128];
        snprintf(what, sizeof what, "%s sketch %d seed %llu", specs[w], k, (unsigned long long)seed);
        cg_cuda_module m;
        emit_compile(sch_traced_func(tr), &m, what);
        emu_assert(orig, &m, what);
        emitted++;
        ok++;
        cg_cuda_module_fini(&m);
        sch_traced_free(tr);
      }
    for (int k = 0; k < nsk; k++) sch_trace_free(sk[k]);
    ts_free(sk);
    ts_arena_free(a);
  }
  fprintf(stderr, "[cuda] sampled GPU candidates: %d emitted and checked, %d rejected by the postprocessors\n",
          emitted, rejected);
  ck_assert_int_gt(emitted, 6);
}
END_TEST

/* ---- cross-thread reductions with guards (odd extents) ------------------------
 * The reduction loop of block `name` split [-1, threads], the inner part moved
 * out and bound to threadIdx.x, the spatial loop to blockIdx.x, the init
 * decomposed in front of the threads: when threads does not divide the
 * extent (999), the update sits under `if (jo * threads + ji < 999)`; when
 * threads is not a multiple of 32 the last warp is partial. */
static void xreduce_block(sch_state *s, const char *name, int64_t threads) {
  sch_loop l[2];
  ck_assert_int_eq(tu_loops(s, name, l, 2), 2);
  sch_loop n[2];
  int64_t f[2] = {-1, threads};
  tu_ok(sch_split(s, l[1], 2, f, n, &D), &D);
  sch_loop order[2] = {n[1], n[0]};
  tu_ok(sch_reorder(s, 2, order, &D), &D);
  tu_ok(sch_bind(s, l[0], "blockIdx.x", &D), &D);
  tu_ok(sch_bind(s, n[1], "threadIdx.x", &D), &D);
  sch_block b, init;
  tu_ok(sch_get_block(s, name, &b, &D), &D);
  tu_ok(sch_decompose_reduction(s, b, n[1], &init, &D), &D);
}

/* An elementwise block's two loops fused, split by 128, bound. */
static void bind_elementwise(sch_state *s, const char *name) {
  sch_loop l[2], fused, parts[2];
  ck_assert_int_eq(tu_loops(s, name, l, 2), 2);
  tu_ok(sch_fuse(s, 2, l, &fused, &D), &D);
  int64_t f[2] = {-1, 128};
  tu_ok(sch_split(s, fused, 2, f, parts, &D), &D);
  tu_ok(sch_bind(s, parts[0], "blockIdx.x", &D), &D);
  tu_ok(sch_bind(s, parts[1], "threadIdx.x", &D), &D);
}

/* spec's reduction blocks red[0..nred) each over `threads` threads, the rest
 * elementwise; checked against the interpreter, compiled by NVRTC, run on the
 * emulation, and the text has one shuffle all-reduce per reduction. */
static void guarded_reduction(const char *spec, const char *const *red, int nred, const char *ew,
                              const int64_t *threads) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, spec, &orig);
  for (int i = 0; i < nred; i++) xreduce_block(s, red[i], threads[i]);
  if (ew) bind_elementwise(s, ew);
  tu_assert_equivalent(orig, sch_func(s));
  char what[160];
  snprintf(what, sizeof what, "%s t=%lld", spec, (long long)threads[0]);
  cg_cuda_module m;
  emit_compile(sch_func(s), &m, what);
  ck_assert_int_eq(m.nshuffle, nred);
  ck_assert_msg(count(m.source, "cross-thread reduction of") == nred, "%s", m.source);
  ck_assert(strstr(m.source, "__shfl_down_sync") != NULL);
  /* the guard of a split that does not divide 999 stays around the partial */
  if (999 % threads[0] != 0)
    ck_assert_msg(strstr(m.source, " < 999)") != NULL, "%s: no guard\n%s", what, m.source);
  bool any_big = false, any_partial = false;
  for (int i = 0; i < nred; i++) {
    any_big |= threads[i] > 32;
    any_partial |= threads[i] % 32 != 0 && threads[i] > 32;
  }
  if (any_big) ck_assert(strstr(m.source, "_redw") != NULL);
  if (any_partial) ck_assert_msg(strstr(m.source, "_wl") != NULL, "%s: no partial-warp lanes\n%s", what, m.source);
  emu_assert(orig, &m, what);
  cg_cuda_module_fini(&m);
  sch_free(s);
  ts_arena_free(a);
}

START_TEST(test_guarded_cross_thread_reduction) {
  static const char *const rs[] = {"Y"}, *const sm[] = {"mx", "s"}, *const ln[] = {"sm", "sq"};
  /* reduce_sum at m=7, n=999: 128 threads (guard, two warps' partials in
   * shared memory), 32 (one warp), 24 (a partial single warp), 999 (every
   * element its own thread, the last warp 7 lanes) */
  static const int64_t t128[] = {128}, t32[] = {32}, t24[] = {24}, t999[] = {999};
  guarded_reduction("reduce_sum:m=7,n=999", rs, 1, NULL, t128);
  guarded_reduction("reduce_sum:m=7,n=999", rs, 1, NULL, t32);
  guarded_reduction("reduce_sum:m=7,n=999", rs, 1, NULL, t24);
  guarded_reduction("reduce_sum:m=7,n=999", rs, 1, NULL, t999);
  /* softmax: max (identity -inf) and sum; layernorm: two sums, 1000 threads
   * for 999 elements (the last thread masked, a partial last warp) */
  static const int64_t sm_t[] = {256, 8}, ln_t[] = {1000, 96};
  guarded_reduction("softmax:m=7,n=999", sm, 2, "Y", sm_t);
  guarded_reduction("layernorm:m=7,n=999", ln, 2, "Y", ln_t);
}
END_TEST

/* The search's CrossThreadReduction sketch of the odd shapes: every sampled
 * thread count emits warp shuffles (no more refused "guarded update"). */
START_TEST(test_cross_thread_sketch_odd_shapes) {
  static const char *const specs[] = {"softmax:m=7,n=999", "layernorm:m=7,n=999", "reduce_sum:m=7,n=999"};
  cg_target t = cuda_target();
  for (size_t w = 0; w < sizeof specs / sizeof specs[0]; w++) {
    ts_arena *a = ts_arena_new();
    ir_func *orig = tu_workload(a, specs[w]);
    sch_trace **sk = NULL;
    int nsk = 0;
    ts_diag_clear(&D);
    tu_ok(srch_sketches(orig, &t, NULL, &sk, &nsk, &D), &D);
    int with_shuffles = 0;
    for (int k = 0; k < nsk; k++)
      for (uint64_t seed = 1; seed <= 1; seed++) {
        ts_diag_clear(&D);
        sch_traced *tr = srch_instantiate(sk[k], orig, &t, true, seed * 31 + (uint64_t)k, &D);
        if (!tr) continue;
        tu_assert_equivalent(orig, sch_traced_func(tr));
        char what[128];
        snprintf(what, sizeof what, "%s sketch %d seed %llu", specs[w], k, (unsigned long long)seed);
        cg_cuda_module m;
        emit_compile(sch_traced_func(tr), &m, what);
        if (m.nshuffle > 0) {
          with_shuffles++;
          ck_assert(strstr(m.source, "__shfl_down_sync") != NULL);
          ck_assert(strstr(m.source, " < 999)") != NULL);
        }
        cg_cuda_module_fini(&m);
        sch_traced_free(tr);
      }
    ck_assert_msg(with_shuffles > 0, "%s: no candidate with a warp all-reduce", specs[w]);
    for (int k = 0; k < nsk; k++) sch_trace_free(sk[k]);
    ts_free(sk);
    ts_arena_free(a);
  }
}
END_TEST

/* A cross-thread reduction the all-reduce cannot take is refused naming it:
 * a block with threadIdx.y as well. */
START_TEST(test_cross_thread_reduction_refused_2d) {
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule(a, "reduce_sum:m=4,n=64", &orig);
  sch_loop l[2], n[2];
  ck_assert_int_eq(tu_loops(s, "Y", l, 2), 2);
  int64_t f[2] = {-1, 32};
  tu_ok(sch_split(s, l[1], 2, f, n, &D), &D);
  sch_loop order[2] = {n[1], n[0]};
  tu_ok(sch_reorder(s, 2, order, &D), &D);
  tu_ok(sch_bind(s, l[0], "threadIdx.y", &D), &D);
  tu_ok(sch_bind(s, n[1], "threadIdx.x", &D), &D);
  sch_block b, init;
  tu_ok(sch_get_block(s, "Y", &b, &D), &D);
  tu_ok(sch_decompose_reduction(s, b, n[1], &init, &D), &D);
  tu_assert_equivalent(orig, sch_func(s));
  cg_target t = cuda_target();
  cg_cuda_module m;
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_cuda_emit(sch_func(s), &t, NULL, &m, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "cross-thread reduction of Y") && strstr(D.msg, "one-dimensional"), "%s", D.msg);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* ---- registers from the cubin -------------------------------------------------
 * cg_nvrtc_compile reads each kernel's registers (EIATTR_REGCOUNT of the
 * cubin's .nv.info) and spills (ptxas --verbose); cg_gpu_check_registers
 * refuses a kernel whose registers x threads exceed the register file, or
 * that spills more than the limit. */

/* Compiles src (NVRTC, sm_90, cubin); the binary's kernel `name`. */
static const cg_cuda_kernel_regs *compile_regs(const char *src, cg_cuda_binary *bin, const char *name) {
  ts_diag_clear(&D);
  tu_ok(cg_nvrtc_compile(src, "sm_90", true, bin, &D), &D);
  const cg_cuda_kernel_regs *r = cg_cuda_binary_kernel(bin, name);
  ck_assert_msg(r != NULL, "no %s in the cubin (%d kernels)", name, bin->nkernels);
  /* the cubin's count and ptxas's report agree */
  cg_cuda_kernel_regs *k = NULL;
  int n = 0;
  tu_ok(cg_cubin_kernel_regs(bin->cubin, bin->cubin_size, &k, &n, &D), &D);
  ck_assert_int_eq(n, bin->nkernels);
  cg_cuda_kernel_regs fromlog = *r;
  fromlog.regs = 0;
  fromlog.stack_bytes = 0;
  cg_ptxas_log_apply(bin->log, &fromlog, 1);
  ck_assert_msg(fromlog.regs == r->regs, "%s: cubin %d registers, ptxas log %d\n%s", name, r->regs, fromlog.regs,
                bin->log ? bin->log : "(no log)");
  ck_assert_int_eq(fromlog.stack_bytes, r->stack_bytes);
  ck_assert_int_ge(r->spill_store_bytes, 0);
  ts_free(k);
  return r;
}

/* A one-kernel module launching `threads` threads (for the register check). */
static cg_cuda_module one_kernel(int64_t threads) {
  cg_cuda_module m;
  memset(&m, 0, sizeof m);
  m.nkernels = 1;
  m.kernels[0].grid[0] = m.kernels[0].grid[1] = m.kernels[0].grid[2] = 1;
  m.kernels[0].block[0] = threads;
  m.kernels[0].block[1] = m.kernels[0].block[2] = 1;
  return m;
}

START_TEST(test_cubin_registers) {
  if (!cg_nvrtc_available()) {
    fprintf(stderr, "[cuda] SKIP register counts: tessel was built without CUDA (no cubin to read)\n");
    return;
  }
  /* a trivial kernel vs a 64-element register tile, fully unrolled */
  static const char *trivial = "extern \"C\" __global__ void tessel_kernel0(float *a) { a[threadIdx.x] = 1.0f; }\n";
  static const char *tile =
      "extern \"C\" __global__ void __launch_bounds__(128) tessel_kernel0(const float *__restrict__ a,\n"
      "    float *__restrict__ c) {\n"
      "  float r[64], acc[64];\n"
      "#pragma unroll\n"
      "  for (int i = 0; i < 64; i++) { r[i] = a[threadIdx.x + i * 128]; acc[i] = 0.0f; }\n"
      "  for (int k = 0; k < 32; k++) {\n"
      "#pragma unroll\n"
      "    for (int i = 0; i < 64; i++) acc[i] += r[i] * a[k * 64 + i];\n"
      "  }\n"
      "#pragma unroll\n"
      "  for (int i = 0; i < 64; i++) c[threadIdx.x + i * 128] = acc[i];\n"
      "}\n";
  cg_cuda_binary bt, bb;
  const cg_cuda_kernel_regs *rt = compile_regs(trivial, &bt, "tessel_kernel0");
  const cg_cuda_kernel_regs *rb = compile_regs(tile, &bb, "tessel_kernel0");
  fprintf(stderr, "[cuda] registers: trivial kernel %d, 64-element unrolled tile %d (spill %lld B)\n", rt->regs,
          rb->regs, (long long)rb->spill_store_bytes);
  ck_assert_int_gt(rt->regs, 0);
  ck_assert_int_ge(rb->regs, rt->regs + 64); /* the 64 accumulators live in registers */
  /* the register check: passes at the real file, refuses one register short */
  cg_cuda_module m = one_kernel(128);
  cg_gpu_limits lim;
  cg_target t = cuda_target();
  cg_gpu_limits_for_target(&t, &lim);
  ck_assert_int_eq(lim.max_regs_per_block, 65536);
  tu_ok(cg_gpu_check_registers(&m, &bb, &lim, &D), &D);
  lim.max_regs_per_block = (int64_t)rb->regs * 128 - 1;
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_gpu_check_registers(&m, &bb, &lim, &D), TS_EUNSUPPORTED);
  char want[96];
  snprintf(want, sizeof want, "kernel tessel_kernel0 uses %d registers per thread x 128 threads", rb->regs);
  ck_assert_msg(strstr(D.msg, want) != NULL, "%s", D.msg);
  /* a register file of sm_53/sm_62 is half */
  cg_target t62;
  ck_assert_int_eq(cg_target_parse("cuda -arch=sm_62", &t62, &D), TS_OK);
  cg_gpu_limits l62;
  cg_gpu_limits_for_target(&t62, &l62);
  ck_assert_int_eq(l62.max_regs_per_block, 32768);
  cg_cuda_binary_fini(&bt);
  cg_cuda_binary_fini(&bb);
}
END_TEST

/* Under __launch_bounds__(1024) ptxas must fit 64 registers per thread, so
 * a kernel wanting more spills: the spill limit refuses it, naming it. */
START_TEST(test_cubin_spills) {
  if (!cg_nvrtc_available()) {
    fprintf(stderr, "[cuda] SKIP spill counts: tessel was built without CUDA\n");
    return;
  }
  static const char *heavy =
      "extern \"C\" __global__ void __launch_bounds__(1024) tessel_kernel0(const float *__restrict__ a,\n"
      "    float *__restrict__ c) {\n"
      "  float acc[160];\n"
      "#pragma unroll\n"
      "  for (int i = 0; i < 160; i++) acc[i] = a[threadIdx.x * 160 + i];\n"
      "  for (int k = 0; k < 64; k++) {\n"
      "    const float x = a[k];\n"
      "#pragma unroll\n"
      "    for (int i = 0; i < 160; i++) acc[i] = acc[i] * x + acc[(i + 1) % 160];\n"
      "  }\n"
      "#pragma unroll\n"
      "  for (int i = 0; i < 160; i++) c[threadIdx.x * 160 + i] = acc[i];\n"
      "}\n";
  cg_cuda_binary b;
  const cg_cuda_kernel_regs *r = compile_regs(heavy, &b, "tessel_kernel0");
  fprintf(stderr, "[cuda] 1024 threads, 160 live floats: %d registers, %lld B spilled, %lld B reloaded\n", r->regs,
          (long long)r->spill_store_bytes, (long long)r->spill_load_bytes);
  ck_assert_int_le(r->regs, 64);
  ck_assert_int_gt(r->spill_store_bytes, 0);
  cg_cuda_module m = one_kernel(1024);
  cg_gpu_limits lim;
  cg_gpu_limits_default(&lim);
  lim.max_spill_bytes = r->spill_store_bytes; /* at the limit: accepted */
  tu_ok(cg_gpu_check_registers(&m, &b, &lim, &D), &D);
  lim.max_spill_bytes = r->spill_store_bytes - 1;
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_gpu_check_registers(&m, &b, &lim, &D), TS_EUNSUPPORTED);
  ck_assert_msg(strstr(D.msg, "kernel tessel_kernel0 spills") && strstr(D.msg, "1024 threads"), "%s", D.msg);
  lim.max_spill_bytes = -1; /* off */
  tu_ok(cg_gpu_check_registers(&m, &b, &lim, &D), &D);
  cg_cuda_binary_fini(&b);
}
END_TEST

/* The ELF reader refuses what is not a cubin, naming the problem. */
START_TEST(test_cubin_reader_refusals) {
  cg_cuda_kernel_regs *k = NULL;
  int n = -1;
  static const char junk[80] = "not an ELF file at all";
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_cubin_kernel_regs(junk, sizeof junk, &k, &n, &D), TS_EPARSE);
  ck_assert_msg(strstr(D.msg, "not an ELF") != NULL, "%s", D.msg);
  ck_assert_int_eq(cg_cubin_kernel_regs(junk, 10, &k, &n, &D), TS_EPARSE);
  ck_assert(k == NULL && n == 0);
  if (!cg_nvrtc_available()) return;
  cg_cuda_binary b;
  tu_ok(cg_nvrtc_compile("extern \"C\" __global__ void tessel_kernel0(float *a) { a[0] = 1; }\n", "sm_90", true,
                         &b, &D),
        &D);
  /* cut before the section headers (at the end of the file) */
  ts_diag_clear(&D);
  ck_assert_int_eq(cg_cubin_kernel_regs(b.cubin, b.cubin_size / 2, &k, &n, &D), TS_EPARSE);
  ck_assert_msg(strstr(D.msg, "cubin:") != NULL, "%s", D.msg);
  /* the whole one has the kernel */
  tu_ok(cg_cubin_kernel_regs(b.cubin, b.cubin_size, &k, &n, &D), &D);
  ck_assert_int_eq(n, 1);
  ck_assert_str_eq(k[0].name, "tessel_kernel0");
  ck_assert_int_gt(k[0].regs, 0);
  ts_free(k);
  cg_cuda_binary_fini(&b);
}
END_TEST

/* tessel build --target cuda's report: the tiled matmul's kernel has its
 * launch, registers and spills in the JSON and on the text lines. */
START_TEST(test_build_report_registers) {
  if (!cg_nvrtc_available()) {
    fprintf(stderr, "[cuda] SKIP build report: tessel was built without CUDA\n");
    return;
  }
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tiled_matmul(a, "matmul:m=64,n=64,k=32", &orig, 4, 8, 8);
  cg_target t = cuda_target();
  char dir[] = "/tmp/tessel-cuda-report-XXXXXX";
  ck_assert(mkdtemp(dir) != NULL);
  char path[128], txt[128];
  snprintf(path, sizeof path, "%s/k.cubin", dir);
  snprintf(txt, sizeof txt, "%s/report.txt", dir);
  FILE *f = fopen(txt, "w+");
  ck_assert(f != NULL);
  json_t *js = json_object();
  tu_ok(tun_build_cuda_report(sch_func(s), &t, path, f, js, &D), &D);
  json_t *k0 = json_array_get(json_object_get(js, "kernels"), 0);
  ck_assert(k0 != NULL);
  json_int_t regs = json_integer_value(json_object_get(k0, "registers"));
  ck_assert_int_gt(regs, 16); /* 16 accumulators per thread */
  ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(k0, "block"), 0)), 8);
  ck_assert_int_eq(json_integer_value(json_object_get(k0, "registers_per_block")), regs * 32);
  ck_assert(json_is_integer(json_object_get(k0, "spill_store_bytes")));
  rewind(f);
  char line[512] = "";
  ck_assert(fgets(line, sizeof line, f) != NULL);
  char want[64];
  snprintf(want, sizeof want, "%lld registers/thread", (long long)regs);
  ck_assert_msg(strstr(line, "tessel_kernel0: grid") && strstr(line, want), "%s", line);
  fclose(f);
  json_decref(js);
  unlink(path);
  unlink(txt);
  rmdir(dir);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* VerifyGPUCode compiles the candidate and checks its registers when the
 * tuner's check is installed (--gpu-regcheck): an architecture NVRTC cannot compile for then
 * fails in the postprocessor, which it does not without the switch. */
START_TEST(test_verify_gpu_code_registers) {
  if (!cg_nvrtc_available()) {
    fprintf(stderr, "[cuda] SKIP VerifyGPUCode registers: tessel was built without CUDA (the check is skipped)\n");
    return;
  }
  ts_arena *a = ts_arena_new();
  ir_func *orig = tu_workload(a, "reduce_sum:m=7,n=999");
  cg_target t = cuda_target();
  sch_trace **sk = NULL;
  int nsk = 0;
  tu_ok(srch_sketches(orig, &t, NULL, &sk, &nsk, &D), &D);
  ck_assert_int_ge(nsk, 1);
  srch_postproc_opts po = {.gpu_regcheck = tun_cuda_regcheck};
  ts_diag_clear(&D);
  sch_traced *tr = srch_instantiate_opts(sk[0], orig, &t, true, 5, &po, &D);
  ck_assert_msg(tr != NULL, "%s", D.msg);
  sch_traced_free(tr);
  cg_target old;
  ck_assert_int_eq(cg_target_parse("cuda -arch=sm_20", &old, &D), TS_OK);
  ts_diag_clear(&D);
  tr = srch_instantiate_opts(sk[0], orig, &old, true, 5, &po, &D);
  ck_assert_msg(tr == NULL && strstr(D.msg, "VerifyGPUCode") && strstr(D.msg, "sm_20"), "%s", D.msg);
  ts_diag_clear(&D);
  tr = srch_instantiate(sk[0], orig, &old, true, 5, &D);
  ck_assert_msg(tr != NULL, "%s", D.msg);
  sch_traced_free(tr);
  for (int k = 0; k < nsk; k++) sch_trace_free(sk[k]);
  ts_free(sk);
  ts_arena_free(a);
}
END_TEST

/* Pooling's cross-thread sketch keeps the init inside the thread loop (the
 * fused window cannot be decomposed): `if (first) Y = init; Y = op(Y, e)`.
 * The thread at the first iteration stores the init, the partials combine,
 * thread 0 applies the total after the barrier (__syncwarp within a warp,
 * __syncthreads beyond): outputs match the interpreter. */
START_TEST(test_cross_thread_pooling_init) {
  static const char *const specs[] = {"max_pool2d:n=1,c=3,h=9,w=9,r=3,s=3,stride=2,pad=1",
                                      "avg_pool2d:n=1,c=2,h=9,w=9,r=3,s=3,stride=2,pad=1",
                                      "max_pool2d:n=1,c=2,h=11,w=11,r=7,s=7,stride=2,pad=3"};
  cg_target t = cuda_target();
  int shuffles = 0, cross_warp = 0;
  for (size_t w = 0; w < sizeof specs / sizeof specs[0]; w++) {
    ts_arena *a = ts_arena_new();
    ir_func *orig = tu_workload(a, specs[w]);
    sch_trace **sk = NULL;
    int nsk = 0;
    tu_ok(srch_sketches(orig, &t, NULL, &sk, &nsk, &D), &D);
    for (uint64_t seed = 1; seed <= 3; seed++) {
      ts_diag_clear(&D);
      sch_traced *tr = srch_instantiate(sk[0], orig, &t, true, seed * 101, &D);
      if (!tr) continue;
      char what[160];
      snprintf(what, sizeof what, "%s seed %llu", specs[w], (unsigned long long)seed);
      cg_cuda_module m;
      emit_compile(sch_traced_func(tr), &m, what);
      if (m.nshuffle > 0) {
        shuffles++;
        cross_warp += strstr(m.source, "_redw") != NULL;
        ck_assert_msg(strstr(m.source, "__syncwarp") || strstr(m.source, "_redw"), "%s: no barrier before the total\n%s",
                      what, m.source);
        emu_assert(orig, &m, what);
      }
      cg_cuda_module_fini(&m);
      sch_traced_free(tr);
    }
    for (int k = 0; k < nsk; k++) sch_trace_free(sk[k]);
    ts_free(sk);
    ts_arena_free(a);
  }
  fprintf(stderr, "[cuda] pooling cross-thread candidates: %d with shuffles, %d across warps\n", shuffles, cross_warp);
  ck_assert_int_ge(shuffles, 3);
}
END_TEST

/* A store pinned to one thread (`if x == 0`) is not a cross-thread
 * reduction, also in a 2-d block: emitted as is (no shuffles, no refusal).
 * (The init is its own launch: under threadIdx.y but outside threadIdx.x
 * every x thread would run it, racing the update, as in TVM.) */
START_TEST(test_pinned_reduction_not_shuffled) {
  static const char *text =
      "func pin(A: f32[4, 8]) -> B: f32[4] {\n"
      "  block root() {\n"
      "    for y0 in thread(0, 4, \"threadIdx.x\") {\n"
      "      block bi(vy: S(0, 4) = y0) {\n"
      "        writes B[vy]\n"
      "        B[vy] = 0.0f32\n"
      "      }\n"
      "    }\n"
      "    for y in thread(0, 4, \"threadIdx.y\") {\n"
      "      for x in thread(0, 32, \"threadIdx.x\") {\n"
      "        if x == 0 {\n"
      "          for k in serial(0, 8) {\n"
      "            block b(vy: S(0, 4) = y, vk: R(0, 8) = k) {\n"
      "              reads B[vy], A[vy, vk]\n"
      "              writes B[vy]\n"
      "              B[vy] = B[vy] + A[vy, vk]\n"
      "            }\n"
      "          }\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n";
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule_text(a, text, &orig);
  cg_cuda_module m;
  emit_compile(sch_func(s), &m, "pinned update");
  ck_assert_int_eq(m.nshuffle, 0);
  ck_assert(strstr(m.source, "__shfl") == NULL);
  emu_assert(orig, &m, "pinned update");
  cg_cuda_module_fini(&m);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* Other dtypes: an i32 max (identity INT_MIN, int partials) run on the
 * emulation at 100 threads (a 4-lane last warp) and 20; an f16 sum (float
 * partials, __half2float in, __float2half out) compiled by NVRTC. */
START_TEST(test_cross_thread_reduction_dtypes) {
  static const char *imax = "kernel imax(X: i32[7, 999]) -> Y: i32[7] {\n"
                            "  Y[i] max= X[i, j]\n"
                            "}\n";
  static const char *hsum = "kernel hsum(X: f16[5, 99]) -> Y: f16[5] {\n"
                            "  Y[i] += X[i, j]\n"
                            "}\n";
  static const int64_t ts[] = {100, 20};
  for (int k = 0; k < 2; k++) {
    ts_arena *a = ts_arena_new();
    ir_func *orig;
    sch_state *s = tu_schedule_text(a, imax, &orig);
    xreduce_block(s, "Y", ts[k]);
    tu_assert_equivalent(orig, sch_func(s));
    char what[64];
    snprintf(what, sizeof what, "i32 max t=%lld", (long long)ts[k]);
    cg_cuda_module m;
    emit_compile(sch_func(s), &m, what);
    ck_assert_int_eq(m.nshuffle, 1);
    ck_assert_msg(strstr(m.source, "int _red0 = (int)(-2147483647 - 1);") && strstr(m.source, "tsl_max("),
                  "%s", m.source);
    emu_assert(orig, &m, what);
    cg_cuda_module_fini(&m);
    sch_free(s);
    ts_arena_free(a);
  }
  ts_arena *a = ts_arena_new();
  ir_func *orig;
  sch_state *s = tu_schedule_text(a, hsum, &orig);
  xreduce_block(s, "Y", 64);
  /* (not compared in the interpreter: the reordered sum rounds differently in f16) */
  cg_cuda_module m;
  emit_compile(sch_func(s), &m, "f16 sum t=64");
  ck_assert_int_eq(m.nshuffle, 1);
  ck_assert_msg(strstr(m.source, "float _red0") && strstr(m.source, "__shared__ float _redw0[2]") &&
                    strstr(m.source, "= __float2half((float)__half2float("),
                "%s", m.source);
  ck_assert_int_eq(m.kernels[0].shared_bytes, 8); /* two warps' float partials */
  cg_cuda_module_fini(&m);
  sch_free(s);
  ts_arena_free(a);
}
END_TEST

/* ---- cuBLAS as a library step ------------------------------------------------------ */
static const char *fake_cublas; /* argv: the stand-in libcublas (TESSEL_LIBCUBLAS) */

/* f's cuBLAS candidate built for cuda: one library step, no kernel, NVRTC
 * accepts the module, and the step run through runtime/cublas.c (on the
 * stand-in cuBLAS, host pointers) equals the interpreter. */
static void cublas_case(const ir_func *f, const char *what) {
  cg_target t = cuda_target();
  tun_lib_cand cs[TUN_LIB_MAX_CANDS];
  ck_assert_msg(tun_library_candidates(f, &t, cs, TUN_LIB_MAX_CANDS) == 1, "%s: one cuBLAS candidate", what);
  ck_assert_str_eq(cs[0].lib, "cublas");
  ck_assert_str_eq(cs[0].fn, "cublasSgemm");
  ts_diag_clear(&D);
  sch_traced *s = tun_library_schedule(f, &t, &cs[0], &D);
  ck_assert_msg(s != NULL, "%s: %s", what, D.msg);
  cg_cuda_module m;
  emit_compile(sch_traced_func(s), &m, what);
  ck_assert_int_eq(m.nkernels, 0);
  ck_assert_int_eq(m.nlibrary, 1);
  ck_assert_int_eq(m.nsteps, 1);
  ck_assert_int_eq(m.steps[0][0], TSRT_STEP_SGEMM);
  ck_assert_msg(strstr(m.source, "tessel_steps[12]") != NULL, "%s", m.source);
  int np = f->nparams;
  ir_tensor ref[4], got[4];
  ck_assert(np == 3);
  ck_assert(ir_tensors_for_func(f, NULL, ref, &D) == TS_OK);
  ck_assert(ir_tensors_for_func(f, NULL, got, &D) == TS_OK);
  unsigned long long ptr[4];
  for (int i = 0; i < np; i++) {
    if (i < f->ninputs) {
      ir_tensor_fill_random(&ref[i], 11 + (uint64_t)i);
      ir_tensor_fill_random(&got[i], 11 + (uint64_t)i);
    }
    ptr[i] = (unsigned long long)(uintptr_t)got[i].data;
  }
  ck_assert(ir_interp_run(f, ref, &D) == TS_OK);
  void *h = dlopen(fake_cublas, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(h != NULL, "%s", dlerror());
  int *calls = dlsym(h, "fake_cublas_calls");
  ck_assert(calls != NULL);
  int before = *calls;
  char err[300] = "";
  ck_assert_msg(tsrt_cublas_step(m.steps[0], ptr, np, err, sizeof err) == 0, "%s: %s", what, err);
  ck_assert_msg(*calls > before, "%s: the step called no cuBLAS product", what);
  double e = 0;
  ck_assert_msg(ir_tensor_allclose(&got[2], &ref[2], 1e-4, 1e-5, &e), "%s: differs from the interpreter by %g", what,
                e);
  fprintf(stderr, "[cuda] cuBLAS step %-34s equals the interpreter (max err %.2g)\n", what, e);
  tsrt_cublas_release();
  dlclose(h);
  for (int i = 0; i < np; i++) {
    ir_tensor_free(&ref[i]);
    ir_tensor_free(&got[i]);
  }
  cg_cuda_module_fini(&m);
  sch_traced_free(s);
}

START_TEST(test_cublas_library_step) {
  if (!fake_cublas) {
    fprintf(stderr, "[cuda] SKIP cuBLAS step: no stand-in libcublas given\n");
    return;
  }
  static const char *const specs[] = {"matmul:m=37,n=29,k=41", "dense:m=13,n=31,k=17,bias=0,act=none",
                                      "batch_matmul:b=3,m=7,n=5,k=11"};
  static const char *const dsl[] = {
      /* a weight without the batch: the batch folds into A's rows */
      "kernel fold(A: f32[3, 5, 7], B: f32[7, 11]) -> C: f32[3, 5, 11] { C[b, i, j] += A[b, i, k] * B[k, j] }",
      /* batched, B transposed */
      "kernel bt(A: f32[2, 9, 6], B: f32[2, 13, 6]) -> C: f32[2, 9, 13] { C[b, i, j] += A[b, i, k] * B[b, j, k] }"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    ts_arena *a = ts_arena_new();
    ir_func *f = NULL;
    ts_diag_clear(&D);
    ck_assert_msg(ir_workload_from_spec(a, specs[i], &f, &D) == TS_OK, "%s: %s", specs[i], D.msg);
    cublas_case(f, specs[i]);
    ts_arena_free(a);
  }
  for (size_t i = 0; i < sizeof dsl / sizeof dsl[0]; i++) {
    ts_arena *a = ts_arena_new();
    ir_func *f = NULL;
    ts_diag_clear(&D);
    ck_assert_msg(ir_parse_func(a, dsl[i], strlen(dsl[i]), "test", &f, &D) == TS_OK, "%s", D.msg);
    cublas_case(f, dsl[i][7] == 'f' ? "fold (batch into rows)" : "batched, B transposed");
    ts_arena_free(a);
  }
  /* no candidate where the step could not stand alone: a fused epilogue */
  ts_arena *a = ts_arena_new();
  ir_func *f = NULL;
  ck_assert(ir_workload_from_spec(a, "dense:m=8,n=8,k=8,bias=1,act=relu", &f, &D) == TS_OK);
  cg_target t = cuda_target();
  tun_lib_cand cs[TUN_LIB_MAX_CANDS];
  ck_assert_int_eq(tun_library_candidates(f, &t, cs, TUN_LIB_MAX_CANDS), 0);
  ts_arena_free(a);
}
END_TEST

static Suite *suite_slow(void) {
  Suite *s = suite_create("cuda_slow");
  TCase *tc = tcase_create("cuda_slow");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_sampled_gpu_candidates_run);
  suite_add_tcase(s, tc);
  return s;
}

static Suite *suite(void) {
  Suite *s = suite_create("cuda");
  TCase *tc = tcase_create("cuda");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_tiled_matmul);
  tcase_add_test(tc, test_sync_order);
  tcase_add_test(tc, test_tiled_matmul_f16);
  tcase_add_test(tc, test_cross_thread_reduction);
  tcase_add_test(tc, test_fp16_and_fast_math);
  tcase_add_test(tc, test_wmma_calls);
  tcase_add_test(tc, test_tensor_core_candidates_run);
  tcase_add_test(tc, test_refusals);
  tcase_add_test(tc, test_refusals_bindings);
  tcase_add_test(tc, test_emulation_detects_wrong_code);
  tcase_add_test(tc, test_odd_extents);
  tcase_add_test(tc, test_nvrtc_error_quotes_line);
  tcase_add_test(tc, test_runtime_without_gpu);
  tcase_add_test(tc, test_every_workload_fallback);
  tcase_add_test(tc, test_default_gpu_schedule_runs);
  suite_add_tcase(s, tc);
  /* guarded cross-thread reductions, registers from the cubin */
  TCase *rt = tcase_create("cuda_rt");
  tcase_set_timeout(rt, 120);
  tcase_add_test(rt, test_guarded_cross_thread_reduction);
  tcase_add_test(rt, test_cross_thread_sketch_odd_shapes);
  tcase_add_test(rt, test_cross_thread_reduction_refused_2d);
  tcase_add_test(rt, test_cross_thread_pooling_init);
  tcase_add_test(rt, test_pinned_reduction_not_shuffled);
  tcase_add_test(rt, test_cross_thread_reduction_dtypes);
  tcase_add_test(rt, test_cubin_registers);
  tcase_add_test(rt, test_cubin_spills);
  tcase_add_test(rt, test_cubin_reader_refusals);
  tcase_add_test(rt, test_build_report_registers);
  tcase_add_test(rt, test_verify_gpu_code_registers);
  tcase_add_test(rt, test_cublas_library_step);
  suite_add_tcase(s, rt);
  return s;
}

int main(int argc, char **argv) {
  if (!cg_nvrtc_available())
    fprintf(stderr, "[cuda] SKIP NVRTC compilation: tessel was built without CUDA (emission still tested)\n");
  bool slow = argc > 1 && strcmp(argv[1], "slow") == 0;
  if (argc > 1 && strstr(argv[1], "cublas")) { /* before anything opens cuBLAS: the choice is made once */
    fake_cublas = argv[1];
    setenv("TESSEL_LIBCUBLAS", fake_cublas, 1);
  }
  SRunner *r = srunner_create(slow ? suite_slow() : suite());
  srunner_run_all(r, CK_NORMAL);
  int nf = srunner_ntests_failed(r);
  srunner_free(r);
  return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
