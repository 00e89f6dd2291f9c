/* llvm.c — the LLVM backend's driver (see llvm.h): resolves targets against
 * the host, creates target machines, builds a module from lowered IR
 * (llvm_emit.c), verifies it, runs the new pass manager's default<O3>
 * pipeline with the target's TTI, and then either JIT-compiles it with ORC
 * LLJIT, writes an object file, links a shared library with ld.lld, or
 * prints the IR.
 *
 * Every build gets its own LLVMContext, so builds on different threads do
 * not share LLVM state (the JIT's context is an ORC thread-safe one). The
 * LLVM targets are initialised once (X86 and AArch64, the ones we link). */
#include <errno.h>
#include <fcntl.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "llvm_int.h"
#include "tessel_config.h"

#ifndef TESSEL_LLD
#define TESSEL_LLD "ld.lld-19"
#endif

extern char **environ;

/* The runtime's launch entry, when this process links the runtime: defined
 * in the JIT directly, so JIT kernels work even if the executable does not
 * export its symbols (-rdynamic). A weak reference does not pull the runtime
 * in; without it, the process search below must find the symbol. */
extern int32_t tsrt_parallel_launch(tsrt_task_fn fn, void *closure, int32_t num_tasks)
    __attribute__((weak));
extern void *tsrt_scratch_alloc(uint64_t bytes) __attribute__((weak));
extern void tsrt_scratch_free(void *p) __attribute__((weak));
extern int32_t tsrt_dnnl_conv2d_f32(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                    int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                    const float *, const float *, float *) __attribute__((weak));
extern int32_t tsrt_dnnl_sgemm_packed(int64_t, int64_t, int64_t, int64_t, const float *, const float *, float *)
    __attribute__((weak));

/* ---- initialisation and targets ---------------------------------------------- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_llvm(void) {
  LLVMInitializeX86TargetInfo();
  LLVMInitializeX86Target();
  LLVMInitializeX86TargetMC();
  LLVMInitializeX86AsmPrinter();
  LLVMInitializeAArch64TargetInfo();
  LLVMInitializeAArch64Target();
  LLVMInitializeAArch64TargetMC();
  LLVMInitializeAArch64AsmPrinter();
}

static void ensure_init(void) { pthread_once(&init_once, init_llvm); }

static void copy_str(char *dst, size_t n, const char *s) {
  snprintf(dst, n, "%s", s ? s : "");
}

/* Whether a feature list ("+avx2,-avx512f,...") enables name. */
static bool has_feature(const char *feats, const char *name) {
  size_t n = strlen(name);
  for (const char *p = feats; *p;) {
    const char *q = strchr(p, ',');
    size_t len = q ? (size_t)(q - p) : strlen(p);
    if (len == n + 1 && p[0] == '+' && !strncmp(p + 1, name, n)) return true;
    if (!q) break;
    p = q + 1;
  }
  return false;
}

/* Host features fit cg_target.attrs (512 bytes) when only the enabled ones
 * are kept, plus the disabled SIMD families a CPU name would otherwise imply
 * (a VM that masks AVX-512 on a znver4). */
static void host_features(char *dst, size_t n) {
  char *all = LLVMGetHostCPUFeatures();
  size_t len = 0;
  dst[0] = '\0';
  if (strlen(all) < n) {
    copy_str(dst, n, all);
    LLVMDisposeMessage(all);
    return;
  }
  static const char *const keep_off[] = {"-avx512f", "-avx512bw", "-avx512vl", "-avx512dq", "-evex512",
                                         "-avx2",    "-avx",      "-fma",      "-f16c"};
  char *save = NULL;
  for (int pass = 0; pass < 2; pass++) {
    char *copy = ts_strdup(all);
    if (!copy) break;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      bool take = pass == 0 ? tok[0] == '+' : false;
      if (pass == 1)
        for (size_t i = 0; i < sizeof keep_off / sizeof *keep_off; i++)
          if (!strcmp(tok, keep_off[i])) take = true;
      size_t tl = strlen(tok);
      if (!take || len + tl + 2 > n) continue;
      if (len) dst[len++] = ',';
      memcpy(dst + len, tok, tl + 1);
      len += tl;
    }
    ts_free(copy);
  }
  LLVMDisposeMessage(all);
}

