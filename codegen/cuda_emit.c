/* codegen/cuda_emit.c — CUDA C emission from a scheduled PrimFunc (see cuda.h for
 * the contract). Three steps over the lowered form (cg_lower, target cuda):
 *
 *  1. split: the top-level statements of the body become kernels (one launch
 *     each, in order); `global` intermediate buffers become __device__ arrays
 *     of the module;
 *  2. per kernel, the launch configuration (largest constant extent bound to
 *     each blockIdx/threadIdx dimension) and the barrier pass, which rebuilds
 *     the kernel body with a sentinel statement wherever __syncthreads() must
 *     go (TVM's ThreadSync for the shared scope: read-after-write and
 *     write-after-read between statements, loops walked twice for
 *     loop-carried conflicts, refused in divergent code);
 *  3. printing, with per-lane scalarisation of vector code and vector
 *     loads/stores for contiguous aligned accesses, race checks on stores
 *     under thread bindings, and warp-shuffle all-reduces for the cross-thread
 *     reduction pattern.
 *
 * The barrier pass is cuda_barrier.c, the cross-thread all-reduce
 * cuda_reduce.c, the WMMA calls cuda_wmma.c (internals: cuda_int.h).
 * Nothing here needs CUDA: nvrtc.c compiles the text. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cuda_int.h"

static const char *const tag_hw[] = {"blockIdx.x", "blockIdx.y", "blockIdx.z",
                                     "threadIdx.x", "threadIdx.y", "threadIdx.z"};

int cu_tag_of(const char *t) {
  if (!t) return TAG_NONE;
  for (int i = 0; i < 6; i++)
    if (strcmp(t, tag_hw[i]) == 0) return i;
  if (strncmp(t, "vthread", 7) == 0) return TAG_VTHREAD;
  return TAG_NONE;
}



/* ---- names ---------------------------------------------------------------- */

static const char *name_of(cctx *c, const void *key, const char *base, uint32_t id, bool keep) {
  for (int i = 0; i < c->nnames; i++)
    if (c->names[i].key == key) return c->names[i].name;
  if (!ts_grow((void **)&c->names, &c->capnames, c->nnames + 1, sizeof *c->names)) {
    failp(c, TS_ENOMEM, "cuda: out of memory");
    return "_";
  }
  char buf[160];
  size_t k = 0;
  if (!base || !*base) base = "v";
  if (!((base[0] >= 'a' && base[0] <= 'z') || (base[0] >= 'A' && base[0] <= 'Z'))) buf[k++] = 'v';
  for (const char *p = base; *p && k < 100; p++) {
    char ch = *p;
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
    buf[k++] = ok ? ch : '_';
  }
  buf[k] = 0;
  if (!keep) snprintf(buf + k, sizeof buf - k, "_%u", id);
  char *s = ts_arena_strdup(c->a, buf);
  if (!s) {
    failp(c, TS_ENOMEM, "cuda: out of memory");
    return "_";
  }
  c->names[c->nnames++] = (name_ent){key, s};
  return s;
}
const char *cu_vname(cctx *c, const ir_var *v) { return name_of(c, v, v->name, v->id, false); }
const char *cu_bname(cctx *c, const ir_buffer *b) {
  bool param = false;
  for (int i = 0; i < c->f->nparams; i++)
    if (c->f->params[i] == b) param = true;
  return name_of(c, b, b->name, b->id, param);
}

static var_mask *find_var(cctx *c, const ir_var *v) {
  for (int i = c->nvars - 1; i >= 0; i--)
    if (c->vars[i].var == v) return &c->vars[i];
  return NULL;
}
void cu_push_var(cctx *c, const ir_var *v, unsigned mask, int tag, int lanes) {
  if (!ts_grow((void **)&c->vars, &c->capvars, c->nvars + 1, sizeof *c->vars)) {
    failp(c, TS_ENOMEM, "cuda: out of memory");
    return;
  }
  c->vars[c->nvars++] = (var_mask){v, mask, tag, lanes};
}

typedef struct mask_ctx {
  cctx *c;
  unsigned mask;
  bool loads;
} mask_ctx;
static bool mask_cb(void *ctx, const ir_expr *e) {
  mask_ctx *m = ctx;
  if (e->kind == IR_LOAD) m->loads = true;
  if (e->kind == IR_VAR) {
    var_mask *v = find_var(m->c, e->u.var);
    if (v) m->mask |= v->mask;
  }
  return true;
}
/* Thread tags an expression depends on (loads count as varying when
 * loads_vary). */
unsigned cu_expr_mask(cctx *c, const ir_expr *e, bool *has_load) {
  mask_ctx m = {c, 0, false};
  ir_visitor v = {mask_cb, NULL, &m};
  if (e) ir_visit_expr(&v, e);
  if (has_load) *has_load = m.loads;
  return m.mask;
}


/* ---- dtypes and literals --------------------------------------------------- */

const char *cu_ctype(cctx *c, ir_dtype t) {
  switch (t.code) {
  case IR_BOOL: return "bool";
  case IR_I8: return "signed char";
  case IR_I16: return "short";
  case IR_I32: return "int";
  case IR_I64: return c->idx32 ? "int" : "long long";
  case IR_U8: return "unsigned char";
  case IR_U32: return "unsigned int";
  case IR_F16: return "__half";
  case IR_BF16: return "__nv_bfloat16";
  case IR_F32: return "float";
  case IR_F64: return "double";
  default: return "void *";
  }
}

static void emit_float(cctx *c, ir_dtype t, double v) {
  char buf[64];
  if (isnan(v)) {
    snprintf(buf, sizeof buf, "__int_as_float(0x7fc00000)");
  } else if (isinf(v)) {
    snprintf(buf, sizeof buf, "%s__int_as_float(0x7f800000)", v < 0 ? "-" : "");
  } else {
    snprintf(buf, sizeof buf, t.code == IR_F64 ? "%.17g" : "%.9g", v);
    if (!strpbrk(buf, ".e")) strcat(buf, ".0");
    if (t.code != IR_F64) strcat(buf, "f");
  }
  if (t.code == IR_F16) P(c, "__float2half(%s)", buf);
  else if (t.code == IR_BF16) P(c, "__float2bfloat16(%s)", buf);
  else if (t.code == IR_F64 && isinf(v)) P(c, "((double)%s)", buf);
  else P(c, "%s", buf);
}

/* ---- expressions ------------------------------------------------------------ */


/* Non-negative under the analyzer (for / and % instead of the floor helpers). */
static bool nonneg(cctx *c, const ir_expr *e) {
  if (e->dtype.lanes != 1) return false;
  ir_const_bound b = ir_analyzer_const_bound(&c->an, e);
  return b.lo >= 0;
}
static bool lane_nonneg(cctx *c, const ir_expr *e) {
  int64_t v;
  switch (e->kind) {
  case IR_INT_IMM: return e->u.ival >= 0;
  case IR_RAMP: return lane_nonneg(c, e->u.ramp.base) && ir_as_int(e->u.ramp.stride, &v) && v >= 0;
  case IR_BROADCAST: return lane_nonneg(c, e->u.bcast.value);
  case IR_ADD: case IR_MUL: return lane_nonneg(c, e->u.bin.a) && lane_nonneg(c, e->u.bin.b);
  default: return e->dtype.lanes == 1 && nonneg(c, e);
  }
}
static bool positive(cctx *c, const ir_expr *e) {
  if (e->kind == IR_BROADCAST) return positive(c, e->u.bcast.value);
  if (e->dtype.lanes != 1) return false;
  ir_const_bound b = ir_analyzer_const_bound(&c->an, e);
  return b.lo > 0;
}

