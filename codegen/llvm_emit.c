/* llvm_emit.c — lowered IR (codegen.h) to LLVM IR through the LLVM-C API:
 * the kernel entry, the body with noalias buffers, outlined parallel tasks
 * and the metadata; lazy selects as masks, nsw index arithmetic, `contract`
 * as the only float flag so results match the interpreter to rounding.
 * docs/TUNING.md ("Notes by file: codegen/"). */
#include <math.h>
#include <llvm-c/DebugInfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/struct.h"
#include "llvm_int.h"

#define TS_SAME(a, b) _Static_assert((int)(a) == (int)(b), "dtype codes drift: " #a)
TS_SAME(TSRT_BOOL, IR_BOOL);
TS_SAME(TSRT_I8, IR_I8);
TS_SAME(TSRT_I16, IR_I16);
TS_SAME(TSRT_I32, IR_I32);
TS_SAME(TSRT_I64, IR_I64);
TS_SAME(TSRT_U8, IR_U8);
TS_SAME(TSRT_U32, IR_U32);
TS_SAME(TSRT_F16, IR_F16);
TS_SAME(TSRT_BF16, IR_BF16);
TS_SAME(TSRT_F32, IR_F32);
TS_SAME(TSRT_F64, IR_F64);
TS_SAME(TSRT_HANDLE, IR_HANDLE);
TS_SAME(TSRT_DTYPE_COUNT, IR_DTYPE_COUNT);

/* Allocations up to this many bytes with a constant size live on the stack. */
#define STACK_ALLOC_MAX 65536
/* Unrolled loops with a constant extent up to this are emitted copy by copy. */
#define UNROLL_COPY_MAX 64
/* Total copies a nest of copied loops may produce before falling back to
 * unroll metadata. */
#define UNROLL_TOTAL_MAX 4096

/* ---- small helpers --------------------------------------------------------- */

LLVMValueRef cg_lx_global(LLVMModuleRef mod, LLVMValueRef init, const char *name, LLVMLinkage link,
                          unsigned align) {
  LLVMValueRef g = LLVMAddGlobal(mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, link);
  if (align) LLVMSetAlignment(g, align);
  return g;
}

LLVMTypeRef cg_lx_vec(LLVMTypeRef elem, int lanes) {
  return lanes > 1 ? LLVMVectorType(elem, (unsigned)lanes) : elem;
}

int cg_lx_lanes(LLVMValueRef v) {
  LLVMTypeRef t = LLVMTypeOf(v);
  return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? (int)LLVMGetVectorSize(t) : 1;
}

static LLVMTypeRef elem_of(LLVMTypeRef t) {
  return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetElementType(t) : t;
}

static LLVMValueRef const_splat(LLVMTypeRef ty, LLVMValueRef c) {
  if (LLVMGetTypeKind(ty) != LLVMVectorTypeKind) return c;
  unsigned n = LLVMGetVectorSize(ty);
  LLVMValueRef small[64], *v = n <= 64 ? small : ts_malloc(sizeof *v * n);
  if (!v) return LLVMGetPoison(ty);
  for (unsigned i = 0; i < n; i++) v[i] = c;
  LLVMValueRef r = LLVMConstVector(v, n);
  if (v != small) ts_free(v);
  return r;
}

LLVMValueRef cg_lx_constf(LLVMTypeRef ty, double v) {
  return const_splat(ty, LLVMConstReal(elem_of(ty), v));
}

LLVMValueRef cg_lx_consti(LLVMTypeRef ty, int64_t v) {
  return const_splat(ty, LLVMConstInt(elem_of(ty), (unsigned long long)v, 1));
}

LLVMValueRef cg_lx_intrin(lx_fn *f, const char *name, LLVMTypeRef *over, int nover,
                          LLVMValueRef *args, int nargs) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  TS_ASSERT(id != 0);
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(f->m->mod, id, over, (size_t)nover);
  LLVMTypeRef fty = LLVMIntrinsicGetType(f->m->ctx, id, over, (size_t)nover);
  return LLVMBuildCall2(f->b, fty, fn, args, (unsigned)nargs, "");
}

static bool code_float(int c) { return c == IR_F16 || c == IR_BF16 || c == IR_F32 || c == IR_F64; }
static bool code_signed(int c) { return c == IR_I8 || c == IR_I16 || c == IR_I32 || c == IR_I64; }

static LLVMTypeRef reg_elem(lx_mod *m, int code) {
  switch (code) {
  case IR_BOOL: return m->t_i1;
  case IR_I8: case IR_U8: return m->t_i8;
  case IR_I16: return m->t_i16;
  case IR_I32: case IR_U32: return m->t_i32;
  case IR_I64: return m->t_i64;
  case IR_F16: case IR_BF16: case IR_F32: return m->t_f32;
  case IR_F64: return m->t_f64;
  default: return m->t_ptr;
  }
}

static LLVMTypeRef mem_elem(lx_mod *m, int code) {
  switch (code) {
  case IR_BOOL: return m->t_i8;
  case IR_F16: return m->t_half;
  case IR_BF16: return m->t_i16;
  default: return reg_elem(m, code);
  }
}

static const char *dts(ir_dtype t, char *buf) { return ir_dtype_str(t, buf, 24); }

static void *fail(lx_fn *f, ts_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void *fail(lx_fn *f, ts_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (f->m->st == TS_OK) {
    f->m->st = st;
    if (f->m->d) ts_diag_vset(f->m->d, st, fmt, ap);
  }
  va_end(ap);
  return NULL;
}

/* ---- bindings -------------------------------------------------------------- */

static bool bind(lx_fn *f, const void *key, LLVMValueRef v) {
  if (f->nbinds == f->capbinds) {
    int cap = f->capbinds ? f->capbinds * 2 : 32;
    lx_bind *nb = ts_realloc(f->binds, sizeof *nb * (size_t)cap);
    if (!nb) return fail(f, TS_ENOMEM, "out of memory binding a variable"), false;
    f->binds = nb;
    f->capbinds = cap;
  }
  f->binds[f->nbinds++] = (lx_bind){key, v};
  return true;
}

static LLVMValueRef lookup(const lx_fn *f, const void *key) {
  for (int i = f->nbinds - 1; i >= 0; i--)
    if (f->binds[i].key == key) return f->binds[i].val;
  return NULL;
}

/* ---- values ---------------------------------------------------------------- */

static LLVMValueRef splat(lx_fn *f, LLVMValueRef v, int lanes) {
  if (lanes <= 1 || cg_lx_lanes(v) == lanes) return v;
  LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(v), (unsigned)lanes);
  LLVMValueRef one = LLVMBuildInsertElement(f->b, LLVMGetPoison(vt), v,
                                            LLVMConstInt(f->m->t_i32, 0, 0), "");
  LLVMValueRef zero_mask = LLVMConstNull(LLVMVectorType(f->m->t_i32, (unsigned)lanes));
  return LLVMBuildShuffleVector(f->b, one, LLVMGetPoison(vt), zero_mask, "");
}

/* Widens a to n lanes (from 1); NULL with a diagnostic on a lane mismatch. */
static LLVMValueRef widen(lx_fn *f, LLVMValueRef a, int n, const char *what) {
  if (!a) return NULL;
  int la = cg_lx_lanes(a);
  if (la == n) return a;
  if (la == 1) return splat(f, a, n);
  return fail(f, TS_ETYPE, "%s: a %d-lane value where %d lanes are expected", what, la, n);
}

static int max_lanes(LLVMValueRef a, LLVMValueRef b) {
  int x = cg_lx_lanes(a), y = cg_lx_lanes(b);
  return x > y ? x : y;
}

/* Rounds a float register holding an f16/bf16 value to that format (RNE). */
static LLVMValueRef round_to(lx_fn *f, int code, LLVMValueRef v) {
  LLVMBuilderRef b = f->b;
  int n = cg_lx_lanes(v);
  if (code == IR_F16) {
    LLVMValueRef h = LLVMBuildFPTrunc(b, v, cg_lx_vec(f->m->t_half, n), "");
    return LLVMBuildFPExt(b, h, cg_lx_vec(f->m->t_f32, n), "");
  }
  if (code == IR_BF16) {
    LLVMTypeRef it = cg_lx_vec(f->m->t_i32, n);
    LLVMValueRef bits = LLVMBuildBitCast(b, v, it, "");
    LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, bits, cg_lx_consti(it, 16), ""),
                                    cg_lx_consti(it, 1), "");
    LLVMValueRef r = LLVMBuildAdd(b, bits, LLVMBuildAdd(b, lsb, cg_lx_consti(it, 0x7fff), ""), "");
    r = LLVMBuildAnd(b, r, cg_lx_consti(it, (int64_t)0xffff0000u), "");
    LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, v, v, "");
    r = LLVMBuildSelect(b, nan, cg_lx_consti(it, 0x7fc00000), r, "");
    return LLVMBuildBitCast(b, r, cg_lx_vec(f->m->t_f32, n), "");
  }
  return v;
}

/* Memory representation -> register representation. */
static LLVMValueRef from_mem(lx_fn *f, int code, LLVMValueRef v) {
  LLVMBuilderRef b = f->b;
  int n = cg_lx_lanes(v);
  switch (code) {
  case IR_BOOL:
    return LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
  case IR_F16: return LLVMBuildFPExt(b, v, cg_lx_vec(f->m->t_f32, n), "");
  case IR_BF16: {
    LLVMTypeRef it = cg_lx_vec(f->m->t_i32, n);
    LLVMValueRef w = LLVMBuildShl(b, LLVMBuildZExt(b, v, it, ""), cg_lx_consti(it, 16), "");
    return LLVMBuildBitCast(b, w, cg_lx_vec(f->m->t_f32, n), "");
  }
  default: return v;
  }
}

/* Register representation -> memory representation (values are already
 * rounded to their format, so the narrowing here is exact). */
static LLVMValueRef to_mem(lx_fn *f, int code, LLVMValueRef v) {
  LLVMBuilderRef b = f->b;
  int n = cg_lx_lanes(v);
  switch (code) {
  case IR_BOOL: return LLVMBuildZExt(b, v, cg_lx_vec(f->m->t_i8, n), "");
  case IR_F16: return LLVMBuildFPTrunc(b, v, cg_lx_vec(f->m->t_half, n), "");
  case IR_BF16: {
    LLVMTypeRef it = cg_lx_vec(f->m->t_i32, n);
    LLVMValueRef w = LLVMBuildLShr(b, LLVMBuildBitCast(b, v, it, ""), cg_lx_consti(it, 16), "");
    return LLVMBuildTrunc(b, w, cg_lx_vec(f->m->t_i16, n), "");
  }
  default: return v;
  }
}

