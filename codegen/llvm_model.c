/* llvm_model.c — model artifacts (runtime/model.h): every kernel of a
 * model compiled into its own object under unique symbols
 * (tessel_model_k<i>_entry / tessel_model_k<i>_meta), one more object holding
 * the plan (`tessel_model_plan`: C structs with pointers the dynamic loader
 * relocates) and the weights (one 64-byte aligned constant blob), all linked
 * by ld.lld into one shared library. Kernels are compiled on up to four
 * threads, each with its own LLVM context (llvm.h: builds may run
 * concurrently). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>

#include "runtime/model.h"
#include "llvm_int.h"

typedef struct kjob {
  const cg_lowered *l;
  const cg_target *t; /* resolved */
  char obj[600];
  int index;
  ts_status st;
  ts_diag d;
} kjob;

typedef struct kqueue {
  pthread_mutex_t mu;
  kjob *jobs;
  int njobs, next;
  bool failed;
} kqueue;

static ts_status emit_kernel(kjob *j) {
  LLVMTargetMachineRef tm;
  cg_target t;
  ts_status st = cg_lx_target_machine(j->t, &t, &tm, &j->d);
  if (st != TS_OK) return st;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod;
  st = cg_lx_build_module(ctx, j->l, &t, tm, &mod, &j->d);
  if (st == TS_OK) {
    char name[64];
    LLVMValueRef fn = LLVMGetNamedFunction(mod, TSRT_ENTRY_SYMBOL);
    LLVMValueRef meta = LLVMGetNamedGlobal(mod, TSRT_META_SYMBOL);
    if (!fn || !meta) {
      st = ts_diag_set(&j->d, TS_EINTERNAL, "kernel %d has no entry or metadata after codegen", j->index);
    } else {
      snprintf(name, sizeof name, "tessel_model_k%d_entry", j->index);
      LLVMSetValueName2(fn, name, strlen(name));
      snprintf(name, sizeof name, "tessel_model_k%d_meta", j->index);
      LLVMSetValueName2(meta, name, strlen(name));
      /* resolved inside the library only */
      LLVMSetVisibility(fn, LLVMHiddenVisibility);
      LLVMSetVisibility(meta, LLVMHiddenVisibility);
      char *err = NULL;
      if (LLVMTargetMachineEmitToFile(tm, mod, j->obj, LLVMObjectFile, &err))
        st = ts_diag_set(&j->d, TS_EIO, "emitting %s: %s", j->obj, err ? err : "?");
      LLVMDisposeMessage(err);
    }
    LLVMDisposeModule(mod);
  }
  LLVMContextDispose(ctx);
  LLVMDisposeTargetMachine(tm);
  return st;
}

static void *worker(void *arg) {
  kqueue *q = arg;
  for (;;) {
    pthread_mutex_lock(&q->mu);
    int i = q->failed ? q->njobs : q->next++;
    pthread_mutex_unlock(&q->mu);
    if (i >= q->njobs) return NULL;
    kjob *j = &q->jobs[i];
    ts_diag_clear(&j->d);
    j->st = emit_kernel(j);
    if (j->st != TS_OK) {
      pthread_mutex_lock(&q->mu);
      q->failed = true;
      pthread_mutex_unlock(&q->mu);
    }
  }
}

/* ---- the plan object ------------------------------------------------------------ */

typedef struct pctx {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMTypeRef i8, i32, i64, ptr;
} pctx;

static LLVMValueRef pglobal(pctx *c, LLVMValueRef init, const char *name, unsigned align) {
  return cg_lx_global(c->mod, init, name, LLVMPrivateLinkage, align);
}

static LLVMValueRef pstr(pctx *c, const char *s) {
  s = s ? s : "";
  return pglobal(c, LLVMConstStringInContext2(c->ctx, s, strlen(s), 0), ".str", 1);
}

static LLVMValueRef pi32s(pctx *c, const int32_t *v, int n) {
  if (n <= 0 || !v) return LLVMConstNull(c->ptr);
  LLVMValueRef *e = ts_malloc(sizeof *e * (size_t)n);
  if (!e) return NULL;
  for (int i = 0; i < n; i++) e[i] = LLVMConstInt(c->i32, (unsigned long long)(int64_t)v[i], 1);
  LLVMValueRef g = pglobal(c, LLVMConstArray2(c->i32, e, (uint64_t)n), ".ids", 4);
  ts_free(e);
  return g;
}