static void ex_call(cctx *c, const ir_expr *e, int lane) {
  ir_dtype t = e->dtype;
  bool h = is_half(t), f64 = t.code == IR_F64, fast = !c->o->precise_math && !f64;
  const char *fn = NULL;
  bool isint = ir_dtype_is_int(t);
  switch (e->u.call.op) {
  case IR_EXP: fn = f64 ? "exp" : fast ? "__expf" : "expf"; break;
  case IR_LOG: fn = f64 ? "log" : fast ? "__logf" : "logf"; break;
  case IR_SQRT: fn = f64 ? "sqrt" : "sqrtf"; break;
  case IR_RSQRT: fn = f64 ? "rsqrt" : "rsqrtf"; break;
  case IR_TANH: fn = f64 ? "tanh" : "tanhf"; break;
  case IR_ERF: fn = f64 ? "erf" : "erff"; break;
  case IR_POW: fn = f64 ? "pow" : fast ? "__powf" : "powf"; break;
  case IR_FMA: fn = f64 ? "fma" : "fmaf"; break;
  case IR_ABS: fn = isint ? "tsl_abs" : f64 ? "fabs" : "fabsf"; break;
  case IR_SIGMOID: fn = NULL; break;
  case IR_FLOOR: fn = f64 ? "floor" : "floorf"; break;
  case IR_CEIL: fn = f64 ? "ceil" : "ceilf"; break;
  case IR_ROUND: fn = f64 ? "rint" : "rintf"; break;
  case IR_SIN: fn = f64 ? "sin" : fast ? "__sinf" : "sinf"; break;
  case IR_COS: fn = f64 ? "cos" : fast ? "__cosf" : "cosf"; break;
  default: break;
  }
  if (h) P(c, "%s(", from_f32(t));
  if (e->u.call.op == IR_SIGMOID) {
    const char *one = f64 ? "1.0" : "1.0f";
    P(c, "(%s / (%s + %s(-(", one, one, f64 ? "exp" : fast ? "__expf" : "expf");
  } else {
    P(c, "%s(", fn ? fn : "?");
  }
  for (int i = 0; i < e->u.call.nargs; i++) {
    if (i) P(c, ", ");
    const ir_expr *x = e->u.call.args[i];
    if (h) P(c, "%s(", to_f32(x->dtype));
    cu_ex(c, x, lane);
    if (h) P(c, ")");
  }
  if (e->u.call.op == IR_SIGMOID) P(c, "))))");
  else P(c, ")");
  if (h) P(c, ")");
}

static void ex_cast(cctx *c, const ir_expr *e, int lane) {
  ir_dtype to = e->dtype, from = e->u.cast.value->dtype;
  const ir_expr *x = e->u.cast.value;
  if (to.code == from.code) {
    cu_ex(c, x, lane);
    return;
  }
  if (to.code == IR_BOOL) {
    P(c, "((");
    cu_ex(c, x, lane);
    P(c, ") != 0)");
    return;
  }
  if (is_half(to)) {
    P(c, "%s((float)(", from_f32(to));
    if (is_half(from)) P(c, "%s(", to_f32(from));
    cu_ex(c, x, lane);
    if (is_half(from)) P(c, ")");
    P(c, "))");
    return;
  }
  P(c, "((%s)(", cu_ctype(c, to));
  if (is_half(from)) P(c, "%s(", to_f32(from));
  cu_ex(c, x, lane);
  if (is_half(from)) P(c, ")");
  P(c, "))");
}

/* "fn(a, b)" and "(a op b)", lane l. */
static void call2(cctx *c, const char *fn, const ir_expr *a, const ir_expr *b, int l) {
  P(c, "%s(", fn);
  cu_ex(c, a, l);
  P(c, ", ");
  cu_ex(c, b, l);
  P(c, ")");
}

static void infix(cctx *c, const ir_expr *a, const char *op, const ir_expr *b, int l) {
  P(c, "(");
  cu_ex(c, a, l);
  P(c, " %s ", op);
  cu_ex(c, b, l);
  P(c, ")");
}

static const preload *find_pre(cctx *c, const ir_expr *e) {
  for (int i = 0; i < c->npre; i++)
    if (c->pre[i].load == e) return &c->pre[i];
  return NULL;
}