static LLVMValueRef to_bool(lx_fn *f, int code, LLVMValueRef v) {
  if (code == IR_BOOL) return v;
  if (code_float(code))
    return LLVMBuildFCmp(f->b, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
  return LLVMBuildICmp(f->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
}

static void set_contract(LLVMValueRef v) {
  if (LLVMIsAInstruction(v) && LLVMCanValueUseFastMathFlags(v))
    LLVMSetFastMathFlags(v, LLVMFastMathAllowContract);
}

/* i64 version of an integer index value. */
static LLVMValueRef idx64(lx_fn *f, int code, LLVMValueRef v) {
  LLVMTypeRef t = cg_lx_vec(f->m->t_i64, cg_lx_lanes(v));
  if (LLVMTypeOf(v) == t) return v;
  return code_signed(code) ? LLVMBuildSExt(f->b, v, t, "") : LLVMBuildZExt(f->b, v, t, "");
}

static LLVMValueRef and_mask(lx_fn *f, LLVMValueRef mask, LLVMValueRef c) {
  if (!mask) return c;
  int n = max_lanes(mask, c);
  return LLVMBuildAnd(f->b, splat(f, mask, n), splat(f, c, n), "");
}

/* ---- lazy evaluation -------------------------------------------------------- */

/* True if evaluating e could fault when its guard is false: a load, or an
 * integer division by a non-constant. */
/* Bounds [*lo, *hi] of integer e (over all its lanes) from the enclosing loops' constant
 * ranges (f->rvar); false when e is of another form or its values may leave
 * +-2^40 (no overflow in the arithmetic below). */
static bool ibound(const lx_fn *f, const ir_expr *e, int64_t *lo, int64_t *hi) {
  const int64_t lim = INT64_C(1) << 40;
  if (!e || !ir_dtype_is_int(e->dtype)) return false;
  int64_t a0, a1, b0, b1;
  switch (e->kind) {
  case IR_BROADCAST:
    if (!ibound(f, e->u.bcast.value, lo, hi)) return false;
    break;
  case IR_RAMP: /* base + stride * [0, lanes) */
    if (!ibound(f, e->u.ramp.base, &a0, &a1) || !ibound(f, e->u.ramp.stride, &b0, &b1) || e->u.ramp.lanes < 1)
      return false;
    *lo = a0 + (b0 < 0 ? b0 * (e->u.ramp.lanes - 1) : 0);
    *hi = a1 + (b1 > 0 ? b1 * (e->u.ramp.lanes - 1) : 0);
    break;
  case IR_INT_IMM:
    if (!ir_as_int(e, lo)) return false;
    *hi = *lo;
    break;
  case IR_VAR: {
    int i = f->nrange - 1;
    while (i >= 0 && f->rvar[i] != e->u.var) i--;
    if (i < 0) return false;
    *lo = f->rlo[i];
    *hi = f->rhi[i];
    break;
  }
  case IR_CAST:
    if (!ir_dtype_is_int(e->u.cast.value->dtype) || !ibound(f, e->u.cast.value, lo, hi)) return false;
    break;
  case IR_ADD: case IR_SUB: case IR_MUL: case IR_MIN: case IR_MAX:
    if (!ibound(f, e->u.bin.a, &a0, &a1) || !ibound(f, e->u.bin.b, &b0, &b1)) return false;
    if (e->kind == IR_ADD) *lo = a0 + b0, *hi = a1 + b1;
    else if (e->kind == IR_SUB) *lo = a0 - b1, *hi = a1 - b0;
    else if (e->kind == IR_MIN) *lo = a0 < b0 ? a0 : b0, *hi = a1 < b1 ? a1 : b1;
    else if (e->kind == IR_MAX) *lo = a0 > b0 ? a0 : b0, *hi = a1 > b1 ? a1 : b1;
    else {
      int64_t p[4] = {a0 * b0, a0 * b1, a1 * b0, a1 * b1};
      *lo = *hi = p[0];
      for (int i = 1; i < 4; i++) {
        if (p[i] < *lo) *lo = p[i];
        if (p[i] > *hi) *hi = p[i];
      }
    }
    break;
  default: return false;
  }
  return *lo > -lim && *hi < lim;
}

static bool may_trap(const lx_fn *f, const ir_expr *e);

/* A load whose index (every lane) the enclosing loops' ranges keep inside its
 * buffer (compact, constant shape): it reads memory in every case, so under
 * a select it needs no guard (a padded copy's clamped index: LLVM then
 * vectorizes the select of a plain load instead of a masked load, which
 * AVX2 has not for bytes). */
static bool safe_load(const lx_fn *f, const ir_expr *e) {
  const ir_buffer *b = e->u.load.buf;
  if (!f || !b || e->u.load.nidx != 1 || b->strides || b->elem_offset) return false;
  int64_t n = 1, lo, hi;
  for (int d = 0; d < b->ndim; d++) {
    int64_t x;
    if (!ir_as_int(b->shape[d], &x) || x <= 0 || x > (INT64_C(1) << 40) / n) return false;
    n *= x;
  }
  return !may_trap(f, e->u.load.idx[0]) && ibound(f, e->u.load.idx[0], &lo, &hi) && lo >= 0 && hi < n;
}

/* f: the emitting function, whose loop ranges may prove a load safe (NULL:
 * every load may trap). */
static bool may_trap(const lx_fn *f, const ir_expr *e) {
  if (!e) return false;
  switch (e->kind) {
  case IR_INT_IMM: case IR_FLOAT_IMM: case IR_VAR: return false;
  case IR_LOAD: return !safe_load(f, e);
  case IR_NOT: return may_trap(f, e->u.un.a);
  case IR_SELECT: return may_trap(f, e->u.sel.cond) || may_trap(f, e->u.sel.t) || may_trap(f, e->u.sel.f);
  case IR_CAST: return may_trap(f, e->u.cast.value);
  case IR_CALL:
    for (int i = 0; i < e->u.call.nargs; i++)
      if (may_trap(f, e->u.call.args[i])) return true;
    return false;
  case IR_RAMP: return may_trap(f, e->u.ramp.base) || may_trap(f, e->u.ramp.stride);
  case IR_BROADCAST: return may_trap(f, e->u.bcast.value);
  case IR_CALL_EXTERN:
    for (int i = 0; i < e->u.ext.nargs; i++)
      if (may_trap(f, e->u.ext.args[i])) return true;
    return false;
  case IR_REINTERPRET: return may_trap(f, e->u.cast.value);
  case IR_ACCESS_PTR: return may_trap(f, e->u.ptr.offset);
  default:
    if (ir_is_binop(e->kind)) {
      if ((e->kind == IR_DIV || e->kind == IR_FLOORDIV || e->kind == IR_FLOORMOD) &&
          !code_float(e->dtype.code) && e->u.bin.b->kind != IR_INT_IMM)
        return true;
      return may_trap(f, e->u.bin.a) || may_trap(f, e->u.bin.b);
    }
    return false;
  }
}

static LLVMValueRef ex(lx_fn *f, const ir_expr *e, LLVMValueRef mask);

/* Scalar lazy choice: cond ? ev(t) : ev(f) with control flow. */
static LLVMValueRef lazy_branch(lx_fn *f, LLVMValueRef cond, const ir_expr *te,
                                LLVMValueRef tconst, const ir_expr *fe, LLVMValueRef fconst,
                                LLVMValueRef mask) {
  LLVMBasicBlockRef bt = LLVMAppendBasicBlockInContext(f->m->ctx, f->fn, "lz.t");
  LLVMBasicBlockRef bf = LLVMAppendBasicBlockInContext(f->m->ctx, f->fn, "lz.f");
  LLVMBasicBlockRef bj = LLVMAppendBasicBlockInContext(f->m->ctx, f->fn, "lz.j");
  LLVMBuildCondBr(f->b, cond, bt, bf);
  LLVMPositionBuilderAtEnd(f->b, bt);
  LLVMValueRef tv = te ? ex(f, te, mask) : tconst;
  if (!tv) return NULL;
  LLVMBasicBlockRef tend = LLVMGetInsertBlock(f->b);
  LLVMPositionBuilderAtEnd(f->b, bf);
  LLVMValueRef fv = fe ? ex(f, fe, mask) : fconst;
  if (!fv) return NULL;
  LLVMBasicBlockRef fend = LLVMGetInsertBlock(f->b);
  int n = max_lanes(tv, fv);
  LLVMPositionBuilderAtEnd(f->b, tend);
  if (!(tv = widen(f, tv, n, "select"))) return NULL;
  LLVMBuildBr(f->b, bj);
  LLVMPositionBuilderAtEnd(f->b, fend);
  if (!(fv = widen(f, fv, n, "select"))) return NULL;
  LLVMBuildBr(f->b, bj);
  if (LLVMTypeOf(tv) != LLVMTypeOf(fv)) return fail(f, TS_ETYPE, "select arms of different types");
  LLVMPositionBuilderAtEnd(f->b, bj);
  LLVMValueRef phi = LLVMBuildPhi(f->b, LLVMTypeOf(tv), "");
  LLVMValueRef vals[2] = {tv, fv};
  LLVMBasicBlockRef bbs[2] = {tend, fend};
  LLVMAddIncoming(phi, vals, bbs, 2);
  return phi;
}

/* ---- expressions ------------------------------------------------------------- */

static LLVMValueRef ex_imm_int(lx_fn *f, const ir_expr *e) {
  int code = e->dtype.code;
  LLVMTypeRef ty = cg_lx_vec(reg_elem(f->m, code), e->dtype.lanes);
  if (code_float(code)) return round_to(f, code, cg_lx_constf(ty, (double)e->u.ival));
  if (code == IR_BOOL) return cg_lx_consti(ty, e->u.ival != 0);
  if (code == IR_HANDLE) return fail(f, TS_EUNSUPPORTED, "handle literals are not supported");
  return cg_lx_consti(ty, e->u.ival);
}

static LLVMValueRef ex_imm_float(lx_fn *f, const ir_expr *e) {
  int code = e->dtype.code;
  LLVMTypeRef ty = cg_lx_vec(reg_elem(f->m, code), e->dtype.lanes);
  if (code_float(code)) return round_to(f, code, cg_lx_constf(ty, e->u.fval));
  return fail(f, TS_ETYPE, "float literal of non-float dtype");
}

/* Signed integer division family with the interpreter's semantics: x / -1
 * wraps instead of trapping; floor division/modulo round toward -inf. */
static LLVMValueRef int_div(lx_fn *f, ir_expr_kind k, bool sgn, LLVMValueRef x, LLVMValueRef y,
                            const ir_expr *ye, LLVMValueRef mask) {
  LLVMBuilderRef b = f->b;
  LLVMTypeRef ty = LLVMTypeOf(x);
  int64_t c = 0;
  bool is_const = ir_as_int(ye, &c);
  if (!sgn) {
    if (!is_const && mask) y = LLVMBuildSelect(b, mask, y, cg_lx_consti(ty, 1), "");
    return k == IR_FLOORMOD ? LLVMBuildURem(b, x, y, "") : LLVMBuildUDiv(b, x, y, "");
  }
  if (is_const && c > 0 && (c & (c - 1)) == 0 && k != IR_DIV) {
    int sh = 0;
    while ((INT64_C(1) << sh) != c) sh++;
    if (k == IR_FLOORDIV) return LLVMBuildAShr(b, x, cg_lx_consti(ty, sh), "");
    return LLVMBuildAnd(b, x, cg_lx_consti(ty, c - 1), "");
  }
  LLVMValueRef q, r;
  if (is_const && c != -1) {
    q = LLVMBuildSDiv(b, x, y, "");
    r = LLVMBuildSRem(b, x, y, "");
  } else {
    LLVMValueRef m1 = LLVMBuildICmp(b, LLVMIntEQ, y, cg_lx_consti(ty, -1), "");
    LLVMValueRef ys = LLVMBuildSelect(b, m1, cg_lx_consti(ty, 1), y, "");
    if (mask) ys = LLVMBuildSelect(b, mask, ys, cg_lx_consti(ty, 1), "");
    q = LLVMBuildSDiv(b, x, ys, "");
    r = LLVMBuildSRem(b, x, ys, "");
    q = LLVMBuildSelect(b, m1, LLVMBuildNeg(b, x, ""), q, "");
    r = LLVMBuildSelect(b, m1, LLVMConstNull(ty), r, "");
  }
  if (k == IR_DIV) return q;
  /* adjust when the remainder is non-zero and its sign differs from y's */
  LLVMValueRef nz = LLVMBuildICmp(b, LLVMIntNE, r, LLVMConstNull(ty), "");
  LLVMValueRef diff = LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildXor(b, r, y, ""), LLVMConstNull(ty), "");
  LLVMValueRef adj = LLVMBuildAnd(b, nz, diff, "");
  if (k == IR_FLOORDIV) return LLVMBuildSub(b, q, LLVMBuildZExt(b, adj, ty, ""), "");
  return LLVMBuildAdd(b, r, LLVMBuildSelect(b, adj, y, LLVMConstNull(ty), ""), "");
}

static LLVMValueRef ex_binop(lx_fn *f, const ir_expr *e, LLVMValueRef mask) {
  LLVMBuilderRef b = f->b;
  ir_expr_kind k = e->kind;
  const ir_expr *xe = e->u.bin.a, *ye = e->u.bin.b;
  if (!xe || !ye) return fail(f, TS_EINVAL, "binary %s with a missing operand", ir_binop_name(k));
  int code = xe->dtype.code;
  LLVMValueRef x = ex(f, xe, mask);
  if (!x) return NULL;
  if ((k == IR_AND || k == IR_OR) && may_trap(NULL, ye)) {
    x = to_bool(f, code, x);
    if (cg_lx_lanes(x) == 1) {
      LLVMValueRef tv = LLVMConstInt(f->m->t_i1, 1, 0), fv = LLVMConstInt(f->m->t_i1, 0, 0);
      /* the right side's value as a bool, evaluated only when needed */
      LLVMBasicBlockRef bt = LLVMAppendBasicBlockInContext(f->m->ctx, f->fn, "sc.rhs");
      LLVMBasicBlockRef bj = LLVMAppendBasicBlockInContext(f->m->ctx, f->fn, "sc.j");
      LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
      if (k == IR_AND) LLVMBuildCondBr(b, x, bt, bj);
      else LLVMBuildCondBr(b, x, bj, bt);
      LLVMPositionBuilderAtEnd(b, bt);
      LLVMValueRef y = ex(f, ye, mask);
      if (!y) return NULL;
      y = to_bool(f, ye->dtype.code, y);
      if (cg_lx_lanes(y) != 1) return fail(f, TS_ETYPE, "vector right side of a scalar && / ||");
      LLVMBasicBlockRef yend = LLVMGetInsertBlock(b);
      LLVMBuildBr(b, bj);
      LLVMPositionBuilderAtEnd(b, bj);
      LLVMValueRef phi = LLVMBuildPhi(b, f->m->t_i1, "");
      LLVMValueRef vals[2] = {k == IR_AND ? fv : tv, y};
      LLVMBasicBlockRef bbs[2] = {from, yend};
      LLVMAddIncoming(phi, vals, bbs, 2);
      return phi;
    }
    LLVMValueRef live = k == IR_AND ? x : LLVMBuildNot(b, x, "");
    LLVMValueRef y = ex(f, ye, and_mask(f, mask, live));
    if (!y) return NULL;
    y = widen(f, to_bool(f, ye->dtype.code, y), cg_lx_lanes(x), "&& / ||");
    if (!y) return NULL;
    return k == IR_AND ? LLVMBuildAnd(b, x, y, "") : LLVMBuildOr(b, x, y, "");
  }
  LLVMValueRef y = ex(f, ye, mask);
  if (!y) return NULL;
  int n = max_lanes(x, y);
  if (!(x = widen(f, x, n, ir_binop_name(k))) || !(y = widen(f, y, n, ir_binop_name(k))))
    return NULL;
  if (k == IR_AND || k == IR_OR) {
    x = to_bool(f, code, x);
    y = to_bool(f, ye->dtype.code, y);
    return k == IR_AND ? LLVMBuildAnd(b, x, y, "") : LLVMBuildOr(b, x, y, "");
  }
  if (LLVMTypeOf(x) != LLVMTypeOf(y) || xe->dtype.code != ye->dtype.code) {
    char b1[24], b2[24];
    return fail(f, TS_ETYPE, "%s of %s and %s", ir_binop_name(k), dts(xe->dtype, b1),
                dts(ye->dtype, b2));
  }
  if (mask && cg_lx_lanes(mask) != n) mask = NULL; /* scalar ops inside vector code */
  if (code_float(code)) {
    LLVMValueRef r;
    switch (k) {
    case IR_ADD: r = LLVMBuildFAdd(b, x, y, ""); break;
    case IR_SUB: r = LLVMBuildFSub(b, x, y, ""); break;
    case IR_MUL: r = LLVMBuildFMul(b, x, y, ""); break;
    case IR_DIV: r = LLVMBuildFDiv(b, x, y, ""); break;
    case IR_FLOORDIV: case IR_FLOORMOD: {
      /* in double, as the interpreter does, then rounded to the dtype */
      LLVMTypeRef dt = cg_lx_vec(f->m->t_f64, n);
      LLVMValueRef xd = code == IR_F64 ? x : LLVMBuildFPExt(b, x, dt, "");
      LLVMValueRef yd = code == IR_F64 ? y : LLVMBuildFPExt(b, y, dt, "");
      LLVMValueRef q = LLVMBuildFDiv(b, xd, yd, "");
      q = cg_lx_intrin(f, "llvm.floor", &dt, 1, &q, 1);
      if (k == IR_FLOORMOD) q = LLVMBuildFSub(b, xd, LLVMBuildFMul(b, q, yd, ""), "");
      r = code == IR_F64 ? q : LLVMBuildFPTrunc(b, q, LLVMTypeOf(x), "");
      break;
    }
    case IR_MIN: case IR_MAX: {
      /* NaN if either is NaN, else x < y ? x : y (x > y ? x : y) */
      LLVMValueRef c = LLVMBuildFCmp(b, k == IR_MIN ? LLVMRealOLT : LLVMRealOGT, x, y, "");
      r = LLVMBuildSelect(b, c, x, y, "");
      r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), x, r, "");
      return r; /* already of the dtype */
    }
    case IR_EQ: return LLVMBuildFCmp(b, LLVMRealOEQ, x, y, "");
    case IR_NE: return LLVMBuildFCmp(b, LLVMRealUNE, x, y, "");
    case IR_LT: return LLVMBuildFCmp(b, LLVMRealOLT, x, y, "");
    case IR_LE: return LLVMBuildFCmp(b, LLVMRealOLE, x, y, "");
    case IR_GT: return LLVMBuildFCmp(b, LLVMRealOGT, x, y, "");
    case IR_GE: return LLVMBuildFCmp(b, LLVMRealOGE, x, y, "");
    default: return fail(f, TS_EINTERNAL, "float binop %s", ir_binop_name(k));
    }
    if (!f->no_contract) set_contract(r);
    return round_to(f, code, r);
  }
  if (code == IR_HANDLE) return fail(f, TS_EUNSUPPORTED, "arithmetic on handles");
  bool sgn = code_signed(code);
  bool nsw = f->in_index > 0 && sgn;
  switch (k) {
  case IR_ADD: return nsw ? LLVMBuildNSWAdd(b, x, y, "") : LLVMBuildAdd(b, x, y, "");
  case IR_SUB: return nsw ? LLVMBuildNSWSub(b, x, y, "") : LLVMBuildSub(b, x, y, "");
  case IR_MUL: return nsw ? LLVMBuildNSWMul(b, x, y, "") : LLVMBuildMul(b, x, y, "");
  case IR_DIV: case IR_FLOORDIV: case IR_FLOORMOD: return int_div(f, k, sgn, x, y, ye, mask);
  case IR_MIN: case IR_MAX: {
    const char *nm = k == IR_MIN ? (sgn ? "llvm.smin" : "llvm.umin") : (sgn ? "llvm.smax" : "llvm.umax");
    LLVMTypeRef ty = LLVMTypeOf(x);
    LLVMValueRef a[2] = {x, y};
    return cg_lx_intrin(f, nm, &ty, 1, a, 2);
  }
  case IR_EQ: return LLVMBuildICmp(b, LLVMIntEQ, x, y, "");
  case IR_NE: return LLVMBuildICmp(b, LLVMIntNE, x, y, "");
  case IR_LT: return LLVMBuildICmp(b, sgn ? LLVMIntSLT : LLVMIntULT, x, y, "");
  case IR_LE: return LLVMBuildICmp(b, sgn ? LLVMIntSLE : LLVMIntULE, x, y, "");
  case IR_GT: return LLVMBuildICmp(b, sgn ? LLVMIntSGT : LLVMIntUGT, x, y, "");
  case IR_GE: return LLVMBuildICmp(b, sgn ? LLVMIntSGE : LLVMIntUGE, x, y, "");
  default: return fail(f, TS_EINTERNAL, "int binop %s", ir_binop_name(k));
  }
}

