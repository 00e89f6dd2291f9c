/* intrin.c — the tensor-intrinsic table (see intrin.h, docs/TENSORIZE.md):
 * descriptions and implementations as loop-IR script, stamped out per row
 * count by the macros below. docs/IR.md ("Notes by file") explains the
 * i8 x i8 VNNI compensation and the interleaving of B. */
#include "intrin.h"

#include <stdio.h>
#include <string.h>

#include "../parse.h"

/* ---- x86 AVX-512 ------------------------------------------------------------ */

#define RAMP16 "ramp(0, 1, 16)"
#define RAMP4 "ramp(0, 1, 4)"

/* The description of a matmul tile: C[i, j] += CV(A[i, k]) * CV(B[k, j])
 * over R rows, L columns and depth K (strings). SIG: the parameters and
 * result; BI: B's index ("vk, vj", or "vj, vk" for B given as [n, k]); CV:
 * a cast ("" for none). */
#define MATMUL_DESC(SIG, R, L, K, BI, CV)                                                      \
  "func desc(" SIG " {\n"                                                                       \
  "  block root() {\n"                                                                         \
  "    for i in serial(0, " R ") {\n"                                                          \
  "      for j in serial(0, " L ") {\n"                                                        \
  "        for k in serial(0, " K ") {\n"                                                      \
  "          block C(vi: S(0, " R ") = i, vj: S(0, " L ") = j, vk: R(0, " K ") = k) {\n"        \
  "            reads C[vi, vj], A[vi, vk], B[" BI "]\n"                                         \
  "            writes C[vi, vj]\n"                                                             \
  "            C[vi, vj] = C[vi, vj] + " CV "(A[vi, vk]) * " CV "(B[" BI "])\n"                  \
  "          }\n"                                                                              \
  "        }\n"                                                                                \
  "      }\n"                                                                                  \
  "    }\n"                                                                                    \
  "  }\n"                                                                                      \
  "}\n"