void cu_ex(cctx *c, const ir_expr *e, int lane) {
  if (c->st) return;
  if (e->dtype.lanes > 1 && lane < 0) {
    FAIL(c, "cuda: internal: vector expression (%d lanes) in scalar context", e->dtype.lanes);
    return;
  }
  int l = e->dtype.lanes > 1 ? lane : -1; /* lanes of children follow */
  switch (e->kind) {
  case IR_INT_IMM:
    if (e->dtype.code == IR_BOOL) P(c, "%s", e->u.ival ? "true" : "false");
    else if (e->dtype.code == IR_I64 && !c->idx32) P(c, "%" PRId64 "LL", e->u.ival);
    else if (e->dtype.code == IR_U32) P(c, "%" PRIu64 "u", (uint64_t)e->u.ival);
    else if (e->dtype.code == IR_I32 || e->dtype.code == IR_I64) {
      if (e->u.ival < 0) P(c, "(%" PRId64 ")", e->u.ival);
      else P(c, "%" PRId64, e->u.ival);
    } else P(c, "((%s)%" PRId64 ")", cu_ctype(c, e->dtype), e->u.ival);
    return;
  case IR_FLOAT_IMM:
    emit_float(c, e->dtype, e->u.fval);
    return;
  case IR_VAR: {
    var_mask *v = find_var(c, e->u.var);
    if (v && v->lanes > 1) P(c, "%s[%d]", cu_vname(c, e->u.var), lane < 0 ? 0 : lane);
    else P(c, "%s", cu_vname(c, e->u.var));
    return;
  }
  case IR_ADD: case IR_SUB: case IR_MUL: case IR_DIV:
  case IR_EQ: case IR_NE: case IR_LT: case IR_LE: case IR_GT: case IR_GE:
  case IR_AND: case IR_OR: {
    const char *sym = ir_binop_symbol(e->kind);
    if (e->kind == IR_DIV && !ir_dtype_is_int(e->dtype) && !c->o->precise_math &&
        e->dtype.code == IR_F32) {
      call2(c, "__fdividef", e->u.bin.a, e->u.bin.b, l);
      return;
    }
    infix(c, e->u.bin.a, sym, e->u.bin.b, l);
    return;
  }
  case IR_FLOORDIV: case IR_FLOORMOD: {
    bool fd = e->kind == IR_FLOORDIV;
    if (ir_dtype_is_int(e->dtype) && lane_nonneg(c, e->u.bin.a) && positive(c, e->u.bin.b)) {
      infix(c, e->u.bin.a, fd ? "/" : "%", e->u.bin.b, l);
      return;
    }
    call2(c, fd ? "tsl_floordiv" : "tsl_floormod", e->u.bin.a, e->u.bin.b, l);
    return;
  }
  case IR_MIN: case IR_MAX:
    call2(c, e->kind == IR_MIN ? "tsl_min" : "tsl_max", e->u.bin.a, e->u.bin.b, l);
    return;
  case IR_NOT:
    P(c, "(!");
    cu_ex(c, e->u.un.a, l);
    P(c, ")");
    return;
  case IR_SELECT:
    P(c, "(");
    cu_ex(c, e->u.sel.cond, l);
    P(c, " ? ");
    cu_ex(c, e->u.sel.t, l);
    P(c, " : ");
    cu_ex(c, e->u.sel.f, l);
    P(c, ")");
    return;
  case IR_CAST:
    ex_cast(c, e, l);
    return;
  case IR_CALL:
    ex_call(c, e, l);
    return;
  case IR_LOAD: {
    const preload *pr = l >= 0 ? find_pre(c, e) : NULL;
    if (pr) {
      static const char comp[] = "xyzw";
      P(c, "_v%d_%d.%c", pr->id, l / pr->width, comp[l % pr->width]);
      return;
    }
    P(c, "%s[", cu_bname(c, e->u.load.buf));
    cu_ex(c, e->u.load.idx[0], l);
    P(c, "]");
    return;
  }
  case IR_RAMP: {
    int64_t stv;
    if (ir_as_int(e->u.ramp.stride, &stv)) {
      int64_t off = stv * (lane < 0 ? 0 : lane);
      if (off == 0) {
        cu_ex(c, e->u.ramp.base, -1);
      } else {
        P(c, "(");
        cu_ex(c, e->u.ramp.base, -1);
        P(c, " + %" PRId64 ")", off);
      }
      return;
    }
    P(c, "(");
    cu_ex(c, e->u.ramp.base, -1);
    P(c, " + ");
    cu_ex(c, e->u.ramp.stride, -1);
    P(c, " * %d)", lane < 0 ? 0 : lane);
    return;
  }
  case IR_BROADCAST:
    cu_ex(c, e->u.bcast.value, -1);
    return;
  case IR_ACCESS_PTR:
    P(c, "(%s + ", cu_bname(c, e->u.ptr.buf));
    cu_ex(c, e->u.ptr.offset, -1);
    P(c, ")");
    return;
  case IR_REINTERPRET:
    P(c, "(*(const %s *)&(", cu_ctype(c, e->dtype));
    cu_ex(c, e->u.cast.value, l);
    P(c, "))");
    return;
  case IR_CALL_EXTERN:
    FAIL(c, "cuda: extern call %s used as a value; the CUDA back end knows only the tessel.wmma.* "
            "statements",
         e->u.ext.name);
    return;
  default:
    FAIL(c, "cuda: cannot emit expression kind %d", (int)e->kind);
    return;
  }
}

/* ---- vector accesses --------------------------------------------------------- */

/* e is provably a multiple of k (structural: constants, sums, products). */
static bool multiple_of(const ir_expr *e, int64_t k) {
  if (k <= 1) return true;
  switch (e->kind) {
  case IR_INT_IMM: return e->u.ival % k == 0;
  case IR_ADD: case IR_SUB: return multiple_of(e->u.bin.a, k) && multiple_of(e->u.bin.b, k);
  case IR_MUL: return multiple_of(e->u.bin.a, k) || multiple_of(e->u.bin.b, k);
  case IR_CAST: return multiple_of(e->u.cast.value, k);
  case IR_FLOORMOD: return false;
  default: return false;
  }
}

/* The CUDA vector type for width w of dtype t, or NULL. */
static const char *vec_type(ir_dtype t, int w) {
  switch (t.code) {
  case IR_F32: return w == 4 ? "float4" : w == 2 ? "float2" : NULL;
  case IR_I32: return w == 4 ? "int4" : w == 2 ? "int2" : NULL;
  case IR_U32: return w == 4 ? "uint4" : w == 2 ? "uint2" : NULL;
  case IR_F64: return w == 2 ? "double2" : NULL;
  case IR_F16: return w == 2 ? "__half2" : NULL;
  case IR_BF16: return w == 2 ? "__nv_bfloat162" : NULL;
  default: return NULL;
  }
}

/* Width (4, 2 or 0) for a contiguous access ramp(base, 1, lanes) of t. */
static int vec_width(const ir_expr *idx, ir_dtype t, int lanes) {
  if (idx->kind != IR_RAMP) return 0;
  int64_t st;
  if (!ir_as_int(idx->u.ramp.stride, &st) || st != 1) return 0;
  for (int w = 4; w >= 2; w /= 2)
    if (vec_type(t, w) && lanes % w == 0 && multiple_of(idx->u.ramp.base, w)) return w;
  return 0;
}

/* Collects the vector loads of a value that are safe to read eagerly (not
 * under a select or a short-circuit operator, where a lane may be masked). */
static void collect_pre(cctx *c, const ir_expr *e) {
  if (!e || c->npre >= (int)(sizeof c->pre / sizeof c->pre[0])) return;
  switch (e->kind) {
  case IR_SELECT: case IR_AND: case IR_OR: return;
  case IR_LOAD: {
    if (e->dtype.lanes < 2 || find_pre(c, e)) return;
    int w = vec_width(e->u.load.idx[0], e->u.load.buf->dtype, e->dtype.lanes);
    if (!w) return;
    c->pre[c->npre++] = (preload){e, c->tmp++, w};
    return;
  }
  default:
    break;
  }
  if (ir_is_binop(e->kind)) {
    collect_pre(c, e->u.bin.a);
    collect_pre(c, e->u.bin.b);
  } else if (e->kind == IR_NOT) {
    collect_pre(c, e->u.un.a);
  } else if (e->kind == IR_CAST) {
    collect_pre(c, e->u.cast.value);
  } else if (e->kind == IR_CALL) {
    for (int i = 0; i < e->u.call.nargs; i++) collect_pre(c, e->u.call.args[i]);
  }
}

static void emit_preloads(cctx *c) {
  for (int i = 0; i < c->npre; i++) {
    const preload *p = &c->pre[i];
    const ir_expr *e = p->load;
    const char *vt = vec_type(e->u.load.buf->dtype, p->width);
    for (int k = 0; k < e->dtype.lanes / p->width; k++) {
      indent(c);
      P(c, "const %s _v%d_%d = *(const %s *)(%s + ", vt, p->id, k, vt, cu_bname(c, e->u.load.buf));
      cu_ex(c, e->u.load.idx[0]->u.ramp.base, -1);
      P(c, " + %d);\n", k * p->width);
      c->nvector++;
    }
  }
}