static LLVMValueRef ex_select(lx_fn *f, const ir_expr *e, LLVMValueRef mask) {
  const ir_expr *ce = e->u.sel.cond, *te = e->u.sel.t, *fe = e->u.sel.f;
  if (!ce || !te || !fe) return fail(f, TS_EINVAL, "select with a missing operand");
  /* a guard the same in every lane (a padded window's bounds test around a
   * channels-last vector): a branch around the plain vector load, not a
   * masked load per lane (AVX2 has none for bytes: a test and an insert
   * per lane, 15x slower on a u8 max pool) */
  if (ce->kind == IR_BROADCAST && !may_trap(f, ce) && (may_trap(f, te) || may_trap(f, fe))) {
    LLVMValueRef cs = ex(f, ce->u.bcast.value, NULL);
    if (!cs) return NULL;
    return lazy_branch(f, to_bool(f, ce->u.bcast.value->dtype.code, cs), te, NULL, fe, NULL, mask);
  }
  LLVMValueRef c = ex(f, ce, mask);
  if (!c) return NULL;
  c = to_bool(f, ce->dtype.code, c);
  if (may_trap(f, te) || may_trap(f, fe)) {
    if (cg_lx_lanes(c) == 1) return lazy_branch(f, c, te, NULL, fe, NULL, mask);
    LLVMValueRef tv = ex(f, te, and_mask(f, mask, c));
    if (!tv) return NULL;
    LLVMValueRef fv = ex(f, fe, and_mask(f, mask, LLVMBuildNot(f->b, c, "")));
    if (!fv) return NULL;
    int n = max_lanes(tv, fv);
    n = n > cg_lx_lanes(c) ? n : cg_lx_lanes(c);
    if (!(tv = widen(f, tv, n, "select")) || !(fv = widen(f, fv, n, "select")) ||
        !(c = widen(f, c, n, "select")))
      return NULL;
    if (LLVMTypeOf(tv) != LLVMTypeOf(fv)) return fail(f, TS_ETYPE, "select arms of different types");
    return LLVMBuildSelect(f->b, c, tv, fv, "");
  }
  LLVMValueRef tv = ex(f, te, mask), fv = tv ? ex(f, fe, mask) : NULL;
  if (!fv) return NULL;
  int n = max_lanes(tv, fv);
  n = n > cg_lx_lanes(c) ? n : cg_lx_lanes(c);
  if (!(tv = widen(f, tv, n, "select")) || !(fv = widen(f, fv, n, "select")) ||
      !(c = widen(f, c, n, "select")))
    return NULL;
  if (LLVMTypeOf(tv) != LLVMTypeOf(fv)) return fail(f, TS_ETYPE, "select arms of different types");
  return LLVMBuildSelect(f->b, c, tv, fv, "");
}

/* A float constant (or its broadcast), in *v. */
static bool float_const(const ir_expr *e, double *v) {
  if (e && e->kind == IR_BROADCAST) e = e->u.bcast.value;
  if (!e || e->kind != IR_FLOAT_IMM) return false;
  *v = e->u.fval;
  return true;
}

/* Whether float e is a clamp min(max(x, lo), hi) (either nesting, constant
 * bounds) into the i32 range: a quantize's saturation. Its conversion to an
 * integer of at most 32 bits is then the same through i32 as through i64
 * (NaN to 0 in both, no other value out of range), and AVX2 converts 8
 * floats to i32 in one instruction where it has none to i64. */
static bool clamped_to_i32(const ir_expr *e) {
  double lo = -INFINITY, hi = INFINITY, c;
  for (int depth = 0; depth < 2 && e && (e->kind == IR_MIN || e->kind == IR_MAX); depth++) {
    const ir_expr *x = e->u.bin.a;
    if (!float_const(e->u.bin.b, &c)) {
      if (!float_const(e->u.bin.a, &c)) return false;
      x = e->u.bin.b;
    }
    if (e->kind == IR_MIN) hi = c < hi ? c : hi;
    else lo = c > lo ? c : lo;
    e = x;
  }
  return lo > -2147483648.0 && hi < 2147483647.0;
}

static LLVMValueRef ex_cast(lx_fn *f, const ir_expr *e, LLVMValueRef mask) {
  const ir_expr *ve = e->u.cast.value;
  if (!ve) return fail(f, TS_EINVAL, "cast with a missing operand");
  /* A float value converted to an integer (a quantize: round, zero point,
   * clamp, cast) is computed without `contract`: it must round once per
   * operation as the interpreter does, since a multiply-add fused into one FMA
   * can move a value across a .5 tie and change the integer by one step. */
  bool exact = code_float(ve->dtype.code) && !code_float(e->dtype.code) && e->dtype.code != IR_BOOL;
  f->no_contract += exact;
  LLVMValueRef v = ex(f, ve, mask);
  f->no_contract -= exact;
  if (!v) return NULL;
  LLVMBuilderRef b = f->b;
  int from = ve->dtype.code, to = e->dtype.code, n = cg_lx_lanes(v);
  if (from == IR_HANDLE || to == IR_HANDLE) return fail(f, TS_EUNSUPPORTED, "casts of handles");
  LLVMTypeRef tt = cg_lx_vec(reg_elem(f->m, to), n);
  if (from == to) return v;
  if (to == IR_BOOL) return to_bool(f, from, v);
  if (code_float(to)) {
    if (code_float(from)) {
      if (to == IR_F64) return from == IR_F64 ? v : LLVMBuildFPExt(b, v, tt, "");
      if (from == IR_F64) v = LLVMBuildFPTrunc(b, v, tt, "");
      return round_to(f, to, v);
    }
    if (from == IR_BOOL || !code_signed(from)) v = LLVMBuildUIToFP(b, v, tt, "");
    else v = LLVMBuildSIToFP(b, v, tt, "");
    return round_to(f, to, v);
  }
  /* to an integer */
  if (code_float(from)) {
    /* truncation toward zero, NaN -> 0, saturating to i64, then wrapping
     * (through i32 where a clamp keeps the value in its range) */
    unsigned tw = LLVMGetIntTypeWidth(reg_elem(f->m, to));
    if (tw <= 32 && clamped_to_i32(ve)) {
      /* NaN (the clamp passes it on) to 0, then a plain conversion: no
       * value left is out of range (llvm.fptosi.sat to i32 would be exact
       * too, but AVX2 lowers it lane by lane) */
      LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, v, v, "");
      v = LLVMBuildSelect(b, nan, LLVMConstNull(LLVMTypeOf(v)), v, "");
      LLVMValueRef r = LLVMBuildFPToSI(b, v, cg_lx_vec(f->m->t_i32, n), "");
      return tw == 32 ? r : LLVMBuildTrunc(b, r, tt, "");
    }
    LLVMTypeRef i64t = cg_lx_vec(f->m->t_i64, n);
    LLVMTypeRef over[2] = {i64t, LLVMTypeOf(v)};
    LLVMValueRef r = cg_lx_intrin(f, "llvm.fptosi.sat", over, 2, &v, 1);
    return to == IR_I64 ? r : LLVMBuildTrunc(b, r, tt, "");
  }
  unsigned fb = LLVMGetIntTypeWidth(elem_of(LLVMTypeOf(v))), tb = LLVMGetIntTypeWidth(reg_elem(f->m, to));
  if (tb < fb) return LLVMBuildTrunc(b, v, tt, "");
  if (tb == fb) return v;
  return code_signed(from) ? LLVMBuildSExt(b, v, tt, "") : LLVMBuildZExt(b, v, tt, "");
}

static LLVMValueRef ex_call(lx_fn *f, const ir_expr *e, LLVMValueRef mask) {
  int na = e->u.call.nargs;
  ir_intrin op = e->u.call.op;
  if (na != ir_intrin_nargs(op) || na > 3)
    return fail(f, TS_EINVAL, "%s with %d arguments", ir_intrin_name(op), na);
  LLVMValueRef a[3];
  int n = 1;
  for (int i = 0; i < na; i++) {
    if (!e->u.call.args[i]) return fail(f, TS_EINVAL, "%s with a missing argument", ir_intrin_name(op));
    if (!(a[i] = ex(f, e->u.call.args[i], mask))) return NULL;
    if (cg_lx_lanes(a[i]) > n) n = cg_lx_lanes(a[i]);
  }
  for (int i = 0; i < na; i++)
    if (!(a[i] = widen(f, a[i], n, ir_intrin_name(op)))) return NULL;
  int code = e->dtype.code;
  if (!code_float(code)) {
    if (op != IR_ABS || code == IR_BOOL || code == IR_HANDLE)
      return fail(f, TS_ETYPE, "%s of a non-float dtype", ir_intrin_name(op));
    if (!code_signed(code)) return a[0];
    LLVMTypeRef ty = LLVMTypeOf(a[0]);
    LLVMValueRef args[2] = {a[0], LLVMConstInt(f->m->t_i1, 0, 0)};
    return cg_lx_intrin(f, "llvm.abs", &ty, 1, args, 2);
  }
  for (int i = 0; i < na; i++)
    if (!code_float(e->u.call.args[i]->dtype.code) || LLVMTypeOf(a[i]) != LLVMTypeOf(a[0]))
      return fail(f, TS_ETYPE, "argument %d of %s is not of the call's dtype", i, ir_intrin_name(op));
  double pc;
  const double *pcp = NULL;
  if (op == IR_POW) {
    const ir_expr *y = e->u.call.args[1];
    if (y->kind == IR_BROADCAST) y = y->u.bcast.value;
    if (y->kind == IR_FLOAT_IMM) pc = y->u.fval, pcp = &pc;
  }
  LLVMValueRef r = cg_lx_math(f, op, a, na, pcp);
  if (!r) return fail(f, TS_EINTERNAL, "intrinsic %s", ir_intrin_name(op));
  return round_to(f, code, r);
}

