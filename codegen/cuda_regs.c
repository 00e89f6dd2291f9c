/* cuda_regs.c — the register check of a compiled CUDA module (cuda.h):
 * each kernel's registers and spills, as NVRTC's cubin reports them, against
 * the device limits of gpu_check.h. It lives with the CUDA backend (it reads
 * the emitter's module and NVRTC's binary), not with the LLVM-free checks. */
#include <stdio.h>
#include <string.h>

#include "codegen/cuda.h"

ts_status cg_gpu_check_registers(const cg_cuda_module *m, const cg_cuda_binary *bin, const cg_gpu_limits *lim,
                                 ts_diag *d) {
  if (!m || !bin) return ts_diag_set(d, TS_EINVAL, "gpu check: registers: missing module or binary");
  cg_gpu_limits def;
  if (!lim) {
    cg_gpu_limits_default(&def);
    lim = &def;
  }
  for (int k = 0; k < m->nkernels; k++) {
    char name[32];
    snprintf(name, sizeof name, "tessel_kernel%d", k);
    const cg_cuda_kernel_regs *r = NULL;
    for (int i = 0; i < bin->nkernels && !r; i++)
      if (strcmp(bin->kernels[i].name, name) == 0) r = &bin->kernels[i];
    if (!r || r->regs <= 0)
      return ts_diag_set(d, TS_EINVAL, "gpu check: registers: the cubin reports no register count for %s (%s)",
                         name, bin->cubin ? "not in its .nv.info" : "compiled without a cubin");
    const cg_cuda_launch *L = &m->kernels[k];
    int64_t threads = L->block[0] * L->block[1] * L->block[2];
    if (r->regs > lim->max_regs_per_thread)
      return ts_diag_set(d, TS_EUNSUPPORTED,
                         "gpu check: kernel %s uses %d registers per thread, over the limit of %d (%lld threads "
                         "per block)",
                         name, r->regs, lim->max_regs_per_thread, (long long)threads);
    if ((int64_t)r->regs * threads > lim->max_regs_per_block)
      return ts_diag_set(d, TS_EUNSUPPORTED,
                         "gpu check: kernel %s uses %d registers per thread x %lld threads per block = %lld "
                         "registers, over the register file of %lld per block",
                         name, r->regs, (long long)threads, (long long)((int64_t)r->regs * threads),
                         (long long)lim->max_regs_per_block);
    if (lim->max_spill_bytes >= 0 && r->spill_store_bytes > lim->max_spill_bytes)
      return ts_diag_set(d, TS_EUNSUPPORTED,
                         "gpu check: kernel %s spills %lld bytes of registers per thread (%d registers, %lld "
                         "threads per block; %lld bytes reloaded), over the limit of %lld",
                         name, (long long)r->spill_store_bytes, r->regs, (long long)threads,
                         (long long)r->spill_load_bytes, (long long)lim->max_spill_bytes);
  }
  return TS_OK;
}