static bool triple_is_host(const char *triple) {
  if (!triple[0]) return true;
  char *host = LLVMGetDefaultTargetTriple();
  char *a = LLVMNormalizeTargetTriple(triple), *b = LLVMNormalizeTargetTriple(host);
  /* compare arch and OS; vendors differ harmlessly (x86_64-pc-linux-gnu vs -linux-gnu) */
  char aa[64], ba[64];
  sscanf(a, "%63[^-]", aa);
  sscanf(b, "%63[^-]", ba);
  bool same = !strcmp(aa, ba) && (strstr(a, "linux") != NULL) == (strstr(b, "linux") != NULL);
  LLVMDisposeMessage(a);
  LLVMDisposeMessage(b);
  LLVMDisposeMessage(host);
  return same;
}

ts_status cg_llvm_resolve_target(cg_target *t, ts_diag *d) {
  ensure_init();
  if (t->kind != CG_TARGET_LLVM)
    return ts_diag_set(d, TS_EINVAL, "target %s is not an LLVM target", t->text[0] ? t->text : "?");
  bool host = triple_is_host(t->triple);
  bool host_cpu = false;
  if (!t->triple[0]) {
    char *tr = LLVMGetDefaultTargetTriple();
    copy_str(t->triple, sizeof t->triple, tr);
    LLVMDisposeMessage(tr);
  }
  LLVMTargetRef target;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(t->triple, &target, &err)) {
    ts_status st = ts_diag_set(d, TS_EUNSUPPORTED, "LLVM target for triple %s: %s (this build has "
                               "x86-64 and aarch64)", t->triple, err ? err : "unknown");
    LLVMDisposeMessage(err);
    return st;
  }
  /* "native" (or nothing) on the host: this machine's CPU and features */
  if (!strcmp(t->cpu, "native")) t->cpu[0] = '\0';
  if (!t->cpu[0]) {
    if (host) {
      char *cpu = LLVMGetHostCPUName();
      copy_str(t->cpu, sizeof t->cpu, cpu);
      LLVMDisposeMessage(cpu);
      host_cpu = true;
    } else {
      copy_str(t->cpu, sizeof t->cpu, "generic");
    }
  } else if (host) {
    char *cpu = LLVMGetHostCPUName();
    host_cpu = !strcmp(cpu, t->cpu);
    LLVMDisposeMessage(cpu);
  }
  bool filled = false;
  if (!t->attrs[0] && host_cpu) {
    host_features(t->attrs, sizeof t->attrs);
    filled = true;
  }
  /* LLVM 19 gives AVX-512 its 512-bit registers only with "evex512", which
   * a CPU without AVX-512 (znver3 as the host, say) does not imply: an explicit
   * +avx512f on such a CPU would otherwise abort the backend on zmm code. */
  if (has_feature(t->attrs, "avx512f") && !strstr(t->attrs, "evex512")) {
    size_t n = strlen(t->attrs);
    if (n + sizeof ",+evex512" > sizeof t->attrs)
      return ts_diag_set(d, TS_EINVAL, "target %s: its feature list is too long", t->text[0] ? t->text : "?");
    memcpy(t->attrs + n, ",+evex512", sizeof ",+evex512");
  }
  /* Widest vectors: from the features when we know them (the host's, or
   * explicit -mattr); a guess from the target string (cg_target_parse
   * knows CPU names) is kept only when the features say nothing. */
  int from_attrs = 0;
  if (has_feature(t->attrs, "avx512f")) from_attrs = 512;
  else if (has_feature(t->attrs, "avx2") || has_feature(t->attrs, "avx")) from_attrs = 256;
  else if (filled || !strncmp(t->triple, "aarch64", 7) || !strncmp(t->triple, "arm64", 5)) from_attrs = 128;
  if (from_attrs && (filled || t->vector_bits <= 0 || from_attrs > t->vector_bits))
    t->vector_bits = from_attrs;
  if (t->vector_bits <= 0) t->vector_bits = 128;
  if (t->num_cores <= 0 && host) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    t->num_cores = n > 0 ? (int)n : 1;
  }
  return TS_OK;
}