/* ---- launch configuration ---------------------------------------------------- */

/* The launch extents: the largest constant extent bound to each tag. */
static bool launch_cb(void *ctx, const ir_stmt *s) {
  cctx *c = ctx;
  if (c->st) return false;
  switch (s->kind) {
  case IR_FOR:
    if (s->u.loop.kind == IR_FOR_THREAD_BINDING) {
      int tag = cu_tag_of(s->u.loop.thread);
      if (tag == TAG_NONE) {
        FAIL(c, "cuda: loop %s is bound to '%s', which is not blockIdx.{x,y,z}, threadIdx.{x,y,z} or vthread",
             s->u.loop.var->name, s->u.loop.thread ? s->u.loop.thread : "?");
        return false;
      }
      int64_t ext;
      if (!ir_as_int(s->u.loop.extent, &ext)) {
        FAIL(c, "cuda: loop %s is bound to %s with a non-constant extent; bind constant extents "
                "(bind the symbolic sizes first)",
             s->u.loop.var->name, s->u.loop.thread);
        return false;
      }
      if (tag < TAG_VTHREAD && ext > c->launch[tag]) c->launch[tag] = ext;
    }
    return true;
  case IR_SEQ:
  case IR_IF:
  case IR_LET:
  case IR_ALLOCATE: return true;
  default: return false;
  }
}

static void launch_walk(cctx *c, const ir_stmt *s) {
  ir_visitor v = {.stmt = launch_cb, .ctx = c};
  ir_visit_stmt(&v, s);
}

/* ---- statements ----------------------------------------------------------------- */


/* Dynamic steps of a statement (constant extents; 1 << 40 when unknown). */
static int64_t steps(const ir_stmt *s) {
  const int64_t big = (int64_t)1 << 40;
  if (!s) return 0;
  switch (s->kind) {
  case IR_FOR: {
    int64_t e;
    if (!ir_as_int(s->u.loop.extent, &e)) return big;
    if (s->u.loop.kind == IR_FOR_THREAD_BINDING && cu_tag_of(s->u.loop.thread) < TAG_VTHREAD) e = 1;
    int64_t b = steps(s->u.loop.body);
    return b > big / (e > 0 ? e : 1) ? big : e * b;
  }
  case IR_SEQ: {
    int64_t t = 0;
    for (int i = 0; i < s->u.seq.n; i++) {
      t += steps(s->u.seq.stmts[i]);
      if (t > big) return big;
    }
    return t;
  }
  case IR_IF: {
    int64_t a = steps(s->u.ifs.then_s), b = steps(s->u.ifs.else_s);
    return a > b ? a : b;
  }
  case IR_LET: return steps(s->u.let.body);
  case IR_ALLOCATE: return steps(s->u.alloc.body);
  default: return 1;
  }
}

/* #pragma unroll for an unrolled loop, and (TVM's pragma_auto_unroll_max_step
 * on an enclosing loop) for a serial loop whose whole nest takes at most that
 * many steps. */
static bool loop_unrolled(cctx *c, const ir_stmt *s) {
  if (s->u.loop.kind == IR_FOR_UNROLLED) return true;
  const ir_annot *a = ir_annot_find(s->u.loop.nannot, s->u.loop.annots, "pragma_auto_unroll_max_step");
  int64_t max = c->unroll_max;
  if (a && a->kind == IR_ANN_INT) max = a->v.i;
  return max > 0 && steps(s) <= max;
}

/* Does the store's index depend on (or its guard pin) thread tag `tag`? */
static bool cond_pins(cctx *c, const ir_expr *e, int tag) {
  if (!e) return false;
  if (e->kind == IR_AND) return cond_pins(c, e->u.bin.a, tag) || cond_pins(c, e->u.bin.b, tag);
  if (e->kind != IR_EQ) return false;
  unsigned ma = cu_expr_mask(c, e->u.bin.a, NULL), mb = cu_expr_mask(c, e->u.bin.b, NULL);
  return ((ma >> tag) & 1u) != ((mb >> tag) & 1u);
}

/* Checks that no two threads store to one element (no race). Returns false
 * (with an error) when a store under a thread loop writes the same element
 * from every thread of that loop. */
static bool store_race_free(cctx *c, const ir_stmt *s, int *racy_tag) {
  const ir_buffer *b = s->u.store.buf;
  if (b->scope && strcmp(b->scope, "local") == 0) return true;
  unsigned im = cu_expr_mask(c, s->u.store.idx[0], NULL);
  bool vload = false;
  unsigned vm = cu_expr_mask(c, s->u.store.value, &vload);
  for (int i = 0; i < c->ntloops; i++) {
    const ir_stmt *l = c->tloops[i];
    int tag = cu_tag_of(l->u.loop.thread);
    if (tag < 0 || tag >= TAG_VTHREAD) continue;
    if (is_shared(b) && tag < TAG_TX) continue; /* one copy per block */
    int64_t ext = 0;
    ir_as_int(l->u.loop.extent, &ext);
    if (ext <= 1 && c->launch[tag] <= 1) continue;
    if ((im >> tag) & 1u) continue;
    bool pinned = false;
    for (int k = 0; k < c->nconds; k++) pinned |= cond_pins(c, c->conds[k], tag);
    if (s->u.store.predicate) pinned |= cond_pins(c, s->u.store.predicate, tag);
    if (pinned) continue;
    /* every thread writes the same value and reads nothing it writes: benign */
    if (!((vm >> tag) & 1u) && !vload) continue;
    *racy_tag = tag;
    return false;
  }
  return true;
}

/* Pattern of a cross-thread reduction store: B[i] = B[i] op e. */
bool cu_reduction_form(const ir_stmt *s, ir_expr_kind *op, const ir_expr **rhs) {
  const ir_expr *v = s->u.store.value;
  if (!ir_is_binop(v->kind)) return false;
  if (v->kind != IR_ADD && v->kind != IR_MAX && v->kind != IR_MIN) return false;
  const ir_expr *a = v->u.bin.a, *b = v->u.bin.b;
  if (a->kind == IR_LOAD && a->u.load.buf == s->u.store.buf && a->u.load.idx[0] == s->u.store.idx[0]) {
    *op = v->kind;
    *rhs = b;
    return true;
  }
  if (b->kind == IR_LOAD && b->u.load.buf == s->u.store.buf && b->u.load.idx[0] == s->u.store.idx[0]) {
    *op = v->kind;
    *rhs = a;
    return true;
  }
  return false;
}