/* Whether a vector index is lane-contiguous: ramp(base, 1, L), possibly plus
 * a broadcast. *base / *extra get the scalar parts (extra may be NULL). */
static bool contiguous(const ir_expr *idx, const ir_expr **base, const ir_expr **extra) {
  int64_t s;
  if (idx->kind == IR_RAMP && ir_as_int(idx->u.ramp.stride, &s) && s == 1) {
    *base = idx->u.ramp.base;
    *extra = NULL;
    return true;
  }
  if (idx->kind == IR_ADD) {
    const ir_expr *a = idx->u.bin.a, *b = idx->u.bin.b;
    for (int i = 0; i < 2; i++) {
      if (a->kind == IR_RAMP && ir_as_int(a->u.ramp.stride, &s) && s == 1 &&
          b->kind == IR_BROADCAST) {
        *base = a->u.ramp.base;
        *extra = b->u.bcast.value;
        return true;
      }
      const ir_expr *t = a;
      a = b;
      b = t;
    }
  }
  return false;
}

/* Index of a vector access that is the same in every lane, or NULL. */
static const ir_expr *uniform(const ir_expr *idx) {
  int64_t s;
  if (idx->kind == IR_BROADCAST) return idx->u.bcast.value;
  if (idx->kind == IR_RAMP && ir_as_int(idx->u.ramp.stride, &s) && s == 0) return idx->u.ramp.base;
  return NULL;
}

/* Emits the address computation of a buffer access: either one scalar
 * pointer (scalar, uniform or contiguous access) with *vec_ptrs false, or a
 * vector of pointers. */
/* Emits a scalar index as (variable part, constant part): the terms of its
 * top-level sum that fold to constants (literals, copies of unrolled loop
 * vars) are summed apart, so the address is gep(gep(base, var), const) and
 * alias analysis sees the accesses of an unrolled tile as one base plus
 * distinct offsets (which is what lets LICM keep an accumulator tile in
 * registers across a reduction loop). */
static bool index_terms(lx_fn *f, const ir_expr *e, LLVMValueRef *var, int64_t *cst) {
  if (e->kind == IR_ADD && e->dtype.lanes == 1 && e->u.bin.a && e->u.bin.b && ir_dtype_is_int(e->dtype) &&
      e->u.bin.a->dtype.lanes == 1 && e->u.bin.b->dtype.lanes == 1)
    return index_terms(f, e->u.bin.a, var, cst) && index_terms(f, e->u.bin.b, var, cst);
  LLVMValueRef v = ex(f, e, NULL);
  if (!v) return false;
  if (cg_lx_lanes(v) != 1) return fail(f, TS_ETYPE, "vector ramp base"), false;
  v = idx64(f, e->dtype.code, v);
  if (LLVMIsAConstantInt(v)) {
    *cst += LLVMConstIntGetSExtValue(v);
    return true;
  }
  *var = *var ? LLVMBuildNSWAdd(f->b, *var, v, "") : v;
  return true;
}

static LLVMValueRef offset_ptr(lx_fn *f, LLVMTypeRef mt, LLVMValueRef base, LLVMValueRef var,
                               int64_t cst) {
  LLVMValueRef p = base;
  if (var) p = LLVMBuildInBoundsGEP2(f->b, mt, p, &var, 1, "");
  if (cst || !var) {
    LLVMValueRef c = LLVMConstInt(f->m->t_i64, (unsigned long long)cst, 1);
    p = LLVMBuildInBoundsGEP2(f->b, mt, p, &c, 1, "");
  }
  return p;
}

/* Emits the address computation of a buffer access: one scalar pointer
 * (scalar, uniform or contiguous access) or a vector of pointers (gather /
 * scatter). */
static LLVMValueRef access_ptr(lx_fn *f, LLVMValueRef base, LLVMTypeRef mt, const ir_expr *idx,
                               int lanes, LLVMValueRef mask, bool *contig, bool *uni) {
  const ir_expr *cb, *cx, *u;
  LLVMValueRef var = NULL, iv = NULL;
  int64_t cst = 0;
  bool ok, scalar = true;
  *contig = *uni = false;
  f->in_index++;
  if (lanes > 1 && contiguous(idx, &cb, &cx)) {
    *contig = true;
    ok = index_terms(f, cb, &var, &cst) && (!cx || index_terms(f, cx, &var, &cst));
  } else if (lanes > 1 && !mask && (u = uniform(idx))) {
    *uni = true;
    ok = index_terms(f, u, &var, &cst);
  } else if (lanes == 1 && idx->dtype.lanes == 1) {
    ok = index_terms(f, idx, &var, &cst);
  } else {
    scalar = false;
    iv = ex(f, idx, mask);
    if (iv) iv = idx64(f, idx->dtype.code, widen(f, iv, lanes, "buffer index"));
    ok = iv != NULL;
  }
  f->in_index--;
  if (!ok) return NULL;
  if (scalar) return offset_ptr(f, mt, base, var, cst);
  return LLVMBuildInBoundsGEP2(f->b, mt, base, &iv, 1, "");
}

static LLVMValueRef all_true(lx_fn *f, int lanes) {
  return cg_lx_consti(cg_lx_vec(f->m->t_i1, lanes), 1);
}

/* Loads lanes elements (memory representation) at p as access_ptr made it. */
static LLVMValueRef load_at(lx_fn *f, LLVMValueRef p, LLVMTypeRef mt, int lanes, unsigned al,
                            bool contig, bool uni, LLVMValueRef mask) {
  LLVMValueRef v;
  LLVMTypeRef vt = cg_lx_vec(mt, lanes);
  if (lanes == 1 || uni) {
    v = LLVMBuildLoad2(f->b, mt, p, "");
    LLVMSetAlignment(v, al);
    v = splat(f, v, lanes);
  } else if (contig && !mask) {
    v = LLVMBuildLoad2(f->b, vt, p, "");
    LLVMSetAlignment(v, al);
  } else if (contig) {
    LLVMTypeRef over[2] = {vt, f->m->t_ptr};
    LLVMValueRef a[4] = {p, LLVMConstInt(f->m->t_i32, al, 0), mask, LLVMConstNull(vt)};
    v = cg_lx_intrin(f, "llvm.masked.load", over, 2, a, 4);
  } else {
    LLVMTypeRef over[2] = {vt, LLVMTypeOf(p)};
    LLVMValueRef a[4] = {p, LLVMConstInt(f->m->t_i32, al, 0), mask ? mask : all_true(f, lanes),
                         LLVMConstNull(vt)};
    v = cg_lx_intrin(f, "llvm.masked.gather", over, 2, a, 4);
  }
  return v;
}

static LLVMValueRef ex_load(lx_fn *f, const ir_expr *e, LLVMValueRef mask) {
  const ir_buffer *buf = e->u.load.buf;
  if (!buf) return fail(f, TS_EINVAL, "load from a missing buffer");
  if (e->u.load.nidx != 1 || !e->u.load.idx || !e->u.load.idx[0])
    return fail(f, TS_EINVAL, "load from %s with %d indices (the lowered form is flat)", buf->name,
                e->u.load.nidx);
  LLVMValueRef base = lookup(f, buf);
  if (!base) return fail(f, TS_EINVAL, "load from buffer %s, which is not in scope", buf->name);
  int code = buf->dtype.code;
  if (code == IR_HANDLE) return fail(f, TS_EUNSUPPORTED, "buffer %s of handles", buf->name);
  const ir_expr *idx = e->u.load.idx[0];
  int lanes = e->dtype.lanes > idx->dtype.lanes ? e->dtype.lanes : idx->dtype.lanes;
  if (mask && cg_lx_lanes(mask) != lanes) mask = NULL;
  LLVMTypeRef mt = mem_elem(f->m, code);
  unsigned al = (unsigned)ir_dtype_bytes(buf->dtype);
  bool contig, uni;
  LLVMValueRef p = access_ptr(f, base, mt, idx, lanes, mask, &contig, &uni);
  if (!p) return NULL;
  return from_mem(f, code, load_at(f, p, mt, lanes, al, contig, uni, mask));
}

static LLVMValueRef ex_ramp(lx_fn *f, const ir_expr *e, LLVMValueRef mask) {
  int lanes = e->u.ramp.lanes;
  if (!e->u.ramp.base || !e->u.ramp.stride || lanes < 1) return fail(f, TS_EINVAL, "malformed ramp");
  LLVMValueRef base = ex(f, e->u.ramp.base, mask), st = base ? ex(f, e->u.ramp.stride, mask) : NULL;
  if (!st) return NULL;
  if (cg_lx_lanes(base) != 1 || cg_lx_lanes(st) != 1) return fail(f, TS_ETYPE, "ramp of vectors");
  int code = e->u.ramp.base->dtype.code;
  LLVMTypeRef vt = cg_lx_vec(LLVMTypeOf(base), lanes);
  LLVMValueRef small[64], *steps = lanes <= 64 ? small : ts_malloc(sizeof *steps * (size_t)lanes);
  if (!steps) return fail(f, TS_ENOMEM, "out of memory");
  for (int i = 0; i < lanes; i++)
    steps[i] = code_float(code) ? LLVMConstReal(LLVMTypeOf(base), i)
                                : LLVMConstInt(LLVMTypeOf(base), (unsigned long long)i, 0);
  LLVMValueRef iota = LLVMConstVector(steps, (unsigned)lanes);
  if (steps != small) ts_free(steps);
  LLVMValueRef bv = splat(f, base, lanes), sv = splat(f, st, lanes);
  if (code_float(code)) {
    LLVMValueRef r = LLVMBuildFAdd(f->b, bv, LLVMBuildFMul(f->b, iota, sv, ""), "");
    return round_to(f, code, r);
  }
  (void)vt;
  bool nsw = f->in_index > 0 && code_signed(code);
  LLVMValueRef off = nsw ? LLVMBuildNSWMul(f->b, iota, sv, "") : LLVMBuildMul(f->b, iota, sv, "");
  return nsw ? LLVMBuildNSWAdd(f->b, bv, off, "") : LLVMBuildAdd(f->b, bv, off, "");
}

/* ---- target intrinsics (docs/TENSORIZE.md) ------------------------------------ */

/* Fits v to the LLVM type want: same type as is, else a bit cast when the
 * sizes agree; NULL otherwise. */
static LLVMValueRef fit_type(lx_fn *f, LLVMValueRef v, LLVMTypeRef want) {
  LLVMTypeRef have = LLVMTypeOf(v);
  if (have == want) return v;
  LLVMTargetDataRef td = LLVMGetModuleDataLayout(f->m->mod);
  if (LLVMGetTypeKind(have) == LLVMPointerTypeKind || LLVMGetTypeKind(want) == LLVMPointerTypeKind)
    return NULL;
  if (LLVMSizeOfTypeInBits(td, have) != LLVMSizeOfTypeInBits(td, want)) return NULL;
  return LLVMBuildBitCast(f->b, v, want, "");
}

/* call_extern("llvm.<name>", dtype, args): an LLVM intrinsic call. An
 * overloaded intrinsic is overloaded on its result type (interleave2,
 * ...). Arguments of another type with the same size are bit cast. */
/* A call of a C library function (cblas_*, dnnl_*: cg_lx_extern_lib): declared
 * from the operands' types (pointers from access_ptr, scalars as they are)
 * and the call's (handle: void); the artifact links the library. */
