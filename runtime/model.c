/* model.c — the graph executor (model.h, include/tessel/tessel_model.h):
 * loads a model artifact, binds symbolic sizes from the input shapes, plans
 * the intermediates' memory from the bound sizes (liveness, best-fit reuse)
 * and runs the kernels in order. libc + pthreads + libdl only. */
#include "model.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../include/tessel/tessel_model.h"
#include "fork_pipe.h"

_Static_assert((int)TESSEL_DT_F32 == (int)TSRT_F32 && (int)TESSEL_DT_F64 == (int)TSRT_F64 &&
                   (int)TESSEL_DT_BOOL == (int)TSRT_BOOL,
               "public dtype codes drift from the runtime's");
_Static_assert(TESSEL_MODEL_MAX_DIMS == TSRT_MAX_DIMS, "max dims drift");

/* ---- plan checks ------------------------------------------------------------ */

/* Call c's specialisations: kernels in range taking the call's tensors, an
 * exact one without sizes, a covering one with the call's sizes, values for
 * every size var (>= 1). */
static ts_status check_specs(const tsrt_model_plan *p, int c, const tsrt_model_call *call, ts_diag *d) {
  if (call->nspecs < 0 || (call->nspecs && (!call->specs || call->nsyms == 0)))
    return ts_diag_set(d, TS_EINVAL, "call %d: %d specialisations of a kernel with %d sizes", c, call->nspecs,
                       call->nsyms);
  for (int i = 0; i < call->nspecs; i++) {
    const tsrt_model_spec *sp = &call->specs[i];
    if (sp->kernel < 0 || sp->kernel >= p->nkernels || !sp->values || (sp->covers != 0 && sp->covers != 1))
      return ts_diag_set(d, TS_EINVAL, "call %d: bad specialisation %d (kernel %d of %d)", c, i, sp->kernel,
                         p->nkernels);
    for (int k = 0; k < call->nsyms; k++)
      if (sp->values[k] < 1)
        return ts_diag_set(d, TS_EINVAL, "call %d: specialisation %d is for size %lld", c, i,
                           (long long)sp->values[k]);
    if (!p->kernels) continue;
    const tsrt_kernel_meta *sm = p->kernels[sp->kernel].meta;
    int want = sp->covers ? call->nsyms : 0;
    if (!sm || !p->kernels[sp->kernel].entry || sm->nparams != call->nargs || sm->nsyms != want)
      return ts_diag_set(d, TS_EINVAL, "call %d: specialised kernel %d does not take the call's %d tensors and %d sizes",
                         c, sp->kernel, call->nargs, want);
  }
  return TS_OK;
}