static void st_vstore(cctx *c, const ir_stmt *s);
void cu_st_store(cctx *c, const ir_stmt *s) {
  if (s == c->red_store) {
    cu_red_accumulate(c, s);
    return;
  }
  const ir_buffer *b = s->u.store.buf;
  const ir_expr *v = s->u.store.value, *idx = s->u.store.idx[0];
  int racy = TAG_NONE;
  if (!store_race_free(c, s, &racy)) {
    FAIL(c, "cuda: the store to %s does not depend on %s (loop bound there), so every thread of it "
            "writes the same element (a cross-thread reduction); rfactor it or keep the reduction "
            "loop serial per thread",
         b->name, tag_hw[racy]);
    return;
  }
  int lanes = v->dtype.lanes;
  /* a store outside every threadIdx loop of a multi-thread kernel would run
   * once per thread: the first thread does it (exactly once, as written) */
  bool solo = false;
  if ((c->launch[3] > 1 || c->launch[4] > 1 || c->launch[5] > 1) &&
      !(b->scope && strcmp(b->scope, "local") == 0)) {
    solo = true;
    for (int i = 0; i < c->ntloops; i++) {
      int tag = cu_tag_of(c->tloops[i]->u.loop.thread);
      if (tag >= TAG_TX && tag <= TAG_TZ) solo = false;
    }
  }
  if (solo) {
    indent(c);
    P(c, "if (");
    bool first = true;
    for (int k = 0; k < 3; k++)
      if (c->launch[3 + k] > 1) {
        P(c, "%sthreadIdx.%c == 0", first ? "" : " && ", "xyz"[k]);
        first = false;
      }
    P(c, ") {\n");
    c->ind++;
  }
  if (lanes <= 1) {
    indent(c);
    if (s->u.store.predicate) {
      P(c, "if (");
      cu_ex(c, s->u.store.predicate, -1);
      P(c, ") ");
    }
    P(c, "%s[", cu_bname(c, b));
    cu_ex(c, idx, -1);
    P(c, "] = ");
    cu_ex(c, v, -1);
    P(c, ";\n");
  } else {
    st_vstore(c, s);
  }
  if (solo) {
    c->ind--;
    indent(c);
    P(c, "}\n");
  }
}

static void st_vstore(cctx *c, const ir_stmt *s) {
  const ir_buffer *b = s->u.store.buf;
  const ir_expr *v = s->u.store.value, *idx = s->u.store.idx[0];
  int lanes = v->dtype.lanes;
  /* vector store: scalarised per lane; contiguous aligned runs as vector
   * accesses */
  indent(c);
  P(c, "{\n");
  c->ind++;
  c->npre = 0;
  if (!s->u.store.predicate) collect_pre(c, v);
  emit_preloads(c);
  int w = s->u.store.predicate ? 0 : vec_width(idx, b->dtype, lanes);
  if (w) {
    const char *vt = vec_type(b->dtype, w);
    for (int k = 0; k < lanes / w; k++) {
      indent(c);
      P(c, "*(%s *)(%s + ", vt, cu_bname(c, b));
      cu_ex(c, idx->u.ramp.base, -1);
      P(c, " + %d) = ", k * w);
      if (b->dtype.code == IR_F16) P(c, "__halves2half2(");
      else if (b->dtype.code == IR_BF16) P(c, "__halves2bfloat162(");
      else P(c, "make_%s(", vt);
      for (int i = 0; i < w; i++) {
        if (i) P(c, ", ");
        cu_ex(c, v, k * w + i);
      }
      P(c, ");\n");
      c->nvector++;
    }
  } else {
    for (int i = 0; i < lanes; i++) {
      indent(c);
      if (s->u.store.predicate) {
        P(c, "if (");
        cu_ex(c, s->u.store.predicate, i);
        P(c, ") ");
      }
      P(c, "%s[", cu_bname(c, b));
      cu_ex(c, idx, i);
      P(c, "] = ");
      cu_ex(c, v, i);
      P(c, ";\n");
    }
  }
  c->npre = 0;
  c->ind--;
  indent(c);
  P(c, "}\n");
}

static void st_for(cctx *c, const ir_stmt *s) {
  const ir_var *v = s->u.loop.var;
  const char *it = cu_ctype(c, v->dtype);
  int nv = c->nvars, nb = c->an.n;
  if (s->u.loop.kind == IR_FOR_THREAD_BINDING) {
    int tag = cu_tag_of(s->u.loop.thread);
    if (tag >= 0 && tag < TAG_VTHREAD) {
      /* the same tag further out: the same hardware index */
      for (int i = 0; i < c->ntloops; i++) {
        const ir_stmt *o = c->tloops[i];
        if (cu_tag_of(o->u.loop.thread) == tag && ir_stmt_uses_var(s->u.loop.body, o->u.loop.var)) {
          FAIL(c, "cuda: loop %s is bound to %s inside loop %s bound to the same thread, and its body "
                  "uses %s (one hardware index cannot stand for both)",
               v->name, s->u.loop.thread, o->u.loop.var->name, o->u.loop.var->name);
          return;
        }
      }
      if (tag == TAG_TX && cu_try_allreduce(c, s)) return;
      int64_t ext = 0;
      ir_as_int(s->u.loop.extent, &ext);
      indent(c);
      P(c, "{\n");
      c->ind++;
      indent(c);
      P(c, "const %s %s = ", it, cu_vname(c, v));
      int64_t mn = 0;
      if (!ir_as_int(s->u.loop.min, &mn) || mn != 0) {
        cu_ex(c, s->u.loop.min, -1);
        P(c, " + ");
      }
      P(c, "(%s)%s;\n", it, tag_hw[tag]);
      bool guard = ext < c->launch[tag];
      if (guard) {
        indent(c);
        P(c, "if (%s < %" PRId64 ") {\n", tag_hw[tag], ext);
        c->ind++;
      }
      cu_push_var(c, v, 1u << tag, tag, 1);
      ir_analyzer_bind(&c->an, v, s->u.loop.min, s->u.loop.extent);
      if (c->ntloops < 32) c->tloops[c->ntloops++] = s;
      int64_t saved_unroll = c->unroll_max;
      const ir_annot *ua = ir_annot_find(s->u.loop.nannot, s->u.loop.annots, "pragma_auto_unroll_max_step");
      if (ua && ua->kind == IR_ANN_INT) c->unroll_max = ua->v.i;
      cu_st(c, s->u.loop.body);
      c->unroll_max = saved_unroll;
      c->ntloops--;
      if (guard) {
        c->ind--;
        indent(c);
        P(c, "}\n");
      }
      c->ind--;
      indent(c);
      P(c, "}\n");
      c->nvars = nv;
      ir_analyzer_truncate(&c->an, nb);
      return;
    }
  }
  unsigned m = cu_expr_mask(c, s->u.loop.min, NULL) | cu_expr_mask(c, s->u.loop.extent, NULL);
  if (loop_unrolled(c, s) || (s->u.loop.kind == IR_FOR_THREAD_BINDING)) {
    indent(c);
    P(c, "#pragma unroll\n");
  }
  int64_t saved_unroll = c->unroll_max;
  const ir_annot *ua = ir_annot_find(s->u.loop.nannot, s->u.loop.annots, "pragma_auto_unroll_max_step");
  if (ua && ua->kind == IR_ANN_INT) c->unroll_max = ua->v.i;
  indent(c);
  P(c, "for (%s %s = ", it, cu_vname(c, v));
  cu_ex(c, s->u.loop.min, -1);
  P(c, "; %s < ", cu_vname(c, v));
  int64_t mn = 0;
  if (!ir_as_int(s->u.loop.min, &mn) || mn != 0) {
    cu_ex(c, s->u.loop.min, -1);
    P(c, " + ");
  }
  cu_ex(c, s->u.loop.extent, -1);
  P(c, "; ++%s) {\n", cu_vname(c, v));
  c->ind++;
  cu_push_var(c, v, m, TAG_NONE, 1);
  ir_analyzer_bind(&c->an, v, s->u.loop.min, s->u.loop.extent);
  cu_st(c, s->u.loop.body);
  c->unroll_max = saved_unroll;
  c->nvars = nv;
  ir_analyzer_truncate(&c->an, nb);
  c->ind--;
  indent(c);
  P(c, "}\n");
}

