/* llvm_int.h — internals shared by the LLVM backend's files: llvm.c (targets,
 * target machines, the O3 pipeline, JIT, objects, shared libraries),
 * llvm_emit.c (lowered IR -> LLVM IR: functions, statements, expressions,
 * parallel outlining, the metadata global) and llvm_math.c (the inline,
 * vectorizable math intrinsics).
 *
 * Value representation in registers (the same everywhere in the backend):
 * bool is i1, integers are iN of their width (signedness lives in the IR
 * dtype, not the LLVM type), f32 is float, f64 is double, and f16 / bf16 are
 * carried as float holding a value already rounded to the narrow format —
 * every operation on them is done in f32 and rounded back (round-to-nearest-
 * even), which is exactly the reference interpreter's semantics because f32
 * has enough bits for the double rounding to be innocuous for + - * / sqrt.
 * In memory, bool is i8, f16 is half and bf16 is i16. A vector of L lanes is
 * <L x T> of the register type. */
#ifndef TESSEL_CODEGEN_LLVM_INT_H
#define TESSEL_CODEGEN_LLVM_INT_H

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "codegen/llvm.h"

/* A module being built: one LLVM context/module plus the handful of types,
 * declarations and target facts every function needs. */
typedef struct lx_mod {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  const cg_target *t;
  ts_diag *d;
  ts_status st;
  LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_half, t_f32, t_f64, t_ptr;
  LLVMValueRef fn_launch;  /* tsrt_parallel_launch (external) */
  LLVMValueRef fn_alloc;   /* tsrt_scratch_alloc (the runtime's) */
  LLVMValueRef fn_free;    /* tsrt_scratch_free (the runtime's) */
  unsigned md_loop;        /* kind id of !llvm.loop */
  int noutlined;           /* counter for outlined function names */
  char vec_bits_str[16];   /* "512": min-legal/prefer-vector-width */
} lx_mod;

/* A binding of an IR var or buffer to an LLVM value, in a scope stack. */
typedef struct lx_bind {
  const void *key; /* ir_var * or ir_buffer * */
  LLVMValueRef val;
} lx_bind;

/* One LLVM function being emitted. Scalars needing lazy evaluation branch;
 * vector lanes are masked (see llvm_emit.c). */
typedef struct lx_fn {
  lx_mod *m;
  LLVMValueRef fn;
  LLVMBuilderRef b;
  LLVMBasicBlockRef entry;  /* allocas go before its terminator */
  LLVMBasicBlockRef oom_bb; /* lazily created: returns -1 */
  int no_contract;          /* > 0: float ops get no `contract` (inside a float-to-integer cast) */
  lx_bind *binds;
  int nbinds, capbinds;
  int par_depth;            /* > 0 inside an outlined parallel body */
  int in_index;             /* > 0 while emitting a load/store index (nsw math) */
  int64_t unroll_budget;    /* pragma_auto_unroll_max_step in force (0: none) */
  /* the enclosing loops with constant bounds: var, first and last value
   * (a load under a select whose index they bound inside its buffer needs no
   * guard: llvm_emit.c safe_load) */
  const struct ir_var *rvar[32];
  int64_t rlo[32], rhi[32];
  int nrange;
} lx_fn;

/* ---- llvm.c: C libraries kernels may call ---------------------------------- */
/* The index of the C library whose functions' names start like name
 * (cblas_: OpenBLAS, dnnl_: oneDNN), or -1 (not one, or this build of tessel
 * did not find it). */
int cg_lx_extern_lib(const char *name);
/* Appends "-L DIR -l NAME" to argv (at most max entries) for each library the
 * lowered kernels call; returns how many entries it wrote. */
int cg_lx_link_libs(const cg_lowered *const *ls, int n, char **argv, int max);

/* ---- llvm_emit.c ---------------------------------------------------------- */
/* Builds the whole kernel (entry, body, outlined tasks, metadata global) for
 * l into m->mod. Errors: TS_EUNSUPPORTED (blocks, thread bindings,
 * handles), TS_EINVAL / TS_ETYPE (malformed lowered IR:
 * multi-index access, unbound var, lane mismatch), TS_ENOMEM. */
ts_status cg_lx_emit_module(lx_mod *m, const cg_lowered *l);

/* Helpers shared with llvm_math.c. */
LLVMTypeRef cg_lx_vec(LLVMTypeRef elem, int lanes);
int cg_lx_lanes(LLVMValueRef v);
/* A constant of type ty (scalar or vector; float or integer) with value v. */
LLVMValueRef cg_lx_constf(LLVMTypeRef ty, double v);
LLVMValueRef cg_lx_consti(LLVMTypeRef ty, int64_t v);
/* A constant global name in mod initialized to init (its type), with the
 * given linkage and alignment (0: the default). */
LLVMValueRef cg_lx_global(LLVMModuleRef mod, LLVMValueRef init, const char *name, LLVMLinkage link,
                          unsigned align);
/* Calls an overloaded intrinsic by name with the given overload types. */
LLVMValueRef cg_lx_intrin(lx_fn *f, const char *name, LLVMTypeRef *over, int nover,
                          LLVMValueRef *args, int nargs);

/* ---- llvm.c, for llvm_model.c ---------------------------------------------------- */
/* The resolved target (host details filled in) and its target machine. */
ts_status cg_lx_target_machine(const cg_target *tin, cg_target *t, LLVMTargetMachineRef *tm, ts_diag *d);
/* One kernel's optimised module in ctx (entry/metadata under the usual names). */
ts_status cg_lx_build_module(LLVMContextRef ctx, const cg_lowered *l, const cg_target *t,
                             LLVMTargetMachineRef tm, LLVMModuleRef *mod, ts_diag *d);
/* Runs argv capturing its output; the exit status or -1. */
int cg_lx_run_capture(char *const argv[], char *out, size_t n);

/* ---- llvm_math.c ---------------------------------------------------------- */
/* Emits intrinsic op over args (float registers: f32 or f64, scalar or
 * vector, all of one type). f32 exp/log/tanh/erf/sigmoid/pow are inline
 * polynomial code (relative error about 2e-7 for exp/log/tanh/erf); f64 ones
 * call the LLVM intrinsics / libm. pow_const, when not NULL, is the constant
 * exponent of a pow (small integer and half exponents become multiplies and
 * square roots). */
LLVMValueRef cg_lx_math(lx_fn *f, ir_intrin op, LLVMValueRef *args, int nargs,
                        const double *pow_const);

#endif