ts_status tsrt_model_plan_check(const tsrt_model_plan *p, ts_diag *d) {
  if (!p) return ts_diag_set(d, TS_EINVAL, "no plan");
  if (p->abi_version != TSRT_MODEL_ABI_VERSION)
    return ts_diag_set(d, TS_EINVAL, "model ABI version %d (this runtime reads %d: rebuild the model with this "
                "tessel)", p->abi_version, TSRT_MODEL_ABI_VERSION);
  if (p->ntensors < 0 || p->ncalls < 0 || p->nkernels < 0 || p->nsyms < 0 ||
      p->nsyms > TSRT_MODEL_MAX_SYMS || p->ninputs < 0 || p->noutputs < 1 ||
      (p->ntensors && !p->tensors) || (p->ncalls && !p->calls) || (p->ninputs && !p->inputs) ||
      !p->outputs || (p->nsyms && !p->syms))
    return ts_diag_set(d, TS_EINVAL, "malformed plan header (%d tensors, %d calls, %d kernels, %d symbols, %d "
                "inputs, %d outputs)", p->ntensors, p->ncalls, p->nkernels, p->nsyms, p->ninputs,
                p->noutputs);
  for (int k = 0; k < p->nsyms; k++) {
    if (!p->syms[k]) return ts_diag_set(d, TS_EINVAL, "symbol %d has no name", k);
    const tsrt_model_symdef *sd = p->symdefs ? &p->symdefs[k] : NULL;
    if (!sd || sd->nfactors == 0) continue;
    if (sd->nfactors < 0 || sd->nfactors > TSRT_MODEL_MAX_SYMS || !sd->factors || sd->coeff < 1)
      return ts_diag_set(d, TS_EINVAL, "symbol %s: malformed definition (%d factors, coefficient %lld)", p->syms[k],
                         sd->nfactors, (long long)sd->coeff);
    for (int f = 0; f < sd->nfactors; f++)
      if (sd->factors[f] < 0 || sd->factors[f] >= p->nsyms || p->symdefs[sd->factors[f]].nfactors != 0)
        return ts_diag_set(d, TS_EINVAL, "symbol %s: factor %d is not a base symbol", p->syms[k], f);
  }
  for (int t = 0; t < p->ntensors; t++) {
    const tsrt_model_tensor *x = &p->tensors[t];
    const char *nm = x->name ? x->name : "?";
    if (x->kind < TSRT_T_INPUT || x->kind > TSRT_T_INTER || tsrt_dtype_bytes(x->dtype) == 0 ||
        x->dtype == TSRT_HANDLE || x->ndim < 0 || x->ndim > TSRT_MAX_DIMS)
      return ts_diag_set(d, TS_EINVAL, "tensor %d (%s): bad kind, dtype or rank", t, nm);
    for (int j = 0; j < x->ndim; j++) {
      int64_t v = x->shape[j];
      if (v < 0 && (v == TSRT_DIM_EXPR || -1 - v >= p->nsyms))
        return ts_diag_set(d, TS_EINVAL, "tensor %s: dim %d refers to an unknown symbol", nm, j);
    }
    if (x->kind == TSRT_T_CONST) {
      uint64_t want = (uint64_t)tsrt_dtype_bytes(x->dtype);
      for (int j = 0; j < x->ndim; j++) {
        if (x->shape[j] < 0) return ts_diag_set(d, TS_EINVAL, "constant %s has a symbolic dim", nm);
        want *= (uint64_t)x->shape[j];
      }
      if (x->nbytes != want || x->offset > p->weights_bytes || x->nbytes > p->weights_bytes - x->offset ||
          (x->nbytes && !p->weights) || x->offset % 64)
        return ts_diag_set(d, TS_EINVAL, "constant %s: %llu bytes at offset %llu do not fit the weights (%llu bytes; "
                    "its shape needs %llu)", nm, (unsigned long long)x->nbytes,
                    (unsigned long long)x->offset, (unsigned long long)p->weights_bytes,
                    (unsigned long long)want);
    }
  }
  for (int i = 0; i < p->ninputs; i++)
    if (p->inputs[i] < 0 || p->inputs[i] >= p->ntensors || p->tensors[p->inputs[i]].kind != TSRT_T_INPUT)
      return ts_diag_set(d, TS_EINVAL, "input %d is not an input tensor", i);
  for (int i = 0; i < p->noutputs; i++)
    if (p->outputs[i] < 0 || p->outputs[i] >= p->ntensors)
      return ts_diag_set(d, TS_EINVAL, "output %d: tensor id %d out of range", i, p->outputs[i]);
  /* every intermediate written exactly once, before any read */
  char *written = ts_calloc((size_t)(p->ntensors ? p->ntensors : 1), 1);
  if (!written) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  ts_status rc = TS_OK;
  for (int c = 0; c < p->ncalls && !rc; c++) {
    const tsrt_model_call *call = &p->calls[c];
    if (call->kernel < 0 || call->kernel >= p->nkernels || call->nargs < 1 || !call->args ||
        call->nsyms < 0 || call->nsyms > TSRT_MODEL_MAX_SYMS || (call->nsyms && !call->syms)) {
      rc = ts_diag_set(d, TS_EINVAL, "call %d: bad kernel index or arguments", c);
      break;
    }
    const tsrt_kernel_meta *km = p->kernels ? p->kernels[call->kernel].meta : NULL;
    if (p->kernels && (!km || !p->kernels[call->kernel].entry)) {
      rc = ts_diag_set(d, TS_EINVAL, "call %d: kernel %d has no entry/metadata", c, call->kernel);
      break;
    }
    if (km && (km->abi_version != TSRT_ABI_VERSION || km->nparams != call->nargs ||
               km->nsyms != call->nsyms)) {
      rc = ts_diag_set(d, TS_EINVAL, "call %d: kernel %s takes %d params and %d sizes (ABI %d), the call passes "
                "%d and %d", c, km->name ? km->name : "?", km->nparams, km->nsyms, km->abi_version,
                call->nargs, call->nsyms);
      break;
    }
    for (int k = 0; k < call->nsyms && !rc; k++)
      if (call->syms[k] < 0 || call->syms[k] >= p->nsyms)
        rc = ts_diag_set(d, TS_EINVAL, "call %d: size %d names no model symbol", c, k);
    if (!rc) rc = check_specs(p, c, call, d);
    if (call->ninputs < 0 || call->ninputs > call->nargs || (km && km->ninputs != call->ninputs)) {
      rc = ts_diag_set(d, TS_EINVAL, "call %d: %d inputs of %d arguments (the kernel reads %d)", c, call->ninputs,
                call->nargs, km ? km->ninputs : -1);
      break;
    }
    int nin = call->ninputs;
    for (int a = 0; a < call->nargs && !rc; a++) {
      int t = call->args[a];
      if (t < 0 || t >= p->ntensors) {
        rc = ts_diag_set(d, TS_EINVAL, "call %d: argument %d is tensor %d (out of range)", c, a, t);
        break;
      }
      const tsrt_model_tensor *x = &p->tensors[t];
      if (a >= nin) {
        if (x->kind != TSRT_T_INTER || written[t])
          rc = ts_diag_set(d, TS_EINVAL, "call %d writes %s, which is not a fresh intermediate", c, x->name);
        written[t] = 1;
      } else if (x->kind == TSRT_T_INTER && !written[t]) {
        rc = ts_diag_set(d, TS_EINVAL, "call %d reads %s before any call writes it", c, x->name);
      }
      if (!rc && km) {
        const tsrt_param_meta *pm = &km->params[a];
        if (pm->dtype != x->dtype || pm->ndim > TSRT_MAX_DIMS) {
          rc = ts_diag_set(d, TS_EINVAL, "call %d: kernel %s param %s is %s, tensor %s is %s", c, km->name, pm->name,
                    tsrt_dtype_name(pm->dtype), x->name, tsrt_dtype_name(x->dtype));
        } else if (pm->ndim == x->ndim) {
          for (int j = 0; j < x->ndim; j++)
            if (pm->shape[j] >= 0 && x->shape[j] >= 0 && pm->shape[j] != x->shape[j])
              rc = ts_diag_set(d, TS_EINVAL, "call %d: kernel %s param %s dim %d is %lld, tensor %s has %lld", c,
                        km->name, pm->name, j, (long long)pm->shape[j], x->name, (long long)x->shape[j]);
        }
      }
    }
  }
  for (int i = 0; i < p->noutputs && !rc; i++) {
    int t = p->outputs[i];
    if (p->tensors[t].kind == TSRT_T_INTER && !written[t])
      rc = ts_diag_set(d, TS_EINVAL, "output %s is never written", p->tensors[t].name);
  }
  ts_free(written);
  return rc;
}