static LLVMValueRef ex_c_extern(lx_fn *f, const ir_expr *e, LLVMValueRef mask) {
  const char *nm = e->u.ext.name;
  int na = e->u.ext.nargs;
  char b1[24];
  if (na > 24) return fail(f, TS_EUNSUPPORTED, "call_extern '%s' with %d arguments", nm, na);
  if (e->dtype.lanes != 1 || e->dtype.code == IR_F16 || e->dtype.code == IR_BF16 || e->dtype.code == IR_BOOL)
    return fail(f, TS_EUNSUPPORTED, "call_extern '%s' returning %s", nm, dts(e->dtype, b1));
  LLVMValueRef a[24];
  LLVMTypeRef pt[24];
  for (int i = 0; i < na; i++) {
    if (!e->u.ext.args[i]) return fail(f, TS_EINVAL, "call_extern '%s' with a missing argument", nm);
    if (e->u.ext.args[i]->dtype.lanes != 1)
      return fail(f, TS_EUNSUPPORTED, "call_extern '%s': argument %d is a vector", nm, i);
    if (!(a[i] = ex(f, e->u.ext.args[i], mask))) return NULL;
    pt[i] = LLVMTypeOf(a[i]);
  }
  bool is_void = e->dtype.code == IR_HANDLE;
  LLVMTypeRef rt = is_void ? LLVMVoidTypeInContext(f->m->ctx) : reg_elem(f->m, e->dtype.code);
  LLVMTypeRef fty = LLVMFunctionType(rt, pt, (unsigned)na, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(f->m->mod, nm);
  if (!fn) fn = LLVMAddFunction(f->m->mod, nm, fty);
  LLVMValueRef r = LLVMBuildCall2(f->b, fty, fn, a, (unsigned)na, "");
  return is_void ? LLVMConstNull(f->m->t_ptr) : r;
}

static LLVMValueRef ex_extern(lx_fn *f, const ir_expr *e, LLVMValueRef mask) {
  const char *nm = e->u.ext.name ? e->u.ext.name : "";
  int na = e->u.ext.nargs;
  if (cg_lx_extern_lib(nm) >= 0) return ex_c_extern(f, e, mask);
  if (strncmp(nm, "llvm.", 5) != 0)
    return fail(f, TS_EUNSUPPORTED,
                "call_extern '%s': the LLVM back end calls only llvm.* intrinsics and the C libraries it links "
                "(cblas_*, dnnl_*, tsrt_dnnl_*, when found at build time)", nm);
  unsigned id = LLVMLookupIntrinsicID(nm, strlen(nm));
  if (!id) return fail(f, TS_EUNSUPPORTED, "call_extern '%s': LLVM has no such intrinsic", nm);
  if (na > 8) return fail(f, TS_EUNSUPPORTED, "call_extern '%s' with %d arguments", nm, na);
  char b1[24];
  bool is_void = e->dtype.code == IR_HANDLE;
  LLVMTypeRef rt = is_void ? LLVMVoidTypeInContext(f->m->ctx)
                           : cg_lx_vec(reg_elem(f->m, e->dtype.code), e->dtype.lanes);
  if (e->dtype.code == IR_F16 || e->dtype.code == IR_BF16 || e->dtype.code == IR_BOOL)
    return fail(f, TS_EUNSUPPORTED, "call_extern '%s' returning %s", nm, dts(e->dtype, b1));
  LLVMValueRef a[8];
  for (int i = 0; i < na; i++) {
    if (!e->u.ext.args[i]) return fail(f, TS_EINVAL, "call_extern '%s' with a missing argument", nm);
    if (!(a[i] = ex(f, e->u.ext.args[i], mask))) return NULL;
  }
  /* The overload types: a fully mangled name (llvm.aarch64.neon.sdot.v4i32.v16i8)
   * names them, found by mangling candidate lists (result, then operands);
   * a bare name is overloaded on its result, or a void one on its first
   * operand (llvm.vector.interleave2, llvm.prefetch). */
  LLVMTypeRef over[3] = {is_void && na ? LLVMTypeOf(a[0]) : rt};
  int nover = 0;
  if (LLVMIntrinsicIsOverloaded(id)) {
    size_t bl;
    const char *base = LLVMIntrinsicGetName(id, &bl);
    nover = 1;
    if (strlen(nm) != bl || strncmp(nm, base, bl)) {
      nover = 0;
      /* candidates: [r], [r, x], [r, x, y] with r the result (or operand 0
       * of a void call) and x, y operand types */
      LLVMTypeRef r0 = over[0];
      for (int n = 1; n <= 3 && !nover; n++)
        for (int i = 0; i < (n >= 2 ? na : 1) && !nover; i++)
          for (int j = 0; j < (n == 3 ? na : 1) && !nover; j++) {
            LLVMTypeRef cand[3] = {r0, na ? LLVMTypeOf(a[i]) : r0, na ? LLVMTypeOf(a[j]) : r0};
            size_t ml;
            char *mn = (char *)LLVMIntrinsicCopyOverloadedName2(f->m->mod, id, cand, (size_t)n, &ml);
            bool same = mn && ml == strlen(nm) && !memcmp(mn, nm, ml);
            free(mn);
            if (same) {
              memcpy(over, cand, sizeof cand);
              nover = n;
            }
          }
      if (!nover)
        return fail(f, TS_ETYPE, "call_extern '%s': the name's type suffix does not match the call's types", nm);
    }
  }
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(f->m->mod, id, over, (size_t)nover);
  LLVMTypeRef fty = LLVMIntrinsicGetType(f->m->ctx, id, over, (size_t)nover);
  if (!fn || !fty) return fail(f, TS_EUNSUPPORTED, "call_extern '%s': cannot declare it", nm);
  if ((int)LLVMCountParamTypes(fty) != na)
    return fail(f, TS_EINVAL, "call_extern '%s' takes %u arguments, got %d", nm, LLVMCountParamTypes(fty), na);
  LLVMTypeRef pt[8];
  LLVMGetParamTypes(fty, pt);
  for (int i = 0; i < na; i++) {
    LLVMValueRef v = a[i];
    if (!(a[i] = fit_type(f, v, pt[i])))
      return fail(f, TS_ETYPE, "argument %d of call_extern '%s' (%s) does not fit the intrinsic's type", i,
                  nm, dts(e->u.ext.args[i]->dtype, b1));
  }
  LLVMValueRef r = LLVMBuildCall2(f->b, fty, fn, a, (unsigned)na, "");
  if (is_void) return LLVMConstNull(f->m->t_ptr);
  LLVMValueRef fr = fit_type(f, r, rt);
  if (!fr) return fail(f, TS_ETYPE, "call_extern '%s' does not return %s", nm, dts(e->dtype, b1));
  return fr;
}

static LLVMValueRef ex_reinterpret(lx_fn *f, const ir_expr *e, LLVMValueRef mask) {
  const ir_expr *ve = e->u.cast.value;
  char b1[24], b2[24];
  if (!ve) return fail(f, TS_EINVAL, "reinterpret with a missing operand");
  int fc = ve->dtype.code, tc = e->dtype.code;
  if (fc == IR_F16 || fc == IR_BF16 || fc == IR_BOOL || fc == IR_HANDLE || tc == IR_F16 || tc == IR_BF16 ||
      tc == IR_BOOL || tc == IR_HANDLE)
    return fail(f, TS_EUNSUPPORTED, "reinterpret between %s and %s", dts(ve->dtype, b1), dts(e->dtype, b2));
  LLVMValueRef v = ex(f, ve, mask);
  if (!v) return NULL;
  LLVMValueRef r = fit_type(f, v, cg_lx_vec(reg_elem(f->m, tc), e->dtype.lanes));
  if (!r) return fail(f, TS_ETYPE, "reinterpret of %s as %s changes the size", dts(ve->dtype, b1), dts(e->dtype, b2));
  return r;
}

/* access_ptr(buf, offset, rw) of the lowered form: offset is flat. */
static LLVMValueRef ex_addr(lx_fn *f, const ir_expr *e) {
  const ir_buffer *buf = e->u.ptr.buf;
  if (!buf || !e->u.ptr.offset) return fail(f, TS_EINVAL, "access_ptr with a missing operand");
  LLVMValueRef base = lookup(f, buf);
  if (!base) return fail(f, TS_EINVAL, "access_ptr of buffer %s, which is not in scope", buf->name);
  LLVMValueRef off = ex(f, e->u.ptr.offset, NULL);
  if (!off) return NULL;
  if (cg_lx_lanes(off) != 1) return fail(f, TS_ETYPE, "access_ptr of %s with a vector offset", buf->name);
  off = idx64(f, e->u.ptr.offset->dtype.code, off);
  return LLVMBuildInBoundsGEP2(f->b, mem_elem(f->m, buf->dtype.code), base, &off, 1, "");
}

static LLVMValueRef ex(lx_fn *f, const ir_expr *e, LLVMValueRef mask) {
  if (!e) return fail(f, TS_EINVAL, "missing expression");
  if (f->m->st != TS_OK) return NULL;
  switch (e->kind) {
  case IR_INT_IMM: return ex_imm_int(f, e);
  case IR_FLOAT_IMM: return ex_imm_float(f, e);
  case IR_VAR: {
    LLVMValueRef v = lookup(f, e->u.var);
    if (!v) return fail(f, TS_EINVAL, "variable %s is not in scope", e->u.var->name);
    return v;
  }
  case IR_NOT: {
    if (!e->u.un.a) return fail(f, TS_EINVAL, "not with a missing operand");
    LLVMValueRef v = ex(f, e->u.un.a, mask);
    return v ? LLVMBuildNot(f->b, to_bool(f, e->u.un.a->dtype.code, v), "") : NULL;
  }
  case IR_SELECT: return ex_select(f, e, mask);
  case IR_CAST: return ex_cast(f, e, mask);
  case IR_CALL: return ex_call(f, e, mask);
  case IR_LOAD: return ex_load(f, e, mask);
  case IR_RAMP: return ex_ramp(f, e, mask);
  case IR_BROADCAST: {
    if (!e->u.bcast.value) return fail(f, TS_EINVAL, "broadcast with a missing value");
    LLVMValueRef v = ex(f, e->u.bcast.value, NULL);
    if (!v) return NULL;
    if (cg_lx_lanes(v) != 1) return fail(f, TS_ETYPE, "broadcast of a vector");
    return splat(f, v, e->u.bcast.lanes);
  }
  case IR_CALL_EXTERN: return ex_extern(f, e, mask);
  case IR_REINTERPRET: return ex_reinterpret(f, e, mask);
  case IR_ACCESS_PTR: return ex_addr(f, e);
  case IR_STR_IMM:
    return fail(f, TS_EUNSUPPORTED, "string \"%s\" as a value (the LLVM back end has no use for it)",
                e->u.sval ? e->u.sval : "");
  default:
    if (ir_is_binop(e->kind)) return ex_binop(f, e, mask);
    return fail(f, TS_EINVAL, "unknown expression kind %d", (int)e->kind);
  }
}

/* ---- functions ----------------------------------------------------------------- */

static void add_fn_attrs(lx_mod *m, LLVMValueRef fn) {
  static const char *const en[] = {"nounwind"};
  for (size_t i = 0; i < sizeof en / sizeof *en; i++) {
    unsigned k = LLVMGetEnumAttributeKindForName(en[i], strlen(en[i]));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(m->ctx, k, 0));
  }
  const char *kv[][2] = {{"target-cpu", m->t->cpu},
                         {"target-features", m->t->attrs},
                         {"min-legal-vector-width", m->vec_bits_str},
                         {"prefer-vector-width", m->vec_bits_str}};
  for (size_t i = 0; i < sizeof kv / sizeof *kv; i++) {
    if (!kv[i][1][0]) continue;
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(m->ctx, kv[i][0], (unsigned)strlen(kv[i][0]),
                                                      kv[i][1], (unsigned)strlen(kv[i][1])));
  }
}

static void add_param_attr(lx_mod *m, LLVMValueRef fn, unsigned idx, const char *name, uint64_t v) {
  unsigned k = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(m->ctx, k, v));
}

/* Marks param i (0-based) a buffer pointer: noalias, nonnull, 64-aligned,
 * dereferenceable for bytes when known (> 0). */
static void buffer_param(lx_mod *m, LLVMValueRef fn, unsigned i, int64_t bytes) {
  add_param_attr(m, fn, i + 1, "noalias", 0);
  add_param_attr(m, fn, i + 1, "nonnull", 0);
  add_param_attr(m, fn, i + 1, "align", 64);
  if (bytes > 0) add_param_attr(m, fn, i + 1, "dereferenceable", (uint64_t)bytes);
}

static LLVMValueRef new_function(lx_mod *m, const char *name, LLVMTypeRef fty, bool external) {
  LLVMValueRef fn = LLVMAddFunction(m->mod, name, fty);
  LLVMSetLinkage(fn, external ? LLVMExternalLinkage : LLVMInternalLinkage);
  add_fn_attrs(m, fn);
  return fn;
}

/* Starts emitting into fn: an entry block (allocas) branching to "start". */
static void fn_begin(lx_fn *f, lx_mod *m, LLVMValueRef fn) {
  memset(f, 0, sizeof *f);
  f->m = m;
  f->fn = fn;
  f->b = LLVMCreateBuilderInContext(m->ctx);
  f->entry = LLVMAppendBasicBlockInContext(m->ctx, fn, "entry");
  LLVMBasicBlockRef start = LLVMAppendBasicBlockInContext(m->ctx, fn, "start");
  LLVMPositionBuilderAtEnd(f->b, f->entry);
  LLVMBuildBr(f->b, start);
  LLVMPositionBuilderAtEnd(f->b, start);
}

static void fn_end(lx_fn *f) {
  LLVMDisposeBuilder(f->b);
  ts_free(f->binds);
  f->binds = NULL;
}

static LLVMValueRef entry_alloca(lx_fn *f, LLVMTypeRef ty, unsigned align) {
  LLVMBuilderRef ab = LLVMCreateBuilderInContext(f->m->ctx);
  LLVMPositionBuilderBefore(ab, LLVMGetBasicBlockTerminator(f->entry));
  LLVMValueRef v = LLVMBuildAlloca(ab, ty, "");
  LLVMSetAlignment(v, align);
  LLVMDisposeBuilder(ab);
  return v;
}

static LLVMBasicBlockRef oom_block(lx_fn *f) {
  if (!f->oom_bb) {
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(f->b);
    f->oom_bb = LLVMAppendBasicBlockInContext(f->m->ctx, f->fn, "oom");
    LLVMPositionBuilderAtEnd(f->b, f->oom_bb);
    LLVMBuildRet(f->b, LLVMConstInt(f->m->t_i32, (unsigned long long)-1, 1));
    LLVMPositionBuilderAtEnd(f->b, cur);
  }
  return f->oom_bb;
}

/* ---- loop metadata ---------------------------------------------------------------- */

