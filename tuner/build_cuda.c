/* build_cuda.c — the CUDA side of `tessel build` and `tessel bench`
 * (--target cuda): emit CUDA C from the scheduled function (codegen/cuda_emit.c),
 * compile it with NVRTC, write the cubin (or the CUDA C / PTX), and measure
 * a cubin on the local GPU through the runtime's dlopen'd driver
 * (runtime/cuda_rt.c), in a forked child. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cuda.h"
#include "codegen/gpu_check.h"
#include "runtime/cuda_rt.h"
#include "tuner/build.h"

static bool ends_with(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && strcmp(s + n - m, suf) == 0;
}

static ts_status write_file(const char *path, const void *data, size_t n, ts_diag *d) {
  FILE *f = fopen(path, "wb");
  if (!f) return ts_diag_set(d, TS_EIO, "cannot write %s", path);
  size_t w = fwrite(data, 1, n, f);
  if (fclose(f) != 0 || w != n) return ts_diag_set(d, TS_EIO, "writing %s failed", path);
  return TS_OK;
}

static ts_status tun_cuda_compile(const ir_func *scheduled, const cg_target *tg, cg_cuda_module *mod,
                           cg_cuda_binary *bin, bool want_cubin, ts_diag *d) {
  memset(bin, 0, sizeof *bin);
  ts_status st = cg_cuda_emit(scheduled, tg, NULL, mod, d);
  if (st) return st;
  st = cg_nvrtc_compile(mod->source, tg->arch[0] ? tg->arch : "sm_90", want_cubin, bin, d);
  if (st) cg_cuda_module_fini(mod);
  return st;
}

/* One line per kernel: launch, then registers and spills from the cubin. */
static void report_text(FILE *f, const cg_cuda_module *m, const cg_cuda_binary *b, const cg_gpu_limits *lim) {
  for (int k = 0; k < m->nkernels; k++) {
    const cg_cuda_launch *L = &m->kernels[k];
    char name[32];
    snprintf(name, sizeof name, "tessel_kernel%d", k);
    long long threads = (long long)(L->block[0] * L->block[1] * L->block[2]);
    fprintf(f, "%s: grid %lldx%lldx%lld, block %lldx%lldx%lld, %lld B shared", name, (long long)L->grid[0],
            (long long)L->grid[1], (long long)L->grid[2], (long long)L->block[0], (long long)L->block[1],
            (long long)L->block[2], (long long)L->shared_bytes);
    const cg_cuda_kernel_regs *r = cg_cuda_binary_kernel(b, name);
    if (r)
      fprintf(f, ", %d registers/thread (%lld of %lld per block), %lld B stack, %lld B spilled, %lld B reloaded\n",
              r->regs, (long long)r->regs * threads, (long long)lim->max_regs_per_block, (long long)r->stack_bytes,
              (long long)r->spill_store_bytes, (long long)r->spill_load_bytes);
    else
      fprintf(f, ", registers unknown (no cubin)\n");
  }
}

static void report_json(json_t *o, const cg_cuda_module *m, const cg_cuda_binary *b, const cg_gpu_limits *lim) {
  json_t *ks = json_array();
  for (int k = 0; k < m->nkernels; k++) {
    const cg_cuda_launch *L = &m->kernels[k];
    char name[32];
    snprintf(name, sizeof name, "tessel_kernel%d", k);
    json_t *j = json_object();
    json_object_set_new(j, "name", json_string(name));
    json_object_set_new(j, "grid", json_pack("[III]", (json_int_t)L->grid[0], (json_int_t)L->grid[1],
                                             (json_int_t)L->grid[2]));
    json_object_set_new(j, "block", json_pack("[III]", (json_int_t)L->block[0], (json_int_t)L->block[1],
                                              (json_int_t)L->block[2]));
    json_object_set_new(j, "shared_bytes", json_integer(L->shared_bytes));
    const cg_cuda_kernel_regs *r = cg_cuda_binary_kernel(b, name);
    int64_t threads = L->block[0] * L->block[1] * L->block[2];
    json_object_set_new(j, "registers", r ? json_integer(r->regs) : json_null());
    json_object_set_new(j, "registers_per_block", r ? json_integer((json_int_t)r->regs * threads) : json_null());
    json_object_set_new(j, "register_file", json_integer(lim->max_regs_per_block));
    json_object_set_new(j, "stack_bytes", r ? json_integer(r->stack_bytes) : json_null());
    json_object_set_new(j, "spill_store_bytes",
                        r && r->spill_store_bytes >= 0 ? json_integer(r->spill_store_bytes) : json_null());
    json_object_set_new(j, "spill_load_bytes",
                        r && r->spill_load_bytes >= 0 ? json_integer(r->spill_load_bytes) : json_null());
    json_array_append_new(ks, j);
  }
  json_object_set_new(o, "kernels", ks);
}