/* ---- shapes -------------------------------------------------------------------- */

/* Bytes of tensor x at the bound symbols; -1 on an unbound symbol or overflow. */
static int64_t tensor_bytes(const tsrt_model_tensor *x, const int64_t *syms, int64_t *shape_out) {
  int64_t n = tsrt_dtype_bytes(x->dtype);
  for (int j = 0; j < x->ndim; j++) {
    int64_t v = x->shape[j] >= 0 ? x->shape[j] : syms[-1 - x->shape[j]];
    if (v < 0) return -1;
    if (shape_out) shape_out[j] = v;
    if (v && n > INT64_MAX / v) return -1;
    n *= v;
  }
  return n;
}

/* ---- memory plan ------------------------------------------------------------------ */

typedef struct mblock {
  uint64_t size;
  bool free;
} mblock;

ts_status tsrt_model_memory_plan(const tsrt_model_plan *p, const int64_t *syms, int64_t *offsets,
                                 uint64_t *ws_bytes, uint64_t *naive_bytes, ts_diag *d) {
  int nt = p->ntensors;
  int *last = ts_malloc(sizeof *last * (size_t)(nt ? nt : 1));
  int *blk = ts_malloc(sizeof *blk * (size_t)(nt ? nt : 1));
  int64_t *bytes = ts_malloc(sizeof *bytes * (size_t)(nt ? nt : 1));
  mblock *bl = ts_malloc(sizeof *bl * (size_t)(nt ? nt : 1));
  int nb = 0;
  ts_status rc = TS_OK;
  if (!last || !blk || !bytes || !bl) {
    rc = ts_diag_set(d, TS_ENOMEM, "out of memory planning the workspace");
    goto out;
  }
  uint64_t naive = 0;
  for (int t = 0; t < nt; t++) {
    last[t] = -1;
    blk[t] = -1;
    offsets[t] = -1;
    bytes[t] = 0;
    if (p->tensors[t].kind != TSRT_T_INTER) continue;
    bytes[t] = tensor_bytes(&p->tensors[t], syms, NULL);
    if (bytes[t] < 0) {
      rc = ts_diag_set(d, TS_EINVAL, "tensor %s: a symbol is unbound or its size overflows", p->tensors[t].name);
      goto out;
    }
    naive += ((uint64_t)bytes[t] + 63) / 64 * 64;
  }
  for (int c = 0; c < p->ncalls; c++)
    for (int a = 0; a < p->calls[c].nargs; a++) last[p->calls[c].args[a]] = c;
  for (int i = 0; i < p->noutputs; i++) last[p->outputs[i]] = p->ncalls; /* live to the end */
  for (int c = 0; c < p->ncalls; c++) {
    const tsrt_model_call *call = &p->calls[c];
    int nin = call->ninputs;
    /* outputs of this call first: they must not share a block with its inputs */
    for (int a = nin; a < call->nargs; a++) {
      int t = call->args[a];
      if (p->tensors[t].kind != TSRT_T_INTER || blk[t] >= 0) continue;
      uint64_t need = ((uint64_t)bytes[t] + 63) / 64 * 64;
      int best = -1, largest = -1;
      for (int b = 0; b < nb; b++) {
        if (!bl[b].free) continue;
        if (bl[b].size >= need && (best < 0 || bl[b].size < bl[best].size)) best = b;
        if (largest < 0 || bl[b].size > bl[largest].size) largest = b;
      }
      if (best < 0 && largest >= 0) best = largest; /* grow the largest free block */
      if (best < 0) {
        best = nb++;
        bl[best].size = 0;
      }
      if (bl[best].size < need) bl[best].size = need;
      bl[best].free = false;
      blk[t] = best;
    }
    /* then free what this call read (or wrote) for the last time */
    for (int a = 0; a < call->nargs; a++) {
      int t = call->args[a];
      if (blk[t] >= 0 && last[t] == c) bl[blk[t]].free = true;
    }
  }
  uint64_t off = 0;
  uint64_t *boff = ts_malloc(sizeof *boff * (size_t)(nb ? nb : 1));
  if (!boff) {
    rc = ts_diag_set(d, TS_ENOMEM, "out of memory planning the workspace");
    goto out;
  }
  for (int b = 0; b < nb; b++) {
    boff[b] = off;
    off += bl[b].size;
  }
  for (int t = 0; t < nt; t++)
    if (blk[t] >= 0) offsets[t] = (int64_t)boff[blk[t]];
  ts_free(boff);
  *ws_bytes = off;
  if (naive_bytes) *naive_bytes = naive;
out:
  ts_free(last);
  ts_free(blk);
  ts_free(bytes);
  ts_free(bl);
  return rc;
}

/* ---- the executor ------------------------------------------------------------------ */