static ts_status make_tm(const cg_target *t, LLVMTargetMachineRef *out, ts_diag *d) {
  LLVMTargetRef target;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(t->triple, &target, &err)) {
    ts_status st = ts_diag_set(d, TS_EUNSUPPORTED, "LLVM target for triple %s: %s", t->triple,
                               err ? err : "unknown");
    LLVMDisposeMessage(err);
    return st;
  }
  *out = LLVMCreateTargetMachine(target, t->triple, t->cpu, t->attrs, LLVMCodeGenLevelAggressive,
                                 LLVMRelocPIC, LLVMCodeModelDefault);
  if (!*out) return ts_diag_set(d, TS_EUNSUPPORTED, "no target machine for %s / %s", t->triple, t->cpu);
  return TS_OK;
}

/* ---- building a module ------------------------------------------------------------ */

/* The target with host details filled in (a copy: the caller's is const). */
static ts_status resolved(const cg_target *t, cg_target *out, ts_diag *d) {
  if (t) *out = *t;
  else {
    memset(out, 0, sizeof *out);
    out->kind = CG_TARGET_LLVM;
  }
  return cg_llvm_resolve_target(out, d);
}

static bool debug_codegen(void) {
  return ts_debug("codegen");
}

/* LLVM's remarks and warnings (e.g. "loop not vectorized" for a
 * vectorized-loop hint it could not honour: the loop then runs serially,
 * which is the documented fallback) go to stderr only with
 * TESSEL_DEBUG=codegen; errors always do. */
static void diag_handler(LLVMDiagnosticInfoRef di, void *opaque) {
  (void)opaque;
  if (LLVMGetDiagInfoSeverity(di) != LLVMDSError && !debug_codegen()) return;
  char *s = LLVMGetDiagInfoDescription(di);
  fprintf(stderr, "[codegen] llvm: %s\n", s);
  LLVMDisposeMessage(s);
}

/* Builds, verifies and (when opt) optimises l into a fresh module in ctx.
 * On success *mod is owned by the caller. */