/* A call's specialisations (tsrt_model_spec: kernel, covers, values), or a
 * null pointer when it has none; NULL on OOM. */
static LLVMValueRef pspecs(pctx *c, LLVMTypeRef spec_t, const tsrt_model_call *x) {
  if (x->nspecs <= 0 || !x->specs) return LLVMConstNull(c->ptr);
  LLVMValueRef *e = ts_malloc(sizeof *e * (size_t)x->nspecs);
  if (!e) return NULL;
  for (int i = 0; i < x->nspecs; i++) {
    LLVMValueRef vals[TSRT_MODEL_MAX_SYMS];
    for (int k = 0; k < x->nsyms && k < TSRT_MODEL_MAX_SYMS; k++)
      vals[k] = LLVMConstInt(c->i64, (unsigned long long)x->specs[i].values[k], 1);
    LLVMValueRef sv = pglobal(c, LLVMConstArray2(c->i64, vals, (uint64_t)x->nsyms), ".spec", 8);
    LLVMValueRef f[3] = {LLVMConstInt(c->i32, (unsigned long long)x->specs[i].kernel, 0),
                         LLVMConstInt(c->i32, (unsigned long long)x->specs[i].covers, 0), sv};
    e[i] = LLVMConstNamedStruct(spec_t, f, 3);
  }
  LLVMValueRef g = pglobal(c, LLVMConstArray2(spec_t, e, (uint64_t)x->nspecs), ".specs", 8);
  ts_free(e);
  return g;
}