struct tessel_model {
  void *handle;
  const tsrt_model_plan *p;
  char err[512];
  int64_t syms[TSRT_MODEL_MAX_SYMS];     /* bound values (-1: unbound) */
  int64_t planned[TSRT_MODEL_MAX_SYMS];  /* the values the current plan was made for */
  bool have_plan;
  void **in_data;                        /* per input: model-owned aligned copy */
  const void **in_ext;                   /* per input: the caller's buffer (bind_input), else NULL */
  size_t *in_cap;
  int64_t (*in_shape)[TSRT_MAX_DIMS];
  bool *in_set;
  int64_t *offsets;                      /* per tensor, into ws */
  uint8_t *ws;
  uint64_t ws_cap, ws_bytes, naive_bytes;
  void **targs;                          /* per tensor: data pointer for this plan */
  void **args;                           /* scratch for a call: nargs + nsyms */
  int64_t *argsyms;
  int maxargs;
  bool ran;
  int *last_spec;                        /* per call: the specialisation its last run used (-1: symbolic) */
  double *prof_secs;                     /* per call, summed over profiled runs (NULL: off) */
  int prof_runs;
};

static int merr(tessel_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int merr(tessel_model *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->err, sizeof m->err, fmt, ap);
  va_end(ap);
  return -1;
}

static void *aligned_or_null(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); }

ts_status tsrt_model_load(const char *path, const tsrt_model_load_opts *o, tsrt_model **out, ts_diag *d) {
  (void)o; /* keep_malloc_settings: nothing to keep since kernels use the scratch pool */
  *out = NULL;
  /* A name without a slash is a file in the current directory, as for any
   * other file argument: dlopen alone would search LD_LIBRARY_PATH and the
   * system's directories for it (and find another model of the same name). */
  char local[4096];
  const char *open_path = path;
  if (!strchr(path, '/')) {
    if ((size_t)snprintf(local, sizeof local, "./%s", path) >= sizeof local)
      return ts_diag_set(d, TS_EINVAL, "cannot load %.200s...: the name is too long", path);
    open_path = local;
  }
  void *h = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return ts_diag_set(d, TS_ELOAD, "cannot load %s: %s", path, dlerror());
  const tsrt_model_plan *p = dlsym(h, TSRT_MODEL_SYMBOL);
  if (!p) {
    dlclose(h);
    return ts_diag_set(d, TS_ELOAD, "%s is not a tessel model (no %s symbol; a single kernel has tessel_kernel_entry)",
                       path, TSRT_MODEL_SYMBOL);
  }
  ts_diag why = {0};
  if (tsrt_model_plan_check(p, &why)) {
    dlclose(h);
    return ts_diag_set(d, TS_ELOAD, "%s: bad model plan: %s", path, why.msg);
  }
  tessel_model *m = ts_calloc(1, sizeof *m);
  int ni = p->ninputs ? p->ninputs : 1, nt = p->ntensors ? p->ntensors : 1;
  int maxargs = 1;
  for (int c = 0; c < p->ncalls; c++)
    if (p->calls[c].nargs + p->calls[c].nsyms > maxargs) maxargs = p->calls[c].nargs + p->calls[c].nsyms;
  if (m) {
    m->in_data = ts_calloc((size_t)ni, sizeof *m->in_data);
    m->in_ext = ts_calloc((size_t)ni, sizeof *m->in_ext);
    m->in_cap = ts_calloc((size_t)ni, sizeof *m->in_cap);
    m->in_shape = ts_calloc((size_t)ni, sizeof *m->in_shape);
    m->in_set = ts_calloc((size_t)ni, sizeof *m->in_set);
    m->offsets = ts_calloc((size_t)nt, sizeof *m->offsets);
    m->targs = ts_calloc((size_t)nt, sizeof *m->targs);
    m->args = ts_calloc((size_t)maxargs, sizeof *m->args);
    m->argsyms = ts_calloc((size_t)maxargs, sizeof *m->argsyms);
    m->last_spec = ts_calloc((size_t)(p->ncalls > 0 ? p->ncalls : 1), sizeof *m->last_spec);
    for (int c = 0; m->last_spec && c < p->ncalls; c++) m->last_spec[c] = -1;
  }
  if (!m || !m->in_data || !m->in_ext || !m->in_cap || !m->in_shape || !m->in_set || !m->offsets || !m->targs ||
      !m->args || !m->argsyms || !m->last_spec) {
    if (m) {
      m->handle = h;
      tessel_model_free(m);
    } else {
      dlclose(h);
    }
    return ts_diag_set(d, TS_ENOMEM, "out of memory loading %s", path);
  }
  m->handle = h;
  m->p = p;
  m->maxargs = maxargs;
  for (int k = 0; k < TSRT_MODEL_MAX_SYMS; k++) m->syms[k] = m->planned[k] = -1;
  *out = m;
  return TS_OK;
}

/* The public API keeps its convention: NULL with the message in err. */
tessel_model *tessel_model_load_with(const char *path, const tessel_model_load_opts *opts, char *err, size_t errn) {
  tsrt_model_load_opts o = {.keep_malloc_settings = opts && opts->keep_malloc_settings};
  tsrt_model *m = NULL;
  ts_diag d = {0};
  if (tsrt_model_load(path, &o, &m, &d) && err && errn) snprintf(err, errn, "%s", d.msg);
  return m;
}

tessel_model *tessel_model_load(const char *path, char *err, size_t errn) {
  return tessel_model_load_with(path, NULL, err, errn);
}

void tessel_model_free(tessel_model *m) {
  if (!m) return;
  if (m->in_data && m->p)
    for (int i = 0; i < m->p->ninputs; i++) ts_free(m->in_data[i]);
  ts_free(m->in_data);
  ts_free(m->in_ext);
  ts_free(m->in_cap);
  ts_free(m->in_shape);
  ts_free(m->in_set);
  ts_free(m->offsets);
  ts_free(m->targs);
  ts_free(m->args);
  ts_free(m->argsyms);
  ts_free(m->last_spec);
  ts_free(m->ws);
  ts_free(m->prof_secs);
  if (m->handle) dlclose(m->handle);
  ts_free(m);
}