static void st_alloc(cctx *c, const ir_stmt *s) {
  const ir_buffer *b = s->u.alloc.buf;
  int64_t n = ir_buffer_const_size(b);
  const char *scope = b->scope ? b->scope : "global";
  if (strncmp(scope, "shared", 6) == 0) {
    if (n < 0) {
      FAIL(c, "cuda: shared buffer %s has a non-constant size", b->name);
      return;
    }
    for (int i = 0; i < c->ntloops; i++) {
      int tag = cu_tag_of(c->tloops[i]->u.loop.thread);
      if (tag >= TAG_TX && tag <= TAG_TZ) {
        FAIL(c, "cuda: shared buffer %s is allocated inside loop %s bound to %s; a shared buffer is one "
                "per block, so it must be allocated above the thread loops",
             b->name, c->tloops[i]->u.loop.var->name, c->tloops[i]->u.loop.thread);
        return;
      }
    }
    indent(c);
    P(c, "__shared__ __align__(16) %s %s[%" PRId64 "];\n", cu_ctype(c, b->dtype), cu_bname(c, b), n);
    c->shared_bytes += n * ir_dtype_bytes(b->dtype);
  } else if (strcmp(scope, "local") == 0) {
    if (n < 0) {
      FAIL(c, "cuda: local buffer %s has a non-constant size", b->name);
      return;
    }
    indent(c);
    P(c, "__align__(16) %s %s[%" PRId64 "];\n", cu_ctype(c, b->dtype), cu_bname(c, b), n);
  } else if (strncmp(scope, "wmma.", 5) == 0) {
    cu_decl_fragment(c, s);
  } else if (strcmp(scope, "global") == 0) {
    /* hoisted to the module (emitted before the kernels) */
  } else {
    FAIL(c, "cuda: buffer %s has scope '%s', which this emitter does not realize", b->name, scope);
    return;
  }
  cu_st(c, s->u.alloc.body);
}

void cu_st(cctx *c, const ir_stmt *s) {
  if (!s || c->st) return;
  if (s == c->sync) {
    indent(c);
    P(c, "__syncthreads();\n");
    c->nsync++;
    return;
  }
  switch (s->kind) {
  case IR_FOR:
    st_for(c, s);
    return;
  case IR_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) cu_st(c, s->u.seq.stmts[i]);
    return;
  case IR_IF:
    indent(c);
    P(c, "if (");
    cu_ex(c, s->u.ifs.cond, -1);
    P(c, ") {\n");
    c->ind++;
    if (c->nconds < 32) c->conds[c->nconds++] = s->u.ifs.cond;
    cu_st(c, s->u.ifs.then_s);
    c->nconds--;
    c->ind--;
    indent(c);
    if (s->u.ifs.else_s) {
      P(c, "} else {\n");
      c->ind++;
      cu_st(c, s->u.ifs.else_s);
      c->ind--;
      indent(c);
    }
    P(c, "}\n");
    return;
  case IR_LET: {
    const ir_var *v = s->u.let.var;
    int lanes = s->u.let.value->dtype.lanes;
    indent(c);
    P(c, "{\n");
    c->ind++;
    indent(c);
    if (lanes > 1) {
      P(c, "%s %s[%d];\n", cu_ctype(c, v->dtype), cu_vname(c, v), lanes);
      for (int i = 0; i < lanes; i++) {
        indent(c);
        P(c, "%s[%d] = ", cu_vname(c, v), i);
        cu_ex(c, s->u.let.value, i);
        P(c, ";\n");
      }
    } else {
      P(c, "const %s %s = ", cu_ctype(c, v->dtype), cu_vname(c, v));
      cu_ex(c, s->u.let.value, -1);
      P(c, ";\n");
    }
    int nv = c->nvars;
    cu_push_var(c, v, cu_expr_mask(c, s->u.let.value, NULL), TAG_NONE, lanes);
    cu_st(c, s->u.let.body);
    c->nvars = nv;
    c->ind--;
    indent(c);
    P(c, "}\n");
    return;
  }
  case IR_ALLOCATE:
    st_alloc(c, s);
    return;
  case IR_EVALUATE:
    if (s->u.eval.value->kind == IR_CALL_EXTERN) {
      if (strncmp(s->u.eval.value->u.ext.name, "tessel.wmma.", 12) == 0) {
        cu_st_wmma(c, s->u.eval.value);
      } else {
        FAIL(c, "cuda: extern call %s is not something the CUDA back end emits (tessel.wmma.* only)",
             s->u.eval.value->u.ext.name);
      }
      return;
    }
    indent(c);
    P(c, "(void)(");
    cu_ex(c, s->u.eval.value, -1);
    P(c, ");\n");
    return;
  case IR_STORE:
    cu_st_store(c, s);
    return;
  default:
    FAIL(c, "cuda: cannot emit statement kind %d (blocks must be lowered first)", (int)s->kind);
    return;
  }
}

/* ---- module ----------------------------------------------------------------------- */

static const char prelude[] =
    "// generated by tessel (codegen/cuda.c)\n"
    "#include <cuda_fp16.h>\n"
    "#include <cuda_bf16.h>\n"
    "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n"
    "template <typename T> static __device__ __forceinline__ T tsl_min(T a, T b) { return a < b ? a : b; }\n"
    "template <typename T> static __device__ __forceinline__ T tsl_max(T a, T b) { return a < b ? b : a; }\n"
    "template <typename T> static __device__ __forceinline__ T tsl_abs(T a) { return a < T(0) ? -a : a; }\n"
    "template <typename T> static __device__ __forceinline__ T tsl_floordiv(T a, T b) {\n"
    "  T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }\n"
    "template <typename T> static __device__ __forceinline__ T tsl_floormod(T a, T b) {\n"
    "  T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }\n"
    "static __device__ __forceinline__ float tsl_floordiv(float a, float b) { return floorf(a / b); }\n"
    "static __device__ __forceinline__ float tsl_floormod(float a, float b) { return a - floorf(a / b) * b; }\n"
    "static __device__ __forceinline__ double tsl_floordiv(double a, double b) { return floor(a / b); }\n"
    "static __device__ __forceinline__ double tsl_floormod(double a, double b) { return a - floor(a / b) * b; }\n"
    "\n";