static LLVMMetadataRef loop_md(lx_mod *m, const char *k1, const char *k2) {
  LLVMMetadataRef ops[3];
  int n = 0;
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(m->ctx, NULL, 0);
  ops[n++] = tmp;
  const char *keys[2] = {k1, k2};
  for (int i = 0; i < 2; i++) {
    if (!keys[i]) continue;
    LLVMMetadataRef kv[2] = {LLVMMDStringInContext2(m->ctx, keys[i], strlen(keys[i])),
                             LLVMValueAsMetadata(LLVMConstInt(m->t_i1, 1, 0))};
    /* llvm.loop.unroll.full takes no value; vectorize.enable takes i1 true */
    bool has_val = strstr(keys[i], ".enable") != NULL;
    ops[n++] = LLVMMDNodeInContext2(m->ctx, kv, has_val ? 2 : 1);
  }
  LLVMMetadataRef node = LLVMMDNodeInContext2(m->ctx, ops, (size_t)n);
  LLVMMetadataReplaceAllUsesWith(tmp, node);
  return node;
}

/* ---- statements ----------------------------------------------------------------------- */

static bool emit_stmt(lx_fn *f, const ir_stmt *s);

/* Product of the constant trip counts of s's deepest loop chain (1 when
 * none; -1 when some extent is not constant). */
static int64_t trips(const ir_stmt *s) {
  if (!s) return 1;
  switch (s->kind) {
  case IR_FOR: {
    int64_t e, in = trips(s->u.loop.body);
    if (!ir_as_int(s->u.loop.extent, &e) || in < 0) return -1;
    return e > 0 ? e * in : 0;
  }
  case IR_SEQ: {
    int64_t mx = 1;
    for (int i = 0; i < s->u.seq.n; i++) {
      int64_t t = trips(s->u.seq.stmts[i]);
      if (t < 0) return -1;
      if (t > mx) mx = t;
    }
    return mx;
  }
  case IR_IF: {
    int64_t a = trips(s->u.ifs.then_s), b = trips(s->u.ifs.else_s);
    return a < 0 || b < 0 ? -1 : a > b ? a : b;
  }
  case IR_LET: return trips(s->u.let.body);
  case IR_ALLOCATE: return trips(s->u.alloc.body);
  default: return 1;
  }
}

/* A serial loop var in [lo, hi), with optional !llvm.loop metadata. */
static bool serial_loop(lx_fn *f, ir_var *v, LLVMValueRef lo, LLVMValueRef hi, const ir_stmt *body,
                        LLVMMetadataRef md) {
  lx_mod *m = f->m;
  LLVMBuilderRef b = f->b;
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef hdr = LLVMAppendBasicBlockInContext(m->ctx, f->fn, v->name);
  LLVMBasicBlockRef bod = LLVMAppendBasicBlockInContext(m->ctx, f->fn, "body");
  LLVMBasicBlockRef ext = LLVMAppendBasicBlockInContext(m->ctx, f->fn, "exit");
  LLVMBuildBr(b, hdr);
  LLVMPositionBuilderAtEnd(b, hdr);
  LLVMValueRef i = LLVMBuildPhi(b, LLVMTypeOf(lo), v->name);
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i, hi, ""), bod, ext);
  LLVMPositionBuilderAtEnd(b, bod);
  int nb = f->nbinds;
  if (!bind(f, v, i) || !emit_stmt(f, body)) return false;
  f->nbinds = nb;
  LLVMValueRef next = LLVMBuildNSWAdd(b, i, LLVMConstInt(LLVMTypeOf(lo), 1, 0), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
  LLVMValueRef br = LLVMBuildBr(b, hdr);
  if (md) LLVMSetMetadata(br, m->md_loop, LLVMMetadataAsValue(m->ctx, md));
  LLVMValueRef vals[2] = {lo, next};
  LLVMBasicBlockRef bbs[2] = {pre, latch};
  LLVMAddIncoming(i, vals, bbs, 2);
  LLVMPositionBuilderAtEnd(b, ext);
  return true;
}

typedef struct capture_set {
  lx_fn *f;
  ts_vec keys;  /* ir_var * / ir_buffer * bound in f, in first-use order */
  ts_vec isbuf; /* non-NULL where keys[i] is a buffer */
  bool oom;
} capture_set;

static void capture(capture_set *c, const void *key, bool isbuf) {
  if (!lookup(c->f, key)) return; /* defined inside the body */
  for (size_t i = 0; i < c->keys.len; i++)
    if (c->keys.items[i] == key) return;
  if (ts_vec_push(&c->keys, (void *)key) != TS_OK ||
      ts_vec_push(&c->isbuf, isbuf ? (void *)key : NULL) != TS_OK)
    c->oom = true;
}

static bool cap_expr(void *ctx, const ir_expr *e) {
  if (e->kind == IR_VAR) capture(ctx, e->u.var, false);
  else if (e->kind == IR_LOAD) capture(ctx, e->u.load.buf, true);
  else if (e->kind == IR_ACCESS_PTR) capture(ctx, e->u.ptr.buf, true);
  return true;
}

static bool cap_stmt(void *ctx, const ir_stmt *s) {
  if (s->kind == IR_STORE) capture(ctx, s->u.store.buf, true);
  return true;
}

static void capture_fini(capture_set *c) {
  ts_vec_fini(&c->keys);
  ts_vec_fini(&c->isbuf);
}

/* A parallel loop: the body is outlined into par.N.body(captures, lo, hi),
 * called from par.N.task(t, n, closure) through tsrt_parallel_launch. */
static bool parallel_loop(lx_fn *f, const ir_stmt *s, LLVMValueRef minv, LLVMValueRef extv) {
  lx_mod *m = f->m;
  LLVMBuilderRef b = f->b;
  ir_var *v = s->u.loop.var;
  capture_set cs = {f, {0}, {0}, false};
  ts_vec_init(&cs.keys);
  ts_vec_init(&cs.isbuf);
  ir_visitor vis = {cap_expr, cap_stmt, &cs};
  ir_visit_stmt(&vis, s->u.loop.body);
  if (cs.oom) {
    capture_fini(&cs);
    return fail(f, TS_ENOMEM, "out of memory outlining a parallel loop"), false;
  }
  int nc = (int)cs.keys.len;
  size_t nt = (size_t)nc + 2;
  LLVMTypeRef *ft = ts_malloc(sizeof *ft * nt);
  LLVMValueRef *cv = ts_malloc(sizeof *cv * nt);
  if (!ft || !cv) {
    ts_free(ft);
    ts_free(cv);
    capture_fini(&cs);
    return fail(f, TS_ENOMEM, "out of memory outlining a parallel loop"), false;
  }
  for (int i = 0; i < nc; i++) {
    cv[i] = lookup(f, cs.keys.items[i]);
    ft[i] = LLVMTypeOf(cv[i]);
  }
  int id = m->noutlined++;
  char name[64];
  /* the body: captures..., i64 lo, i64 hi */
  ft[nc] = ft[nc + 1] = m->t_i64;
  snprintf(name, sizeof name, "par.%d.body", id);
  LLVMValueRef bfn = new_function(m, name, LLVMFunctionType(m->t_i32, ft, (unsigned)nt, 0), false);
  lx_fn g;
  fn_begin(&g, m, bfn);
  g.par_depth = f->par_depth + 1;
  g.unroll_budget = f->unroll_budget;
  bool ok = true;
  for (int i = 0; i < nc && ok; i++) {
    LLVMValueRef p = LLVMGetParam(bfn, (unsigned)i);
    if (cs.isbuf.items[i]) buffer_param(m, bfn, (unsigned)i, 0);
    ok = bind(&g, cs.keys.items[i], p);
  }
  if (ok) {
    LLVMTypeRef vt = reg_elem(m, v->dtype.code);
    LLVMValueRef lo = LLVMGetParam(bfn, (unsigned)nc), hi = LLVMGetParam(bfn, (unsigned)nc + 1);
    if (vt != m->t_i64) {
      lo = LLVMBuildTrunc(g.b, lo, vt, "");
      hi = LLVMBuildTrunc(g.b, hi, vt, "");
    }
    ok = serial_loop(&g, v, lo, hi, s->u.loop.body, NULL);
    if (ok) LLVMBuildRet(g.b, LLVMConstInt(m->t_i32, 0, 0));
  }
  fn_end(&g);
  if (!ok) {
    ts_free(ft);
    ts_free(cv);
    capture_fini(&cs);
    return false;
  }
  /* the closure: captures..., i64 min, i64 extent */
  LLVMTypeRef clo_t = LLVMStructTypeInContext(m->ctx, ft, (unsigned)nt, 0);
  /* the task */
  snprintf(name, sizeof name, "par.%d.task", id);
  LLVMTypeRef task_params[3] = {m->t_i32, m->t_i32, m->t_ptr};
  LLVMTypeRef task_t = LLVMFunctionType(m->t_i32, task_params, 3, 0);
  LLVMValueRef tfn = new_function(m, name, task_t, false);
  LLVMBuilderRef tb = LLVMCreateBuilderInContext(m->ctx);
  LLVMPositionBuilderAtEnd(tb, LLVMAppendBasicBlockInContext(m->ctx, tfn, "entry"));
  LLVMValueRef clo = LLVMGetParam(tfn, 2);
  LLVMValueRef *args = cv; /* reuse: cv's values are stored below first */
  /* store captures into the closure in the caller */
  LLVMValueRef cl = entry_alloca(f, clo_t, 8);
  for (int i = 0; i < nc; i++)
    LLVMBuildStore(b, cv[i], LLVMBuildStructGEP2(b, clo_t, cl, (unsigned)i, ""));
  LLVMBuildStore(b, idx64(f, v->dtype.code, minv), LLVMBuildStructGEP2(b, clo_t, cl, (unsigned)nc, ""));
  LLVMBuildStore(b, idx64(f, v->dtype.code, extv),
                 LLVMBuildStructGEP2(b, clo_t, cl, (unsigned)nc + 1, ""));
  for (size_t i = 0; i < nt; i++)
    args[i] = LLVMBuildLoad2(tb, ft[i], LLVMBuildStructGEP2(tb, clo_t, clo, (unsigned)i, ""), "");
  LLVMValueRef t64 = LLVMBuildSExt(tb, LLVMGetParam(tfn, 0), m->t_i64, "");
  LLVMValueRef n64 = LLVMBuildSExt(tb, LLVMGetParam(tfn, 1), m->t_i64, "");
  LLVMValueRef mn = args[nc], ext = args[nc + 1];
  LLVMValueRef lo = LLVMBuildSDiv(tb, LLVMBuildMul(tb, ext, t64, ""), n64, "");
  LLVMValueRef hi = LLVMBuildSDiv(
      tb, LLVMBuildMul(tb, ext, LLVMBuildAdd(tb, t64, LLVMConstInt(m->t_i64, 1, 0), ""), ""), n64, "");
  args[nc] = LLVMBuildAdd(tb, mn, lo, "");
  args[nc + 1] = LLVMBuildAdd(tb, mn, hi, "");
  LLVMValueRef r = LLVMBuildCall2(tb, LLVMGlobalGetValueType(bfn), bfn, args, (unsigned)nt, "");
  LLVMBuildRet(tb, r);
  LLVMDisposeBuilder(tb);
  ts_free(ft);
  ts_free(cv);
  capture_fini(&cs);
  /* the launch; a non-zero result is the kernel's */
  LLVMValueRef la[3] = {tfn, cl, LLVMConstInt(m->t_i32, 0, 0)};
  LLVMValueRef rc = LLVMBuildCall2(b, LLVMGlobalGetValueType(m->fn_launch), m->fn_launch, la, 3, "");
  LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(m->ctx, f->fn, "par.fail");
  LLVMBasicBlockRef good = LLVMAppendBasicBlockInContext(m->ctx, f->fn, "par.done");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntNE, rc, LLVMConstInt(m->t_i32, 0, 0), ""), bad, good);
  LLVMPositionBuilderAtEnd(b, bad);
  LLVMBuildRet(b, rc);
  LLVMPositionBuilderAtEnd(b, good);
  return true;
}