static ts_status build(LLVMContextRef ctx, const cg_lowered *l, const cg_target *t,
                       LLVMTargetMachineRef tm, bool opt, LLVMModuleRef *mod, ts_diag *d) {
  if (!l || !l->func) return ts_diag_set(d, TS_EINVAL, "no lowered function");
  lx_mod m;
  memset(&m, 0, sizeof m);
  LLVMContextSetDiagnosticHandler(ctx, diag_handler, NULL);
  m.ctx = ctx;
  m.t = t;
  m.d = d;
  const char *name = l->func->name ? l->func->name : "kernel";
  m.mod = LLVMModuleCreateWithNameInContext(name, ctx);
  LLVMSetTarget(m.mod, t->triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(m.mod, td);
  LLVMDisposeTargetData(td);
  ts_status st = cg_lx_emit_module(&m, l);
  if (st != TS_OK) {
    LLVMDisposeModule(m.mod);
    return st;
  }
  char *err = NULL;
  if (LLVMVerifyModule(m.mod, LLVMReturnStatusAction, &err)) {
    st = ts_diag_set(d, TS_EINTERNAL, "codegen produced invalid LLVM IR for %s: %s", name,
                     err ? err : "?");
    LLVMDisposeMessage(err);
    LLVMDisposeModule(m.mod);
    return st;
  }
  LLVMDisposeMessage(err);
  if (debug_codegen()) {
    char *s = LLVMPrintModuleToString(m.mod);
    fprintf(stderr, "[codegen] %s before optimisation:\n%s\n", name, s);
    LLVMDisposeMessage(s);
  }
  if (opt) {
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(po, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, 1);
    LLVMPassBuilderOptionsSetLoopInterleaving(po, 1);
    LLVMErrorRef e = LLVMRunPasses(m.mod, "default<O3>", tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (e) {
      char *msg = LLVMGetErrorMessage(e);
      st = ts_diag_set(d, TS_EINTERNAL, "LLVM O3 pipeline on %s: %s", name, msg);
      LLVMDisposeErrorMessage(msg);
      LLVMDisposeModule(m.mod);
      return st;
    }
  }
  *mod = m.mod;
  return TS_OK;
}

/* ---- JIT --------------------------------------------------------------------------- */

struct cg_jit {
  LLVMOrcLLJITRef jit;
  tsrt_kernel_fn entry;
  const tsrt_kernel_meta *meta;
};

static ts_status orc_fail(ts_diag *d, LLVMErrorRef e, const char *what) {
  char *msg = LLVMGetErrorMessage(e);
  ts_status st = ts_diag_set(d, TS_EINTERNAL, "%s: %s", what, msg);
  LLVMDisposeErrorMessage(msg);
  return st;
}

ts_status cg_llvm_jit(const cg_lowered *l, const cg_target *tin, cg_jit **out, ts_diag *d) {
  *out = NULL;
  cg_target t;
  ts_status st = resolved(tin, &t, d);
  if (st != TS_OK) return st;
  if (!triple_is_host(t.triple))
    return ts_diag_set(d, TS_EUNSUPPORTED, "cannot JIT for %s on this host (emit an object instead)",
                       t.triple);
  LLVMTargetMachineRef tm;
  if ((st = make_tm(&t, &tm, d)) != TS_OK) return st;
  LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
  LLVMModuleRef mod;
  st = build(LLVMOrcThreadSafeContextGetContext(tsc), l, &t, tm, true, &mod, d);
  if (st != TS_OK) {
    LLVMDisposeTargetMachine(tm);
    LLVMOrcDisposeThreadSafeContext(tsc);
    return st;
  }
  LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(mod, tsc);
  LLVMOrcDisposeThreadSafeContext(tsc);
  /* the JIT's own target machine: same triple/cpu/features/level (owns tm) */
  LLVMOrcJITTargetMachineBuilderRef jtmb = LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm);
  LLVMOrcLLJITBuilderRef jb = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(jb, jtmb);
  cg_jit *j = ts_calloc(1, sizeof *j);
  if (!j) {
    LLVMOrcDisposeLLJITBuilder(jb);
    LLVMOrcDisposeThreadSafeModule(tsm);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  LLVMErrorRef e = LLVMOrcCreateLLJIT(&j->jit, jb);
  if (e) {
    ts_free(j);
    LLVMOrcDisposeThreadSafeModule(tsm);
    return orc_fail(d, e, "creating the LLJIT");
  }
  /* libc, libm ...: from this process */
  LLVMOrcDefinitionGeneratorRef gen;
  e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(j->jit),
                                                           NULL, NULL);
  if (e) {
    LLVMOrcDisposeThreadSafeModule(tsm);
    cg_jit_free(j);
    return orc_fail(d, e, "process symbol generator");
  }
  LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(j->jit);
  LLVMOrcJITDylibAddGenerator(jd, gen);
  /* the runtime's entries (thread pool, kernel scratch) when linked */
  const struct {
    const char *name;
    void *addr;
  } rt[] = {{"tsrt_parallel_launch", (void *)(uintptr_t)tsrt_parallel_launch},
            {"tsrt_scratch_alloc", (void *)(uintptr_t)tsrt_scratch_alloc},
            {"tsrt_scratch_free", (void *)(uintptr_t)tsrt_scratch_free},
            {"tsrt_dnnl_conv2d_f32", (void *)(uintptr_t)tsrt_dnnl_conv2d_f32},
            {"tsrt_dnnl_sgemm_packed", (void *)(uintptr_t)tsrt_dnnl_sgemm_packed}};
  for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++) {
    if (!rt[i].addr) continue;
    LLVMOrcCSymbolMapPair sym = {
        LLVMOrcLLJITMangleAndIntern(j->jit, rt[i].name),
        {(LLVMOrcExecutorAddress)(uintptr_t)rt[i].addr,
         {LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0}}};
    LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(&sym, 1);
    e = LLVMOrcJITDylibDefine(jd, mu);
    if (e) {
      LLVMOrcDisposeMaterializationUnit(mu);
      LLVMOrcDisposeThreadSafeModule(tsm);
      cg_jit_free(j);
      return orc_fail(d, e, "defining the runtime's entries in the JIT");
    }
  }
  e = LLVMOrcLLJITAddLLVMIRModule(j->jit, jd, tsm);
  if (e) {
    LLVMOrcDisposeThreadSafeModule(tsm);
    cg_jit_free(j);
    return orc_fail(d, e, "adding the module to the JIT");
  }
  LLVMOrcExecutorAddress ea = 0, ma = 0;
  e = LLVMOrcLLJITLookup(j->jit, &ea, TSRT_ENTRY_SYMBOL);
  if (!e) e = LLVMOrcLLJITLookup(j->jit, &ma, TSRT_META_SYMBOL);
  if (e) {
    cg_jit_free(j);
    return orc_fail(d, e, "JIT-compiling the kernel");
  }
  j->entry = (tsrt_kernel_fn)(uintptr_t)ea;
  j->meta = (const tsrt_kernel_meta *)(uintptr_t)ma;
  *out = j;
  return TS_OK;
}