typedef struct glob_ctx {
  cctx *c;
} glob_ctx;
static bool glob_cb(void *ctx, const ir_stmt *s) {
  cctx *c = ((glob_ctx *)ctx)->c;
  if (s->kind == IR_ALLOCATE) {
    const ir_buffer *b = s->u.alloc.buf;
    if (!b->scope || strcmp(b->scope, "global") == 0) {
      if (ts_grow((void **)&c->globals, &c->capglobals, c->nglobals + 1, sizeof *c->globals))
        c->globals[c->nglobals++] = b;
      else
        failp(c, TS_ENOMEM, "cuda: out of memory");
    }
  }
  return true;
}

typedef struct i64_ctx {
  bool any;
} i64_ctx;
static bool bigloop_cb(void *ctx, const ir_stmt *s) {
  i64_ctx *k = ctx;
  int64_t e;
  if (s->kind == IR_FOR && !ir_as_int(s->u.loop.extent, &e)) k->any = true;
  if (s->kind == IR_FOR && ir_as_int(s->u.loop.extent, &e) && e > INT32_MAX / 2) k->any = true;
  if (s->kind == IR_ALLOCATE) {
    int64_t n = ir_buffer_const_size(s->u.alloc.buf);
    if (n < 0 || n > INT32_MAX / 2 || s->u.alloc.buf->dtype.code == IR_I64) k->any = true;
  }
  return true;
}

/* The words of a library step when stage x is one (1), else 0; -1 when it
 * names a call it cannot make (c->st set). `tessel.cublas.sgemm(trans_b, m,
 * n, k, batch, A, B, C)`, constants and access_ptr of params at offset 0,
 * is runtime/cublas.h's TSRT_STEP_SGEMM (kind 1). */
static int library_step(cctx *c, const ir_stmt *x, long long *w) {
  if (x->kind != IR_EVALUATE || x->u.eval.value->kind != IR_CALL_EXTERN ||
      strcmp(x->u.eval.value->u.ext.name, "tessel.cublas.sgemm") != 0)
    return 0;
  const ir_expr *e = x->u.eval.value;
  if (e->u.ext.nargs != 8) return FAIL(c, "cuda: tessel.cublas.sgemm takes 8 arguments, not %d", e->u.ext.nargs), -1;
  w[0] = 1;
  for (int i = 0; i < 5; i++) {
    int64_t v;
    if (!ir_as_int(e->u.ext.args[i], &v))
      return FAIL(c, "cuda: tessel.cublas.sgemm: argument %d is not a constant", i), -1;
    w[1 + i] = v;
  }
  for (int i = 0; i < 3; i++) {
    const ir_expr *p = e->u.ext.args[5 + i];
    int64_t off = -1;
    int idx = -1;
    if (p->kind == IR_ACCESS_PTR && ir_as_int(p->u.ptr.offset, &off) && off == 0)
      for (int j = 0; j < c->f->nparams; j++)
        if (c->f->params[j] == p->u.ptr.buf) idx = j;
    if (idx < 0)
      return FAIL(c, "cuda: tessel.cublas.sgemm: operand %d is not a parameter of the function at offset 0", i), -1;
    w[6 + i] = idx;
  }
  return 1;
}

static void emit_kernel(cctx *c, int k, ir_stmt *body, cg_cuda_launch *L) {
  memset(c->launch, 0, sizeof c->launch);
  launch_walk(c, body);
  if (c->st) return;
  for (int i = 0; i < 6; i++)
    if (c->launch[i] <= 0) c->launch[i] = 1;
  int64_t threads = c->launch[3] * c->launch[4] * c->launch[5];
  if (threads > 1024) {
    FAIL(c, "cuda: kernel %d needs %" PRId64 " threads per block (%" PRId64 "x%" PRId64 "x%" PRId64
            "), over 1024",
         k, threads, c->launch[3], c->launch[4], c->launch[5]);
    return;
  }
  if (c->launch[4] > 1024 || c->launch[5] > 64) {
    FAIL(c, "cuda: kernel %d: threadIdx.y %" PRId64 " / threadIdx.z %" PRId64 " over cuda's 1024 / 64", k,
         c->launch[4], c->launch[5]);
    return;
  }
  if (c->launch[1] > 65535 || c->launch[2] > 65535) {
    FAIL(c, "cuda: kernel %d: blockIdx.y/z extent over 65535", k);
    return;
  }
  /* barriers */
  accset pend;
  memset(&pend, 0, sizeof pend);
  c->nvars = 0;
  ir_stmt *synced = cu_sync_stmt(c, body, &pend, true, "kernel body");
  if (c->st) return;
  c->nvars = 0;
  c->nsync = 0;
  c->shared_bytes = 0;
  P(c, "extern \"C\" __global__ void __launch_bounds__(%" PRId64 ") tessel_kernel%d(", threads, k);
  for (int i = 0; i < c->f->nparams; i++) {
    const ir_buffer *b = c->f->params[i];
    P(c, "%s%s%s *__restrict__ %s", i ? ", " : "", i < c->f->ninputs ? "const " : "", cu_ctype(c, b->dtype),
      cu_bname(c, b));
  }
  P(c, ") {\n");
  c->ind = 1;
  cu_st(c, synced);
  c->ind = 0;
  P(c, "}\n\n");
  for (int i = 0; i < 3; i++) {
    L->grid[i] = c->launch[i];
    L->block[i] = c->launch[3 + i];
  }
  L->shared_bytes = c->shared_bytes;
  L->nsyncs = c->nsync;
  if (c->shared_bytes > 48 * 1024)
    FAIL(c, "cuda: kernel %d uses %" PRId64 " bytes of static shared memory, over the 48 KiB a block may "
            "declare statically",
         k, c->shared_bytes);
}

