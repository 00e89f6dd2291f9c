/* f16_funcs.h — DSL texts of f16 kernels shared by the GPU tests
 * (tests/codegen/test_cuda.c, tests/search/test_gpu_tensor_core.c). */
#ifndef TESSEL_TESTS_UTIL_F16_FUNCS_H
#define TESSEL_TESTS_UTIL_F16_FUNCS_H

/* dense-like: Y = X . W^T with W[n, k] (the trans_b mma, matrix_b loaded col_major) */
static const char DENSE_F16[] =
    "func dn(X: f16[32, 32], W: f16[48, 32]) -> Y: f32[32, 48] {\n"
    "  block root() {\n"
    "    for i in serial(0, 32) {\n"
    "      for j in serial(0, 48) {\n"
    "        for k in serial(0, 32) {\n"
    "          block Y(vi: S(0, 32) = i, vj: S(0, 48) = j, vk: R(0, 32) = k) {\n"
    "            reads X[vi, vk], W[vj, vk]\n"
    "            writes Y[vi, vj]\n"
    "            init { Y[vi, vj] = 0.0f32 }\n"
    "            Y[vi, vj] = Y[vi, vj] + f32(X[vi, vk]) * f32(W[vj, vk])\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* an odd batch (3) of f16 matmuls, extents multiples of 16, two k tiles
 * (the batch goes to blockIdx.z, fragments take a leading dimension) */
static const char BATCH_F16[] =
    "func bmm(A: f16[3, 32, 32], B: f16[3, 32, 48]) -> C: f32[3, 32, 48] {\n"
    "  block root() {\n"
    "    for b in serial(0, 3) {\n"
    "      for i in serial(0, 32) {\n"
    "        for j in serial(0, 48) {\n"
    "          for k in serial(0, 32) {\n"
    "            block C(vb: S(0, 3) = b, vi: S(0, 32) = i, vj: S(0, 48) = j, vk: R(0, 32) = k) {\n"
    "              reads A[vb, vi, vk], B[vb, vk, vj]\n"
    "              writes C[vb, vi, vj]\n"
    "              init { C[vb, vi, vj] = 0.0f32 }\n"
    "              C[vb, vi, vj] = C[vb, vi, vj] + f32(A[vb, vi, vk]) * f32(B[vb, vk, vj])\n"
    "            }\n"
    "          }\n"
    "        }\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

#endif