const char *tessel_model_error(const tessel_model *m) { return m ? m->err : "no model"; }
int tessel_model_num_inputs(const tessel_model *m) { return m->p->ninputs; }
int tessel_model_num_outputs(const tessel_model *m) { return m->p->noutputs; }

int tessel_model_input_index(const tessel_model *m, const char *name) {
  for (int i = 0; i < m->p->ninputs; i++)
    if (!strcmp(m->p->tensors[m->p->inputs[i]].name, name)) return i;
  return -1;
}
int tessel_model_output_index(const tessel_model *m, const char *name) {
  for (int i = 0; i < m->p->noutputs; i++)
    if (!strcmp(m->p->tensors[m->p->outputs[i]].name, name)) return i;
  return -1;
}

static void fill_info(const tsrt_model_plan *p, int t, tessel_tensor_info *o) {
  const tsrt_model_tensor *x = &p->tensors[t];
  memset(o, 0, sizeof *o);
  o->name = x->name;
  o->dtype = x->dtype;
  o->ndim = x->ndim;
  for (int j = 0; j < x->ndim; j++) {
    o->shape[j] = x->shape[j] >= 0 ? x->shape[j] : -1;
    o->dim_names[j] = x->shape[j] >= 0 ? NULL : p->syms[-1 - x->shape[j]];
  }
}

int tessel_model_input_info(const tessel_model *m, int i, tessel_tensor_info *out) {
  if (i < 0 || i >= m->p->ninputs) return merr((tessel_model *)m, "no input %d (the model has %d)", i, m->p->ninputs);
  fill_info(m->p, m->p->inputs[i], out);
  return 0;
}
int tessel_model_output_info(const tessel_model *m, int i, tessel_tensor_info *out) {
  if (i < 0 || i >= m->p->noutputs) return merr((tessel_model *)m, "no output %d (the model has %d)", i, m->p->noutputs);
  fill_info(m->p, m->p->outputs[i], out);
  return 0;
}

int tessel_dtype_bytes(int dtype) { return tsrt_dtype_bytes(dtype); }
const char *tessel_dtype_name(int dtype) { return tsrt_dtype_name(dtype); }

/* Re-derives the bound symbols from every set input (so replacing an input
 * with another batch size rebinds cleanly), then the derived ones (products
 * of base symbols, tsrt_model_symdef). */
static int bind_symbols(tessel_model *m) {
  const tsrt_model_plan *p = m->p;
  for (int k = 0; k < p->nsyms; k++) m->syms[k] = -1;
  for (int i = 0; i < p->ninputs; i++) {
    if (!m->in_set[i]) continue;
    const tsrt_model_tensor *x = &p->tensors[p->inputs[i]];
    for (int j = 0; j < x->ndim; j++) {
      if (x->shape[j] >= 0) continue;
      int k = (int)(-1 - x->shape[j]);
      int64_t v = m->in_shape[i][j];
      if (m->syms[k] >= 0 && m->syms[k] != v)
        return merr(m, "input %s dim %d binds %s = %lld, but another input bound it to %lld", x->name, j,
                    p->syms[k], (long long)v, (long long)m->syms[k]);
      m->syms[k] = v;
    }
  }
  for (int k = 0; k < p->nsyms && p->symdefs; k++) {
    const tsrt_model_symdef *sd = &p->symdefs[k];
    if (sd->nfactors == 0) continue;
    int64_t v = sd->coeff;
    for (int f = 0; f < sd->nfactors && v >= 0; f++) {
      int64_t s = m->syms[sd->factors[f]];
      if (s < 0 || __builtin_mul_overflow(v, s, &v)) v = -1; /* unbound (or absurd): planning says which */
    }
    if (m->syms[k] >= 0 && v >= 0 && m->syms[k] != v)
      return merr(m, "an input binds %s = %lld, but its factors make it %lld", p->syms[k], (long long)m->syms[k],
                  (long long)v);
    if (v >= 0) m->syms[k] = v;
  }
  return 0;
}

/* Checks input i's shape against the declared one; its size in *bytes. */
static int check_input(tessel_model *m, int i, int ndim, const int64_t *shape, int64_t *bytes) {
  const tsrt_model_plan *p = m->p;
  if (i < 0 || i >= p->ninputs) return merr(m, "no input %d (the model has %d)", i, p->ninputs);
  const tsrt_model_tensor *x = &p->tensors[p->inputs[i]];
  if (ndim != x->ndim) return merr(m, "input %s has %d dims, got %d", x->name, x->ndim, ndim);
  *bytes = tsrt_dtype_bytes(x->dtype);
  for (int j = 0; j < ndim; j++) {
    if (shape[j] < 0) return merr(m, "input %s: dim %d is negative (%lld)", x->name, j, (long long)shape[j]);
    if (x->shape[j] >= 0 && shape[j] != x->shape[j])
      return merr(m, "input %s: dim %d must be %lld, got %lld", x->name, j, (long long)x->shape[j],
                  (long long)shape[j]);
    if (shape[j] && *bytes > INT64_MAX / 2 / shape[j]) return merr(m, "input %s is too large", x->name);
    *bytes *= shape[j];
  }
  return 0;
}