static bool st_for(lx_fn *f, const ir_stmt *s) {
  lx_mod *m = f->m;
  ir_var *v = s->u.loop.var;
  if (!v || !s->u.loop.min || !s->u.loop.extent) return fail(f, TS_EINVAL, "malformed loop"), false;
  if (s->u.loop.kind == IR_FOR_THREAD_BINDING)
    return fail(f, TS_EUNSUPPORTED, "loop %s is bound to %s, which a CPU cannot run", v->name,
                s->u.loop.thread ? s->u.loop.thread : "a thread"),
           false;
  if (!ir_dtype_is_int(v->dtype) || v->dtype.lanes != 1)
    return fail(f, TS_ETYPE, "loop var %s is not a scalar integer", v->name), false;
  LLVMTypeRef vt = reg_elem(m, v->dtype.code);
  LLVMValueRef minv = ex(f, s->u.loop.min, NULL), extv = minv ? ex(f, s->u.loop.extent, NULL) : NULL;
  if (!extv) return false;
  if (LLVMTypeOf(minv) != vt || LLVMTypeOf(extv) != vt)
    return fail(f, TS_ETYPE, "loop %s: bounds are not of the loop var's dtype", v->name), false;
  int64_t ext_c;
  bool ext_const = ir_as_int(s->u.loop.extent, &ext_c);
  const ir_annot *au = ir_annot_find(s->u.loop.nannot, s->u.loop.annots, "pragma_auto_unroll_max_step");
  int64_t saved_budget = f->unroll_budget;
  if (au && au->kind == IR_ANN_INT) f->unroll_budget = au->v.i;
  bool ok;
  int64_t inner = ext_const ? trips(s->u.loop.body) : -1;
  /* the loop's range while its body is emitted (safe_load) */
  int64_t min_c;
  int saved_nrange = f->nrange;
  if (ext_const && ext_c > 0 && ir_as_int(s->u.loop.min, &min_c) && f->nrange < 32) {
    f->rvar[f->nrange] = v;
    f->rlo[f->nrange] = min_c;
    f->rhi[f->nrange++] = min_c + ext_c - 1;
  }
  bool copy = ext_const && ext_c >= 0 && inner >= 0 &&
              ((s->u.loop.kind == IR_FOR_UNROLLED && ext_c <= UNROLL_COPY_MAX &&
                ext_c * inner <= UNROLL_TOTAL_MAX) ||
               (s->u.loop.kind == IR_FOR_SERIAL && f->unroll_budget > 0 &&
                ext_c * inner <= f->unroll_budget));
  if (s->u.loop.kind == IR_FOR_PARALLEL && f->par_depth == 0) {
    ok = parallel_loop(f, s, minv, extv);
  } else if (copy) {
    ok = true;
    for (int64_t k = 0; ok && k < ext_c; k++) {
      LLVMValueRef iv = LLVMBuildNSWAdd(f->b, minv, LLVMConstInt(vt, (unsigned long long)k, 1), "");
      int nb = f->nbinds;
      ok = bind(f, v, iv) && emit_stmt(f, s->u.loop.body);
      f->nbinds = nb;
    }
  } else {
    LLVMMetadataRef md = NULL;
    if (s->u.loop.kind == IR_FOR_VECTORIZED) md = loop_md(m, "llvm.loop.vectorize.enable", NULL);
    else if (s->u.loop.kind == IR_FOR_UNROLLED)
      md = loop_md(m, ext_const ? "llvm.loop.unroll.full" : "llvm.loop.unroll.enable", NULL);
    LLVMValueRef hi = LLVMBuildNSWAdd(f->b, minv, extv, "");
    ok = serial_loop(f, v, minv, hi, s->u.loop.body, md);
  }
  f->unroll_budget = saved_budget;
  f->nrange = saved_nrange;
  return ok;
}

/* A store; with guard (an init guard, see init_guard) the store is made
 * unconditional: buf[idx] = guard ? value : buf[idx]. */
static bool st_store(lx_fn *f, const ir_stmt *s, const ir_expr *guard) {
  lx_mod *m = f->m;
  const ir_buffer *buf = s->u.store.buf;
  if (!buf || !s->u.store.value) return fail(f, TS_EINVAL, "malformed store"), false;
  if (s->u.store.nidx != 1 || !s->u.store.idx || !s->u.store.idx[0])
    return fail(f, TS_EINVAL, "store to %s with %d indices (the lowered form is flat)", buf->name,
                s->u.store.nidx),
           false;
  LLVMValueRef base = lookup(f, buf);
  if (!base) return fail(f, TS_EINVAL, "store to buffer %s, which is not in scope", buf->name), false;
  int code = buf->dtype.code;
  if (code == IR_HANDLE) return fail(f, TS_EUNSUPPORTED, "buffer %s of handles", buf->name), false;
  if (s->u.store.value->dtype.code != code) {
    char b1[24], b2[24];
    return fail(f, TS_ETYPE, "store of a %s value into buffer %s of dtype %s",
                dts(s->u.store.value->dtype, b1), buf->name, dts(buf->dtype, b2)),
           false;
  }
  const ir_expr *idx = s->u.store.idx[0], *pe = s->u.store.predicate;
  int lanes = idx->dtype.lanes > s->u.store.value->dtype.lanes ? idx->dtype.lanes
                                                               : s->u.store.value->dtype.lanes;
  LLVMValueRef mask = NULL;
  LLVMBasicBlockRef skip = NULL;
  int64_t pc;
  if (pe && !(ir_as_int(pe, &pc) && pc != 0)) {
    LLVMValueRef pv = ex(f, pe, NULL);
    if (!pv) return false;
    pv = to_bool(f, pe->dtype.code, pv);
    if (cg_lx_lanes(pv) == 1) {
      LLVMBasicBlockRef doit = LLVMAppendBasicBlockInContext(m->ctx, f->fn, "st.pred");
      skip = LLVMAppendBasicBlockInContext(m->ctx, f->fn, "st.skip");
      LLVMBuildCondBr(f->b, pv, doit, skip);
      LLVMPositionBuilderAtEnd(f->b, doit);
    } else {
      if (cg_lx_lanes(pv) > lanes) lanes = cg_lx_lanes(pv);
      mask = pv;
    }
  }
  LLVMTypeRef mt = mem_elem(m, code);
  unsigned al = (unsigned)ir_dtype_bytes(buf->dtype);
  bool contig, uni;
  LLVMValueRef p = access_ptr(f, base, mt, idx, lanes, mask, &contig, &uni);
  if (!p) return false;
  if (lanes > 1 && uni)
    return fail(f, TS_EUNSUPPORTED, "store of %d lanes to one element of %s", lanes, buf->name), false;
  LLVMValueRef v = ex(f, s->u.store.value, mask);
  if (!v || !(v = widen(f, v, lanes, "store value"))) return false;
  if (mask && !(mask = widen(f, mask, lanes, "store predicate"))) return false;
  LLVMTypeRef vt = cg_lx_vec(mt, lanes);
  if (guard) {
    LLVMValueRef g = ex(f, guard, NULL);
    if (!g || !(g = widen(f, to_bool(f, guard->dtype.code, g), lanes, "init guard"))) return false;
    LLVMValueRef old = load_at(f, p, mt, lanes, al, contig, uni, NULL);
    v = LLVMBuildSelect(f->b, g, v, from_mem(f, code, old), "");
  }
  v = to_mem(f, code, v);
  if (lanes == 1 || (contig && !mask)) {
    LLVMValueRef sti = LLVMBuildStore(f->b, v, p);
    LLVMSetAlignment(sti, al);
  } else if (contig) {
    LLVMTypeRef over[2] = {vt, m->t_ptr};
    LLVMValueRef a[4] = {v, p, LLVMConstInt(m->t_i32, al, 0), mask};
    cg_lx_intrin(f, "llvm.masked.store", over, 2, a, 4);
  } else {
    LLVMTypeRef over[2] = {vt, LLVMTypeOf(p)};
    LLVMValueRef a[4] = {v, p, LLVMConstInt(m->t_i32, al, 0), mask ? mask : all_true(f, lanes)};
    cg_lx_intrin(f, "llvm.masked.scatter", over, 2, a, 4);
  }
  if (skip) {
    LLVMBuildBr(f->b, skip);
    LLVMPositionBuilderAtEnd(f->b, skip);
  }
  return true;
}

static bool st_alloc(lx_fn *f, const ir_stmt *s) {
  lx_mod *m = f->m;
  ir_buffer *buf = s->u.alloc.buf;
  if (!buf) return fail(f, TS_EINVAL, "allocate of a missing buffer"), false;
  if (buf->dtype.code == IR_HANDLE || buf->dtype.lanes > 1)
    return fail(f, TS_EUNSUPPORTED, "buffer %s of dtype %s", buf->name,
                ir_dtype_code_name((ir_dtype_code)buf->dtype.code)),
           false;
  LLVMTypeRef mt = mem_elem(m, buf->dtype.code);
  int64_t eb = ir_dtype_bytes(buf->dtype);
  int64_t n = ir_buffer_const_size(buf);
  int nb = f->nbinds;
  if (n >= 0 && n * eb <= STACK_ALLOC_MAX) {
    LLVMValueRef p = entry_alloca(f, LLVMArrayType2(mt, (uint64_t)(n ? n : 1)), 64);
    if (!bind(f, buf, p) || !emit_stmt(f, s->u.alloc.body)) return false;
    f->nbinds = nb;
    return true;
  }
  /* heap: tsrt_scratch_alloc(bytes rounded up to 64), 64-byte aligned; NULL -> return -1 */
  LLVMBuilderRef b = f->b;
  LLVMValueRef bytes;
  if (n >= 0) {
    bytes = LLVMConstInt(m->t_i64, (unsigned long long)n * (unsigned long long)eb, 0);
  } else {
    bytes = LLVMConstInt(m->t_i64, (unsigned long long)eb, 0);
    for (int i = 0; i < buf->ndim; i++) {
      LLVMValueRef d = ex(f, buf->shape[i], NULL);
      if (!d) return false;
      bytes = LLVMBuildMul(b, bytes, idx64(f, buf->shape[i]->dtype.code, d), "");
    }
  }
  bytes = LLVMBuildAnd(b, LLVMBuildAdd(b, bytes, LLVMConstInt(m->t_i64, 63, 0), ""),
                       LLVMConstInt(m->t_i64, ~63ull, 0), "");
  bytes = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, bytes, LLVMConstInt(m->t_i64, 0, 0), ""),
                          LLVMConstInt(m->t_i64, 64, 0), bytes, "");
  LLVMValueRef p = LLVMBuildCall2(b, LLVMGlobalGetValueType(m->fn_alloc), m->fn_alloc, &bytes, 1, buf->name);
  LLVMBasicBlockRef ok_bb = LLVMAppendBasicBlockInContext(m->ctx, f->fn, "alloc.ok");
  LLVMBuildCondBr(b, LLVMBuildIsNull(b, p, ""), oom_block(f), ok_bb);
  LLVMPositionBuilderAtEnd(b, ok_bb);
  if (!bind(f, buf, p) || !emit_stmt(f, s->u.alloc.body)) return false;
  f->nbinds = nb;
  LLVMBuildCall2(f->b, LLVMGlobalGetValueType(m->fn_free), m->fn_free, &p, 1, "");
  return true;
}

/* Exact equality of load-free index expressions (vars by identity). */
static bool same_index(const ir_expr *a, const ir_expr *b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind || !ir_dtype_eq(a->dtype, b->dtype)) return false;
  switch (a->kind) {
  case IR_INT_IMM: return a->u.ival == b->u.ival;
  case IR_VAR: return a->u.var == b->u.var;
  case IR_RAMP:
    return a->u.ramp.lanes == b->u.ramp.lanes && same_index(a->u.ramp.base, b->u.ramp.base) &&
           same_index(a->u.ramp.stride, b->u.ramp.stride);
  case IR_BROADCAST:
    return a->u.bcast.lanes == b->u.bcast.lanes && same_index(a->u.bcast.value, b->u.bcast.value);
  case IR_CAST: return same_index(a->u.cast.value, b->u.cast.value);
  default:
    if (ir_is_binop(a->kind)) return same_index(a->u.bin.a, b->u.bin.a) && same_index(a->u.bin.b, b->u.bin.b);
    return false;
  }
}

/* The reduction-init pattern cg_lower emits before decompose_reduction:
 *   if (first iteration) B[idx] = init;  B[idx] = B[idx] + ...;
 * When the next statement stores to exactly the same element
 * unconditionally, the element is known addressable here, so the guarded
 * store can become an unconditional select-store: straight-line code in
 * which LLVM keeps the accumulator in registers across the reduction loop
 * (a branch around the store would keep it in memory). */
static bool init_guard(const ir_stmt *g, const ir_stmt *next) {
  if (!g || !next || g->kind != IR_IF || g->u.ifs.else_s || !g->u.ifs.cond) return false;
  const ir_stmt *t = g->u.ifs.then_s;
  if (!t || t->kind != IR_STORE || next->kind != IR_STORE) return false;
  if (g->u.ifs.cond->dtype.lanes != 1 || may_trap(NULL, g->u.ifs.cond)) return false;
  if (t->u.store.predicate || next->u.store.predicate || t->u.store.buf != next->u.store.buf ||
      t->u.store.nidx != 1 || next->u.store.nidx != 1 || !t->u.store.idx || !next->u.store.idx)
    return false;
  const ir_expr *v = t->u.store.value;
  if (!v || may_trap(NULL, v) || v->dtype.lanes != next->u.store.value->dtype.lanes) return false;
  return same_index(t->u.store.idx[0], next->u.store.idx[0]);
}

static bool emit_stmt(lx_fn *f, const ir_stmt *s) {
  if (f->m->st != TS_OK) return false;
  if (!s) return true;
  lx_mod *m = f->m;
  switch (s->kind) {
  case IR_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) {
      const ir_stmt *g = s->u.seq.stmts[i];
      bool ok = i + 1 < s->u.seq.n && init_guard(g, s->u.seq.stmts[i + 1])
                    ? st_store(f, g->u.ifs.then_s, g->u.ifs.cond)
                    : emit_stmt(f, g);
      if (!ok) return false;
    }
    return true;
  case IR_FOR: return st_for(f, s);
  case IR_STORE: return st_store(f, s, NULL);
  case IR_ALLOCATE: return st_alloc(f, s);
  case IR_EVALUATE: return s->u.eval.value ? ex(f, s->u.eval.value, NULL) != NULL : true;
  case IR_LET: {
    if (!s->u.let.var || !s->u.let.value) return fail(f, TS_EINVAL, "malformed let"), false;
    LLVMValueRef v = ex(f, s->u.let.value, NULL);
    if (!v) return false;
    int nb = f->nbinds;
    if (!bind(f, s->u.let.var, v) || !emit_stmt(f, s->u.let.body)) return false;
    f->nbinds = nb;
    return true;
  }
  case IR_IF: {
    if (!s->u.ifs.cond) return fail(f, TS_EINVAL, "if with a missing condition"), false;
    LLVMValueRef c = ex(f, s->u.ifs.cond, NULL);
    if (!c) return false;
    c = to_bool(f, s->u.ifs.cond->dtype.code, c);
    if (cg_lx_lanes(c) != 1) return fail(f, TS_ETYPE, "if on a vector condition"), false;
    LLVMBasicBlockRef bt = LLVMAppendBasicBlockInContext(m->ctx, f->fn, "then");
    LLVMBasicBlockRef be = s->u.ifs.else_s ? LLVMAppendBasicBlockInContext(m->ctx, f->fn, "else") : NULL;
    LLVMBasicBlockRef bj = LLVMAppendBasicBlockInContext(m->ctx, f->fn, "endif");
    LLVMBuildCondBr(f->b, c, bt, be ? be : bj);
    LLVMPositionBuilderAtEnd(f->b, bt);
    if (!emit_stmt(f, s->u.ifs.then_s)) return false;
    LLVMBuildBr(f->b, bj);
    if (be) {
      LLVMPositionBuilderAtEnd(f->b, be);
      if (!emit_stmt(f, s->u.ifs.else_s)) return false;
      LLVMBuildBr(f->b, bj);
    }
    LLVMPositionBuilderAtEnd(f->b, bj);
    return true;
  }
  case IR_BLOCK_REALIZE:
    return fail(f, TS_EUNSUPPORTED, "block %s was not lowered (the LLVM backend takes cg_lower's output)",
                s->u.realize.block && s->u.realize.block->name ? s->u.realize.block->name : "?"),
           false;
  default: return fail(f, TS_EINVAL, "unknown statement kind %d", (int)s->kind), false;
  }
}

