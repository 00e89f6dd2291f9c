/* codegen/nvrtc.c — CUDA C to PTX and cubin through NVRTC (linked at build
 * time when meson finds the toolkit: -Dcuda=auto|enabled). Without CUDA the
 * same functions exist and answer TS_EUNSUPPORTED "built without CUDA", so
 * callers need no #ifdefs.
 *
 * Compile errors come back as TS_EINTERNAL (generated code that does not
 * compile is tessel's bug) with NVRTC's first error line and the generated
 * source line it points at, quoted with its number.
 *
 * With a cubin, each kernel's registers and stack frame are read from the
 * cubin's .nv.info (cg_cubin_kernel_regs, no CUDA needed) and its spills
 * from ptxas's --verbose report in the log (cg_ptxas_log_apply). */
#include "codegen/cuda.h"

#include <elf.h>
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
  ts_free(b->kernels);
  memset(b, 0, sizeof *b);
}

const cg_cuda_kernel_regs *cg_cuda_binary_kernel(const cg_cuda_binary *b, const char *name) {
  for (int i = 0; b && name && i < b->nkernels; i++)
    if (strcmp(b->kernels[i].name, name) == 0) return &b->kernels[i];
  return NULL;
}

/* ---- registers from the cubin ------------------------------------------------
 * A cubin is an ELF64 file; its .nv.info section is a list of attributes
 * (NVIDIA's EIATTR records, as cuobjdump -elf prints them): a format byte, an
 * attribute byte, then for EIFMT_SVAL (4) a 16-bit size and that many bytes,
 * for the other formats (NVAL 1, BVAL 2, HVAL 3) two more bytes. The
 * per-function ones used here are EIFMT_SVAL with {u32 symbol index, u32
 * value}: EIATTR_REGCOUNT (0x2f) and EIATTR_FRAME_SIZE (0x11). */
enum { EIFMT_SVAL = 4, EIATTR_FRAME_SIZE = 0x11, EIATTR_REGCOUNT = 0x2f };

static uint32_t rd32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

ts_status cg_cubin_kernel_regs(const void *cubin, size_t size, cg_cuda_kernel_regs **out, int *n,
                               ts_diag *d) {
  *out = NULL;
  *n = 0;
  const unsigned char *img = cubin;
  Elf64_Ehdr eh;
  if (!img || size < sizeof eh) return ts_diag_set(d, TS_EPARSE, "cubin: %zu bytes, too short for an ELF header", size);
  memcpy(&eh, img, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return ts_diag_set(d, TS_EPARSE, "cubin: not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return ts_diag_set(d, TS_EPARSE, "cubin: not a little-endian ELF64 file (class %d, data %d)",
                       eh.e_ident[EI_CLASS], eh.e_ident[EI_DATA]);
  if (eh.e_machine != 190 /* EM_CUDA */)
    return ts_diag_set(d, TS_EPARSE, "cubin: ELF machine %d is not EM_CUDA (190)", eh.e_machine);
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > size ||
      (size - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum || eh.e_shstrndx >= eh.e_shnum)
    return ts_diag_set(d, TS_EPARSE, "cubin: section header table (offset %llu, %u entries) outside the %zu bytes",
                       (unsigned long long)eh.e_shoff, eh.e_shnum, size);
  Elf64_Shdr *sh = ts_malloc(sizeof *sh * (eh.e_shnum ? eh.e_shnum : 1));
  if (!sh) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  memcpy(sh, img + eh.e_shoff, sizeof *sh * eh.e_shnum);
  ts_status st = TS_OK;
  for (int i = 0; i < eh.e_shnum; i++)
    if (sh[i].sh_type != SHT_NOBITS && (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset)) {
      st = ts_diag_set(d, TS_EPARSE, "cubin: section %d (offset %llu, %llu bytes) outside the %zu bytes", i,
                       (unsigned long long)sh[i].sh_offset, (unsigned long long)sh[i].sh_size, size);
      break;
    }
  const Elf64_Shdr *shstr = &sh[eh.e_shstrndx], *info = NULL, *symtab = NULL;
  for (int i = 0; !st && i < eh.e_shnum; i++) {
    if (sh[i].sh_name >= shstr->sh_size) continue;
    const char *nm = (const char *)img + shstr->sh_offset + sh[i].sh_name;
    size_t room = shstr->sh_size - sh[i].sh_name;
    if (strnlen(nm, room) == room) continue;
    if (strcmp(nm, ".nv.info") == 0) info = &sh[i];
    if (sh[i].sh_type == SHT_SYMTAB) symtab = &sh[i];
  }
  if (!st && !symtab) st = ts_diag_set(d, TS_EPARSE, "cubin: no symbol table");
  if (!st && (symtab->sh_link >= eh.e_shnum || symtab->sh_entsize != sizeof(Elf64_Sym)))
    st = ts_diag_set(d, TS_EPARSE, "cubin: malformed symbol table (link %u, entry size %llu)", symtab->sh_link,
                     (unsigned long long)symtab->sh_entsize);
  if (st) {
    ts_free(sh);
    return st;
  }
  const Elf64_Shdr *strtab = &sh[symtab->sh_link];
  size_t nsym = symtab->sh_size / sizeof(Elf64_Sym);
  /* the kernels: global function symbols, and where each lands in the list */
  cg_cuda_kernel_regs *k = ts_calloc(nsym ? nsym : 1, sizeof *k);
  int *slot = ts_calloc(nsym ? nsym : 1, sizeof *slot);
  if (!k || !slot) {
    ts_free(k);
    ts_free(slot);
    ts_free(sh);
    return ts_diag_set(d, TS_ENOMEM, "out of memory");
  }
  int nk = 0;
  for (size_t i = 0; i < nsym; i++) {
    Elf64_Sym sym;
    memcpy(&sym, img + symtab->sh_offset + i * sizeof sym, sizeof sym);
    slot[i] = -1;
    if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
        ELF64_ST_BIND(sym.st_info) == STB_LOCAL || sym.st_name >= strtab->sh_size)
      continue;
    const char *nm = (const char *)img + strtab->sh_offset + sym.st_name;
    size_t room = strtab->sh_size - sym.st_name;
    size_t len = strnlen(nm, room);
    if (len == room) continue;
    slot[i] = nk;
    snprintf(k[nk].name, sizeof k[nk].name, "%.*s", (int)len, nm);
    k[nk].spill_store_bytes = k[nk].spill_load_bytes = -1;
    nk++;
  }
  /* the attributes */
  if (info) {
    const unsigned char *p = img + info->sh_offset, *end = p + info->sh_size;
    while (p + 4 <= end) {
      int fmt = p[0], attr = p[1];
      size_t len = 4;
      if (fmt == EIFMT_SVAL) {
        uint16_t sz;
        memcpy(&sz, p + 2, 2);
        len += sz;
      } else if (fmt < 1 || fmt > 4) {
        st = ts_diag_set(d, TS_EPARSE, "cubin: .nv.info record at byte %ld has unknown format %d",
                         (long)(p - (img + info->sh_offset)), fmt);
        break;
      }
      if (len > (size_t)(end - p)) {
        st = ts_diag_set(d, TS_EPARSE, "cubin: .nv.info record at byte %ld runs past the section",
                         (long)(p - (img + info->sh_offset)));
        break;
      }
      if (fmt == EIFMT_SVAL && len == 12 && (attr == EIATTR_REGCOUNT || attr == EIATTR_FRAME_SIZE)) {
        uint32_t si = rd32(p + 4), v = rd32(p + 8);
        if (si < nsym && slot[si] >= 0) {
          if (attr == EIATTR_REGCOUNT) k[slot[si]].regs = (int)v;
          else k[slot[si]].stack_bytes = v;
        }
      }
      p += len;
    }
  }
  ts_free(slot);
  ts_free(sh);
  if (st) {
    ts_free(k);
    return st;
  }
  *out = k;
  *n = nk;
  return TS_OK;
}