/* C[i, j] += A[i, k] * B[k, j] over rows R, L lanes, k = 1 (f32). */
#define FMA_DESC(R, L) \
  MATMUL_DESC("A: f32[" #R ", 1], B: f32[1, " #L "]) -> C: f32[" #R ", " #L "]", #R, #L, "1", "vk, vj", "")

/* One broadcast A element times a B row, fused into each C row. */
#define FMA_IMPL(R, L, RAMP)                                                             \
  "func impl(A: f32[" #R ", 1], B: f32[1, " #L "]) -> C: f32[" #R ", " #L "] {\n"        \
  "  block root() {\n"                                                                  \
  "    for r in unrolled(0, " #R ") {\n"                                                \
  "      C[r, " RAMP "] = fma(broadcast(A[r, 0], " #L "), B[0, " RAMP "], C[r, " RAMP "])\n" \
  "    }\n"                                                                             \
  "  }\n"                                                                               \
  "}\n"

/* C[i, j] += i32(A[i, k]) * i32(B[k, j]) over rows R, lanes L, k = 4. */
#define DOT_DESC(R, L, AT, BT)                                                                      \
  MATMUL_DESC("A: " AT "[" #R ", 4], B: " BT "[4, " #L "]) -> C: i32[" #R ", " #L "]", #R, #L, "4", \
              "vk, vj", "i32")

/* B's rows 0..3 interleaved: byte 4j+k = B[k, j] (i8x64). */
#define B_PACK16                                                                             \
  "call_extern(\"llvm.vector.interleave2\", i8x64, "                                         \
  "call_extern(\"llvm.vector.interleave2\", i8x32, B[0, " RAMP16 "], B[2, " RAMP16 "]), "    \
  "call_extern(\"llvm.vector.interleave2\", i8x32, B[1, " RAMP16 "], B[3, " RAMP16 "]))"

#define VPDPBUSD "\"llvm.x86.avx512.vpdpbusd.512\""

/* u8 x i8: one vpdpbusd per row. */
#define VNNI_U8_IMPL(R)                                                                      \
  "func impl(A: u8[" #R ", 4], B: i8[4, 16]) -> C: i32[" #R ", 16] {\n"                      \
  "  block root() {\n"                                                                      \
  "    for r in unrolled(0, " #R ") {\n"                                                    \
  "      C[r, " RAMP16 "] = call_extern(" VPDPBUSD ", i32x16, C[r, " RAMP16 "], "            \
  "broadcast(reinterpret(i32, A[r, " RAMP4 "]), 16), reinterpret(i32x16, " B_PACK16 "))\n"   \
  "    }\n"                                                                                 \
  "  }\n"                                                                                   \
  "}\n"

/* i8 x i8: (a + 128) x b, minus 128 x sum b (see the file comment). */
#define VNNI_I8_IMPL(R)                                                                      \
  "func impl(A: i8[" #R ", 4], B: i8[4, 16]) -> C: i32[" #R ", 16] {\n"                      \
  "  block root() {\n"                                                                      \
  "    for r in unrolled(0, " #R ") {\n"                                                    \
  "      C[r, " RAMP16 "] = call_extern(" VPDPBUSD ", i32x16, C[r, " RAMP16 "], "            \
  "broadcast(reinterpret(i32, A[r, " RAMP4 "] + broadcast(-128i8, 4)), 16), "               \
  "reinterpret(i32x16, " B_PACK16 ")) - call_extern(" VPDPBUSD ", i32x16, "                 \
  "broadcast(0i32, 16), broadcast(-2139062144i32, 16), reinterpret(i32x16, " B_PACK16 "))\n" \
  "    }\n"                                                                                 \
  "  }\n"                                                                                   \
  "}\n"

/* Packed B (the VNNI weight layout, TVM's dense_vnni): the weight [k, n]
 * re-laid as [n/16, k/4, 64] with byte 4j+kk of row (n/16, k/4) = B[4(k/4)+kk,
 * 16(n/16)+j] (docs/TENSORIZE.md, "Packed weights"), so one 64-byte load is
 * vpdpbusd's B operand. The description's B is one such row: [1, 1, 64]. */
#define DOT_PACKED_DESC(R, AT)                                                                  \
  MATMUL_DESC("A: " AT "[" #R ", 4], B: i8[1, 1, 64]) -> C: i32[" #R ", 16]", #R, "16", "4",   \
              "0, 0, vj * 4 + vk", "i32")

#define B_PACKED "reinterpret(i32x16, B[0, 0, ramp(0, 1, 64)])"

/* u8 x i8 on packed B: one load of B, one vpdpbusd per row. */
#define VNNI_U8_PACKED_IMPL(R)                                                                \
  "func impl(A: u8[" #R ", 4], B: i8[1, 1, 64]) -> C: i32[" #R ", 16] {\n"                    \
  "  block root() {\n"                                                                       \
  "    for r in unrolled(0, " #R ") {\n"                                                     \
  "      C[r, " RAMP16 "] = call_extern(" VPDPBUSD ", i32x16, C[r, " RAMP16 "], "             \
  "broadcast(reinterpret(i32, A[r, " RAMP4 "]), 16), " B_PACKED ")\n"                        \
  "    }\n"                                                                                  \
  "  }\n"                                                                                    \
  "}\n"

/* i8 x i8 on packed B with the +128 trick inside (for blocks whose A cannot
 * be shifted ahead: the compensation is subtracted at every call; the search
 * prefers ShiftToUnsigned + the u8 kernel, which hoists it). */
#define VNNI_I8_PACKED_IMPL(R)                                                                \
  "func impl(A: i8[" #R ", 4], B: i8[1, 1, 64]) -> C: i32[" #R ", 16] {\n"                    \
  "  block root() {\n"                                                                       \
  "    for r in unrolled(0, " #R ") {\n"                                                     \
  "      C[r, " RAMP16 "] = call_extern(" VPDPBUSD ", i32x16, C[r, " RAMP16 "], "             \
  "broadcast(reinterpret(i32, A[r, " RAMP4 "] + broadcast(-128i8, 4)), 16), " B_PACKED       \
  ") - call_extern(" VPDPBUSD ", i32x16, broadcast(0i32, 16), broadcast(-2139062144i32, 16), " \
  B_PACKED ")\n"                                                                             \
  "    }\n"                                                                                  \
  "  }\n"                                                                                    \
  "}\n"

/* Column sums of the packed weight (ShiftToUnsigned's B_sum block, k
 * outer as it makes it): Z[j] += Σk<4 i32(B[0, 0, 4j+k]) for 16 columns,
 * one vpdpbusd with an all-ones u8 operand. */
#define VNNI_COLSUM_DESC                                                                       \
  "func desc(B: i8[1, 1, 64]) -> Z: i32[16] {\n"                                              \
  "  block root() {\n"                                                                        \
  "    for j in serial(0, 16) {\n"                                                            \
  "      for k in serial(0, 4) {\n"                                                           \
  "        block Z(vk: R(0, 4) = k, vj: S(0, 16) = j) {\n"                                    \
  "          reads Z[vj], B[0, 0, vj * 4 + vk]\n"                                             \
  "          writes Z[vj]\n"                                                                  \
  "          Z[vj] = Z[vj] + i32(B[0, 0, vj * 4 + vk])\n"                                     \
  "        }\n"                                                                               \
  "      }\n"                                                                                 \
  "    }\n"                                                                                   \
  "  }\n"                                                                                     \
  "}\n"

#define VNNI_COLSUM_IMPL                                                                       \
  "func impl(B: i8[1, 1, 64]) -> Z: i32[16] {\n"                                              \
  "  block root() {\n"                                                                        \
  "    Z[" RAMP16 "] = call_extern(" VPDPBUSD ", i32x16, Z[" RAMP16 "], broadcast(16843009i32, 16), " \
  B_PACKED ")\n"                                                                              \
  "  }\n"                                                                                     \
  "}\n"

/* ---- AArch64 ------------------------------------------------------------------- */

/* B's rows 0..3 interleaved for 4 lanes: byte 4j+k = B[k, j] (T x16). */
#define B_PACK4(T)                                                                           \
  "call_extern(\"llvm.vector.interleave2\", " T "x16, "                                      \
  "call_extern(\"llvm.vector.interleave2\", " T "x8, B[0, " RAMP4 "], B[2, " RAMP4 "]), "    \
  "call_extern(\"llvm.vector.interleave2\", " T "x8, B[1, " RAMP4 "], B[3, " RAMP4 "]))"

/* sdot / udot: acc[j] += sum_k a.byte[4j+k] * b.byte[4j+k], with a = A's
 * row broadcast (4 bytes -> every lane). */
#define ARM_DOT_IMPL(R, T, OP)                                                                \
  "func impl(A: " T "[" #R ", 4], B: " T "[4, 4]) -> C: i32[" #R ", 4] {\n"                  \
  "  block root() {\n"                                                                       \
  "    for r in unrolled(0, " #R ") {\n"                                                     \
  "      C[r, " RAMP4 "] = call_extern(\"llvm.aarch64.neon." OP ".v4i32.v16i8\", i32x4, "     \
  "C[r, " RAMP4 "], reinterpret(" T "x16, broadcast(reinterpret(i32, A[r, " RAMP4 "]), 4)), " \
  B_PACK4(T) ")\n"                                                                           \
  "    }\n"                                                                                  \
  "  }\n"                                                                                    \
  "}\n"

/* ---- CUDA WMMA (TVM's wmma intrinsics; code generation is the CUDA back end's) ---- */

/* C += A . B on one 16x16x16 tile; T is the input type (f16 or bf16), BI
 * B's index: "vk, vj" for B[k, n], or "vj, vk" for B given as [n, k]
 * (dense's W[n, k]: C += A . B^T, its matrix_b fragment loaded col_major
 * from the [n, k] tile). */
#define WMMA_SYNC_SIG(T)                                                                         \
  "A: " T "[16, 16] scope(\"wmma.matrix_a\"), B: " T "[16, 16] scope(\"wmma.matrix_b\"))"            \
  " -> C: f32[16, 16] scope(\"wmma.accumulator\")"
#define WMMA_SYNC_DESC_B(T, BI) MATMUL_DESC(WMMA_SYNC_SIG(T), "16", "16", "16", BI, "f32")
#define WMMA_SYNC_DESC(T) WMMA_SYNC_DESC_B(T, "vk, vj")
#define WMMA_SYNC_TRANS_DESC(T) WMMA_SYNC_DESC_B(T, "vj, vk")

#define WMMA_SYNC_IMPL(T)                                                                       \
  "func impl(" WMMA_SYNC_SIG(T) " {\n"                                                           \
  "  block root() {\n"                                                                         \
  "    eval call_extern(\"tessel.wmma.mma_sync\", handle, access_ptr(C, 0, 3), 0, "            \
  "access_ptr(A, 0, 1), 0, access_ptr(B, 0, 1), 0, access_ptr(C, 0, 3), 0)\n"                  \
  "  }\n"                                                                                      \
  "}\n"

#define WMMA_FILL_DESC                                                                         \
  "func desc() -> C: f32[16, 16] scope(\"wmma.accumulator\") {\n"                              \
  "  block root() {\n"                                                                         \
  "    for i in serial(0, 16) {\n"                                                             \
  "      for j in serial(0, 16) {\n"                                                           \
  "        block C(vi: S(0, 16) = i, vj: S(0, 16) = j) {\n"                                    \
  "          writes C[vi, vj]\n"                                                               \
  "          C[vi, vj] = 0.0f32\n"                                                               \
  "        }\n"                                                                                \
  "      }\n"                                                                                  \
  "    }\n"                                                                                    \
  "  }\n"                                                                                      \
  "}\n"

#define WMMA_FILL_IMPL                                                                         \
  "func impl() -> C: f32[16, 16] scope(\"wmma.accumulator\") {\n"                              \
  "  block root() {\n"                                                                         \
  "    eval call_extern(\"tessel.wmma.fill_fragment\", handle, access_ptr(C, 0, 2), 16, 16, 16, " \
  "0, 0.0f32)\n"                                                                                 \
  "  }\n"                                                                                      \
  "}\n"

/* A 16x16 tile copied between memory and a fragment (TVM's wmma_load_16x16x16
 * / wmma_store_16x16x16): the description is the element-wise copy, the
 * implementation one load_matrix_sync / store_matrix_sync. The leading
 * dimension of the memory side is "tessel.buffer_stride" of its pointer
 * (dimension -2: the rows, counted from the last, so that a buffer with
 * leading batch dimensions gives its row stride too): lowering resolves it to the row stride of the buffer as
 * laid out after compaction (docs/TENSORIZE.md), as TVM binds the
 * description's symbolic stride after CompactBufferAllocation.
 * DSCOPE / SSCOPE: the scope clauses of the destination and the source ("": any
 * scope, global or shared). */
#define WMMA_COPY_FUNC(NAME, T, DSCOPE, SSCOPE)                                                     \
  "func " NAME "(S: " T "[16, 16]" SSCOPE ") -> D: " T "[16, 16]" DSCOPE " {\n"

#define WMMA_COPY_DESC(T, DSCOPE, SSCOPE)                                                           \
  WMMA_COPY_FUNC("desc", T, DSCOPE, SSCOPE)                                                         \
  "  block root() {\n"                                                                              \
  "    for i in serial(0, 16) {\n"                                                                  \
  "      for j in serial(0, 16) {\n"                                                                \
  "        block D(vi: S(0, 16) = i, vj: S(0, 16) = j) {\n"                                         \
  "          reads S[vi, vj]\n"                                                                     \
  "          writes D[vi, vj]\n"                                                                    \
  "          D[vi, vj] = S[vi, vj]\n"                                                               \
  "        }\n"                                                                                     \
  "      }\n"                                                                                       \
  "    }\n"                                                                                         \
  "  }\n"                                                                                           \
  "}\n"

#define WMMA_STRIDE(B) "call_extern(\"tessel.buffer_stride\", i32, access_ptr(" B ", 0, 1), -2)"

/* fragment <- shared memory, LAYOUT "row_major" / "col_major" */
#define WMMA_LOAD_IMPL(T, DSCOPE, LAYOUT)                                                           \
  WMMA_COPY_FUNC("impl", T, DSCOPE, " scope(\"shared\")")                                           \
  "  block root() {\n"                                                                              \
  "    eval call_extern(\"tessel.wmma.load_matrix_sync\", handle, access_ptr(D, 0, 2), 16, 16, 16, 0, " \
  "access_ptr(S, 0, 1), " WMMA_STRIDE("S") ", \"" LAYOUT "\")\n"                                    \
  "  }\n"                                                                                           \
  "}\n"

/* memory (any scope: global or shared) <- accumulator fragment */
#define WMMA_STORE_IMPL                                                                             \
  WMMA_COPY_FUNC("impl", "f32", "", " scope(\"wmma.accumulator\")")                                 \
  "  block root() {\n"                                                                              \
  "    eval call_extern(\"tessel.wmma.store_matrix_sync\", handle, access_ptr(S, 0, 1), 16, 16, 16, 0, " \
  "access_ptr(D, 0, 2), " WMMA_STRIDE("D") ", \"row_major\")\n"                                    \
  "  }\n"                                                                                           \
  "}\n"

#define SC_A " scope(\"wmma.matrix_a\")"
#define SC_B " scope(\"wmma.matrix_b\")"
#define SC_SH " scope(\"shared\")"
#define SC_ACC " scope(\"wmma.accumulator\")"

/* One table row per WMMA mma_sync (input type T, minimum arch SM, name
 * suffix SUF, description macro DESC) and per fragment load (WHICH: a, b
 * or b_trans; SC the fragment's scope; MAJOR its layout in memory). */
#define WMMA_MMA_ROW(T, SM, SUF, DESC) \
  {"cuda.wmma.mma_sync." T "f32.16x16x16" SUF, "cuda", SM, 16, 16, 16, DESC(T), WMMA_SYNC_IMPL(T)}
#define WMMA_LOAD_ROW(WHICH, T, SM, SC, MAJOR)                                                                \
  {"cuda.wmma.load_matrix_" WHICH "." T ".16x16", "cuda", SM, 16, 16, 0, WMMA_COPY_DESC(T, SC, SC_SH), \
   WMMA_LOAD_IMPL(T, SC, MAJOR)}

/* ---- x86 AVX2 (no VNNI): int8 through vpmaddwd ------------------------------------- *
 * Packed B as VNNI's with 8 lanes and depth 2: the weight [k, n] re-laid as
 * [n/8, k/2, 16] with byte 2j+kk of row (n/8, k/2) = B[2(k/2)+kk, 8(n/8)+j].
 * One 16-byte load, sign-extended to i16x16, is vpmaddwd's B operand; A's
 * two bytes of a row, broadcast as one i16 to 8 pairs (one vpbroadcastw from
 * memory) and then widened to i16 (zero- or sign-extended by A's type: one
 * vpmovzxbw / vpmovsxbw), its A operand (widening first, then broadcasting
 * the pair as an i32, made LLVM move it through a general register: movzwl,
 * vmovd, vpmovzxbw, vpbroadcastd per row and k pair). vpmaddwd sums
 * each lane's two i16 products into an i32: exact (|a*b| <= 255*128, two of
 * them fit an i16 pair's i32 sum), 16 multiply-adds per instruction. */
/* One vpmaddwd kernel per row of the tile: A (AT, its pair as the i16x16
 * operand AVAL) against B (BT, the operand BVAL), R rows by 8 columns. */
#define PMADDWD_DESC(R, AT, BT)                                                                  \
  MATMUL_DESC("A: " AT "[" #R ", 2], B: " BT "[1, 1, 16]) -> C: i32[" #R ", 8]", #R, "8", "2",  \
              "0, 0, vj * 2 + vk", "i32")

#define PMADDWD_IMPL(R, AT, BT, AVAL, BVAL)                                                      \
  "func impl(A: " AT "[" #R ", 2], B: " BT "[1, 1, 16]) -> C: i32[" #R ", 8] {\n"                \
  "  block root() {\n"                                                                         \
  "    for r in unrolled(0, " #R ") {\n"                                                       \
  "      C[r, ramp(0, 1, 8)] = C[r, ramp(0, 1, 8)] + call_extern(\"llvm.x86.avx2.pmadd.wd\", i32x8, " \
  AVAL ", " BVAL ")\n"                                                                         \
  "    }\n"                                                                                     \
  "  }\n"                                                                                       \
  "}\n"

/* A's two bytes broadcast as one i16, then widened by A's type. */
#define PMADDWD_A8(AT) "i16x16(reinterpret(" AT "x16, broadcast(reinterpret(i16, A[r, ramp(0, 1, 2)]), 8)))"

#define PMADDWD_PACKED_ROW(SIG, R, AT)                                                           \
  {"x86.avx2.pmaddwd." SIG ".packed." #R "x8x2", "x86_64", "avx2", R, 8, 2, PMADDWD_DESC(R, AT, "i8"), \
   PMADDWD_IMPL(R, AT, "i8", PMADDWD_A8(AT), "i16x16(B[0, 0, ramp(0, 1, 16)])")}

/* The same kernels on the weight stored as i16 at build time (.packed16:
 * the layout map widens it, docs/TENSORIZE.md "Packed weights"): B's 16
 * values are one plain 32-byte load, vpmaddwd's operand as it is (or its
 * memory operand), so per k pair an R-row tile widens only A's R pairs.
 * Exact for every i16 weight: |a·b| <= 255 * 32768, two of them fit an i32. */
#define PMADDWD_PACKED16_ROW(SIG, R, AT)                                                         \
  {"x86.avx2.pmaddwd." SIG ".packed16." #R "x8x2", "x86_64", "avx2", R, 8, 2, PMADDWD_DESC(R, AT, "i16"), \
   PMADDWD_IMPL(R, AT, "i16", PMADDWD_A8(AT), "B[0, 0, ramp(0, 1, 16)]")}

/* And with A widened once to i16 beforehand (a u8 or i8 activation stored
 * as i16 by a stage of its own: SetDType, docs/TENSORIZE.md "Activations
 * widened once"): A's pair is one i32 broadcast from memory (vpbroadcastd),
 * no widening in the kernel at all: per k pair an R x C tile is R·C
 * vpmaddwd + vpaddd and loads. */
#define PMADDWD_W16_ROW(R)                                                                       \
  {"x86.avx2.pmaddwd.i16i16.packed16." #R "x8x2", "x86_64", "avx2", R, 8, 2, PMADDWD_DESC(R, "i16", "i16"), \
   PMADDWD_IMPL(R, "i16", "i16", "reinterpret(i16x16, broadcast(reinterpret(i32, A[r, ramp(0, 1, 2)]), 8))", \
                "B[0, 0, ramp(0, 1, 16)]")}

/* A VNNI row on packed B: name x86.avx512.vnni.<SIG>.packed.<R>x16x4. */
#define VNNI_PACKED_ROW(SIG, R, AT, IMPL)                                                          \
  {"x86.avx512.vnni." SIG ".packed." #R "x16x4", "x86_64", "avx512f,avx512vnni", R, 16, 4, DOT_PACKED_DESC(R, AT), \
   IMPL(R)}

static const sch_intrin table[] = {
    {"x86.avx512.fma.f32.8x16x1", "x86_64", "avx512f", 8, 16, 1, FMA_DESC(8, 16), FMA_IMPL(8, 16, RAMP16)},
    {"x86.avx512.fma.f32.4x16x1", "x86_64", "avx512f", 4, 16, 1, FMA_DESC(4, 16), FMA_IMPL(4, 16, RAMP16)},
    {"x86.avx512.fma.f32.1x16x1", "x86_64", "avx512f", 1, 16, 1, FMA_DESC(1, 16), FMA_IMPL(1, 16, RAMP16)},
    {"x86.avx512.vnni.i8i8.8x16x4", "x86_64", "avx512f,avx512vnni", 8, 16, 4, DOT_DESC(8, 16, "i8", "i8"),
     VNNI_I8_IMPL(8)},
    {"x86.avx512.vnni.i8i8.4x16x4", "x86_64", "avx512f,avx512vnni", 4, 16, 4, DOT_DESC(4, 16, "i8", "i8"),
     VNNI_I8_IMPL(4)},
    {"x86.avx512.vnni.i8i8.1x16x4", "x86_64", "avx512f,avx512vnni", 1, 16, 4, DOT_DESC(1, 16, "i8", "i8"),
     VNNI_I8_IMPL(1)},
    {"x86.avx512.vnni.u8i8.8x16x4", "x86_64", "avx512f,avx512vnni", 8, 16, 4, DOT_DESC(8, 16, "u8", "i8"),
     VNNI_U8_IMPL(8)},
    {"x86.avx512.vnni.u8i8.4x16x4", "x86_64", "avx512f,avx512vnni", 4, 16, 4, DOT_DESC(4, 16, "u8", "i8"),
     VNNI_U8_IMPL(4)},
    {"x86.avx512.vnni.u8i8.1x16x4", "x86_64", "avx512f,avx512vnni", 1, 16, 4, DOT_DESC(1, 16, "u8", "i8"),
     VNNI_U8_IMPL(1)},
    VNNI_PACKED_ROW("u8i8", 8, "u8", VNNI_U8_PACKED_IMPL),
    VNNI_PACKED_ROW("u8i8", 4, "u8", VNNI_U8_PACKED_IMPL),
    VNNI_PACKED_ROW("u8i8", 1, "u8", VNNI_U8_PACKED_IMPL),
    VNNI_PACKED_ROW("i8i8", 8, "i8", VNNI_I8_PACKED_IMPL),
    VNNI_PACKED_ROW("i8i8", 4, "i8", VNNI_I8_PACKED_IMPL),
    VNNI_PACKED_ROW("i8i8", 1, "i8", VNNI_I8_PACKED_IMPL),
    {"x86.avx512.vnni.colsum.packed.16x4", "x86_64", "avx512f,avx512vnni", 1, 16, 4, VNNI_COLSUM_DESC,
     VNNI_COLSUM_IMPL},
    PMADDWD_PACKED_ROW("u8i8", 8, "u8"),
    PMADDWD_PACKED_ROW("u8i8", 4, "u8"),
    PMADDWD_PACKED_ROW("u8i8", 1, "u8"),
    PMADDWD_PACKED_ROW("i8i8", 8, "i8"),
    PMADDWD_PACKED_ROW("i8i8", 4, "i8"),
    PMADDWD_PACKED_ROW("i8i8", 1, "i8"),
    PMADDWD_PACKED16_ROW("u8i8", 4, "u8"),
    PMADDWD_PACKED16_ROW("u8i8", 1, "u8"),
    PMADDWD_PACKED16_ROW("i8i8", 4, "i8"),
    PMADDWD_PACKED16_ROW("i8i8", 1, "i8"),
    PMADDWD_W16_ROW(4),
    PMADDWD_W16_ROW(1),
    {"arm.neon.fma.f32.4x4x1", "aarch64", "neon", 4, 4, 1, FMA_DESC(4, 4), FMA_IMPL(4, 4, RAMP4)},
    {"arm.dotprod.sdot.i8i8.4x4x4", "aarch64", "neon,dotprod", 4, 4, 4, DOT_DESC(4, 4, "i8", "i8"),
     ARM_DOT_IMPL(4, "i8", "sdot")},
    {"arm.dotprod.sdot.i8i8.1x4x4", "aarch64", "neon,dotprod", 1, 4, 4, DOT_DESC(1, 4, "i8", "i8"),
     ARM_DOT_IMPL(1, "i8", "sdot")},
    {"arm.dotprod.udot.u8u8.1x4x4", "aarch64", "neon,dotprod", 1, 4, 4, DOT_DESC(1, 4, "u8", "u8"),
     ARM_DOT_IMPL(1, "u8", "udot")},
    WMMA_MMA_ROW("f16", "sm_70", "", WMMA_SYNC_DESC),
    WMMA_MMA_ROW("bf16", "sm_80", "", WMMA_SYNC_DESC),
    WMMA_MMA_ROW("f16", "sm_70", ".trans_b", WMMA_SYNC_TRANS_DESC),
    WMMA_MMA_ROW("bf16", "sm_80", ".trans_b", WMMA_SYNC_TRANS_DESC),
    {"cuda.wmma.fill.f32.16x16", "cuda", "sm_70", 16, 16, 0, WMMA_FILL_DESC, WMMA_FILL_IMPL},
    WMMA_LOAD_ROW("a", "f16", "sm_70", SC_A, "row_major"),
    WMMA_LOAD_ROW("b", "f16", "sm_70", SC_B, "row_major"),
    WMMA_LOAD_ROW("a", "bf16", "sm_80", SC_A, "row_major"),
    WMMA_LOAD_ROW("b", "bf16", "sm_80", SC_B, "row_major"),
    WMMA_LOAD_ROW("b_trans", "f16", "sm_70", SC_B, "col_major"),
    WMMA_LOAD_ROW("b_trans", "bf16", "sm_80", SC_B, "col_major"),
    {"cuda.wmma.store.f32.16x16", "cuda", "sm_70", 16, 16, 0, WMMA_COPY_DESC("f32", "", SC_ACC), WMMA_STORE_IMPL},
};

#define NTABLE ((int)(sizeof table / sizeof table[0]))

int sch_intrin_count(void) { return NTABLE; }

const sch_intrin *sch_intrin_at(int i) { return i >= 0 && i < NTABLE ? &table[i] : NULL; }

const sch_intrin *sch_intrin_get(const char *name) {
  for (int i = 0; name && i < NTABLE; i++)
    if (!strcmp(table[i].name, name)) return &table[i];
  return NULL;
}

ts_status sch_intrin_funcs(const sch_intrin *in, ts_arena *a, ir_func **desc, ir_func **impl,
                           ts_diag *d) {
  ts_status st = ir_parse_func(a, in->desc, strlen(in->desc), in->name, desc, d);
  if (st == TS_OK) st = ir_parse_func(a, in->impl, strlen(in->impl), in->name, impl, d);
  if (st != TS_OK) return st;
  if ((*desc)->nparams != (*impl)->nparams || (*desc)->ninputs != (*impl)->ninputs)
    return ts_diag_set(d, TS_EINTERNAL, "intrinsic %s: description and implementation differ in parameters",
                       in->name);
  return TS_OK;
}

/* ---- target features ------------------------------------------------------------- */

/* LLVM CPUs whose features we know (the ones a tuner names with -mcpu). */
static const struct {
  const char *cpu, *features;
} cpus[] = {
    {"znver4", "avx512f,avx512vnni,avx512bw,avx512vl,fma,avx2"},
    {"znver5", "avx512f,avx512vnni,avx512bw,avx512vl,fma,avx2"},
    {"sapphirerapids", "avx512f,avx512vnni,avx512bw,avx512vl,fma,avx2"},
    {"icelake-server", "avx512f,avx512vnni,avx512bw,avx512vl,fma,avx2"},
    {"icelake-client", "avx512f,avx512vnni,avx512bw,avx512vl,fma,avx2"},
    {"cascadelake", "avx512f,avx512vnni,avx512bw,avx512vl,fma,avx2"},
    {"skylake-avx512", "avx512f,avx512bw,avx512vl,fma,avx2"},
    {"neoverse-n1", "neon,dotprod"},
    {"neoverse-n2", "neon,dotprod"},
    {"neoverse-v1", "neon,dotprod"},
    {"cortex-a76", "neon,dotprod"},
    {"cortex-a78", "neon,dotprod"},
    {"apple-m1", "neon,dotprod"},
    {"cortex-a72", "neon"},
    {"cortex-a53", "neon"},
    {"generic", ""},
};

/* Is feature f (no sign) in list (comma separated, optional +/- signs)?
 * Returns 1 present, -1 explicitly disabled, 0 absent. */
static int has_feature(const char *list, const char *f, size_t fl) {
  int r = 0;
  for (const char *p = list; p && *p;) {
    while (*p == ',' || *p == ' ') p++;
    char sign = '+';
    if (*p == '+' || *p == '-') sign = *p++;
    const char *q = p;
    while (*q && *q != ',') q++;
    if ((size_t)(q - p) == fl && !strncmp(p, f, fl)) r = sign == '-' ? -1 : 1;
    p = q;
  }
  return r;
}

static bool arch_is(const char *arch, const char *want) {
  size_t n = strlen(want);
  if (!arch || strncmp(arch, want, n) != 0) return false;
  return arch[n] == 0 || arch[n] == '-';
}

bool sch_intrin_available(const sch_intrin *in, const char *arch, const char *cpu,
                          const char *features, const char *cuda_arch) {
  if (!in) return false;
  if (!strcmp(in->arch, "cuda")) {
    int want = 0, have = 0;
    if (!cuda_arch || sscanf(cuda_arch, "sm_%d", &have) != 1) return false;
    sscanf(in->features, "sm_%d", &want);
    return have >= want;
  }
  bool x86 = !strcmp(in->arch, "x86_64");
  if (!(x86 ? arch_is(arch, "x86_64") : arch_is(arch, "aarch64") || arch_is(arch, "arm64")))
    return false;
  const char *cpu_feats = NULL;
  for (size_t i = 0; cpu && i < sizeof cpus / sizeof cpus[0]; i++)
    if (!strcmp(cpus[i].cpu, cpu)) cpu_feats = cpus[i].features;
  for (const char *p = in->features; *p;) {
    const char *q = p;
    while (*q && *q != ',') q++;
    size_t fl = (size_t)(q - p);
    int h = has_feature(features, p, fl);
    /* neon is part of every AArch64 target LLVM builds for */
    bool implied = !x86 && fl == 4 && !strncmp(p, "neon", 4);
    if (h < 0 || (h == 0 && !implied && !(cpu_feats && has_feature(cpu_feats, p, fl) > 0))) return false;
    p = *q ? q + 1 : q;
  }
  return true;
}