/* ---- the metadata global ------------------------------------------------------ */

static LLVMValueRef cstr(lx_mod *m, const char *s) {
  LLVMValueRef init = LLVMConstStringInContext(m->ctx, s, (unsigned)strlen(s), 0);
  LLVMValueRef g = LLVMAddGlobal(m->mod, LLVMTypeOf(init), ".str");
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
  return g;
}

static ts_status emit_meta(lx_mod *m, const cg_lowered *l) {
  const ir_func *of = l->orig ? l->orig : l->func;
  if (of->nparams != l->func->nparams)
    return ts_diag_set(m->d, TS_EINVAL, "the lowered function has %d params, the original %d",
                       l->func->nparams, of->nparams);
  LLVMTypeRef shape_t = LLVMArrayType2(m->t_i64, TSRT_MAX_DIMS);
  LLVMTypeRef pm_f[4] = {m->t_ptr, m->t_i32, m->t_i32, shape_t};
  LLVMTypeRef pm_t = LLVMStructCreateNamed(m->ctx, "tsrt_param_meta");
  LLVMStructSetBody(pm_t, pm_f, 4, 0);
  LLVMTypeRef km_f[8] = {m->t_i32, m->t_i32, m->t_i32, m->t_ptr, m->t_ptr, m->t_ptr, m->t_i32, m->t_ptr};
  LLVMTypeRef km_t = LLVMStructCreateNamed(m->ctx, "tsrt_kernel_meta");
  LLVMStructSetBody(km_t, km_f, 8, 0);
  int np = of->nparams;
  LLVMValueRef *pv = ts_malloc(sizeof *pv * (size_t)(np ? np : 1));
  if (!pv) return ts_diag_set(m->d, TS_ENOMEM, "out of memory");
  for (int i = 0; i < np; i++) {
    const ir_buffer *p = of->params[i];
    if (p->ndim > TSRT_MAX_DIMS) {
      ts_free(pv);
      return ts_diag_set(m->d, TS_EUNSUPPORTED, "param %s has %d dims (artifacts allow %d)", p->name,
                         p->ndim, TSRT_MAX_DIMS);
    }
    LLVMValueRef dims[TSRT_MAX_DIMS];
    for (int j = 0; j < TSRT_MAX_DIMS; j++) {
      int64_t v = 0;
      if (j < p->ndim && !ir_fold_int(p->shape[j], &v)) { /* a bound task's `1 * 64` is 64 */
        /* symbolic: the size var's index, or "an expression of them" */
        v = TSRT_DIM_EXPR;
        if (p->shape[j]->kind == IR_VAR) {
          for (int k = 0; k < of->nsyms; k++)
            if (of->syms[k] == p->shape[j]->u.var) v = TSRT_DIM_SYM(k);
          if (v == TSRT_DIM_EXPR) {
            ts_free(pv);
            return ts_diag_set(m->d, TS_EINVAL, "param %s dim %d is %s, which is not a size var of %s",
                               p->name, j, p->shape[j]->u.var->name, of->name ? of->name : "the kernel");
          }
        }
      }
      dims[j] = LLVMConstInt(m->t_i64, (unsigned long long)v, 1);
    }
    LLVMValueRef fields[4] = {cstr(m, p->name ? p->name : ""),
                              LLVMConstInt(m->t_i32, p->dtype.code, 0),
                              LLVMConstInt(m->t_i32, (unsigned long long)p->ndim, 0),
                              LLVMConstArray2(m->t_i64, dims, TSRT_MAX_DIMS)};
    pv[i] = LLVMConstNamedStruct(pm_t, fields, 4);
  }
  LLVMValueRef arr = LLVMConstArray2(pm_t, pv, (uint64_t)np);
  ts_free(pv);
  LLVMValueRef ga = LLVMAddGlobal(m->mod, LLVMTypeOf(arr), "tessel.params");
  LLVMSetInitializer(ga, arr);
  LLVMSetGlobalConstant(ga, 1);
  LLVMSetLinkage(ga, LLVMPrivateLinkage);
  char key[17];
  ir_workload_key(of, key);
  /* the size vars' names (the entry reads their values after the tensors) */
  LLVMValueRef gs = LLVMConstNull(m->t_ptr);
  if (of->nsyms > 0) {
    LLVMValueRef sv[32];
    if (of->nsyms > 32)
      return ts_diag_set(m->d, TS_EUNSUPPORTED, "%s has %d symbolic sizes (artifacts allow 32)",
                         of->name ? of->name : "kernel", of->nsyms);
    for (int k = 0; k < of->nsyms; k++) sv[k] = cstr(m, of->syms[k]->name ? of->syms[k]->name : "?");
    LLVMValueRef sa = LLVMConstArray2(m->t_ptr, sv, (uint64_t)of->nsyms);
    gs = LLVMAddGlobal(m->mod, LLVMTypeOf(sa), "tessel.syms");
    LLVMSetInitializer(gs, sa);
    LLVMSetGlobalConstant(gs, 1);
    LLVMSetLinkage(gs, LLVMPrivateLinkage);
  }
  LLVMValueRef kf[8] = {LLVMConstInt(m->t_i32, TSRT_ABI_VERSION, 0),
                        LLVMConstInt(m->t_i32, (unsigned long long)np, 0),
                        LLVMConstInt(m->t_i32, (unsigned long long)of->ninputs, 0),
                        cstr(m, of->name ? of->name : (l->func->name ? l->func->name : "kernel")),
                        cstr(m, key), ga,
                        LLVMConstInt(m->t_i32, (unsigned long long)of->nsyms, 0), gs};
  cg_lx_global(m->mod, LLVMConstNamedStruct(km_t, kf, 8), TSRT_META_SYMBOL, LLVMExternalLinkage, 8);
  return TS_OK;
}

/* ---- the module --------------------------------------------------------------- */

static void declare_externals(lx_mod *m) {
  LLVMTypeRef lp[3] = {m->t_ptr, m->t_ptr, m->t_i32};
  m->fn_launch = LLVMAddFunction(m->mod, "tsrt_parallel_launch", LLVMFunctionType(m->t_i32, lp, 3, 0));
  /* heap scratch from the runtime's per-thread pool (runtime/scratch.c),
   * which keeps a freed block faulted in for the next call */
  m->fn_alloc = LLVMAddFunction(m->mod, "tsrt_scratch_alloc", LLVMFunctionType(m->t_ptr, &m->t_i64, 1, 0));
  m->fn_free = LLVMAddFunction(m->mod, "tsrt_scratch_free", LLVMFunctionType(m->t_void, &m->t_ptr, 1, 0));
  add_param_attr(m, m->fn_alloc, LLVMAttributeReturnIndex, "noalias", 0);
  add_param_attr(m, m->fn_alloc, LLVMAttributeFunctionIndex, "nounwind", 0);
  add_param_attr(m, m->fn_free, LLVMAttributeFunctionIndex, "nounwind", 0);
}

ts_status cg_lx_emit_module(lx_mod *m, const cg_lowered *l) {
  const ir_func *fn = l->func;
  if (!fn || !fn->body) return ts_diag_set(m->d, TS_EINVAL, "no lowered function to build");
  const ir_func *of = l->orig ? l->orig : fn;
  if (fn->nsyms != of->nsyms)
    return ts_diag_set(m->d, TS_EINVAL, "the lowered function has %d size vars, the original %d",
                       fn->nsyms, of->nsyms);
  m->t_void = LLVMVoidTypeInContext(m->ctx);
  m->t_i1 = LLVMInt1TypeInContext(m->ctx);
  m->t_i8 = LLVMInt8TypeInContext(m->ctx);
  m->t_i16 = LLVMInt16TypeInContext(m->ctx);
  m->t_i32 = LLVMInt32TypeInContext(m->ctx);
  m->t_i64 = LLVMInt64TypeInContext(m->ctx);
  m->t_half = LLVMHalfTypeInContext(m->ctx);
  m->t_f32 = LLVMFloatTypeInContext(m->ctx);
  m->t_f64 = LLVMDoubleTypeInContext(m->ctx);
  m->t_ptr = LLVMPointerTypeInContext(m->ctx, 0);
  m->md_loop = LLVMGetMDKindIDInContext(m->ctx, "llvm.loop", 9);
  snprintf(m->vec_bits_str, sizeof m->vec_bits_str, "%d", m->t->vector_bits > 0 ? m->t->vector_bits : 128);
  declare_externals(m);
  ts_status st = emit_meta(m, l);
  if (st != TS_OK) return m->st = st;

  /* body(tensors..., i64 size vars...) */
  int np = fn->nparams, ns = fn->nsyms, na = np + ns;
  LLVMTypeRef *pt = ts_malloc(sizeof *pt * (size_t)(na ? na : 1));
  LLVMValueRef *pv = ts_malloc(sizeof *pv * (size_t)(na ? na : 1));
  if (!pt || !pv) {
    ts_free(pt);
    ts_free(pv);
    return m->st = ts_diag_set(m->d, TS_ENOMEM, "out of memory");
  }
  for (int i = 0; i < np; i++) pt[i] = m->t_ptr;
  for (int k = 0; k < ns; k++) pt[np + k] = m->t_i64;
  LLVMValueRef body = new_function(m, "tessel.body", LLVMFunctionType(m->t_i32, pt, (unsigned)na, 0), false);
  lx_fn f;
  fn_begin(&f, m, body);
  bool ok = true;
  for (int i = 0; i < np && ok; i++) {
    const ir_buffer *p = fn->params[i];
    if (p->dtype.code == IR_HANDLE || p->dtype.lanes > 1) {
      fail(&f, TS_EUNSUPPORTED, "param %s of dtype %s", p->name,
           ir_dtype_code_name((ir_dtype_code)p->dtype.code));
      ok = false;
      break;
    }
    int64_t n = ir_buffer_const_size(p);
    buffer_param(m, body, (unsigned)i, n >= 0 ? n * ir_dtype_bytes(p->dtype) : 0);
    ok = bind(&f, p, LLVMGetParam(body, (unsigned)i));
  }
  for (int k = 0; k < ns && ok; k++) {
    if (fn->syms[k]->dtype.code != IR_I64 || fn->syms[k]->dtype.lanes != 1) {
      fail(&f, TS_EUNSUPPORTED, "size var %s is not a scalar i64", fn->syms[k]->name);
      ok = false;
      break;
    }
    ok = bind(&f, fn->syms[k], LLVMGetParam(body, (unsigned)(np + k)));
  }
  if (ok) ok = emit_stmt(&f, fn->body);
  if (ok) LLVMBuildRet(f.b, LLVMConstInt(m->t_i32, 0, 0));
  fn_end(&f);
  if (ok) {
    LLVMTypeRef et = LLVMFunctionType(m->t_i32, &m->t_ptr, 1, 0);
    LLVMValueRef entry = new_function(m, TSRT_ENTRY_SYMBOL, et, true);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(m->ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(m->ctx, entry, "entry"));
    LLVMValueRef args = LLVMGetParam(entry, 0);
    for (int i = 0; i < np; i++) {
      LLVMValueRef ix = LLVMConstInt(m->t_i64, (unsigned long long)i, 0);
      LLVMValueRef slot = LLVMBuildInBoundsGEP2(b, m->t_ptr, args, &ix, 1, "");
      pv[i] = LLVMBuildLoad2(b, m->t_ptr, slot, fn->params[i]->name);
    }
    for (int k = 0; k < ns; k++) { /* args[np + k] points at the size's int64 */
      LLVMValueRef ix = LLVMConstInt(m->t_i64, (unsigned long long)(np + k), 0);
      LLVMValueRef slot = LLVMBuildInBoundsGEP2(b, m->t_ptr, args, &ix, 1, "");
      LLVMValueRef vp = LLVMBuildLoad2(b, m->t_ptr, slot, "");
      pv[np + k] = LLVMBuildLoad2(b, m->t_i64, vp, fn->syms[k]->name);
    }
    LLVMValueRef r = LLVMBuildCall2(b, LLVMGlobalGetValueType(body), body, pv, (unsigned)na, "");
    LLVMBuildRet(b, r);
    LLVMDisposeBuilder(b);
  }
  ts_free(pt);
  ts_free(pv);
  if (m->st == TS_OK && !ok) m->st = ts_diag_set(m->d, TS_EINTERNAL, "codegen failed");
  return m->st;
}
