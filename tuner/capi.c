/* capi.c — the public C API's kernels, built kernels, logs and errors
 * (include/tessel/tessel.h): thin handles over the IR parser, the workload
 * library, the runtime's artifact loader and the tuning log, each turning a
 * ts_diag into the caller's tessel_error. Tuning and building are
 * capi_tune.c. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tuner/capi_int.h"
#include "ir/parse.h"
#include "ir/struct.h"
#include "ir/workloads/workloads.h"
#include "runtime/runtime.h"
#include "tuner/build.h"
#include "tuner/database.h"

/* The public codes are the internal ones (the numbers are ABI). */
#define CHECK_CODE(pub, in) _Static_assert((int)(pub) == (int)(in), #pub " is " #in);
CHECK_CODE(TESSEL_OK, TS_OK)
CHECK_CODE(TESSEL_EINVAL, TS_EINVAL)
CHECK_CODE(TESSEL_EIO, TS_EIO)
CHECK_CODE(TESSEL_EINTERNAL, TS_EINTERNAL)
CHECK_CODE(TESSEL_EPENDING, TS_EPENDING)
CHECK_CODE(TESSEL_EKERNEL, TS_EKERNEL)
_Static_assert(TS_STATUS_COUNT == TESSEL_EKERNEL + 1, "tessel.h lists every ts_status");

/* ---- errors ------------------------------------------------------------------------ */

const char *tessel_strerror(tessel_status st) {
  if (st == TESSEL_ECANCELED) return "cancelled";
  return ts_strerror((ts_status)st);
}

tessel_status capi_fail(tessel_error *err, const ts_diag *d) {
  ts_status code = d->code ? d->code : TS_EINTERNAL;
  if (err) {
    err->code = (tessel_status)code;
    snprintf(err->msg, sizeof err->msg, "%s", d->msg[0] ? d->msg : ts_strerror(code));
  }
  return (tessel_status)code;
}