tsrt_kernel_fn cg_jit_entry(const cg_jit *j) { return j ? j->entry : NULL; }
const tsrt_kernel_meta *cg_jit_meta(const cg_jit *j) { return j ? j->meta : NULL; }

void cg_jit_free(cg_jit *j) {
  if (!j) return;
  if (j->jit) {
    LLVMErrorRef e = LLVMOrcDisposeLLJIT(j->jit);
    if (e) LLVMConsumeError(e);
  }
  ts_free(j);
}

/* ---- objects and shared libraries ----------------------------------------------------- */

ts_status cg_llvm_emit_object(const cg_lowered *l, const cg_target *tin, const char *path, ts_diag *d) {
  cg_target t;
  ts_status st = resolved(tin, &t, d);
  if (st != TS_OK) return st;
  LLVMTargetMachineRef tm;
  if ((st = make_tm(&t, &tm, d)) != TS_OK) return st;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod;
  st = build(ctx, l, &t, tm, true, &mod, d);
  if (st == TS_OK) {
    char *err = NULL;
    if (LLVMTargetMachineEmitToFile(tm, mod, path, LLVMObjectFile, &err))
      st = ts_diag_set(d, TS_EIO, "emitting %s for %s: %s", path, t.triple, err ? err : "?");
    LLVMDisposeMessage(err);
    LLVMDisposeModule(mod);
  }
  LLVMContextDispose(ctx);
  LLVMDisposeTargetMachine(tm);
  return st;
}

/* ---- C libraries a kernel may call (library candidates) ---------------------------- */
/* A call_extern whose name starts with a prefix below is a call of that C
 * library's function (tuner/library.c makes them); the artifact then links
 * the library from the directory this build of tessel found it in. */
