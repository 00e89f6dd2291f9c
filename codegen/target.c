/* codegen/target.c — target strings: "kind -key=value ...", parsed into a
 * cg_target with a canonical spelling for logs (so two spellings of one
 * target never land in different tuning records), plus a first guess of the
 * SIMD width from the triple, CPU and features. The LLVM backend fills in the
 * host's details later (cg_llvm_resolve_target); nothing here needs LLVM.
 *
 * Kinds and keys are tables, not scattered string compares: a new key is one
 * row, and the error for an unknown one lists the rows. */
#include "codegen/codegen.h"
#include "codegen/gpu_check.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tables ---------------------------------------------------------------- */

/* cuda's own check: the device limits (gpu_check.h); host-side stores stay
 * allowed here (the emitter runs them on one thread), the search refuses
 * them itself. */
static ts_status cuda_check(const ir_func *f, const cg_target *t, ts_diag *d) {
  cg_gpu_limits lim;
  cg_gpu_limits_for_target(t, &lim);
  lim.allow_unbound = true;
  lim.global_deps = false; /* conservative: leave explicit traces to verification */
  return cg_gpu_check(f, &lim, d);
}

static const cg_target_ops target_ops[] = {
    [CG_TARGET_LLVM] = {.name = "llvm", .gpu = false, .check = NULL},
    [CG_TARGET_CUDA] = {.name = "cuda", .gpu = true, .check = cuda_check},
};

const cg_target_ops *cg_target_ops_of(const cg_target *t) {
  if (!t) return &target_ops[CG_TARGET_LLVM];
  return t->ops ? t->ops : &target_ops[t->kind];
}

typedef struct kind_info {
  const char *name;
  cg_target_kind kind;
} kind_info;

static const kind_info kinds[] = {
    {"llvm", CG_TARGET_LLVM},
    {"cuda", CG_TARGET_CUDA},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

typedef enum { KEY_STR, KEY_POSINT } key_type;

/* One key: which kind accepts it, where its value goes, how it is checked. */
typedef struct key_info {
  const char *name; /* without the leading '-' */
  cg_target_kind kind;
  key_type type;
  size_t off;  /* offsetof(cg_target, field) */
  size_t size; /* char array size for KEY_STR */
} key_info;

#define STRKEY(n, k, field) {n, k, KEY_STR, offsetof(cg_target, field), sizeof(((cg_target *)0)->field)}
/* Canonical order of keys in t->text is the order of this table. */
static const key_info keys[] = {
    STRKEY("mtriple", CG_TARGET_LLVM, triple),
    STRKEY("mcpu", CG_TARGET_LLVM, cpu),
    STRKEY("mattr", CG_TARGET_LLVM, attrs),
    {"num-cores", CG_TARGET_LLVM, KEY_POSINT, offsetof(cg_target, num_cores), 0},
    STRKEY("arch", CG_TARGET_CUDA, arch),
};
#undef STRKEY
#define NKEYS (sizeof keys / sizeof keys[0])

/* x86 CPUs whose widest vectors are 512 / 256 bits (LLVM -mcpu names). */
static const char *const cpus512[] = {
    "znver4", "znver5", "skylake-avx512", "skx", "cascadelake", "cooperlake", "cannonlake",
    "icelake-client", "icelake-server", "tigerlake", "rocketlake", "sapphirerapids",
    "emeraldrapids", "graniterapids", "graniterapids-d", "knl", "knm", "x86-64-v4",
};
static const char *const cpus256[] = {
    "znver1", "znver2", "znver3", "haswell", "broadwell", "skylake", "alderlake", "raptorlake",
    "meteorlake", "arrowlake", "lunarlake", "gracemont", "bdver4", "x86-64-v3", "core-avx2",
};

static bool in_list(const char *s, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(s, list[i]) == 0) return true;
  return false;
}

/* ---- helpers --------------------------------------------------------------- */

static void list_kinds(char *buf, size_t n) {
  size_t k = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < NKINDS && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", kinds[i].name);
}

static void list_keys(cg_target_kind kind, char *buf, size_t n) {
  size_t k = 0;
  int m = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < NKEYS && k < n; i++)
    if (keys[i].kind == kind) k += (size_t)snprintf(buf + k, n - k, "%s-%s", m++ ? ", " : "", keys[i].name);
}

/* Sign of feature name in a comma-separated attribute list: +1 if "+name"
 * (or bare "name"), -1 if "-name", 0 if absent; the last mention wins.
 * prefix_match accepts any feature starting with name (avx512f, avx512bw...). */