int tessel_model_set_input(tessel_model *m, int i, const void *data, int ndim, const int64_t *shape) {
  int64_t bytes;
  if (check_input(m, i, ndim, shape, &bytes)) return -1;
  const tsrt_model_tensor *x = &m->p->tensors[m->p->inputs[i]];
  if ((size_t)bytes > m->in_cap[i] || !m->in_data[i]) {
    void *nd = aligned_or_null((size_t)bytes);
    if (!nd) return merr(m, "out of memory for input %s (%lld bytes)", x->name, (long long)bytes);
    ts_free(m->in_data[i]);
    m->in_data[i] = nd;
    m->in_cap[i] = (size_t)bytes;
  }
  if (bytes) memcpy(m->in_data[i], data, (size_t)bytes);
  for (int j = 0; j < ndim; j++) m->in_shape[i][j] = shape[j];
  m->in_ext[i] = NULL;
  m->in_set[i] = true;
  m->ran = false;
  return bind_symbols(m);
}

int tessel_model_bind_input(tessel_model *m, int i, const void *data, int ndim, const int64_t *shape,
                            int *borrowed) {
  if (borrowed) *borrowed = 0;
  if ((uintptr_t)data % 64) return tessel_model_set_input(m, i, data, ndim, shape);
  int64_t bytes;
  if (check_input(m, i, ndim, shape, &bytes)) return -1;
  for (int j = 0; j < ndim; j++) m->in_shape[i][j] = shape[j];
  m->in_ext[i] = data;
  m->in_set[i] = true;
  m->ran = false;
  if (borrowed) *borrowed = 1;
  return bind_symbols(m);
}

static int ensure_plan(tessel_model *m) {
  const tsrt_model_plan *p = m->p;
  bool same = m->have_plan;
  for (int k = 0; k < p->nsyms && same; k++) same = m->planned[k] == m->syms[k];
  if (same) return 0;
  uint64_t ws = 0, naive = 0;
  ts_diag why = {0};
  if (tsrt_model_memory_plan(p, m->syms, m->offsets, &ws, &naive, &why))
    return merr(m, "memory plan: %s", why.msg);
  if (ws > m->ws_cap || !m->ws) {
    uint8_t *nw = aligned_or_null((size_t)ws);
    if (!nw) return merr(m, "out of memory for the workspace (%llu bytes)", (unsigned long long)ws);
    ts_free(m->ws);
    m->ws = nw;
    m->ws_cap = ws;
  }
  m->ws_bytes = ws;
  m->naive_bytes = naive;
  for (int k = 0; k < p->nsyms; k++) m->planned[k] = m->syms[k];
  m->have_plan = true;
  return 0;
}

static int run_calls(tessel_model *m);

int tessel_model_run(tessel_model *m) {
  const tsrt_model_plan *p = m->p;
  m->ran = false;
  for (int i = 0; i < p->ninputs; i++)
    if (!m->in_set[i]) return merr(m, "input %s is not set", p->tensors[p->inputs[i]].name);
  for (int k = 0; k < p->nsyms; k++)
    if (m->syms[k] < 0) return merr(m, "symbol %s is not bound by any input", p->syms[k]);
  if (ensure_plan(m)) return -1;
  for (int t = 0; t < p->ntensors; t++) {
    const tsrt_model_tensor *x = &p->tensors[t];
    if (x->kind == TSRT_T_CONST) m->targs[t] = (void *)(p->weights + x->offset);
    else if (x->kind == TSRT_T_INTER) m->targs[t] = m->offsets[t] >= 0 ? m->ws + m->offsets[t] : NULL;
  }
  for (int i = 0; i < p->ninputs; i++) m->targs[p->inputs[i]] = m->in_ext[i] ? (void *)m->in_ext[i] : m->in_data[i];
  tsrt_affinity aff;
  tsrt_caller_pin(&aff);
  int rc = run_calls(m);
  tsrt_caller_restore(&aff);
  if (rc) return rc;
  m->ran = true;
  if (m->prof_secs) m->prof_runs++;
  return 0;
}

/* The specialisation call runs at the bound sizes: the first (smallest
 * bucket) that fits, -1 for the symbolic kernel. */
static int pick_spec(const tessel_model *m, const tsrt_model_call *call) {
  for (int i = 0; i < call->nspecs; i++) {
    const tsrt_model_spec *sp = &call->specs[i];
    bool fits = true;
    for (int s = 0; s < call->nsyms && fits; s++) {
      int64_t v = m->syms[call->syms[s]];
      fits = sp->covers ? v <= sp->values[s] : v == sp->values[s];
    }
    if (fits) return i;
  }
  return -1;
}

/* The calls in order (tessel_model_run, with the caller pinned). */
static int run_calls(tessel_model *m) {
  const tsrt_model_plan *p = m->p;
  for (int c = 0; c < p->ncalls; c++) {
    const tsrt_model_call *call = &p->calls[c];
    const tsrt_model_kernel *k = &p->kernels[call->kernel];
    int spec = pick_spec(m, call);
    if (spec >= 0) k = &p->kernels[call->specs[spec].kernel];
    bool sizes = spec < 0 || call->specs[spec].covers;
    if (m->last_spec) m->last_spec[c] = spec;
    for (int a = 0; a < call->nargs; a++) m->args[a] = m->targs[call->args[a]];
    for (int s = 0; s < call->nsyms && sizes; s++) {
      m->argsyms[s] = m->syms[call->syms[s]];
      m->args[call->nargs + s] = &m->argsyms[s];
    }
    double pt0 = m->prof_secs ? tsrt_now() : 0;
    int32_t rc = k->entry(m->args);
    if (m->prof_secs) m->prof_secs[c] += tsrt_now() - pt0;
    if (rc != 0)
      return merr(m, "kernel %s (call %d of %d) returned %d", k->meta->name ? k->meta->name : "?", c,
                  p->ncalls, rc);
  }
  return 0;
}