static ts_status build_plan_module(pctx *c, const tsrt_model_plan *p, int nkernels, ts_diag *d) {
  LLVMTypeRef shape_t = LLVMArrayType2(c->i64, TSRT_MAX_DIMS);
  LLVMTypeRef tens_f[8] = {c->ptr, c->i32, c->i32, c->i32, c->i32, shape_t, c->i64, c->i64};
  LLVMTypeRef tens_t = LLVMStructCreateNamed(c->ctx, "tsrt_model_tensor");
  LLVMStructSetBody(tens_t, tens_f, 8, 0);
  LLVMTypeRef call_f[8] = {c->i32, c->i32, c->ptr, c->i32, c->ptr, c->i32, c->i32, c->ptr};
  LLVMTypeRef call_t = LLVMStructCreateNamed(c->ctx, "tsrt_model_call");
  LLVMStructSetBody(call_t, call_f, 8, 0);
  LLVMTypeRef spec_f[3] = {c->i32, c->i32, c->ptr};
  LLVMTypeRef spec_t = LLVMStructCreateNamed(c->ctx, "tsrt_model_spec");
  LLVMStructSetBody(spec_t, spec_f, 3, 0);
  LLVMTypeRef kern_f[2] = {c->ptr, c->ptr};
  LLVMTypeRef kern_t = LLVMStructCreateNamed(c->ctx, "tsrt_model_kernel");
  LLVMStructSetBody(kern_t, kern_f, 2, 0);
  LLVMTypeRef sdef_f[4] = {c->i64, c->i32, c->i32, c->ptr};
  LLVMTypeRef sdef_t = LLVMStructCreateNamed(c->ctx, "tsrt_model_symdef");
  LLVMStructSetBody(sdef_t, sdef_f, 4, 0);
  LLVMTypeRef plan_f[18] = {c->i32, c->i32, c->i32, c->i32, c->i32, c->i32, c->i32, c->ptr, c->ptr,
                            c->ptr, c->ptr, c->ptr, c->ptr, c->ptr, c->ptr, c->ptr, c->i64, c->ptr};
  LLVMTypeRef plan_t = LLVMStructCreateNamed(c->ctx, "tsrt_model_plan");
  LLVMStructSetBody(plan_t, plan_f, 18, 0);
  int nmax = p->ntensors > p->ncalls ? p->ntensors : p->ncalls;
  if (nkernels > nmax) nmax = nkernels;
  if (p->nsyms > nmax) nmax = p->nsyms;
  LLVMValueRef *el = ts_malloc(sizeof *el * (size_t)(nmax ? nmax : 1));
  if (!el) return ts_diag_set(d, TS_ENOMEM, "out of memory building the model plan");
  /* symbols */
  for (int k = 0; k < p->nsyms; k++) el[k] = pstr(c, p->syms[k]);
  LLVMValueRef syms = p->nsyms ? pglobal(c, LLVMConstArray2(c->ptr, el, (uint64_t)p->nsyms), ".syms", 8)
                               : LLVMConstNull(c->ptr);
  LLVMValueRef symdefs = LLVMConstNull(c->ptr);
  if (p->nsyms && p->symdefs) {
    for (int k = 0; k < p->nsyms; k++) {
      const tsrt_model_symdef *sd = &p->symdefs[k];
      LLVMValueRef fs = pi32s(c, sd->factors, sd->nfactors);
      if (!fs) {
        ts_free(el);
        return ts_diag_set(d, TS_ENOMEM, "out of memory building the model plan");
      }
      LLVMValueRef f[4] = {LLVMConstInt(c->i64, (unsigned long long)sd->coeff, 1),
                           LLVMConstInt(c->i32, (unsigned long long)sd->nfactors, 0), LLVMConstInt(c->i32, 0, 0), fs};
      el[k] = LLVMConstNamedStruct(sdef_t, f, 4);
    }
    symdefs = pglobal(c, LLVMConstArray2(sdef_t, el, (uint64_t)p->nsyms), ".symdefs", 8);
  }
  /* tensors */
  for (int t = 0; t < p->ntensors; t++) {
    const tsrt_model_tensor *x = &p->tensors[t];
    LLVMValueRef dims[TSRT_MAX_DIMS];
    for (int j = 0; j < TSRT_MAX_DIMS; j++)
      dims[j] = LLVMConstInt(c->i64, (unsigned long long)(j < x->ndim ? x->shape[j] : 0), 1);
    LLVMValueRef f[8] = {pstr(c, x->name), LLVMConstInt(c->i32, (unsigned long long)x->kind, 0),
                         LLVMConstInt(c->i32, (unsigned long long)x->dtype, 0),
                         LLVMConstInt(c->i32, (unsigned long long)x->ndim, 0), LLVMConstInt(c->i32, 0, 0),
                         LLVMConstArray2(c->i64, dims, TSRT_MAX_DIMS),
                         LLVMConstInt(c->i64, x->offset, 0), LLVMConstInt(c->i64, x->nbytes, 0)};
    el[t] = LLVMConstNamedStruct(tens_t, f, 8);
  }
  LLVMValueRef tensors = p->ntensors ? pglobal(c, LLVMConstArray2(tens_t, el, (uint64_t)p->ntensors),
                                               ".tensors", 8)
                                     : LLVMConstNull(c->ptr);
  /* calls */
  for (int i = 0; i < p->ncalls; i++) {
    const tsrt_model_call *x = &p->calls[i];
    LLVMValueRef a = pi32s(c, x->args, x->nargs), s = pi32s(c, x->syms, x->nsyms);
    if (!a || !s) {
      ts_free(el);
      return ts_diag_set(d, TS_ENOMEM, "out of memory building the model plan");
    }
    LLVMValueRef sv = pspecs(c, spec_t, x);
    if (!sv) {
      ts_free(el);
      return ts_diag_set(d, TS_ENOMEM, "out of memory building the model plan");
    }
    LLVMValueRef f[8] = {LLVMConstInt(c->i32, (unsigned long long)x->kernel, 0),
                         LLVMConstInt(c->i32, (unsigned long long)x->nargs, 0), a,
                         LLVMConstInt(c->i32, (unsigned long long)x->nsyms, 0), s,
                         LLVMConstInt(c->i32, (unsigned long long)x->nspecs, 0),
                         LLVMConstInt(c->i32, (unsigned long long)x->ninputs, 0), sv};
    el[i] = LLVMConstNamedStruct(call_t, f, 8);
  }
  LLVMValueRef calls = p->ncalls ? pglobal(c, LLVMConstArray2(call_t, el, (uint64_t)p->ncalls), ".calls", 8)
                                 : LLVMConstNull(c->ptr);
  /* kernels: the other objects' hidden symbols */
  LLVMTypeRef ent_t = LLVMFunctionType(c->i32, &c->ptr, 1, 0);
  for (int i = 0; i < nkernels; i++) {
    char name[64];
    snprintf(name, sizeof name, "tessel_model_k%d_meta", i);
    LLVMValueRef meta = LLVMAddGlobal(c->mod, c->i8, name);
    LLVMSetVisibility(meta, LLVMHiddenVisibility);
    snprintf(name, sizeof name, "tessel_model_k%d_entry", i);
    LLVMValueRef fn = LLVMAddFunction(c->mod, name, ent_t);
    LLVMSetVisibility(fn, LLVMHiddenVisibility);
    LLVMValueRef f[2] = {meta, fn};
    el[i] = LLVMConstNamedStruct(kern_t, f, 2);
  }
  LLVMValueRef kernels = nkernels ? pglobal(c, LLVMConstArray2(kern_t, el, (uint64_t)nkernels), ".kernels", 8)
                                  : LLVMConstNull(c->ptr);
  ts_free(el);
  LLVMValueRef inputs = pi32s(c, p->inputs, p->ninputs), outputs = pi32s(c, p->outputs, p->noutputs);
  if (!inputs || !outputs) return ts_diag_set(d, TS_ENOMEM, "out of memory building the model plan");
  LLVMValueRef weights = LLVMConstNull(c->ptr);
  if (p->weights_bytes) {
    LLVMValueRef w = LLVMConstStringInContext2(c->ctx, (const char *)p->weights, (size_t)p->weights_bytes, 1);
    weights = pglobal(c, w, "tessel.weights", 64);
  }
  LLVMValueRef f[18] = {LLVMConstInt(c->i32, TSRT_MODEL_ABI_VERSION, 0),
                        LLVMConstInt(c->i32, (unsigned long long)p->ntensors, 0),
                        LLVMConstInt(c->i32, (unsigned long long)p->ncalls, 0),
                        LLVMConstInt(c->i32, (unsigned long long)nkernels, 0),
                        LLVMConstInt(c->i32, (unsigned long long)p->nsyms, 0),
                        LLVMConstInt(c->i32, (unsigned long long)p->ninputs, 0),
                        LLVMConstInt(c->i32, (unsigned long long)p->noutputs, 0),
                        pstr(c, p->name), pstr(c, p->target), syms, tensors, calls, kernels, inputs,
                        outputs, weights, LLVMConstInt(c->i64, p->weights_bytes, 0), symdefs};
  cg_lx_global(c->mod, LLVMConstNamedStruct(plan_t, f, 18), TSRT_MODEL_SYMBOL, LLVMExternalLinkage, 8);
  return TS_OK;
}