ts_status tun_build_cuda(const ir_func *scheduled, const cg_target *tg, const char *path, ts_diag *d) {
  return tun_build_cuda_report(scheduled, tg, path, NULL, NULL, d);
}

ts_status tun_build_cuda_report(const ir_func *scheduled, const cg_target *tg, const char *path, FILE *text,
                                json_t *json, ts_diag *d) {
  cg_cuda_module mod;
  if (ts_debug("codegen") || ts_debug("cuda")) {
    /* the CUDA C, before compiling it */
    if (cg_cuda_emit(scheduled, tg, NULL, &mod, d) == TS_OK) fprintf(stderr, "%s\n", mod.source);
    cg_cuda_module_fini(&mod);
  }
  cg_cuda_binary bin;
  if (ends_with(path, ".cu")) { /* the CUDA C only: no NVRTC needed */
    ts_status st = cg_cuda_emit(scheduled, tg, NULL, &mod, d);
    if (st) return st;
    st = write_file(path, mod.source, strlen(mod.source), d);
    cg_cuda_module_fini(&mod);
    return st;
  }
  bool ptx = ends_with(path, ".ptx");
  ts_status st = tun_cuda_compile(scheduled, tg, &mod, &bin, !ptx, d);
  if (st) return st;
  /* the register file is a hard limit (the launch would fail); spills are
   * the search's concern (VerifyGPUCode), not a reason to refuse a build */
  cg_gpu_limits lim;
  cg_gpu_limits_for_target(tg, &lim);
  lim.max_spill_bytes = -1;
  if (!ptx) st = cg_gpu_check_registers(&mod, &bin, &lim, d);
  if (!st && text) report_text(text, &mod, ptx ? NULL : &bin, &lim);
  if (!st && json) report_json(json, &mod, ptx ? NULL : &bin, &lim);
  if (!st)
    st = ptx ? write_file(path, bin.ptx, bin.ptx_size, d) : write_file(path, bin.cubin, bin.cubin_size, d);
  if (!st && (ts_debug("codegen") || ts_debug("cuda")))
    fprintf(stderr, "cuda: %d kernel(s), %d barrier(s), %d vector access(es), %d warp all-reduce(s); "
                    "first launch grid %lldx%lldx%lld block %lldx%lldx%lld, %lld B shared\n",
            mod.nkernels, mod.nsyncs, mod.nvector, mod.nshuffle, (long long)mod.kernels[0].grid[0],
            (long long)mod.kernels[0].grid[1], (long long)mod.kernels[0].grid[2],
            (long long)mod.kernels[0].block[0], (long long)mod.kernels[0].block[1],
            (long long)mod.kernels[0].block[2], (long long)mod.kernels[0].shared_bytes);
  cg_cuda_binary_fini(&bin);
  cg_cuda_module_fini(&mod);
  return st;
}

ts_status tun_cuda_regcheck(const ir_func *scheduled, const cg_target *t, ts_diag *d) {
  if (!cg_nvrtc_available()) return TS_OK; /* nothing to compile with: skipped */
  ts_diag q;
  ts_diag_clear(&q);
  cg_cuda_module m;
  if (cg_cuda_emit(scheduled, t, NULL, &m, &q)) return ts_diag_set(d, q.code, "emitting CUDA: %s", q.msg);
  cg_cuda_binary b;
  ts_status st = cg_nvrtc_compile(m.source, t->arch[0] ? t->arch : "sm_90", true, &b, &q);
  if (!st) {
    cg_gpu_limits lim;
    cg_gpu_limits_for_target(t, &lim);
    st = cg_gpu_check_registers(&m, &b, &lim, &q);
  }
  if (st) ts_diag_set(d, q.code, "%s", q.msg);
  cg_cuda_binary_fini(&b);
  cg_cuda_module_fini(&m);
  return st;
}

void tun_measure_cuda_file(const char *path, const tsrt_measure_opts *mo, tsrt_measure_result *res) {
  size_t n = 0;
  ts_diag rd = {0};
  void *img = tsrt_read_file(path, &n, &rd);
  if (!img) {
    memset(res, 0, sizeof *res);
    res->status = TS_ELOAD;
    snprintf(res->error, sizeof res->error, "%.500s", rd.msg);
    return;
  }
  tsrt_cuda_measure_forked(img, n, mo, res);
  free(img);
}