int tessel_model_set_profiling(tessel_model *m, int on) {
  ts_free(m->prof_secs);
  m->prof_secs = NULL;
  m->prof_runs = 0;
  if (!on) return 0;
  m->prof_secs = ts_calloc((size_t)(m->p->ncalls > 0 ? m->p->ncalls : 1), sizeof *m->prof_secs);
  return m->prof_secs ? 0 : merr(m, "out of memory for the profile");
}

int tessel_model_get_call_profile(const tessel_model *m, int call, const char **kernel, double *mean_secs) {
  if (!m->prof_secs) return merr((tessel_model *)m, "profiling is off (tessel_model_set_profiling)");
  if (call < 0 || call >= m->p->ncalls)
    return merr((tessel_model *)m, "no call %d (the model makes %d)", call, m->p->ncalls);
  const tsrt_model_call *cl = &m->p->calls[call];
  int sp = m->last_spec[call];
  const tsrt_model_kernel *k = &m->p->kernels[sp >= 0 ? cl->specs[sp].kernel : cl->kernel]; /* the one that ran */
  *kernel = k->meta && k->meta->name ? k->meta->name : "?";
  *mean_secs = m->prof_runs > 0 ? m->prof_secs[call] / m->prof_runs : 0;
  return 0;
}

int tessel_model_get_call_spec(const tessel_model *m, int call, int *spec, int *nspecs, const int64_t **values,
                               int *covers) {
  if (call < 0 || call >= m->p->ncalls)
    return merr((tessel_model *)m, "no call %d (the model makes %d)", call, m->p->ncalls);
  const tsrt_model_call *c = &m->p->calls[call];
  int s = m->last_spec[call];
  if (spec) *spec = s;
  if (nspecs) *nspecs = c->nspecs;
  if (values) *values = s >= 0 ? c->specs[s].values : NULL;
  if (covers) *covers = s >= 0 ? c->specs[s].covers : 0;
  return 0;
}

int tessel_model_get_output(const tessel_model *m, int i, const void **data, int *ndim,
                            int64_t shape[TESSEL_MODEL_MAX_DIMS]) {
  const tsrt_model_plan *p = m->p;
  if (i < 0 || i >= p->noutputs) return merr((tessel_model *)m, "no output %d (the model has %d)", i, p->noutputs);
  if (!m->ran) return merr((tessel_model *)m, "the model has not run since its inputs were set");
  int t = p->outputs[i];
  const tsrt_model_tensor *x = &p->tensors[t];
  int64_t sh[TSRT_MAX_DIMS];
  if (tensor_bytes(x, m->syms, sh) < 0) return merr((tessel_model *)m, "output %s: unbound size", x->name);
  *data = m->targs[t];
  *ndim = x->ndim;
  for (int j = 0; j < x->ndim; j++) shape[j] = sh[j];
  return 0;
}

int tessel_model_copy_output(const tessel_model *m, int i, void *dst, size_t dst_bytes) {
  const void *data;
  int nd;
  int64_t shape[TESSEL_MODEL_MAX_DIMS];
  if (tessel_model_get_output(m, i, &data, &nd, shape)) return -1;
  const tsrt_model_tensor *x = &m->p->tensors[m->p->outputs[i]];
  uint64_t bytes = (uint64_t)tsrt_dtype_bytes(x->dtype);
  for (int j = 0; j < nd; j++) bytes *= (uint64_t)shape[j];
  if (bytes > dst_bytes)
    return merr((tessel_model *)m, "output %s needs %llu bytes, the buffer has %zu", x->name,
                (unsigned long long)bytes, dst_bytes);
  if (bytes) memcpy(dst, data, (size_t)bytes);
  return 0;
}

int tessel_model_get_stats(const tessel_model *m, tessel_model_stats *o) {
  memset(o, 0, sizeof *o);
  o->nkernels = m->p->nkernels;
  o->ncalls = m->p->ncalls;
  o->ntensors = m->p->ntensors;
  o->nsyms = m->p->nsyms;
  o->weights_bytes = m->p->weights_bytes;
  o->workspace_bytes = m->ws_bytes;
  o->naive_bytes = m->naive_bytes;
  o->target = m->p->target;
  return 0;
}

int64_t tessel_model_symbol(const tessel_model *m, const char *name) {
  for (int k = 0; k < m->p->nsyms; k++)
    if (!strcmp(m->p->syms[k], name)) return m->syms[k];
  return -1;
}

/* ---- forked runs ---------------------------------------------------------------------- */


/* The child's report: a header, then per output its io record and bytes
 * (same binary on both ends of the pipe). */
typedef struct run_header {
  int32_t status, nsecs, noutputs;
  char error[512];
  double secs[TSRT_MAX_REPEAT];
} run_header;