static const struct {
  const char *prefix, *lib, *dir;
  bool have;
} extern_libs[] = {
    {"cblas_", "openblas", TESSEL_OPENBLAS_LIBDIR, TESSEL_HAVE_OPENBLAS},
    {"dnnl_", "dnnl", TESSEL_DNNL_LIBDIR, TESSEL_HAVE_DNNL},
    /* the runtime's oneDNN convolution (runtime/dnnl_conv.c): resolved from the
     * loading process like tsrt_parallel_launch; the artifact links libdnnl */
    {"tsrt_dnnl_", "dnnl", TESSEL_DNNL_LIBDIR, TESSEL_HAVE_DNNL},
};
#define N_EXTERN_LIBS ((int)(sizeof extern_libs / sizeof extern_libs[0]))

int cg_lx_extern_lib(const char *name) {
  for (int i = 0; name && i < N_EXTERN_LIBS; i++)
    if (!strncmp(name, extern_libs[i].prefix, strlen(extern_libs[i].prefix))) return extern_libs[i].have ? i : -1;
  return -1;
}

bool cg_llvm_have_library(const char *lib) {
  for (int i = 0; lib && i < N_EXTERN_LIBS; i++)
    if (!strcmp(lib, extern_libs[i].lib)) return extern_libs[i].have;
  return false;
}

typedef struct libs_seen {
  bool used[N_EXTERN_LIBS];
} libs_seen;

static bool see_extern(void *ctx, const ir_expr *e) {
  if (e->kind == IR_CALL_EXTERN) {
    int k = cg_lx_extern_lib(e->u.ext.name);
    if (k >= 0) ((libs_seen *)ctx)->used[k] = true;
  }
  return true;
}

int cg_lx_link_libs(const cg_lowered *const *ls, int n, char **argv, int max) {
  libs_seen seen = {{false}};
  ir_visitor v = {see_extern, NULL, &seen};
  for (int i = 0; i < n; i++)
    if (ls[i] && ls[i]->func && ls[i]->func->body) ir_visit_stmt(&v, ls[i]->func->body);
  int k = 0;
  for (int i = 0; i < N_EXTERN_LIBS; i++)
    for (int j = 0; j < i; j++) /* one -l per library (two prefixes may name one) */
      if (seen.used[i] && seen.used[j] && !strcmp(extern_libs[i].lib, extern_libs[j].lib)) seen.used[i] = false;
  for (int i = 0; i < N_EXTERN_LIBS; i++)
    if (seen.used[i] && k + 4 <= max) {
      argv[k++] = "-L";
      argv[k++] = (char *)extern_libs[i].dir;
      argv[k++] = "-l";
      argv[k++] = (char *)extern_libs[i].lib;
    }
  return k;
}

/* Runs argv (argv[0] a path or a name on PATH), capturing stdout+stderr into
 * out (truncated); returns the exit status, or -1 if it could not run. */
