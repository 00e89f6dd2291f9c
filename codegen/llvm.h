/* llvm.h — the LLVM-C backend: lowered IR (codegen.h) to LLVM IR, optimised
 * at O3, then JIT-compiled in process or emitted as an object for any linked
 * triple (x86-64, aarch64) and linked into a shared library with ld.lld.
 * Every artifact exports the runtime's kernel ABI (runtime/runtime.h); each
 * build has its own LLVM context, so builds may run concurrently. The
 * kernel's contract: docs/TUNING.md ("Notes by file: codegen/"). */
#ifndef TESSEL_CODEGEN_LLVM_H
#define TESSEL_CODEGEN_LLVM_H

#include "codegen/codegen.h"
#include "runtime/runtime.h"

/* Fills the host's triple, CPU and features where t leaves them empty (a
 * CPU of "native" counts as empty), and vector_bits / num_cores: the widest
 * vectors from the features (avx512f 512, avx/avx2 256, aarch64 128; a
 * non-zero guess already in t is kept when the features say nothing, e.g. a
 * cross CPU named without -mattr), cores from sysconf on the host. A cross
 * triple without a CPU gets "generic". Errors: TS_EINVAL (not an LLVM
 * target), TS_EUNSUPPORTED (a triple this LLVM has no backend for). */
ts_status cg_llvm_resolve_target(cg_target *t, ts_diag *d);

/* A JIT-compiled kernel in this process. cg_llvm_jit takes the lowered
 * function (l->orig, or l->func when NULL, gives the metadata) and a target
 * (NULL or empty fields: the host), which must be the host's architecture.
 * On success *out owns the code; the entry and metadata pointers stay valid
 * until cg_jit_free. Errors: TS_EUNSUPPORTED (a cross target, thread-bound
 * loops, blocks left in the IR, handles), TS_EINVAL /
 * TS_ETYPE (malformed lowered IR, with the node named), TS_EINTERNAL (LLVM
 * rejected the module), TS_ENOMEM. */
typedef struct cg_jit cg_jit;
ts_status cg_llvm_jit(const cg_lowered *l, const cg_target *t, cg_jit **out, ts_diag *d);
tsrt_kernel_fn cg_jit_entry(const cg_jit *j);
const tsrt_kernel_meta *cg_jit_meta(const cg_jit *j);
void cg_jit_free(cg_jit *j);

/* Emits an object file (path) for t's triple. Errors as cg_llvm_jit (any
 * triple LLVM knows is fine), plus TS_EIO when the file cannot be written. */
ts_status cg_llvm_emit_object(const cg_lowered *l, const cg_target *t, const char *path, ts_diag *d);
/* Emits and links a shared library (path) with ld.lld for t's triple; the
 * runtime's and libc's symbols stay undefined for the loader. Errors as
 * cg_llvm_emit_object; a failing link is TS_EIO with the linker's output. */
ts_status cg_llvm_build_shared(const cg_lowered *l, const cg_target *t, const char *path, ts_diag *d);
/* A model artifact (runtime/model.h, docs/MODEL.md): kernels[i]
 * becomes kernel i (unique hidden symbols), the plan (plan->kernels is
 * ignored; nkernels counts kernels) and its weights are emitted as data, and
 * all of it is linked into one shared library at path for t. The plan is
 * checked first (TS_EINVAL with the reason); otherwise errors as
 * cg_llvm_build_shared, naming the kernel that failed. */
struct tsrt_model_plan;
ts_status cg_llvm_build_model(const struct tsrt_model_plan *plan, const cg_lowered *const *kernels,
                              int nkernels, const cg_target *t, const char *path, ts_diag *d);
/* True when this build of tessel links kernels against the C library lib
 * ("openblas": call_extern("cblas_*"), "dnnl": call_extern("dnnl_*")): such
 * a kernel's artifact (and a model holding one) links the library, found in
 * the directory the build found it in; nothing else does. */
bool cg_llvm_have_library(const char *lib);
/* Textual LLVM IR (after optimisation when opt is true): a heap string the
 * caller frees with ts_free, or NULL with d set. */
char *cg_llvm_dump_ir(const cg_lowered *l, const cg_target *t, bool opt, ts_diag *d);
/* Target assembly of the optimised module for t (any triple LLVM was built
 * with): a heap string the caller frees with ts_free, or NULL with d set
 * (errors as cg_llvm_emit_object). Tests grep it for instructions
 * (vpdpbusd, sdot, vfmadd...). */
char *cg_llvm_dump_asm(const cg_lowered *l, const cg_target *t, ts_diag *d);

#endif
