/* llvm.h — the LLVM-C backend: lowered IR (codegen.h) to LLVM IR, optimised
 * with the new pass manager at O3, then either JIT-compiled in process, or
 * emitted as an object for any triple LLVM was built with (x86-64, aarch64)
 * and linked into a shared library with ld.lld.
 *
 * Every artifact exports the kernel through the runtime ABI
 * (codegen/runtime/runtime.h): `tessel_kernel_entry(void **args)` and
 * `tessel_kernel_meta` (names, dtypes and shapes of the params), so a loader
 * that has never seen the IR can allocate arguments. Parallel loops are
 * outlined into task functions called through tsrt_parallel_launch, which the
 * loading process provides (tessel and rpc_server export the runtime).
 * Math intrinsics (exp, log, tanh, erf, sigmoid, ...) are emitted as
 * vectorizable inline implementations, not libm calls. */
#ifndef TESSEL_CODEGEN_LLVM_H
#define TESSEL_CODEGEN_LLVM_H

#include "codegen/codegen.h"
#include "codegen/runtime/runtime.h"

/* Fills the host's triple, CPU and features where t leaves them empty, and
 * vector_bits / num_cores. */
ts_status cg_llvm_resolve_target(cg_target *t, ts_diag *d);

/* A JIT-compiled kernel in this process. */
typedef struct cg_jit cg_jit;
ts_status cg_llvm_jit(const cg_lowered *l, const cg_target *t, cg_jit **out, ts_diag *d);
tsrt_kernel_fn cg_jit_entry(const cg_jit *j);
const tsrt_kernel_meta *cg_jit_meta(const cg_jit *j);
void cg_jit_free(cg_jit *j);

/* Emits an object file (path) for t's triple. */
ts_status cg_llvm_emit_object(const cg_lowered *l, const cg_target *t, const char *path, ts_diag *d);
/* Emits and links a shared library (path) with ld.lld for t's triple. */
ts_status cg_llvm_build_shared(const cg_lowered *l, const cg_target *t, const char *path, ts_diag *d);
/* Textual LLVM IR (after optimisation when opt is true), heap string. */
char *cg_llvm_dump_ir(const cg_lowered *l, const cg_target *t, bool opt, ts_diag *d);

#endif