static int attr_sign(const char *attrs, const char *name, bool prefix_match) {
  int sign = 0;
  size_t nl = strlen(name);
  const char *p = attrs;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    int sg = 1;
    const char *f = p;
    if (len && (*f == '+' || *f == '-')) {
      sg = *f == '-' ? -1 : 1;
      f++;
      len--;
    }
    if (len >= nl && strncmp(f, name, nl) == 0 && (prefix_match || len == nl)) sign = sg;
    if (!e) break;
    p = e + 1;
  }
  return sign;
}

/* The architecture part of a triple, normalised (arm64 -> aarch64, amd64 ->
 * x86_64), into buf. */
static void triple_arch(const char *triple, char *buf, size_t n) {
  size_t len = strcspn(triple, "-");
  if (len >= n) len = n - 1;
  memcpy(buf, triple, len);
  buf[len] = '\0';
  if (strcmp(buf, "arm64") == 0) snprintf(buf, n, "aarch64");
  else if (strcmp(buf, "amd64") == 0) snprintf(buf, n, "x86_64");
}

static bool arch_is_arm(const char *arch) {
  return strncmp(arch, "aarch64", 7) == 0 || strncmp(arch, "arm", 3) == 0 ||
         strncmp(arch, "thumb", 5) == 0;
}

/* First guess of the widest SIMD register, from what the string names. A
 * bare host target stays 0: the LLVM backend asks the host. */
static int guess_vector_bits(const cg_target *t) {
  if (t->kind != CG_TARGET_LLVM) return 0;
  bool native = !t->cpu[0] || strcmp(t->cpu, "native") == 0;
  if (!t->triple[0] && native && !t->attrs[0]) return 0;
  char arch[64] = "";
  if (t->triple[0]) triple_arch(t->triple, arch, sizeof arch);
  if (arch_is_arm(arch)) return 128; /* NEON (SVE is scalable; 128 is its floor) */
  int a512 = attr_sign(t->attrs, "avx512", true);
  if (a512 > 0) return 512;
  bool cpu512 = in_list(t->cpu, cpus512, sizeof cpus512 / sizeof cpus512[0]);
  if (cpu512 && a512 == 0) return 512;
  int a2 = attr_sign(t->attrs, "avx2", false), a1 = attr_sign(t->attrs, "avx", false);
  bool cpu256 = cpu512 || in_list(t->cpu, cpus256, sizeof cpus256 / sizeof cpus256[0]);
  if (a2 > 0 || a1 > 0 || (cpu256 && a2 == 0 && a1 >= 0)) return 256;
  return 128;
}

/* False when the canonical text does not fit t->text. */
static bool canonical_text(cg_target *t) {
  size_t n = sizeof t->text, k = 0;
  for (size_t i = 0; i < NKINDS; i++)
    if (kinds[i].kind == t->kind) k = (size_t)snprintf(t->text, n, "%s", kinds[i].name);
  for (size_t i = 0; i < NKEYS && k < n; i++) {
    const key_info *ki = &keys[i];
    if (ki->kind != t->kind) continue;
    if (ki->type == KEY_STR) {
      const char *v = (const char *)t + ki->off;
      if (v[0]) k += (size_t)snprintf(t->text + k, n - k, " -%s=%s", ki->name, v);
    } else {
      int v = *(const int *)(const void *)((const char *)t + ki->off);
      if (v) k += (size_t)snprintf(t->text + k, n - k, " -%s=%d", ki->name, v);
    }
  }
  return k < n;
}

/* ---- API ------------------------------------------------------------------- */