static ts_status emit_plan(const tsrt_model_plan *p, int nkernels, const cg_target *tin, const char *obj,
                           ts_diag *d) {
  LLVMTargetMachineRef tm;
  cg_target t;
  ts_status st = cg_lx_target_machine(tin, &t, &tm, d);
  if (st != TS_OK) return st;
  pctx c;
  c.ctx = LLVMContextCreate();
  c.mod = LLVMModuleCreateWithNameInContext("tessel.model", c.ctx);
  LLVMSetTarget(c.mod, t.triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(c.mod, td);
  LLVMDisposeTargetData(td);
  c.i8 = LLVMInt8TypeInContext(c.ctx);
  c.i32 = LLVMInt32TypeInContext(c.ctx);
  c.i64 = LLVMInt64TypeInContext(c.ctx);
  c.ptr = LLVMPointerTypeInContext(c.ctx, 0);
  st = build_plan_module(&c, p, nkernels, d);
  if (st == TS_OK) {
    char *err = NULL;
    if (LLVMVerifyModule(c.mod, LLVMReturnStatusAction, &err))
      st = ts_diag_set(d, TS_EINTERNAL, "the model plan is invalid LLVM IR: %s", err ? err : "?");
    LLVMDisposeMessage(err);
    err = NULL;
    if (st == TS_OK && LLVMTargetMachineEmitToFile(tm, c.mod, (char *)obj, LLVMObjectFile, &err))
      st = ts_diag_set(d, TS_EIO, "emitting %s: %s", obj, err ? err : "?");
    LLVMDisposeMessage(err);
  }
  LLVMDisposeModule(c.mod);
  LLVMContextDispose(c.ctx);
  LLVMDisposeTargetMachine(tm);
  return st;
}

ts_status cg_llvm_build_model(const tsrt_model_plan *plan, const cg_lowered *const *kernels, int nkernels,
                              const cg_target *tin, const char *path, ts_diag *d) {
  ts_diag why = {0};
  tsrt_model_plan p = *plan;
  p.kernels = NULL;
  p.nkernels = nkernels;
  if (tsrt_model_plan_check(&p, &why))
    return ts_diag_set(d, TS_EINVAL, "model plan for %s: %s", path, why.msg);
  cg_target t;
  LLVMTargetMachineRef tm0;
  ts_status st = cg_lx_target_machine(tin, &t, &tm0, d);
  if (st != TS_OK) return st;
  LLVMDisposeTargetMachine(tm0);
  size_t pl = strlen(path);
  if (pl > 400) return ts_diag_set(d, TS_EINVAL, "output path too long: %s", path);
  char dir[512];
  snprintf(dir, sizeof dir, "%s.objs.XXXXXX", path);
  if (!mkdtemp(dir)) return ts_diag_set(d, TS_EIO, "temporary directory next to %s: %s", path, strerror(errno));
  kjob *jobs = ts_calloc((size_t)(nkernels ? nkernels : 1), sizeof *jobs);
  char **argv = ts_calloc((size_t)nkernels + 12 + 16, sizeof *argv);
  char plan_obj[600];
  snprintf(plan_obj, sizeof plan_obj, "%s/plan.o", dir);
  if (!jobs || !argv) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto out;
  }
  for (int i = 0; i < nkernels; i++) {
    jobs[i].l = kernels[i];
    jobs[i].t = &t;
    jobs[i].index = i;
    snprintf(jobs[i].obj, sizeof jobs[i].obj, "%s/k%d.o", dir, i);
  }
  kqueue q = {PTHREAD_MUTEX_INITIALIZER, jobs, nkernels, 0, false};
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int nth = ncpu > 4 ? 4 : (ncpu < 1 ? 1 : (int)ncpu);
  if (nth > nkernels) nth = nkernels;
  pthread_t th[4];
  int started = 0;
  for (int i = 1; i < nth; i++)
    if (pthread_create(&th[started], NULL, worker, &q) == 0) started++;
  worker(&q);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < nkernels; i++)
    if (jobs[i].st != TS_OK) {
      const ir_func *f = kernels[i]->orig ? kernels[i]->orig : kernels[i]->func;
      st = ts_diag_set(d, jobs[i].st, "kernel %d (%s): %s", i, f && f->name ? f->name : "?", jobs[i].d.msg);
      goto out;
    }
  if ((st = emit_plan(&p, nkernels, &t, plan_obj, d)) != TS_OK) goto out;
  int n = 0;
  argv[n++] = (char *)TESSEL_LLD;
  argv[n++] = "-shared";
  argv[n++] = "-o";
  argv[n++] = (char *)path;
  argv[n++] = plan_obj;
  for (int i = 0; i < nkernels; i++) argv[n++] = jobs[i].obj;
  argv[n++] = "-z";
  argv[n++] = "noexecstack";
  argv[n++] = "--hash-style=both";
  n += cg_lx_link_libs(kernels, nkernels, argv + n, 16); /* only when a kernel calls one */
  argv[n] = NULL;
  char lout[1536];
  int rc = cg_lx_run_capture(argv, lout, sizeof lout);
  if (rc != 0)
    st = ts_diag_set(d, TS_EIO, "linking %s with %s failed (exit %d): %s", path, TESSEL_LLD, rc, lout);
out:
  if (jobs)
    for (int i = 0; i < nkernels; i++) unlink(jobs[i].obj);
  unlink(plan_obj);
  rmdir(dir);
  ts_free(jobs);
  ts_free(argv);
  return st;
}