/* ---- ptxas --verbose lines ---------------------------------------------------- */
static cg_cuda_kernel_regs *log_kernel(cg_cuda_kernel_regs *k, int n, const char *name, size_t len) {
  for (int i = 0; i < n; i++)
    if (strlen(k[i].name) == len && strncmp(k[i].name, name, len) == 0) return &k[i];
  return NULL;
}

void cg_ptxas_log_apply(const char *log, cg_cuda_kernel_regs *kernels, int n) {
  cg_cuda_kernel_regs *cur = NULL;
  for (const char *line = log; line && *line;) {
    const char *eol = strchr(line, '\n');
    size_t ll = eol ? (size_t)(eol - line) : strlen(line);
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s", (int)(ll < sizeof buf - 1 ? ll : sizeof buf - 1), line);
    const char *p;
    if ((p = strstr(buf, "Function properties for ")) != NULL) {
      p += strlen("Function properties for ");
      cur = log_kernel(kernels, n, p, strcspn(p, " \r"));
    } else if ((p = strstr(buf, "Compiling entry function '")) != NULL) {
      p += strlen("Compiling entry function '");
      cur = log_kernel(kernels, n, p, strcspn(p, "'"));
    } else if (cur && (p = strstr(buf, "bytes stack frame")) != NULL) {
      const char *q = strchr(buf, '.');
      long long stack, sst, sld;
      if (q && sscanf(q + 1, " %lld bytes stack frame, %lld bytes spill stores, %lld bytes spill loads", &stack,
                      &sst, &sld) == 3) {
        if (cur->stack_bytes == 0) cur->stack_bytes = stack;
        cur->spill_store_bytes = sst;
        cur->spill_load_bytes = sld;
      }
    } else if (cur && (p = strstr(buf, "Used ")) != NULL) {
      int r;
      if (sscanf(p, "Used %d registers", &r) == 1 && cur->regs == 0) cur->regs = r;
    }
    line = eol ? eol + 1 : NULL;
  }
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
  /* with a cubin, ptxas reports each kernel's registers and spills */
  const char *opts[] = {archopt, incopt, "--std=c++17", "-default-device", "--ptxas-options=--verbose"};
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source, "tessel.cu", 0, NULL, NULL);
  if (r != NVRTC_SUCCESS)
    return ts_diag_set(d, TS_EINTERNAL, "nvrtc: nvrtcCreateProgram failed: %s", nvrtcGetErrorString(r));
  r = nvrtcCompileProgram(prog, want_cubin ? 5 : 4, opts); /* fast math is chosen per intrinsic by the emitter */
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
    ts_diag q;
    ts_diag_clear(&q);
    if (cg_cubin_kernel_regs(out->cubin, n, &out->kernels, &out->nkernels, &q)) {
      st = ts_diag_set(d, q.code == TS_ENOMEM ? TS_ENOMEM : TS_EINTERNAL,
                       "nvrtc: reading the registers of the cubin NVRTC wrote for %s: %s", arch, q.msg);
      goto done;
    }
    cg_ptxas_log_apply(out->log, out->kernels, out->nkernels);
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