tessel_status capi_err(tessel_error *err, tessel_status code, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* ---- kernels to tune ------------------------------------------------------------ */

static tessel_func *func_new(void) {
  tessel_func *f = ts_calloc(1, sizeof *f);
  if (f) ts_arena_init(&f->ar);
  return f;
}

void tessel_func_free(tessel_func *f) {
  if (!f) return;
  ts_arena_fini(&f->ar);
  ts_free(f->definition);
  ts_free(f);
}

/* Picks the function (named, or the only one) of the module parsed from
 * src into f's arena; where names the source in messages. */
static ts_status func_from_source(tessel_func *f, const char *src, const char *where, const char *name,
                                  ts_diag *d) {
  ir_module *m = ir_module_new();
  if (!m) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  ts_status st = ir_parse_module(m, src, strlen(src), where, d);
  ir_func *pick = NULL;
  if (!st && name) {
    if (!(pick = ir_module_get(m, name))) st = ts_diag_set(d, TS_ENOTFOUND, "%s: no function named '%s'", where, name);
  } else if (!st && m->nfuncs == 1) {
    pick = m->funcs[0].u.prim;
  } else if (!st) {
    ts_strbuf sb;
    ts_strbuf_init(&sb);
    for (int i = 0; i < m->nfuncs; i++) ts_strbuf_printf(&sb, "%s%s", i ? ", " : "", m->funcs[i].name);
    st = ts_diag_set(d, TS_EINVAL, "%s holds %d functions; name one (%s)", where, m->nfuncs,
                     sb.data ? sb.data : "none");
    ts_strbuf_fini(&sb);
  }
  if (pick && !(f->func = ir_func_copy(&f->ar, pick))) st = ts_diag_set(d, TS_ENOMEM, "out of memory");
  ir_module_free(m);
  return st;
}

/* Key, and the refusal of symbolic sizes (tuning needs them bound). */
static tessel_status func_finish(tessel_func *f, tessel_func **out, tessel_error *err) {
  if (f->func->nsyms) {
    capi_err(err, TESSEL_EINVAL, "%s has symbolic sizes; bind them in the DSL (tessel tunes one size)",
             f->func->name ? f->func->name : "the function");
    tessel_func_free(f);
    return TESSEL_EINVAL;
  }
  ir_workload_key(f->func, f->key);
  *out = f;
  return TESSEL_OK;
}

static bool is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

tessel_status tessel_func_parse(const char *subject, tessel_func **out, tessel_error *err) {
  *out = NULL;
  if (!subject) return capi_err(err, TESSEL_EINVAL, "no subject given (a workload spec or a DSL file)");
  tessel_func *f = func_new();
  if (!f) return capi_err(err, TESSEL_ENOMEM, "out of memory");
  ts_diag d;
  ts_diag_clear(&d);
  char path[4096];
  snprintf(path, sizeof path, "%s", subject);
  char *name = strrchr(path, '#');
  if (name && !is_file(path)) *name++ = '\0';
  else name = NULL;
  ts_status st;
  if (!is_file(path)) { /* a workload spec */
    ir_wl_inst wl;
    st = ir_wl_parse(subject, &wl, &d);
    if (st && (strchr(subject, '/') || strchr(subject, '.'))) {
      ts_diag_clear(&d);
      st = ts_diag_set(&d, TS_ENOTFOUND, "'%s' is neither a file nor a built-in workload (see `tessel workloads`)",
                       subject);
    }
    if (!st) {
      char canon[512];
      ir_wl_canonical(&wl, canon, sizeof canon);
      f->flops = ir_wl_flops(&wl);
      if (!(f->definition = ts_strdup(canon))) st = ts_diag_set(&d, TS_ENOMEM, "out of memory");
    }
    if (!st) st = ir_wl_build(&f->ar, &wl, &f->func, &d);
  } else { /* a DSL file: logged under the argument, as `tessel tune` does */
    char *src = NULL;
    size_t len = 0;
    st = ts_read_file_as(path, TS_FILE_DSL, &src, &len, &d);
    if (!st) st = func_from_source(f, src, path, name, &d);
    ts_free(src);
    if (!st && !(f->definition = ts_strdup(subject))) st = ts_diag_set(&d, TS_ENOMEM, "out of memory");
  }
  if (st) {
    tessel_func_free(f);
    return capi_fail(err, &d);
  }
  return func_finish(f, out, err);
}

tessel_status tessel_func_from_dsl(const char *source, const char *name, tessel_func **out, tessel_error *err) {
  *out = NULL;
  if (!source) return capi_err(err, TESSEL_EINVAL, "no DSL source given");
  tessel_func *f = func_new();
  if (!f) return capi_err(err, TESSEL_ENOMEM, "out of memory");
  ts_diag d;
  ts_diag_clear(&d);
  ts_status st = func_from_source(f, source, "<dsl>", name, &d);
  if (!st && !(f->definition = ts_strdup(source))) st = ts_diag_set(&d, TS_ENOMEM, "out of memory");
  if (st) {
    tessel_func_free(f);
    return capi_fail(err, &d);
  }
  return func_finish(f, out, err);
}

const char *tessel_func_definition(const tessel_func *f) { return f->definition; }
const char *tessel_func_key(const tessel_func *f) { return f->key; }
double tessel_func_flops(const tessel_func *f) { return f->flops; }

/* ---- built kernels --------------------------------------------------------------- */

struct tessel_kernel {
  tsrt_module mod;
};

tessel_status tessel_kernel_load(const char *path, tessel_kernel **out, tessel_error *err) {
  *out = NULL;
  if (!path) return capi_err(err, TESSEL_EINVAL, "no kernel path given");
  char p[4096];
  snprintf(p, sizeof p, "%s%s", strchr(path, '/') ? "" : "./", path); /* never dlopen's search path */
  if (!is_file(p)) return capi_err(err, TESSEL_ELOAD, "%s: no such file", path);
  tessel_kernel *k = ts_calloc(1, sizeof *k);
  if (!k) return capi_err(err, TESSEL_ENOMEM, "out of memory");
  ts_diag d;
  ts_diag_clear(&d);
  if (tsrt_module_load(p, &k->mod, &d)) {
    ts_free(k);
    return capi_fail(err, &d);
  }
  *out = k;
  return TESSEL_OK;
}

void tessel_kernel_free(tessel_kernel *k) {
  if (!k) return;
  tsrt_module_unload(&k->mod);
  ts_free(k);
}

int tessel_kernel_num_params(const tessel_kernel *k) { return k->mod.meta->nparams; }
int tessel_kernel_num_inputs(const tessel_kernel *k) { return k->mod.meta->ninputs; }

tessel_status tessel_kernel_param_info(const tessel_kernel *k, int i, tessel_tensor_info *out, tessel_error *err) {
  const tsrt_kernel_meta *m = k->mod.meta;
  if (i < 0 || i >= m->nparams)
    return capi_err(err, TESSEL_EBOUNDS, "kernel %s has no parameter %d (it has %d)", m->name, i, m->nparams);
  const tsrt_param_meta *p = &m->params[i];
  memset(out, 0, sizeof *out);
  out->name = p->name;
  out->dtype = p->dtype;
  out->ndim = p->ndim;
  for (int j = 0; j < p->ndim && j < TESSEL_MODEL_MAX_DIMS; j++) {
    int64_t s = p->shape[j];
    out->shape[j] = s >= 0 ? s : -1;
    if (s < 0 && s != TSRT_DIM_EXPR && -1 - s < m->nsyms) out->dim_names[j] = m->syms[-1 - s];
  }
  return TESSEL_OK;
}

tessel_status tessel_kernel_run(const tessel_kernel *k, void *const *args, tessel_error *err) {
  const tsrt_kernel_meta *m = k->mod.meta;
  if (m->nsyms)
    return capi_err(err, TESSEL_EUNSUPPORTED, "kernel %s has symbolic sizes (%s...); build it at one size", m->name,
                    m->syms[0]);
  void *a[256];
  if (m->nparams > 256) return capi_err(err, TESSEL_EUNSUPPORTED, "kernel %s has over 256 parameters", m->name);
  for (int i = 0; i < m->nparams; i++) {
    if (!args || !args[i]) return capi_err(err, TESSEL_EINVAL, "kernel %s: no buffer for %s", m->name, m->params[i].name);
    if ((uintptr_t)args[i] % 64)
      return capi_err(err, TESSEL_EINVAL, "kernel %s: the buffer of %s is not 64-byte aligned", m->name,
                      m->params[i].name);
    a[i] = args[i];
  }
  int32_t rc = k->mod.entry(a);
  if (rc) return capi_err(err, TESSEL_EKERNEL, "kernel %s returned %d", m->name, (int)rc);
  return TESSEL_OK;
}

/* ---- logs ---------------------------------------------------------------------------- */

struct tessel_log {
  tun_db *db;
  int skipped;
};

tessel_status tessel_log_open(const char *path, tessel_log **out, tessel_error *err) {
  *out = NULL;
  if (!path) return capi_err(err, TESSEL_EINVAL, "no log path given");
  if (!is_file(path)) return capi_err(err, TESSEL_EIO, "log %s: no such file", path);
  tessel_log *l = ts_calloc(1, sizeof *l);
  if (!l) return capi_err(err, TESSEL_ENOMEM, "out of memory");
  ts_diag d;
  ts_diag_clear(&d);
  if (!(l->db = tun_db_load(path, NULL, &l->skipped, &d))) {
    ts_free(l);
    if (!d.code) ts_diag_set(&d, TS_EIO, "log %s: cannot be read", path);
    return capi_fail(err, &d);
  }
  *out = l;
  return TESSEL_OK;
}

void tessel_log_close(tessel_log *l) {
  if (!l) return;
  tun_db_close(l->db);
  ts_free(l);
}

int tessel_log_count(const tessel_log *l) { return tun_db_count(l->db); }
int tessel_log_skipped(const tessel_log *l) { return l->skipped; }

static void record_out(const tun_record *r, tessel_record *out) {
  memset(out, 0, sizeof *out);
  out->workload = r->workload;
  out->workload_key = r->workload_key;
  out->target = r->target;
  out->trace = r->trace;
  out->error = r->error;
  out->verified = r->verified;
  out->nruns = r->nruns;
  out->mean_seconds = tun_record_mean(r);
  double fl = r->error ? 0 : tun_record_flops(r);
  out->gflops = fl > 0 && out->mean_seconds > 0 ? fl / out->mean_seconds * 1e-9 : 0;
  out->build_seconds = r->build_secs;
  out->time = r->time;
}

tessel_status tessel_log_record(const tessel_log *l, int i, tessel_record *out, tessel_error *err) {
  int n = tun_db_count(l->db);
  if (i < 0 || i >= n) return capi_err(err, TESSEL_EBOUNDS, "the log has no record %d (it has %d)", i, n);
  record_out(tun_db_get(l->db, i), out);
  return TESSEL_OK;
}

int tessel_log_best(const tessel_log *l, const char *workload, const char *target, tessel_record *out, int max) {
  char canon[700];
  if (target && tessel_target_canonical(target, canon, sizeof canon, NULL) == TESSEL_OK) target = canon;
  int ng = tun_db_groups(l->db, NULL, 0);
  const tun_record **first = ts_calloc((size_t)(ng > 0 ? ng : 1), sizeof *first);
  if (!first) return 0;
  tun_db_groups(l->db, first, ng);
  int k = 0;
  for (int i = 0; i < ng; i++) {
    if (!tun_record_matches(first[i], workload) || (target && strcmp(first[i]->target, target))) continue;
    const tun_record *b = tun_db_best(l->db, first[i]->workload_key, first[i]->target);
    if (!b) continue;
    if (k < max) record_out(b, &out[k]);
    k++;
  }
  ts_free(first);
  return k;
}

tessel_status tessel_target_canonical(const char *target, char *buf, size_t n, tessel_error *err) {
  cg_target tg;
  ts_diag d;
  ts_diag_clear(&d);
  if (cg_target_parse(target ? target : "llvm", &tg, &d) || tun_resolve_target(&tg, &d)) return capi_fail(err, &d);
  snprintf(buf, n, "%s", tg.text);
  return TESSEL_OK;
}