static int run_capture(char *const argv[], char *out, size_t n) {
  int fds[2];
  out[0] = '\0';
  if (pipe(fds) != 0) {
    snprintf(out, n, "pipe: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    snprintf(out, n, "cannot run %s: %s", argv[0], strerror(rc));
    return -1;
  }
  size_t len = 0;
  char buf[1024];
  for (;;) {
    ssize_t r = read(fds[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    size_t take = (size_t)r;
    if (len + 1 < n) {
      if (take > n - 1 - len) take = n - 1 - len;
      memcpy(out + len, buf, take);
      len += take;
      out[len] = '\0';
    }
  }
  close(fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      snprintf(out, n, "waitpid: %s", strerror(errno));
      return -1;
    }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  snprintf(out + len, n - len, "%s killed by signal %d", argv[0],
           WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return -1;
}

ts_status cg_llvm_build_shared(const cg_lowered *l, const cg_target *t, const char *path, ts_diag *d) {
  size_t pl = strlen(path);
  char *obj = ts_malloc(pl + 16);
  if (!obj) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  snprintf(obj, pl + 16, "%s.XXXXXX.o", path);
  int fd = mkstemps(obj, 2);
  if (fd < 0) {
    ts_status st = ts_diag_set(d, TS_EIO, "temporary object next to %s: %s", path, strerror(errno));
    ts_free(obj);
    return st;
  }
  close(fd);
  ts_status st = cg_llvm_emit_object(l, t, obj, d);
  if (st == TS_OK) {
    /* tsrt_parallel_launch, tsrt_scratch_* and libc stay undefined: the loader resolves
     * them from the process that dlopens the artifact */
    char *argv[16] = {(char *)TESSEL_LLD, "-shared", "-o", (char *)path, obj,
                      "-z", "noexecstack", "--hash-style=both", NULL};
    int na = 8; /* plus the C libraries it calls, if any (library candidates) */
    na += cg_lx_link_libs(&l, 1, argv + na, 16 - 1 - na);
    argv[na] = NULL;
    char out[1536];
    int rc = run_capture(argv, out, sizeof out);
    if (rc != 0)
      st = ts_diag_set(d, TS_EIO, "linking %s with %s failed (exit %d): %s", path, TESSEL_LLD, rc, out);
  }
  unlink(obj);
  ts_free(obj);
  return st;
}

/* A dump of l's module: the IR text (asm false) or the target's assembly. */
static char *module_text(LLVMTargetMachineRef tm, LLVMModuleRef mod, const cg_target *t, bool asm_, ts_diag *d) {
  char *res = NULL;
  if (!asm_) {
    char *s = LLVMPrintModuleToString(mod);
    res = ts_strdup(s);
    LLVMDisposeMessage(s);
    if (!res) ts_diag_set(d, TS_ENOMEM, "out of memory");
    return res;
  }
  char *err = NULL;
  LLVMMemoryBufferRef mb = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMAssemblyFile, &err, &mb)) {
    ts_diag_set(d, TS_EINTERNAL, "LLVM could not emit assembly for %s: %s", t->triple, err ? err : "?");
  } else {
    size_t n = LLVMGetBufferSize(mb);
    res = ts_malloc(n + 1);
    if (res) {
      memcpy(res, LLVMGetBufferStart(mb), n);
      res[n] = 0;
    } else {
      ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
  }
  if (err) LLVMDisposeMessage(err);
  if (mb) LLVMDisposeMemoryBuffer(mb);
  return res;
}

static char *dump(const cg_lowered *l, const cg_target *tin, bool opt, bool asm_, ts_diag *d) {
  cg_target t;
  if (resolved(tin, &t, d) != TS_OK) return NULL;
  LLVMTargetMachineRef tm;
  if (make_tm(&t, &tm, d) != TS_OK) return NULL;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod;
  char *res = NULL;
  if (build(ctx, l, &t, tm, opt, &mod, d) == TS_OK) {
    res = module_text(tm, mod, &t, asm_, d);
    LLVMDisposeModule(mod);
  }
  LLVMContextDispose(ctx);
  LLVMDisposeTargetMachine(tm);
  return res;
}

char *cg_llvm_dump_ir(const cg_lowered *l, const cg_target *tin, bool opt, ts_diag *d) {
  return dump(l, tin, opt, false, d);
}

char *cg_llvm_dump_asm(const cg_lowered *l, const cg_target *tin, ts_diag *d) { return dump(l, tin, true, true, d); }

/* ---- for llvm_model.c (model artifacts: many kernels, one library) ---------------------- */

ts_status cg_lx_target_machine(const cg_target *tin, cg_target *t, LLVMTargetMachineRef *tm, ts_diag *d) {
  ts_status st = resolved(tin, t, d);
  return st != TS_OK ? st : make_tm(t, tm, d);
}

ts_status cg_lx_build_module(LLVMContextRef ctx, const cg_lowered *l, const cg_target *t,
                             LLVMTargetMachineRef tm, LLVMModuleRef *mod, ts_diag *d) {
  return build(ctx, l, t, tm, true, mod, d);
}

int cg_lx_run_capture(char *const argv[], char *out, size_t n) { return run_capture(argv, out, n); }