ts_status cg_cuda_emit(const ir_func *f, const cg_target *t, const cg_cuda_opts *opts,
                       cg_cuda_module *out, ts_diag *d) {
  if (!f || !t || !out) return ts_diag_set(d, TS_EINVAL, "cuda: missing argument");
  memset(out, 0, sizeof *out);
  if (t->kind != CG_TARGET_CUDA) return ts_diag_set(d, TS_EINVAL, "cuda: target '%s' is not cuda", t->text);
  for (int i = 0; i < f->nparams; i++) {
    int64_t n = ir_buffer_const_size(f->params[i]);
    if (n < 0)
      return ts_diag_set(d, TS_EUNSUPPORTED,
                         "cuda: param %s has a symbolic shape; bind the size vars before building for cuda",
                         f->params[i]->name);
  }
  ts_status s = cg_check(f, t, d);
  if (s) return s;
  ts_arena *a = ts_arena_new();
  if (!a) return ts_diag_set(d, TS_ENOMEM, "cuda: out of memory");
  cg_lowered low;
  s = cg_lower(a, f, t, &low, d);
  if (s) {
    ts_arena_free(a);
    return s;
  }
  cg_cuda_opts defo = {0};
  cctx c;
  memset(&c, 0, sizeof c);
  c.a = a;
  c.d = d;
  c.o = opts ? opts : &defo;
  c.f = low.func;
  ir_analyzer_init(&c.an, a);
  c.sync = ir_evaluate(a, ir_i32(a, 0));
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  c.out = &sb;
  const ir_func *lf = low.func;
  /* index width */
  i64_ctx ik = {false};
  for (int i = 0; i < lf->nparams; i++) {
    int64_t n = ir_buffer_const_size(lf->params[i]);
    if (n < 0 || n > INT32_MAX / 2 || lf->params[i]->dtype.code == IR_I64) ik.any = true;
  }
  ir_visitor bv = {NULL, bigloop_cb, &ik};
  ir_visit_stmt(&bv, lf->body);
  c.idx32 = !ik.any;
  /* module-level buffers */
  glob_ctx gc = {&c};
  ir_visitor gv = {NULL, glob_cb, &gc};
  ir_visit_stmt(&gv, lf->body);
  ts_strbuf_append(&sb, prelude);
  for (int i = 0; i < c.nglobals && !c.st; i++) {
    const ir_buffer *b = c.globals[i];
    int64_t n = ir_buffer_const_size(b);
    if (n < 0) {
      FAIL(&c, "cuda: intermediate buffer %s has a non-constant size; a module buffer needs a constant one",
           b->name);
      break;
    }
    P(&c, "static __device__ __align__(16) %s %s[%" PRId64 "];\n", cu_ctype(&c, b->dtype), cu_bname(&c, b), n);
  }
  /* split into kernels: peel global allocations and sequences at the top */
  ir_stmt *stages[CG_CUDA_MAX_KERNELS];
  int nst = 0;
  ir_stmt *todo[64];
  int ntodo = 0;
  todo[ntodo++] = lf->body;
  /* a depth-first split that keeps program order */
  while (ntodo && !c.st) {
    ir_stmt *x = todo[--ntodo];
    if (!x) continue;
    if (x->kind == IR_ALLOCATE && (!x->u.alloc.buf->scope || strcmp(x->u.alloc.buf->scope, "global") == 0)) {
      todo[ntodo++] = x->u.alloc.body;
    } else if (x->kind == IR_SEQ) {
      if (ntodo + x->u.seq.n > 64) {
        FAIL(&c, "cuda: the function has too many top-level stages");
        break;
      }
      for (int i = x->u.seq.n - 1; i >= 0; i--) todo[ntodo++] = x->u.seq.stmts[i];
    } else {
      if (nst >= CG_CUDA_MAX_KERNELS) {
        FAIL(&c, "cuda: the function has more than %d top-level stages (kernels)", CG_CUDA_MAX_KERNELS);
        break;
      }
      stages[nst++] = x;
    }
  }
  P(&c, "\n");
  /* a library step (cuBLAS) is a stage of the launch sequence, not a kernel */
  int nk = 0;
  for (int k = 0; k < nst && !c.st; k++) {
    long long *w = out->steps[k];
    memset(w, 0, sizeof out->steps[k]);
    int lib = library_step(&c, stages[k], w);
    if (lib > 0) {
      out->nlibrary++;
    } else if (lib == 0) {
      w[1] = nk; /* kind 0: the kernel's index */
      emit_kernel(&c, nk, stages[k], &out->kernels[nk]);
      nk++;
    }
  }
  if (!c.st && out->nlibrary) { /* the launch sequence: kernels and library calls in program order */
    out->nsteps = nst;
    P(&c, "extern \"C\" __device__ const int tessel_nsteps = %d;\n", nst);
    P(&c, "extern \"C\" __device__ const long long tessel_steps[%d] = {", nst * CG_CUDA_STEP_WORDS);
    for (int k = 0; k < nst; k++)
      for (int w = 0; w < CG_CUDA_STEP_WORDS; w++) P(&c, "%s%lld", k || w ? ", " : "", out->steps[k][w]);
    P(&c, "};\n");
  }
  nst = nk;
  if (!c.st) {
    out->nkernels = nst;
    /* self-describing metadata (read by runtime/cuda_rt.c) */
    P(&c, "extern \"C\" __device__ const int tessel_abi_version = 1;\n");
    P(&c, "extern \"C\" __device__ const int tessel_nkernels = %d;\n", nst);
    P(&c, "extern \"C\" __device__ const long long tessel_launch[%d] = {", nst > 0 ? nst * 7 : 1);
    for (int k = 0; k < nst; k++) {
      const cg_cuda_launch *L = &out->kernels[k];
      P(&c, "%s%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64,
        k ? ", " : "", L->grid[0], L->grid[1], L->grid[2], L->block[0], L->block[1], L->block[2],
        L->shared_bytes);
      out->nsyncs += L->nsyncs;
    }
    if (!nst) P(&c, "0");
    P(&c, "};\n");
    const ir_func *of = low.orig;
    P(&c, "extern \"C\" __device__ const int tessel_nparams = %d;\n", of->nparams);
    P(&c, "extern \"C\" __device__ const int tessel_ninputs = %d;\n", of->ninputs);
    P(&c, "extern \"C\" __device__ const int tessel_param_dtype[%d] = {", of->nparams);
    for (int i = 0; i < of->nparams; i++) P(&c, "%s%d", i ? ", " : "", (int)of->params[i]->dtype.code);
    P(&c, "};\n");
    P(&c, "extern \"C\" __device__ const int tessel_param_ndim[%d] = {", of->nparams);
    for (int i = 0; i < of->nparams; i++) P(&c, "%s%d", i ? ", " : "", of->params[i]->ndim);
    P(&c, "};\n");
    P(&c, "extern \"C\" __device__ const long long tessel_param_shape[%d] = {", of->nparams * 8);
    for (int i = 0; i < of->nparams; i++)
      for (int j = 0; j < 8; j++) {
        int64_t v = 1;
        if (j < of->params[i]->ndim) ir_as_int(of->params[i]->shape[j], &v);
        P(&c, "%s%" PRId64, i || j ? ", " : "", v);
      }
    P(&c, "};\n");
  }
  if (!c.st && c.uses_wmma) { /* nvcuda::wmma lives in mma.h */
    ts_strbuf full;
    ts_strbuf_init(&full);
    ts_strbuf_append(&full, "#include <mma.h>\n");
    ts_strbuf_append(&full, sb.data ? sb.data : "");
    ts_strbuf_fini(&sb);
    sb = full;
  }
  out->nvector = c.nvector;
  out->nshuffle = c.nshuffle;
  out->nwmma = c.nwmma;
  ts_status rs = c.st;
  ir_analyzer_fini(&c.an);
  ts_free(c.names);
  ts_free(c.vars);
  ts_free(c.globals);
  if (rs) {
    ts_strbuf_fini(&sb);
  } else {
    out->source = ts_strbuf_take(&sb);
    if (!out->source) rs = ts_diag_set(d, TS_ENOMEM, "cuda: out of memory");
  }
  ts_arena_free(a);
  return rs;
}

void cg_cuda_module_fini(cg_cuda_module *m) {
  if (!m) return;
  ts_free(m->source);
  memset(m, 0, sizeof *m);
}