ts_status cg_target_parse(const char *s, cg_target *t, ts_diag *d) {
  char valid[256];
  if (!s || !t) return ts_diag_set(d, TS_EINVAL, "target: missing target string");
  memset(t, 0, sizeof *t);
  const char *p = s;
  while (isspace((unsigned char)*p)) p++;
  size_t klen = strcspn(p, " \t\r\n");
  if (klen == 0) {
    list_kinds(valid, sizeof valid);
    return ts_diag_set(d, TS_EINVAL, "target: empty target string; valid kinds: %s", valid);
  }
  size_t ki;
  for (ki = 0; ki < NKINDS; ki++)
    if (strlen(kinds[ki].name) == klen && strncmp(p, kinds[ki].name, klen) == 0) break;
  if (ki == NKINDS) {
    list_kinds(valid, sizeof valid);
    return ts_diag_set(d, TS_EINVAL, "target: unknown kind '%.*s'; valid kinds: %s", (int)klen, p,
                       valid);
  }
  t->kind = kinds[ki].kind;
  t->ops = &target_ops[t->kind];
  p += klen;
  bool seen[NKEYS] = {false};
  for (;;) {
    while (isspace((unsigned char)*p)) p++;
    if (!*p) break;
    size_t tlen = strcspn(p, " \t\r\n");
    const char *tok = p;
    p += tlen;
    list_keys(t->kind, valid, sizeof valid);
    if (tok[0] != '-' || tlen < 2)
      return ts_diag_set(d, TS_EINVAL, "target: expected -key=value, got '%.*s'; valid keys for %s: %s",
                         (int)tlen, tok, kinds[ki].name, valid);
    const char *name = tok + 1;
    const char *eq = memchr(name, '=', tlen - 1);
    size_t nlen = eq ? (size_t)(eq - name) : tlen - 1;
    size_t j;
    for (j = 0; j < NKEYS; j++)
      if (keys[j].kind == t->kind && strlen(keys[j].name) == nlen && strncmp(name, keys[j].name, nlen) == 0)
        break;
    if (j == NKEYS)
      return ts_diag_set(d, TS_EINVAL, "target: unknown key '-%.*s' for %s; valid keys: %s", (int)nlen,
                         name, kinds[ki].name, valid);
    const key_info *key = &keys[j];
    if (!eq || eq + 1 == tok + tlen)
      return ts_diag_set(d, TS_EINVAL, "target: key -%s needs a value (-%s=...)", key->name, key->name);
    if (seen[j]) return ts_diag_set(d, TS_EINVAL, "target: key -%s given twice", key->name);
    seen[j] = true;
    const char *val = eq + 1;
    size_t vlen = (size_t)(tok + tlen - val);
    if (key->type == KEY_STR) {
      if (vlen >= key->size)
        return ts_diag_set(d, TS_EINVAL, "target: the value of -%s is too long (%zu characters, at most %zu)",
                           key->name, vlen, key->size - 1);
      char *dst = (char *)t + key->off;
      memcpy(dst, val, vlen);
      dst[vlen] = '\0';
    } else {
      char num[32];
      char *end = NULL;
      if (vlen >= sizeof num)
        return ts_diag_set(d, TS_EINVAL, "target: -%s must be a positive integer, got '%.*s'", key->name,
                           (int)vlen, val);
      memcpy(num, val, vlen);
      num[vlen] = '\0';
      errno = 0;
      long v = strtol(num, &end, 10);
      if (errno || *end || v <= 0 || v > 1 << 20)
        return ts_diag_set(d, TS_EINVAL, "target: -%s must be a positive integer, got '%s'", key->name, num);
      *(int *)(void *)((char *)t + key->off) = (int)v;
    }
  }
  if (t->kind == CG_TARGET_CUDA && t->arch[0]) {
    const char *a = t->arch;
    bool ok = strncmp(a, "sm_", 3) == 0 && isdigit((unsigned char)a[3]);
    for (const char *q = a + 3; ok && *q; q++)
      ok = isdigit((unsigned char)*q) || (q[1] == '\0' && (*q == 'a' || *q == 'f'));
    if (!ok)
      return ts_diag_set(d, TS_EINVAL, "target: -arch must look like sm_XY (e.g. sm_80, sm_90a), got '%s'", a);
  }
  t->vector_bits = guess_vector_bits(t);
  if (!canonical_text(t))
    return ts_diag_set(d, TS_EINVAL, "target: the target string is too long (canonical form over %zu characters)",
                       sizeof t->text - 1);
  return TS_OK;
}

bool cg_target_is_host(const cg_target *t) {
  if (!t || t->kind != CG_TARGET_LLVM) return false;
  if (!t->triple[0]) return true;
  char arch[64];
  triple_arch(t->triple, arch, sizeof arch);
#if defined(__x86_64__)
  const char *host = "x86_64";
#elif defined(__aarch64__)
  const char *host = "aarch64";
#elif defined(__riscv) && __riscv_xlen == 64
  const char *host = "riscv64";
#else
  const char *host = "";
#endif
  if (strcmp(arch, host) != 0) return false;
#if defined(__linux__)
  return strstr(t->triple, "linux") != NULL;
#elif defined(__APPLE__)
  return strstr(t->triple, "darwin") != NULL || strstr(t->triple, "macos") != NULL;
#else
  return true;
#endif
}
