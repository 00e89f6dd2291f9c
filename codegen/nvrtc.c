/* codegen/nvrtc.c — CUDA C to PTX and cubin through NVRTC (linked at build
 * time when meson finds the toolkit: -Dcuda=auto|enabled). Without CUDA the
 * same functions exist and answer TS_EUNSUPPORTED "built without CUDA", so
 * callers need no #ifdefs.
 *
 * Compile errors come back as TS_EINTERNAL (generated code that does not
 * compile is tessel's bug) with NVRTC's first error line and the generated
 * source line it points at, quoted with its number. */
#include "codegen/cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessel_config.h"

#if TESSEL_HAVE_CUDA
#include <nvrtc.h>
#endif

void cg_cuda_binary_fini(cg_cuda_binary *b) {
  if (!b) return;
  ts_free(b->ptx);
  ts_free(b->cubin);
  ts_free(b->log);
  memset(b, 0, sizeof *b);
}

#if !TESSEL_HAVE_CUDA

bool cg_nvrtc_available(void) { return false; }
void cg_nvrtc_version(char *buf, size_t n) { snprintf(buf, n, "none"); }
ts_status cg_nvrtc_compile(const char *source, const char *arch, bool want_cubin, cg_cuda_binary *out,
                           ts_diag *d) {
  if (out) memset(out, 0, sizeof *out);
  return ts_diag_set(d, TS_EUNSUPPORTED,
                     "nvrtc: tessel was built without CUDA (configure with -Dcuda=enabled and the toolkit "
                     "at /usr/local/cuda to compile for '%s')",
                     arch && *arch ? arch : "sm_90");
}

#else

bool cg_nvrtc_available(void) { return true; }

void cg_nvrtc_version(char *buf, size_t n) {
  int ma = 0, mi = 0;
  if (nvrtcVersion(&ma, &mi) == NVRTC_SUCCESS) snprintf(buf, n, "%d.%d", ma, mi);
  else snprintf(buf, n, "unknown");
}

/* The first "NAME(LINE): error: MSG" of the log, with the source line. */
static ts_status compile_error(const char *source, const char *log, const char *arch, ts_diag *d) {
  const char *e = log ? strstr(log, ": error") : NULL;
  if (!e) e = log ? strstr(log, "error") : NULL;
  if (!e) return ts_diag_set(d, TS_EINTERNAL, "nvrtc: compiling the generated CUDA for %s failed: %s", arch,
                             log && *log ? log : "(no log)");
  /* back up to the start of the line: "tessel.cu(LINE)" */
  const char *ls = e;
  while (ls > log && ls[-1] != '\n') ls--;
  const char *le = strchr(e, '\n');
  int msglen = (int)(le ? le - ls : (long)strlen(ls));
  long line = -1;
  const char *paren = memchr(ls, '(', (size_t)(e - ls));
  if (paren) line = strtol(paren + 1, NULL, 10);
  const char *src = source;
  for (long i = 1; src && i < line; i++) {
    src = strchr(src, '\n');
    if (src) src++;
  }
  if (line > 0 && src) {
    const char *se = strchr(src, '\n');
    int slen = (int)(se ? se - src : (long)strlen(src));
    return ts_diag_set(d, TS_EINTERNAL,
                       "nvrtc: the generated CUDA does not compile for %s: %.*s\n  %ld | %.*s", arch,
                       msglen, ls, line, slen > 300 ? 300 : slen, src);
  }
  return ts_diag_set(d, TS_EINTERNAL, "nvrtc: the generated CUDA does not compile for %s: %.*s", arch,
                     msglen, ls);
}

ts_status cg_nvrtc_compile(const char *source, const char *arch, bool want_cubin, cg_cuda_binary *out,
                           ts_diag *d) {
  if (!source || !out) return ts_diag_set(d, TS_EINVAL, "nvrtc: missing argument");
  memset(out, 0, sizeof *out);
  if (!arch || !*arch) arch = "sm_90";
  /* sm_XX gives PTX and a cubin; compute_XX only PTX */
  char archopt[64], incopt[600];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s%s", want_cubin ? "" : "compute_",
           want_cubin ? arch : (strncmp(arch, "sm_", 3) == 0 ? arch + 3 : arch));
  const char *inc = getenv("TESSEL_CUDA_INCLUDE");
#ifdef TESSEL_CUDA_INCLUDE_DIR
  if (!inc || !*inc) inc = TESSEL_CUDA_INCLUDE_DIR;
#endif
  if (!inc || !*inc) inc = "/usr/local/cuda/include";
  snprintf(incopt, sizeof incopt, "--include-path=%s", inc);
  const char *opts[] = {archopt, incopt, "--std=c++17", "-default-device"};
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source, "tessel.cu", 0, NULL, NULL);
  if (r != NVRTC_SUCCESS)
    return ts_diag_set(d, TS_EINTERNAL, "nvrtc: nvrtcCreateProgram failed: %s", nvrtcGetErrorString(r));
  r = nvrtcCompileProgram(prog, 4, opts); /* fast math is chosen per intrinsic by the emitter */
  size_t logn = 0;
  nvrtcGetProgramLogSize(prog, &logn);
  if (logn > 1) {
    out->log = ts_malloc(logn + 1);
    if (out->log && nvrtcGetProgramLog(prog, out->log) != NVRTC_SUCCESS) out->log[0] = 0;
    if (out->log) out->log[logn] = 0;
  }
  ts_status st = TS_OK;
  if (r != NVRTC_SUCCESS) {
    if (r == NVRTC_ERROR_INVALID_OPTION)
      st = ts_diag_set(d, TS_EINVAL, "nvrtc: architecture '%s' is not supported by this NVRTC: %s", arch,
                       out->log ? out->log : nvrtcGetErrorString(r));
    else
      st = compile_error(source, out->log, arch, d);
    goto done;
  }
  size_t n = 0;
  if ((r = nvrtcGetPTXSize(prog, &n)) != NVRTC_SUCCESS) goto nverr;
  out->ptx = ts_malloc(n + 1);
  if (!out->ptx) {
    st = ts_diag_set(d, TS_ENOMEM, "nvrtc: out of memory");
    goto done;
  }
  if ((r = nvrtcGetPTX(prog, out->ptx)) != NVRTC_SUCCESS) goto nverr;
  out->ptx[n] = 0;
  out->ptx_size = strlen(out->ptx);
  if (want_cubin) {
    if ((r = nvrtcGetCUBINSize(prog, &n)) != NVRTC_SUCCESS) goto nverr;
    if (n == 0) {
      st = ts_diag_set(d, TS_EINVAL, "nvrtc: no cubin for '%s' (a real sm_XX architecture is needed)", arch);
      goto done;
    }
    out->cubin = ts_malloc(n);
    if (!out->cubin) {
      st = ts_diag_set(d, TS_ENOMEM, "nvrtc: out of memory");
      goto done;
    }
    if ((r = nvrtcGetCUBIN(prog, out->cubin)) != NVRTC_SUCCESS) goto nverr;
    out->cubin_size = n;
  }
  goto done;
nverr:
  st = ts_diag_set(d, TS_EINTERNAL, "nvrtc: %s", nvrtcGetErrorString(r));
done:
  nvrtcDestroyProgram(&prog);
  if (st) {
    char *keep = out->log;
    out->log = NULL;
    cg_cuda_binary_fini(out);
    out->log = keep;
  }
  return st;
}

#endif