static void child_run(int fd, const char *path, const tsrt_model_io *in, int nin, int repeat) {
  run_header h;
  memset(&h, 0, sizeof h);
  h.status = TS_ELOAD;
  tessel_model *m = tessel_model_load(path, h.error, sizeof h.error);
  if (!m) goto report;
  for (int i = 0; i < m->p->ninputs; i++) {
    const char *name = m->p->tensors[m->p->inputs[i]].name;
    const tsrt_model_io *io = NULL;
    for (int k = 0; k < nin; k++)
      if (!strcmp(in[k].name, name)) io = &in[k];
    if (!io) {
      snprintf(h.error, sizeof h.error, "input %s was not sent", name);
      goto report;
    }
    int64_t want = tsrt_dtype_bytes(m->p->tensors[m->p->inputs[i]].dtype);
    for (int j = 0; j < io->ndim; j++) want *= io->shape[j];
    if (io->dtype != m->p->tensors[m->p->inputs[i]].dtype || (int64_t)io->nbytes != want) {
      snprintf(h.error, sizeof h.error, "input %s: %s data of %zu bytes does not fit the model's %s", name,
               tsrt_dtype_name(io->dtype), io->nbytes, tsrt_dtype_name(m->p->tensors[m->p->inputs[i]].dtype));
      goto report;
    }
    if (tessel_model_set_input(m, i, io->data, io->ndim, io->shape)) {
      snprintf(h.error, sizeof h.error, "%s", m->err);
      goto report;
    }
  }
  h.status = TS_EKERNEL;
  if (tessel_model_run(m)) {
    snprintf(h.error, sizeof h.error, "%s", m->err);
    goto report;
  }
  for (int r = 0; r < repeat && r < TSRT_MAX_REPEAT; r++) {
    double t0 = tsrt_now();
    if (tessel_model_run(m)) {
      snprintf(h.error, sizeof h.error, "%s", m->err);
      goto report;
    }
    h.secs[h.nsecs++] = tsrt_now() - t0;
  }
  h.status = TS_OK;
  h.noutputs = m->p->noutputs;
report:
  if (tsrt_write_all(fd, &h, sizeof h) == 0 && h.status == TS_OK)
    for (int i = 0; i < h.noutputs; i++) {
      tsrt_model_io io;
      memset(&io, 0, sizeof io);
      const void *data = NULL;
      int nd = 0;
      tessel_model_get_output(m, i, &data, &nd, io.shape);
      const tsrt_model_tensor *x = &m->p->tensors[m->p->outputs[i]];
      snprintf(io.name, sizeof io.name, "%s", x->name);
      io.dtype = x->dtype;
      io.ndim = nd;
      io.nbytes = (size_t)tsrt_dtype_bytes(x->dtype);
      for (int j = 0; j < nd; j++) io.nbytes *= (size_t)io.shape[j];
      if (tsrt_write_all(fd, &io, sizeof io) || (io.nbytes && tsrt_write_all(fd, data, io.nbytes))) break;
    }
  tessel_model_free(m);
}

void tsrt_model_run_forked(const char *path, const tsrt_model_io *inputs, int ninputs, int repeat,
                           double timeout_s, int num_threads, tsrt_model_run_result *res) {
  memset(res, 0, sizeof *res);
  double timeout = timeout_s > 0 ? timeout_s : 60;
  int fds[2];
  pid_t pid = tsrt_fork_pipe(fds, &res->status, res->error, sizeof res->error);
  if (pid < 0) return;
  if (pid == 0) {
    close(fds[0]);
    tsrt_child_threads(num_threads);
    child_run(fds[1], path, inputs, ninputs, repeat);
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  double deadline = tsrt_now() + timeout;
  run_header h;
  int rc = tsrt_read_all(fds[0], &h, sizeof h, deadline);
  if (rc == 0) {
    h.error[sizeof h.error - 1] = '\0';
    res->status = (ts_status)h.status;
    snprintf(res->error, sizeof res->error, "%s", h.error);
    res->nsecs = h.nsecs < 0 ? 0 : h.nsecs > TSRT_MAX_REPEAT ? TSRT_MAX_REPEAT : h.nsecs;
    memcpy(res->secs, h.secs, sizeof res->secs);
    if (h.status == TS_OK && h.noutputs > 0 && h.noutputs <= 4096) {
      res->outputs = ts_calloc((size_t)h.noutputs, sizeof *res->outputs);
      if (!res->outputs) rc = -1;
      for (int i = 0; i < h.noutputs && rc == 0; i++) {
        tsrt_model_io *io = &res->outputs[i];
        if ((rc = tsrt_read_all(fds[0], io, sizeof *io, deadline)) != 0) break;
        io->name[sizeof io->name - 1] = '\0';
        io->data = ts_malloc(io->nbytes ? io->nbytes : 1);
        if (!io->data) {
          rc = -1;
          break;
        }
        res->noutputs = i + 1;
        if (io->nbytes && (rc = tsrt_read_all(fds[0], io->data, io->nbytes, deadline)) != 0) break;
      }
    }
  }
  if (rc == -2) kill(pid, SIGKILL);
  int wst = tsrt_reap(pid);
  close(fds[0]);
  if (rc == -2) {
    tsrt_model_run_result_fini(res);
    res->status = TS_ETIMEOUT;
    snprintf(res->error, sizeof res->error, "the model run took over %.1f s (killed)", timeout);
  } else if (rc != 0) {
    tsrt_model_run_result_fini(res);
    res->status = WIFSIGNALED(wst) ? TS_ECRASH : TS_ESYSTEM;
    snprintf(res->error, sizeof res->error, "%s", WIFSIGNALED(wst) ? "the model run crashed" : "lost the child's report");
    if (WIFSIGNALED(wst))
      snprintf(res->error, sizeof res->error, "the model run died on signal %d", WTERMSIG(wst));
  }
}

void tsrt_model_run_result_fini(tsrt_model_run_result *res) {
  for (int i = 0; i < res->noutputs && res->outputs; i++) ts_free(res->outputs[i].data);
  ts_free(res->outputs);
  res->outputs = NULL;
  res->noutputs = 0;
}
