/* legalize.c — legalisation: every ONNX-level op becomes a call of a
 * PrimFunc, written as compute-DSL text (docs/SCRIPT.md) and parsed, so each
 * op reads like its ONNX definition and the parser checks shapes and types;
 * fusion reuses the same writers. docs/PASSES.md, docs/IR.md ("Notes by
 * file"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../parse.h"
#include "passes_int.h"

/* ---- small text helpers ----------------------------------------------------------- */

typedef struct tb {
  char s[16384];
  size_t n;
  bool over;
} tb;

static void tb_reset(tb *b) {
  b->n = 0;
  b->s[0] = '\0';
  b->over = false;
}

__attribute__((format(printf, 2, 3))) static void tb_printf(tb *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = sizeof b->s - b->n;
  int w = vsnprintf(b->s + b->n, room, fmt, ap);
  va_end(ap);
  if (w < 0 || (size_t)w >= room) {
    b->over = true;
    b->n = sizeof b->s - 1;
  } else {
    b->n += (size_t)w;
  }
}

static const char *dtn(ir_dtype t) { return ir_dtype_code_name((ir_dtype_code)t.code); }

static bool dim_is(tg_dim d, int64_t v) { return d.sym == NULL && d.value == v; }

static int sym_index(lg_kernel *k, const char *sym) {
  for (int i = 0; i < k->nsyms; i++)
    if (!strcmp(k->syms[i], sym)) return i;
  if (k->nsyms == LG_MAX_SYMS) {
    if (k->st == TS_OK)
      k->st = ts_diag_set(k->d, TS_EUNSUPPORTED, "more than %d distinct symbolic dims in one kernel", LG_MAX_SYMS);
    return 0;
  }
  k->syms[k->nsyms] = sym;
  return k->nsyms++;
}

/* A dim as DSL text: the number, or the symbol's DSL name. */
static void dim_txt(lg_kernel *k, tg_dim d, tb *b) {
  if (d.sym) tb_printf(b, "sym%d", sym_index(k, d.sym));
  else tb_printf(b, "%" PRId64, d.value);
}

static const char *dim_s(lg_kernel *k, tg_dim d, char buf[48]) {
  if (d.sym) snprintf(buf, 48, "sym%d", sym_index(k, d.sym));
  else snprintf(buf, 48, "%" PRId64, d.value);
  return buf;
}

/* A float literal the DSL reads back as that float (adopts the other operand's dtype). */
static const char *flit(double v, char buf[48]) {
  if (isnan(v)) return strcpy(buf, "nan");
  if (isinf(v)) return strcpy(buf, v < 0 ? "-inf" : "inf");
  snprintf(buf, 48, "%.9g", v);
  if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
  return buf;
}

/* A literal for dtype t: float text for float dtypes, an integer otherwise. */
static const char *lit(ir_dtype t, double v, char buf[48]) {
  if (ir_dtype_is_float(t)) return flit(v, buf);
  snprintf(buf, 48, "%" PRId64, (int64_t)v);
  return buf;
}

static const tg_value *V(const lg_kernel *k, int vid) { return k->g->values[vid]; }

static void fail(lg_kernel *k, ts_status st, const tg_node *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(lg_kernel *k, ts_status st, const tg_node *n, const char *fmt, ...) {
  if (k->st != TS_OK) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  k->st = ts_diag_set(k->d, st, "node '%s' (%s, opset %d): %s", n->name ? n->name : "?",
                      tg_op_name(lg_node_op(n)), k->g->opset, msg);
}

/* "name[i0, i1, ...]" over rank r output axes. */
static void lhs(tb *b, const char *name, int r) {
  tb_printf(b, "%s[", name);
  for (int i = 0; i < r; i++) tb_printf(b, "%si%d", i ? ", " : "", i);
  tb_printf(b, "]");
}

/* A load of value vid (named name) broadcast against an output of rank r
 * with dims od. */
static void load_bcast(lg_kernel *k, tb *b, const char *name, int vid, int r, const tg_dim *od) {
  const tg_value *v = V(k, vid);
  int off = r - v->ndim;
  tb_printf(b, "%s[", name);
  for (int a = 0; a < v->ndim; a++) {
    int o = a + off;
    bool zero = o < 0 || (dim_is(v->dims[a], 1) && !dim_is(od[o], 1));
    if (zero) tb_printf(b, "%s0", a ? ", " : "");
    else tb_printf(b, "%si%d", a ? ", " : "", o);
  }
  tb_printf(b, "]");
}

static void stmt(lg_kernel *k, tb *b) {
  if (b->over && k->st == TS_OK) k->st = ts_diag_set(k->d, TS_EUNSUPPORTED, "generated statement too long");
  ts_strbuf_printf(&k->body, "  %s\n", b->s);
}

void lg_init(lg_kernel *k, const tg_graph *g, ts_diag *d) {
  memset(k, 0, sizeof *k);
  k->g = g;
  k->d = d;
  ts_strbuf_init(&k->lets);
  ts_strbuf_init(&k->body);
}

void lg_fini(lg_kernel *k) {
  ts_strbuf_fini(&k->lets);
  ts_strbuf_fini(&k->body);
}

static void decl(lg_kernel *k, ts_strbuf *sb, const char *name, ir_dtype dt, int nd, const tg_dim *dims) {
  tb b;
  tb_reset(&b);
  tb_printf(&b, "%s: %s[", name, dtn(dt));
  for (int i = 0; i < nd; i++) {
    if (i) tb_printf(&b, ", ");
    dim_txt(k, dims[i], &b);
  }
  tb_printf(&b, "]");
  ts_strbuf_append(sb, b.s);
}

void lg_let(lg_kernel *k, const char *name, int vid) {
  const tg_value *v = V(k, vid);
  ts_strbuf_append(&k->lets, "  let ");
  decl(k, &k->lets, name, v->dtype, v->ndim, v->dims);
  ts_strbuf_append(&k->lets, "\n");
}

static void let_dims(lg_kernel *k, const char *name, ir_dtype dt, int nd, const tg_dim *dims) {
  ts_strbuf_append(&k->lets, "  let ");
  decl(k, &k->lets, name, dt, nd, dims);
  ts_strbuf_append(&k->lets, "\n");
}

/* ---- op patterns ------------------------------------------------------------------ */

tg_op lg_node_op(const tg_node *n) {
  if (n->op != TG_OP_CALL) return n->op;
  const char *o = tg_attr_str(n, "tessel.op", NULL);
  if (!o) return TG_OP_CALL;
  tg_op op = tg_op_from_name(o);
  return op == TG_OP_COUNT ? TG_OP_CALL : op;
}

static bool same_shape(const tg_value *a, const tg_value *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (!tg_dim_eq(a->dims[i], b->dims[i])) return false;
  return true;
}

tg_pattern lg_pattern(const tg_graph *g, const tg_node *n) {
  switch (lg_node_op(n)) {
    case TG_OP_ADD:
    case TG_OP_SUB:
    case TG_OP_MUL:
    case TG_OP_DIV:
    case TG_OP_POW: {
      const tg_value *o = g->values[n->outputs[0]];
      for (int i = 0; i < n->nin; i++)
        if (n->inputs[i] >= 0 && !same_shape(g->values[n->inputs[i]], o)) return TG_PAT_BROADCAST;
      return TG_PAT_ELEMWISE;
    }
    case TG_OP_RELU:
    case TG_OP_LEAKY_RELU:
    case TG_OP_SIGMOID:
    case TG_OP_TANH:
    case TG_OP_ERF:
    case TG_OP_GELU:
    case TG_OP_CLIP:
    case TG_OP_SQRT:
    case TG_OP_CAST:
    case TG_OP_IDENTITY:
      return TG_PAT_ELEMWISE;
    case TG_OP_BATCH_NORM:
      return TG_PAT_BROADCAST;
    case TG_OP_FLATTEN:
    case TG_OP_RESHAPE:
    case TG_OP_TRANSPOSE:
    case TG_OP_CONCAT:
    case TG_OP_SPLIT:
    case TG_OP_SLICE:
    case TG_OP_GATHER:
    case TG_OP_PAD:
    case TG_OP_SQUEEZE:
    case TG_OP_UNSQUEEZE:
      return TG_PAT_INJECTIVE;
    case TG_OP_SOFTMAX:
    case TG_OP_LAYER_NORM:
    case TG_OP_REDUCE_MEAN:
    case TG_OP_REDUCE_SUM:
    case TG_OP_GLOBAL_AVERAGE_POOL:
      return TG_PAT_REDUCE;
    case TG_OP_CONV:
    case TG_OP_CONV_TRANSPOSE:
    case TG_OP_GEMM:
    case TG_OP_MATMUL:
    case TG_OP_MAX_POOL:
    case TG_OP_AVERAGE_POOL:
      return TG_PAT_OUT_EWISE;
    default:
      return TG_PAT_OPAQUE;
  }
}

const char *lg_node_short_name(const tg_node *n) {
  tg_op op = lg_node_op(n);
  if (op == TG_OP_CONV && tg_attr_int(n, "tessel.winograd", 0)) return "conv2d_winograd";
  return lg_short_name(op);
}

const char *lg_short_name(tg_op op) {
  switch (op) {
    case TG_OP_CONV: return "conv2d";
    case TG_OP_CONV_TRANSPOSE: return "conv2d_transpose";
    case TG_OP_GEMM: return "dense";
    case TG_OP_MATMUL: return "matmul";
    case TG_OP_ADD: return "add";
    case TG_OP_SUB: return "subtract";
    case TG_OP_MUL: return "multiply";
    case TG_OP_DIV: return "divide";
    case TG_OP_RELU: return "relu";
    case TG_OP_LEAKY_RELU: return "leaky_relu";
    case TG_OP_SIGMOID: return "sigmoid";
    case TG_OP_TANH: return "tanh";
    case TG_OP_ERF: return "erf";
    case TG_OP_GELU: return "gelu";
    case TG_OP_CLIP: return "clip";
    case TG_OP_SOFTMAX: return "softmax";
    case TG_OP_LAYER_NORM: return "layer_norm";
    case TG_OP_BATCH_NORM: return "batch_norm";
    case TG_OP_MAX_POOL: return "max_pool2d";
    case TG_OP_AVERAGE_POOL: return "avg_pool2d";
    case TG_OP_GLOBAL_AVERAGE_POOL: return "global_avg_pool2d";
    case TG_OP_FLATTEN: return "flatten";
    case TG_OP_RESHAPE: return "reshape";
    case TG_OP_TRANSPOSE: return "transpose";
    case TG_OP_CONCAT: return "concat";
    case TG_OP_SPLIT: return "split";
    case TG_OP_SLICE: return "slice";
    case TG_OP_GATHER: return "take";
    case TG_OP_PAD: return "pad";
    case TG_OP_REDUCE_MEAN: return "mean";
    case TG_OP_REDUCE_SUM: return "sum";
    case TG_OP_SQRT: return "sqrt";
    case TG_OP_POW: return "power";
    case TG_OP_CAST: return "cast";
    case TG_OP_SQUEEZE: return "squeeze";
    case TG_OP_UNSQUEEZE: return "expand_dims";
    case TG_OP_SHAPE: return "shape_of";
    case TG_OP_IDENTITY: return "copy";
    default: return "op";
  }
}

/* ---- normalisation: compile-time inputs become attributes ------------------------ */

static bool const_ints(const tg_value *v, int64_t *out, int max, int *n) {
  if (!v || v->kind != TG_V_CONST || !v->data) return false;
  int64_t cnt = tg_value_numel(v);
  if (cnt < 0 || cnt > max) return false;
  for (int64_t i = 0; i < cnt; i++) {
    switch (v->dtype.code) {
      case IR_I64: out[i] = ((const int64_t *)v->data)[i]; break;
      case IR_I32: out[i] = ((const int32_t *)v->data)[i]; break;
      default: return false;
    }
  }
  *n = (int)cnt;
  return true;
}

static bool const_scalar(const tg_value *v, double *out) {
  if (!v || v->kind != TG_V_CONST || !v->data || tg_value_numel(v) != 1) return false;
  switch (v->dtype.code) {
    case IR_F32: *out = ((const float *)v->data)[0]; return true;
    case IR_F64: *out = ((const double *)v->data)[0]; return true;
    case IR_I64: *out = (double)((const int64_t *)v->data)[0]; return true;
    case IR_I32: *out = ((const int32_t *)v->data)[0]; return true;
    case IR_I8: *out = ((const int8_t *)v->data)[0]; return true;
    case IR_U8: *out = ((const uint8_t *)v->data)[0]; return true;
    default: return false;
  }
}

static ts_status set_ints(tg_graph *g, tg_node *n, const char *name, const int64_t *v, int cnt) {
  tg_attr a = {.name = name, .kind = TG_A_INTS, .n = cnt, .ints = (int64_t *)v};
  return tg_node_set_attr(g, n, &a);
}

static ts_status set_float(tg_graph *g, tg_node *n, const char *name, double v) {
  tg_attr a = {.name = name, .kind = TG_A_FLOAT, .f = v};
  return tg_node_set_attr(g, n, &a);
}

/* Which inputs (from index `first`) are compile-time parameters of op. */
static int first_param_input(tg_op op) {
  switch (op) {
    case TG_OP_RESHAPE:
    case TG_OP_SLICE:
    case TG_OP_PAD:
    case TG_OP_CLIP:
    case TG_OP_REDUCE_MEAN:
    case TG_OP_REDUCE_SUM:
    case TG_OP_SQUEEZE:
    case TG_OP_UNSQUEEZE:
    case TG_OP_SPLIT:
      return 1;
    default:
      return -1;
  }
}

ts_status lg_normalize(tg_graph *g, tg_node *n, ts_diag *d) {
  tg_op op = lg_node_op(n);
  int first = first_param_input(op);
  if (first < 0 || n->nin <= first) return TS_OK;
  static const char *const slice_names[] = {"starts", "ends", "axes", "steps"};
  for (int i = first; i < n->nin; i++) {
    int vid = n->inputs[i];
    if (vid < 0) continue;
    const tg_value *v = g->values[vid];
    int64_t ints[64];
    int cnt = 0;
    double f = 0;
    const char *what = NULL;
    ts_status st = TS_OK;
    switch (op) {
      case TG_OP_RESHAPE: /* target shape: the output value's dims already say it */
      case TG_OP_SQUEEZE:
      case TG_OP_UNSQUEEZE:
      case TG_OP_SPLIT:
        continue;
      case TG_OP_SLICE:
        what = slice_names[i - 1];
        if (!const_ints(v, ints, 64, &cnt)) break;
        st = set_ints(g, n, what, ints, cnt);
        what = NULL;
        break;
      case TG_OP_PAD:
        if (i == 1) {
          what = "pads";
          if (const_ints(v, ints, 64, &cnt)) st = set_ints(g, n, "pads", ints, cnt), what = NULL;
        } else if (i == 2) {
          what = "constant_value";
          if (const_scalar(v, &f)) st = set_float(g, n, "value", f), what = NULL;
        } else {
          what = "axes";
          if (const_ints(v, ints, 64, &cnt)) st = set_ints(g, n, "axes", ints, cnt), what = NULL;
        }
        break;
      case TG_OP_CLIP:
        what = i == 1 ? "min" : "max";
        if (const_scalar(v, &f)) st = set_float(g, n, what, f), what = NULL;
        break;
      case TG_OP_REDUCE_MEAN:
      case TG_OP_REDUCE_SUM:
        what = "axes";
        if (const_ints(v, ints, 64, &cnt)) st = set_ints(g, n, "axes", ints, cnt), what = NULL;
        break;
      default:
        break;
    }
    if (st != TS_OK) return ts_diag_set(d, st, "node '%s': out of memory", n->name);
    if (what)
      return ts_diag_set(d, TS_EUNSUPPORTED,
                         "node '%s' (%s, opset %d): input %d ('%s', the %s) must be a constant to compile "
                         "(a value computed at run time is not supported)",
                         n->name, tg_op_name(op), g->opset, i, v->name, what);
  }
  n->nin = first;
  return TS_OK;
}

/* ---- the op writers --------------------------------------------------------------- */

#define IN(i) (in[(i)])
#define OUTV(i) V(k, n->outputs[(i)])

static int norm_axis(int64_t a, int r) { return (int)(a < 0 ? a + r : a); }

static void emit_unary(lg_kernel *k, const tg_node *n, tg_op op, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = y->ndim;
  tb b, X;
  tb_reset(&b);
  tb_reset(&X);
  load_bcast(k, &X, IN(0), n->inputs[0], r, y->dims);
  char l1[48], l2[48];
  lhs(&b, o, r);
  tb_printf(&b, " = ");
  switch (op) {
    case TG_OP_RELU: tb_printf(&b, "max(%s, %s)", X.s, lit(x->dtype, 0, l1)); break;
    case TG_OP_LEAKY_RELU:
      tb_printf(&b, "select(%s > 0.0, %s, %s * %s)", X.s, X.s, X.s, flit(tg_attr_float(n, "alpha", 0.01), l1));
      break;
    case TG_OP_SIGMOID: tb_printf(&b, "sigmoid(%s)", X.s); break;
    case TG_OP_TANH: tb_printf(&b, "tanh(%s)", X.s); break;
    case TG_OP_ERF: tb_printf(&b, "erf(%s)", X.s); break;
    case TG_OP_SQRT: tb_printf(&b, "sqrt(%s)", X.s); break;
    case TG_OP_GELU:
      if (!strcmp(tg_attr_str(n, "approximate", "none"), "tanh"))
        tb_printf(&b, "0.5 * %s * (1.0 + tanh(0.797884561 * (%s + 0.044715 * %s * %s * %s)))", X.s, X.s, X.s,
                  X.s, X.s);
      else
        tb_printf(&b, "0.5 * %s * (1.0 + erf(%s * 0.707106781))", X.s, X.s);
      break;
    case TG_OP_CLIP: {
      const tg_attr *mn = tg_node_attr(n, "min"), *mx = tg_node_attr(n, "max");
      if (mx) tb_printf(&b, "min(");
      if (mn) tb_printf(&b, "max(");
      tb_printf(&b, "%s", X.s);
      if (mn) tb_printf(&b, ", %s)", lit(x->dtype, mn->kind == TG_A_INT ? (double)mn->i : mn->f, l1));
      if (mx) tb_printf(&b, ", %s)", lit(x->dtype, mx->kind == TG_A_INT ? (double)mx->i : mx->f, l2));
      break;
    }
    case TG_OP_CAST:
      if (ir_dtype_eq(x->dtype, y->dtype)) tb_printf(&b, "%s", X.s);
      else if (ir_dtype_is_bool(y->dtype)) tb_printf(&b, "%s != %s", X.s, lit(x->dtype, 0, l1));
      else tb_printf(&b, "%s(%s)", dtn(y->dtype), X.s);
      break;
    default: /* Identity */
      tb_printf(&b, "%s", X.s);
      break;
  }
  stmt(k, &b);
}

static void emit_binary(lg_kernel *k, const tg_node *n, tg_op op, const char *const *in, const char *o) {
  const tg_value *y = OUTV(0), *a = V(k, n->inputs[0]), *bv = V(k, n->inputs[1]);
  int r = y->ndim;
  tb b, A, B;
  tb_reset(&b);
  tb_reset(&A);
  tb_reset(&B);
  load_bcast(k, &A, IN(0), n->inputs[0], r, y->dims);
  load_bcast(k, &B, IN(1), n->inputs[1], r, y->dims);
  lhs(&b, o, r);
  if (op == TG_OP_POW) {
    if (!ir_dtype_is_float(a->dtype)) {
      fail(k, TS_EUNSUPPORTED, n, "Pow of %s (only float bases are supported)", dtn(a->dtype));
      return;
    }
    /* x^2 and x^0.5 are common (layer norms written out); keep them exact and cheap */
    double e;
    if (bv->kind == TG_V_CONST && const_scalar(bv, &e) && (e == 2.0 || e == 0.5 || e == 1.0 || e == 3.0)) {
      if (e == 2.0) tb_printf(&b, " = %s * %s", A.s, A.s);
      else if (e == 3.0) tb_printf(&b, " = %s * %s * %s", A.s, A.s, A.s);
      else if (e == 1.0) tb_printf(&b, " = %s", A.s);
      else tb_printf(&b, " = sqrt(%s)", A.s);
    } else if (ir_dtype_eq(a->dtype, bv->dtype)) {
      tb_printf(&b, " = pow(%s, %s)", A.s, B.s);
    } else {
      tb_printf(&b, " = pow(%s, %s(%s))", A.s, dtn(a->dtype), B.s);
    }
    stmt(k, &b);
    return;
  }
  if (!ir_dtype_eq(a->dtype, bv->dtype)) {
    fail(k, TS_ETYPE, n, "operands of different dtypes (%s, %s)", dtn(a->dtype), dtn(bv->dtype));
    return;
  }
  const char *sym = op == TG_OP_ADD ? "+" : op == TG_OP_SUB ? "-" : op == TG_OP_MUL ? "*" : "/";
  tb_printf(&b, " = %s %s %s", A.s, sym, B.s);
  stmt(k, &b);
}

/* Reduction helper: writes "T[kept axes] OP= SRC[...] for r.." where the
 * axes in red[] of value x (rank r) are reduced. kept indices are i<axis>. */
static void red_index(tb *b, const char *name, int r, const bool *red) {
  tb_printf(b, "%s[", name);
  int j = 0, first = 1;
  for (int a = 0; a < r; a++) {
    if (red[a]) tb_printf(b, "%sr%d", first ? "" : ", ", j++);
    else tb_printf(b, "%si%d", first ? "" : ", ", a);
    first = 0;
  }
  tb_printf(b, "]");
}
static void kept_index(tb *b, const char *name, int r, const bool *red) {
  tb_printf(b, "%s[", name);
  int first = 1;
  for (int a = 0; a < r; a++)
    if (!red[a]) {
      tb_printf(b, "%si%d", first ? "" : ", ", a);
      first = 0;
    }
  tb_printf(b, "]");
}
static void red_for(lg_kernel *k, tb *b, const tg_value *x, const bool *red) {
  int j = 0;
  char s[48];
  for (int a = 0; a < x->ndim; a++)
    if (red[a]) {
      tb_printf(b, "%s r%d in 0..%s", j ? "," : " for", j, dim_s(k, x->dims[a], s));
      j++;
    }
}
/* kept dims of x (axes not reduced). */
static int kept_dims(const tg_value *x, const bool *red, tg_dim *out) {
  int m = 0;
  for (int a = 0; a < x->ndim; a++)
    if (!red[a]) out[m++] = x->dims[a];
  return m;
}
/* Product of the reduced dims as f32-able text: "12.0" or "f32(sym0 * 4)". */
static void red_count(lg_kernel *k, tb *b, const tg_value *x, const bool *red, ir_dtype dt) {
  int64_t c = 1;
  tb syms;
  tb_reset(&syms);
  char s[48];
  for (int a = 0; a < x->ndim; a++)
    if (red[a]) {
      if (x->dims[a].sym) tb_printf(&syms, "%s%s", syms.n ? " * " : "", dim_s(k, x->dims[a], s));
      else c *= x->dims[a].value;
    }
  if (!syms.n) tb_printf(b, "%s", lit(dt, (double)c, s));
  else tb_printf(b, "%s(%s * %" PRId64 ")", dtn(dt), syms.s, c);
}

static void tmpname(char *buf, size_t n, const char *o, const char *tag) { snprintf(buf, n, "%s_%s", o, tag); }

/* "DST[kept] OP SRC[...] for r.." : src (shaped like x) reduced over the
 * axes in red[] into dst (the kept axes of x). */
static void reduce_stmt(lg_kernel *k, const char *dst, const char *op, const char *src, const tg_value *x,
                        const bool *red) {
  tb b;
  tb_reset(&b);
  kept_index(&b, dst, x->ndim, red);
  tb_printf(&b, " %s ", op);
  red_index(&b, src, x->ndim, red);
  red_for(k, &b, x, red);
  stmt(k, &b);
}

static void emit_softmax(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  bool red[8] = {false};
  int64_t ax = tg_attr_int(n, "axis", k->g->opset && k->g->opset < 13 ? 1 : -1);
  int a = norm_axis(ax, r);
  if (a < 0 || a >= r) {
    fail(k, TS_EINVAL, n, "axis %" PRId64 " out of range for rank %d", ax, r);
    return;
  }
  if (k->g->opset && k->g->opset < 13)
    for (int i = a; i < r; i++) red[i] = true;
  else red[a] = true;
  tg_dim kd[8];
  int nk = kept_dims(x, red, kd);
  char mx[96], e[96], s[96];
  tmpname(mx, sizeof mx, o, "max");
  tmpname(e, sizeof e, o, "exp");
  tmpname(s, sizeof s, o, "sum");
  let_dims(k, mx, x->dtype, nk, kd);
  let_dims(k, e, x->dtype, r, x->dims);
  let_dims(k, s, x->dtype, nk, kd);
  reduce_stmt(k, mx, "max=", IN(0), x, red);
  tb b;
  tb_reset(&b);
  lhs(&b, e, r);
  tb_printf(&b, " = exp(");
  lhs(&b, IN(0), r);
  tb_printf(&b, " - ");
  kept_index(&b, mx, r, red);
  tb_printf(&b, ")");
  stmt(k, &b);
  reduce_stmt(k, s, "+=", e, x, red);
  tb_reset(&b);
  lhs(&b, o, r);
  tb_printf(&b, " = ");
  lhs(&b, e, r);
  tb_printf(&b, " / ");
  kept_index(&b, s, r, red);
  stmt(k, &b);
}

static void emit_layernorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  int64_t ax = tg_attr_int(n, "axis", -1);
  int a = norm_axis(ax, r);
  if (a < 0 || a >= r) {
    fail(k, TS_EINVAL, n, "axis %" PRId64 " out of range for rank %d", ax, r);
    return;
  }
  bool red[8] = {false};
  for (int i = a; i < r; i++) red[i] = true;
  tg_dim kd[8];
  int nk = kept_dims(x, red, kd);
  const char *o = out[0];
  char sm[96], mean[96], sq[96], rstd[96], cnt[64], eps[48];
  tmpname(sm, sizeof sm, o, "sum");
  tmpname(mean, sizeof mean, o, "mean");
  tmpname(sq, sizeof sq, o, "sqsum");
  tmpname(rstd, sizeof rstd, o, "rstd");
  let_dims(k, sm, x->dtype, nk, kd);
  let_dims(k, mean, x->dtype, nk, kd);
  let_dims(k, sq, x->dtype, nk, kd);
  let_dims(k, rstd, x->dtype, nk, kd);
  tb c;
  tb_reset(&c);
  red_count(k, &c, x, red, x->dtype);
  snprintf(cnt, sizeof cnt, "%s", c.s);
  flit(tg_attr_float(n, "epsilon", 1e-5), eps);
  tb b, xr, xk, mk;
  tb_reset(&xr);
  red_index(&xr, IN(0), r, red);
  tb_reset(&mk);
  kept_index(&mk, mean, r, red);
  tb_reset(&b);
  kept_index(&b, sm, r, red);
  tb_printf(&b, " += %s", xr.s);
  red_for(k, &b, x, red);
  stmt(k, &b);
  tb_reset(&b);
  kept_index(&b, mean, r, red);
  tb_printf(&b, " = ");
  kept_index(&b, sm, r, red);
  tb_printf(&b, " / %s", cnt);
  stmt(k, &b);
  tb_reset(&b);
  kept_index(&b, sq, r, red);
  tb_printf(&b, " += (%s - %s) * (%s - %s)", xr.s, mk.s, xr.s, mk.s);
  red_for(k, &b, x, red);
  stmt(k, &b);
  tb_reset(&b);
  kept_index(&b, rstd, r, red);
  tb_printf(&b, " = rsqrt(");
  kept_index(&b, sq, r, red);
  tb_printf(&b, " / %s + %s)", cnt, eps);
  stmt(k, &b);
  tb_reset(&b);
  tb_reset(&xk);
  lhs(&xk, IN(0), r);
  lhs(&b, o, r);
  tb_printf(&b, " = (%s - %s) * ", xk.s, mk.s);
  kept_index(&b, rstd, r, red);
  tb_printf(&b, " * ");
  load_bcast(k, &b, IN(1), n->inputs[1], r, x->dims);
  if (n->nin > 2 && n->inputs[2] >= 0 && IN(2)) {
    tb_printf(&b, " + ");
    load_bcast(k, &b, IN(2), n->inputs[2], r, x->dims);
  }
  stmt(k, &b);
  /* optional Mean / InvStdDev outputs: shape X.shape[:axis] + [1]*(r-axis) */
  for (int oi = 1; oi < n->nout && oi < 3; oi++) {
    if (!out[oi]) continue;
    tb_reset(&b);
    lhs(&b, out[oi], r);
    tb_printf(&b, " = ");
    kept_index(&b, oi == 1 ? mean : rstd, r, red);
    stmt(k, &b);
  }
}

static void emit_batchnorm(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  if (tg_attr_int(n, "training_mode", 0)) {
    fail(k, TS_EUNSUPPORTED, n, "training_mode=1 (only inference batch norm is supported)");
    return;
  }
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  if (r < 2) {
    fail(k, TS_EUNSUPPORTED, n, "input of rank %d (need the channel axis 1)", r);
    return;
  }
  char eps[48];
  flit(tg_attr_float(n, "epsilon", 1e-5), eps);
  tb b;
  tb_reset(&b);
  lhs(&b, o, r);
  tb_printf(&b, " = (");
  lhs(&b, IN(0), r);
  tb_printf(&b, " - %s[i1]) * (%s[i1] * rsqrt(%s[i1] + %s)) + %s[i1]", IN(3), IN(1), IN(4), eps, IN(2));
  stmt(k, &b);
}

static void emit_gemm(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *a = V(k, n->inputs[0]), *y = OUTV(0);
  bool ta = tg_attr_int(n, "transA", 0) != 0, tbm = tg_attr_int(n, "transB", 0) != 0;
  double alpha = tg_attr_float(n, "alpha", 1.0), beta = tg_attr_float(n, "beta", 1.0);
  if (a->ndim != 2 || V(k, n->inputs[1])->ndim != 2) {
    fail(k, TS_ESHAPE, n, "Gemm needs 2-d A and B");
    return;
  }
  bool has_c = n->nin > 2 && n->inputs[2] >= 0 && beta != 0.0;
  char s[48], l1[48], l2[48], mm[96];
  const char *dst = o;
  tmpname(mm, sizeof mm, o, "mm");
  if (has_c || alpha != 1.0) {
    dst = mm;
    lg_let(k, mm, n->outputs[0]);
  }
  tb b;
  tb_reset(&b);
  tb_printf(&b, "%s[i0, i1] += %s[%s] * %s[%s] for r0 in 0..%s", dst, IN(0), ta ? "r0, i0" : "i0, r0", IN(1),
            tbm ? "i1, r0" : "r0, i1", dim_s(k, a->dims[ta ? 0 : 1], s));
  stmt(k, &b);
  if (dst == o) return;
  tb_reset(&b);
  tb_printf(&b, "%s[i0, i1] = ", o);
  if (alpha != 1.0) tb_printf(&b, "%s * ", flit(alpha, l1));
  tb_printf(&b, "%s[i0, i1]", mm);
  if (has_c) {
    tb_printf(&b, " + ");
    if (beta != 1.0) tb_printf(&b, "%s * ", flit(beta, l2));
    load_bcast(k, &b, IN(2), n->inputs[2], 2, y->dims);
  }
  stmt(k, &b);
}

static void emit_matmul(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *a = V(k, n->inputs[0]), *bv = V(k, n->inputs[1]), *y = OUTV(0);
  int ra = a->ndim, rb = bv->ndim, r = y->ndim;
  bool bt = tg_attr_int(n, "tessel.b_transposed", 0) != 0; /* layout_rewrite: B stored [.., N, K] */
  char s[48];
  if (ra < 1 || rb < 1) {
    fail(k, TS_ESHAPE, n, "MatMul of a 0-d operand");
    return;
  }
  tb b;
  tb_reset(&b);
  lhs(&b, o, r);
  tb_printf(&b, " += %s[", IN(0));
  /* A */
  if (ra == 1) {
    tb_printf(&b, "r0");
  } else {
    int nb = ra - 2, yb = (rb == 1 ? r - 1 : r - 2);
    for (int i = 0; i < nb; i++) {
      int oax = yb - nb + i;
      bool zero = oax < 0 || (dim_is(a->dims[i], 1) && !dim_is(y->dims[oax], 1));
      if (zero) tb_printf(&b, "0, ");
      else tb_printf(&b, "i%d, ", oax);
    }
    tb_printf(&b, "i%d, r0", rb == 1 ? r - 1 : r - 2);
  }
  tb_printf(&b, "] * %s[", IN(1));
  if (rb == 1) {
    tb_printf(&b, "r0");
  } else {
    int nb = rb - 2, yb = r - 1 - (ra == 1 ? 0 : 1);
    for (int i = 0; i < nb; i++) {
      int oax = yb - nb + i;
      bool zero = oax < 0 || (dim_is(bv->dims[i], 1) && !dim_is(y->dims[oax], 1));
      if (zero) tb_printf(&b, "0, ");
      else tb_printf(&b, "i%d, ", oax);
    }
    if (bt) tb_printf(&b, "i%d, r0", r - 1);
    else tb_printf(&b, "r0, i%d", r - 1);
  }
  tb_printf(&b, "] for r0 in 0..%s", dim_s(k, a->dims[ra - 1], s));
  stmt(k, &b);
}

/* Convolution / pooling window geometry along the spatial axes. */
typedef struct win {
  int ns;
  int64_t kern[3], st[3], dil[3], pb[3], pe[3];
} win;

static bool get_win(lg_kernel *k, const tg_node *n, const tg_value *x, const tg_value *y, const int64_t *kern,
                    win *w) {
  w->ns = x->ndim - 2;
  if (w->ns < 1 || w->ns > 3) {
    fail(k, TS_EUNSUPPORTED, n, "%d spatial dims (1 to 3 are supported)", w->ns);
    return false;
  }
  int c;
  const int64_t *st = tg_attr_ints(n, "strides", &c);
  if (st && c != w->ns) st = NULL;
  const int64_t *dl = tg_attr_ints(n, "dilations", &c);
  if (dl && c != w->ns) dl = NULL;
  const int64_t *pads = tg_attr_ints(n, "pads", &c);
  if (pads && c != 2 * w->ns) pads = NULL;
  const char *ap = tg_attr_str(n, "auto_pad", "NOTSET");
  for (int i = 0; i < w->ns; i++) {
    w->kern[i] = kern[i];
    w->st[i] = st ? st[i] : 1;
    w->dil[i] = dl ? dl[i] : 1;
    w->pb[i] = pads ? pads[i] : 0;
    w->pe[i] = pads ? pads[i + w->ns] : 0;
    if (w->st[i] < 1 || w->dil[i] < 1) {
      fail(k, TS_EINVAL, n, "stride and dilation must be >= 1");
      return false;
    }
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
      tg_dim xi = x->dims[2 + i], yo = y->dims[2 + i];
      if (xi.sym || yo.sym) {
        fail(k, TS_EUNSUPPORTED, n, "auto_pad=%s over a symbolic spatial dim", ap);
        return false;
      }
      int64_t tot = (yo.value - 1) * w->st[i] + (w->kern[i] - 1) * w->dil[i] + 1 - xi.value;
      if (tot < 0) tot = 0;
      w->pb[i] = !strcmp(ap, "SAME_UPPER") ? tot / 2 : tot - tot / 2;
      w->pe[i] = tot - w->pb[i];
    } else if (!strcmp(ap, "VALID")) {
      w->pb[i] = w->pe[i] = 0;
    } else if (strcmp(ap, "NOTSET")) {
      fail(k, TS_EUNSUPPORTED, n, "auto_pad='%s'", ap);
      return false;
    }
  }
  return true;
}

/* Input coordinate along spatial axis s: "i<2+s> * st + r<rv> * dil - pb". */
static void spatial(tb *b, const win *w, int s, int rv) {
  tb_printf(b, "i%d", 2 + s);
  if (w->st[s] != 1) tb_printf(b, " * %" PRId64, w->st[s]);
  tb_printf(b, " + r%d", rv);
  if (w->dil[s] != 1) tb_printf(b, " * %" PRId64, w->dil[s]);
  if (w->pb[s]) tb_printf(b, " - %" PRId64, w->pb[s]);
}

/* " where e >= 0 && e < H ..." for the axes whose window can leave the input. */
static void window_where(lg_kernel *k, tb *b, const win *w, const tg_value *x, const tg_value *y, int rv0) {
  bool any = false;
  char s[48];
  for (int i = 0; i < w->ns; i++) {
    tg_dim H = x->dims[2 + i], P = y->dims[2 + i];
    bool may = w->pb[i] > 0 || H.sym || P.sym ||
               (P.value - 1) * w->st[i] + (w->kern[i] - 1) * w->dil[i] - w->pb[i] >= H.value;
    if (!may) continue;
    tb e;
    tb_reset(&e);
    spatial(&e, w, i, rv0 + i);
    tb_printf(b, "%s%s >= 0 && %s < %s", any ? " && " : " where ", e.s, e.s, dim_s(k, H, s));
    any = true;
  }
}

/* Conv and ConvTranspose with a bias (input 2) accumulate into O_conv (its
 * name written to cv) and add the bias per output channel after; without
 * one they accumulate into o. Returns the accumulator. */
static const char *conv_acc(lg_kernel *k, const tg_node *n, const char *o, char *cv, size_t ncv) {
  if (n->nin <= 2 || n->inputs[2] < 0) return o;
  tmpname(cv, ncv, o, "conv");
  lg_let(k, cv, n->outputs[0]);
  return cv;
}
/* o = acc + bias[i1] when conv_acc chose a temporary (rank r). */
static void conv_bias(lg_kernel *k, const char *const *in, const char *o, const char *acc, int r) {
  if (acc == o) return;
  tb b;
  tb_reset(&b);
  lhs(&b, o, r);
  tb_printf(&b, " = ");
  lhs(&b, acc, r);
  tb_printf(&b, " + %s[i1]", IN(2));
  stmt(k, &b);
}

/* The Winograd F(4x4, 3x3) form the winograd pass prepared (in: x, U[6,6,C,K],
 * bias or NULL, BT[6,6], AT[4,6]): a zero-padded copy of x covering whole
 * tiles; the input transform in two separable steps (rows, then columns);
 * 36 independent matmuls over the channels, laid out like a matmul with the
 * output channels innermost; the output transform in two steps, the second
 * writing the NCHW output. Tiles t = (n, th, tw) of 4x4 outputs each. */
static void emit_conv_winograd(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]), *uv = V(k, n->inputs[1]), *y = OUTV(0);
  win w;
  if (!get_win(k, n, x, y, (const int64_t[]){3, 3}, &w)) return;
  int64_t pt = w.pb[0], pl = w.pb[1];
  if (uv->ndim != 4 || uv->dims[2].sym || uv->dims[3].sym || x->dims[2].sym || x->dims[3].sym || y->dims[2].sym ||
      y->dims[3].sym) {
    fail(k, TS_EINVAL, n, "winograd form with unexpected shapes");
    return;
  }
  int64_t C = uv->dims[2].value, K = uv->dims[3].value;
  int64_t H = x->dims[2].value, W = x->dims[3].value, OH = y->dims[2].value, OW = y->dims[3].value;
  int64_t th = (OH + 3) / 4, tw = (OW + 3) / 4;
  char cv[96], xp[96], t1[96], tv[96], tm[96], to[96];
  const char *dst = conv_acc(k, n, o, cv, sizeof cv);
  tmpname(xp, sizeof xp, o, "wpad");
  tmpname(t1, sizeof t1, o, "wrow");
  tmpname(tv, sizeof tv, o, "wv");
  tmpname(tm, sizeof tm, o, "wm");
  tmpname(to, sizeof to, o, "wo");
  tg_dim N = x->dims[0];
  /* the padded input channels-last, so that every transform reads and
   * writes whole channel vectors */
  tg_dim pd[4] = {N, {th * 4 + 2, NULL}, {tw * 4 + 2, NULL}, {C, NULL}};
  let_dims(k, xp, x->dtype, 4, pd);
  tg_dim vd[6] = {{6, NULL}, {6, NULL}, N, {th, NULL}, {tw, NULL}, {C, NULL}};
  let_dims(k, t1, x->dtype, 6, vd);
  let_dims(k, tv, x->dtype, 6, vd);
  vd[5] = (tg_dim){K, NULL};
  let_dims(k, tm, x->dtype, 6, vd);
  vd[0] = (tg_dim){4, NULL};
  let_dims(k, to, x->dtype, 6, vd);
  tb b;
  tb_reset(&b);
  tb_printf(&b,
            "%s[i0, i1, i2, i3] = select(i1 - %" PRId64 " >= 0 && i1 - %" PRId64 " < %" PRId64 " && i2 - %" PRId64
            " >= 0 && i2 - %" PRId64 " < %" PRId64 ", %s[i0, i3, min(max(i1 - %" PRId64 ", 0), %" PRId64
            "), min(max(i2 - %" PRId64 ", 0), %" PRId64 ")], 0.0)",
            xp, pt, pt, H, pl, pl, W, IN(0), pt, H - 1, pl, W - 1);
  stmt(k, &b);
  /* the input transform, rows then columns (separable: 2 x 6 terms, not 36) */
  tb_reset(&b);
  tb_printf(&b, "%s[i0, i1, i2, i3, i4, i5] += %s[i0, r0] * %s[i2, i3 * 4 + r0, i4 * 4 + i1, i5] for r0 in 0..6", t1,
            IN(3), xp);
  stmt(k, &b);
  tb_reset(&b);
  tb_printf(&b, "%s[i0, i1, i2, i3, i4, i5] += %s[i0, r0, i2, i3, i4, i5] * %s[i1, r0] for r0 in 0..6", tv, t1, IN(3));
  stmt(k, &b);
  tb_reset(&b);
  tb_printf(&b, "%s[i0, i1, i2, i3, i4, i5] += %s[i0, i1, i2, i3, i4, r0] * %s[i0, i1, r0, i5] for r0 in 0..%" PRId64,
            tm, tv, IN(1), C);
  stmt(k, &b);
  tb_reset(&b);
  tb_printf(&b, "%s[i0, i1, i2, i3, i4, i5] += %s[i0, r0] * %s[r0, i1, i2, i3, i4, i5] for r0 in 0..6", to, IN(4), tm);
  stmt(k, &b);
  tb_reset(&b);
  lhs(&b, dst, 4);
  tb_printf(&b, " += %s[i2 %% 4, r0, i0, i2 // 4, i3 // 4, i1] * %s[i3 %% 4, r0] for r0 in 0..6", to, IN(4));
  stmt(k, &b);
  conv_bias(k, in, o, dst, 4);
}

/* "dst[i0, ..] += src[i0, <input channel>": r0 within the output channel's group */
static void conv_lhs_chan(tb *b, const char *dst, int r, const char *src, int64_t g, int64_t M, int64_t cg) {
  tb_reset(b);
  lhs(b, dst, r);
  tb_printf(b, " += %s[i0, ", src);
  if (g == 1) tb_printf(b, "r0");
  else tb_printf(b, "(i1 // %" PRId64 ") * %" PRId64 " + r0", M / g, cg);
}

static void emit_conv(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  if (tg_attr_int(n, "tessel.winograd", 0) == 4 && n->nin >= 5) {
    emit_conv_winograd(k, n, in, o);
    return;
  }
  const tg_value *x = V(k, n->inputs[0]), *wv = V(k, n->inputs[1]), *y = OUTV(0);
  int r = x->ndim;
  int64_t kern[3];
  for (int i = 0; i < r - 2 && i < 3; i++) {
    if (wv->dims[2 + i].sym) {
      fail(k, TS_EUNSUPPORTED, n, "symbolic kernel size");
      return;
    }
    kern[i] = wv->dims[2 + i].value;
  }
  win w;
  if (!get_win(k, n, x, y, kern, &w)) return;
  int64_t g = tg_attr_int(n, "group", 1);
  if (wv->dims[1].sym || wv->dims[0].sym) {
    fail(k, TS_EUNSUPPORTED, n, "symbolic channel counts");
    return;
  }
  int64_t cg = wv->dims[1].value, M = wv->dims[0].value;
  if (g < 1 || M % g) {
    fail(k, TS_EINVAL, n, "group=%" PRId64 " does not divide the %" PRId64 " output channels", g, M);
    return;
  }
  char cv[96], xp[96];
  const char *dst = conv_acc(k, n, o, cv, sizeof cv);
  /* Padding as its own stage (as TVM's data_pad and the built-in conv
   * workloads): the convolution then reads without a guard, and the search
   * places (or keeps) the pad stage. Needs constant spatial sizes; else the
   * guard stays in the convolution. */
  bool guard = false, konst = true;
  int64_t pext[3] = {0, 0, 0};
  for (int s = 0; s < w.ns; s++) {
    tg_dim H = x->dims[2 + s], P = y->dims[2 + s];
    if (H.sym || P.sym) {
      konst = false;
      continue;
    }
    pext[s] = (P.value - 1) * w.st[s] + (w.kern[s] - 1) * w.dil[s] + 1;
    guard = guard || w.pb[s] > 0 || pext[s] - w.pb[s] > H.value;
  }
  bool pad_stage = guard && konst && w.ns <= 3;
  const char *src = IN(0);
  /* A strided 2-d convolution reads its padded input in polyphase order,
   * xp[n, c, p, q, h', w'] = padded x[n, c, h'*sh + p, w'*sw + q]: the output
   * column i3 then reads xp[.., i3 + s // sw] at unit stride (the plain order
   * reads x[.., i3*sw + s], a gather once the output width is vectorised). */
  bool poly = pad_stage && w.ns == 2 && (w.st[0] > 1 || w.st[1] > 1) && w.dil[0] == 1 && w.dil[1] == 1 &&
              !k->g->opts.polyphase_off; /* --polyphase off: the plain order (comparisons) */
  if (poly) {
    tmpname(xp, sizeof xp, o, "pad");
    tg_dim pd[6] = {x->dims[0], x->dims[1], {w.st[0], NULL}, {w.st[1], NULL},
                    {y->dims[2].value + (w.kern[0] - 1) / w.st[0], NULL},
                    {y->dims[3].value + (w.kern[1] - 1) / w.st[1], NULL}};
    let_dims(k, xp, x->dtype, 6, pd);
    tb p;
    tb_reset(&p);
    char hs[48], ws[48];
    dim_s(k, x->dims[2], hs);
    dim_s(k, x->dims[3], ws);
    lhs(&p, xp, 6);
    tb_printf(&p,
              " = select(i4 * %" PRId64 " + i2 - %" PRId64 " >= 0 && i4 * %" PRId64 " + i2 - %" PRId64
              " < %s && i5 * %" PRId64 " + i3 - %" PRId64 " >= 0 && i5 * %" PRId64 " + i3 - %" PRId64
              " < %s, %s[i0, i1, min(max(i4 * %" PRId64 " + i2 - %" PRId64 ", 0), %s - 1), min(max(i5 * %" PRId64
              " + i3 - %" PRId64 ", 0), %s - 1)], 0.0)",
              w.st[0], w.pb[0], w.st[0], w.pb[0], hs, w.st[1], w.pb[1], w.st[1], w.pb[1], ws, IN(0), w.st[0],
              w.pb[0], hs, w.st[1], w.pb[1], ws);
    stmt(k, &p);
    tb b;
    conv_lhs_chan(&b, dst, r, xp, g, M, cg);
    tb_printf(&b, ", r1 %% %" PRId64 ", r2 %% %" PRId64 ", i2 + r1 // %" PRId64 ", i3 + r2 // %" PRId64 "]", w.st[0],
              w.st[1], w.st[0], w.st[1]);
    tb_printf(&b, " * %s[i1, r0, r1, r2] for r0 in 0..%" PRId64 ", r1 in 0..%" PRId64 ", r2 in 0..%" PRId64, IN(1),
              cg, w.kern[0], w.kern[1]);
    stmt(k, &b);
    conv_bias(k, in, o, dst, r);
    return;
  }
  if (pad_stage) {
    tmpname(xp, sizeof xp, o, "pad");
    tg_dim pd[5];
    pd[0] = x->dims[0];
    pd[1] = x->dims[1];
    for (int s = 0; s < w.ns; s++) pd[2 + s] = (tg_dim){pext[s], NULL};
    let_dims(k, xp, x->dtype, 2 + w.ns, pd);
    tb p;
    tb_reset(&p);
    lhs(&p, xp, 2 + w.ns);
    tb_printf(&p, " = select(");
    char hs[48];
    for (int s = 0; s < w.ns; s++)
      tb_printf(&p, "%si%d - %" PRId64 " >= 0 && i%d - %" PRId64 " < %s", s ? " && " : "", 2 + s, w.pb[s], 2 + s,
                w.pb[s], dim_s(k, x->dims[2 + s], hs));
    /* the load's indices clamped too: safe even where a select is eager */
    tb_printf(&p, ", %s[i0, i1", IN(0));
    for (int s = 0; s < w.ns; s++)
      tb_printf(&p, ", min(max(i%d - %" PRId64 ", 0), %s - 1)", 2 + s, w.pb[s], dim_s(k, x->dims[2 + s], hs));
    tb_printf(&p, "], 0.0)");
    stmt(k, &p);
    src = xp;
    for (int s = 0; s < w.ns; s++) w.pb[s] = 0; /* the conv indexes the padded input */
  }
  tb b;
  conv_lhs_chan(&b, dst, r, src, g, M, cg);
  for (int s = 0; s < w.ns; s++) {
    tb_printf(&b, ", ");
    spatial(&b, &w, s, 1 + s);
  }
  tb_printf(&b, "] * %s[i1, r0", IN(1));
  for (int s = 0; s < w.ns; s++) tb_printf(&b, ", r%d", 1 + s);
  tb_printf(&b, "]");
  if (!pad_stage) window_where(k, &b, &w, x, y, 1);
  tb_printf(&b, " for r0 in 0..%" PRId64, cg);
  for (int s = 0; s < w.ns; s++) tb_printf(&b, ", r%d in 0..%" PRId64, 1 + s, w.kern[s]);
  stmt(k, &b);
  conv_bias(k, in, o, dst, r);
}

static void emit_conv_transpose(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]), *wv = V(k, n->inputs[1]), *y = OUTV(0);
  int r = x->ndim;
  if (tg_attr_int(n, "group", 1) != 1) {
    fail(k, TS_EUNSUPPORTED, n, "group != 1");
    return;
  }
  int64_t kern[3];
  for (int i = 0; i < r - 2 && i < 3; i++) {
    if (wv->dims[2 + i].sym || wv->dims[0].sym) {
      fail(k, TS_EUNSUPPORTED, n, "symbolic kernel size or channel count");
      return;
    }
    kern[i] = wv->dims[2 + i].value;
  }
  win w;
  if (!get_win(k, n, x, y, kern, &w)) return;
  if (!strcmp(tg_attr_str(n, "auto_pad", "NOTSET"), "SAME_UPPER") ||
      !strcmp(tg_attr_str(n, "auto_pad", "NOTSET"), "SAME_LOWER")) {
    fail(k, TS_EUNSUPPORTED, n, "auto_pad SAME for ConvTranspose");
    return;
  }
  for (int s = 0; s < w.ns; s++)
    if (w.dil[s] != 1 || x->dims[2 + s].sym) {
      fail(k, TS_EUNSUPPORTED, n, "dilation != 1 or a symbolic spatial dim");
      return;
    }
  char cv[96];
  const char *dst = conv_acc(k, n, o, cv, sizeof cv);
  /* output y gets input h when y + pb - rk == h * stride */
  tb b, cond;
  tb_reset(&b);
  tb_reset(&cond);
  lhs(&b, dst, r);
  tb_printf(&b, " += %s[i0, r0", IN(0));
  for (int s = 0; s < w.ns; s++) {
    int64_t H = x->dims[2 + s].value, st = w.st[s];
    char t[96];
    snprintf(t, sizeof t, "i%d + %" PRId64 " - r%d", 2 + s, w.pb[s], 1 + s);
    if (st == 1) {
      tb_printf(&b, ", %s", t);
      tb_printf(&cond, "%s%s >= 0 && %s < %" PRId64, s ? " && " : "", t, t, H);
    } else {
      tb_printf(&b, ", (%s) // %" PRId64, t, st);
      tb_printf(&cond, "%s(%s) %% %" PRId64 " == 0 && %s >= 0 && %s < %" PRId64, s ? " && " : "", t, st, t, t,
                H * st);
    }
  }
  tb_printf(&b, "] * %s[r0, i1", IN(1));
  for (int s = 0; s < w.ns; s++) tb_printf(&b, ", r%d", 1 + s);
  tb_printf(&b, "] where %s for r0 in 0..%" PRId64, cond.s, wv->dims[0].value);
  for (int s = 0; s < w.ns; s++) tb_printf(&b, ", r%d in 0..%" PRId64, 1 + s, w.kern[s]);
  stmt(k, &b);
  conv_bias(k, in, o, dst, r);
}

static void emit_pool(lg_kernel *k, const tg_node *n, tg_op op, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = x->ndim, c;
  const int64_t *ks = tg_attr_ints(n, "kernel_shape", &c);
  if (!ks || c != r - 2) {
    fail(k, TS_EINVAL, n, "kernel_shape missing or of the wrong length");
    return;
  }
  win w;
  if (!get_win(k, n, x, y, ks, &w)) return;
  if (n->nout > 1 && n->outputs[1] >= 0) {
    fail(k, TS_EUNSUPPORTED, n, "the Indices output of MaxPool");
    return;
  }
  tb b;
  tb_reset(&b);
  bool avg = op == TG_OP_AVERAGE_POOL;
  char sm[96];
  tmpname(sm, sizeof sm, o, "sum");
  if (avg) {
    for (int s = 0; s < w.ns; s++)
      if (w.dil[s] != 1) {
        fail(k, TS_EUNSUPPORTED, n, "dilated AveragePool");
        return;
      }
    lg_let(k, sm, n->outputs[0]);
  }
  lhs(&b, avg ? sm : o, r);
  tb_printf(&b, " %s %s[i0, i1", avg ? "+=" : "max=", IN(0));
  for (int s = 0; s < w.ns; s++) {
    tb_printf(&b, ", ");
    spatial(&b, &w, s, s);
  }
  tb_printf(&b, "]");
  window_where(k, &b, &w, x, y, 0);
  for (int s = 0; s < w.ns; s++) tb_printf(&b, "%s r%d in 0..%" PRId64, s ? "," : " for", s, w.kern[s]);
  stmt(k, &b);
  if (!avg) return;
  tb_reset(&b);
  lhs(&b, o, r);
  tb_printf(&b, " = ");
  lhs(&b, sm, r);
  bool incl = tg_attr_int(n, "count_include_pad", 0) != 0;
  int64_t taps = 1;
  for (int s = 0; s < w.ns; s++) taps *= w.kern[s];
  bool pads = false;
  for (int s = 0; s < w.ns; s++) pads |= w.pb[s] || w.pe[s];
  if (incl || !pads) {
    char l[48];
    tb_printf(&b, " / %s", lit(y->dtype, (double)taps, l));
  } else {
    /* count of taps inside the input, per output: prod over axes of
     * min(o*st - pb + k, H) - max(o*st - pb, 0) */
    tb_printf(&b, " / %s(", dtn(y->dtype));
    char s[48];
    for (int a = 0; a < w.ns; a++) {
      tb_printf(&b, "%s(min(i%d * %" PRId64 " - %" PRId64 " + %" PRId64 ", %s) - max(i%d * %" PRId64 " - %" PRId64
                ", 0))",
                a ? " * " : "", 2 + a, w.st[a], w.pb[a], w.kern[a], dim_s(k, x->dims[2 + a], s), 2 + a, w.st[a],
                w.pb[a]);
    }
    tb_printf(&b, ")");
  }
  stmt(k, &b);
}

static void emit_global_avg(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  bool red[8] = {false};
  for (int a = 2; a < r; a++) red[a] = true;
  tg_dim kd[8] = {{0}}; /* kept_dims fills nk (GCC cannot see it) */
  int nk = kept_dims(x, red, kd);
  char sm[96];
  tmpname(sm, sizeof sm, o, "sum");
  let_dims(k, sm, x->dtype, nk, kd);
  reduce_stmt(k, sm, "+=", IN(0), x, red);
  tb b;
  tb_reset(&b);
  lhs(&b, o, r);
  tb_printf(&b, " = ");
  kept_index(&b, sm, r, red);
  tb_printf(&b, " / ");
  red_count(k, &b, x, red, x->dtype);
  stmt(k, &b);
}

static void emit_reduce(lg_kernel *k, const tg_node *n, tg_op op, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = x->ndim, c = 0;
  const int64_t *axes = tg_attr_ints(n, "axes", &c);
  bool keep = tg_attr_int(n, "keepdims", 1) != 0;
  bool red[8] = {false};
  if (!axes || c == 0) {
    if (tg_attr_int(n, "noop_with_empty_axes", 0)) {
      tb b;
      tb_reset(&b);
      lhs(&b, o, r);
      tb_printf(&b, " = ");
      lhs(&b, IN(0), r);
      stmt(k, &b);
      return;
    }
    for (int a = 0; a < r; a++) red[a] = true;
  } else {
    for (int i = 0; i < c; i++) {
      int a = norm_axis(axes[i], r);
      if (a < 0 || a >= r) {
        fail(k, TS_EINVAL, n, "axis %" PRId64 " out of range for rank %d", axes[i], r);
        return;
      }
      red[a] = true;
    }
  }
  bool mean = op == TG_OP_REDUCE_MEAN;
  char sm[96];
  tmpname(sm, sizeof sm, o, "sum");
  const char *dst = mean ? sm : o;
  /* The accumulator is indexed by output axes: with keepdims the reduced axes
   * stay (extent 1, index var unused), without they vanish; the source is
   * indexed with i<output axis> for kept axes. */
  tb b;
  tb_reset(&b);
  if (mean) lg_let(k, sm, n->outputs[0]);
  lhs(&b, dst, y->ndim);
  tb_printf(&b, " += %s[", IN(0));
  int oa = 0, j = 0;
  for (int a = 0; a < r; a++) {
    if (a) tb_printf(&b, ", ");
    if (red[a]) {
      tb_printf(&b, "r%d", j++);
      if (keep) oa++;
    } else {
      tb_printf(&b, "i%d", oa++);
    }
  }
  tb_printf(&b, "]");
  red_for(k, &b, x, red);
  stmt(k, &b);
  if (!mean) return;
  tb_reset(&b);
  lhs(&b, o, y->ndim);
  tb_printf(&b, " = ");
  lhs(&b, sm, y->ndim);
  tb_printf(&b, " / ");
  red_count(k, &b, x, red, y->dtype);
  stmt(k, &b);
}

static void emit_transpose(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim, c;
  const int64_t *perm = tg_attr_ints(n, "perm", &c);
  int p[8];
  for (int i = 0; i < r; i++) p[i] = perm && c == r ? (int)perm[i] : r - 1 - i;
  int src[8];
  for (int i = 0; i < r; i++) src[i] = -1;
  for (int i = 0; i < r; i++) {
    if (p[i] < 0 || p[i] >= r || src[p[i]] >= 0) {
      fail(k, TS_EINVAL, n, "perm is not a permutation of 0..%d", r - 1);
      return;
    }
    src[p[i]] = i;
  }
  tb b;
  tb_reset(&b);
  lhs(&b, o, r);
  tb_printf(&b, " = %s[", IN(0));
  for (int a = 0; a < r; a++) tb_printf(&b, "%si%d", a ? ", " : "", src[a]);
  tb_printf(&b, "]");
  stmt(k, &b);
}

/* Reshape and its relatives: when the non-1 dims of input and output are the
 * same sequence, map axes directly; else go through the flat index. */
static void emit_reshape(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int rx = x->ndim, ry = y->ndim;
  int nx[8], ny[8], cx = 0, cy = 0;
  for (int a = 0; a < rx; a++)
    if (!dim_is(x->dims[a], 1)) nx[cx++] = a;
  for (int a = 0; a < ry; a++)
    if (!dim_is(y->dims[a], 1)) ny[cy++] = a;
  bool direct = cx == cy;
  for (int i = 0; direct && i < cx; i++) direct = tg_dim_eq(x->dims[nx[i]], y->dims[ny[i]]);
  tb b;
  tb_reset(&b);
  lhs(&b, o, ry);
  tb_printf(&b, " = %s[", IN(0));
  char s[48];
  if (direct) {
    int j = 0;
    for (int a = 0; a < rx; a++) {
      if (a) tb_printf(&b, ", ");
      if (j < cx && nx[j] == a) tb_printf(&b, "i%d", ny[j++]);
      else tb_printf(&b, "0");
    }
  } else {
    /* flat = ((i0 * d1 + i1) * d2 + i2) ... over the output */
    tb flat;
    tb_reset(&flat);
    for (int a = 0; a < ry; a++) {
      if (a == 0) tb_printf(&flat, "i0");
      else {
        tb t;
        tb_reset(&t);
        tb_printf(&t, "(%s) * %s + i%d", flat.s, dim_s(k, y->dims[a], s), a);
        flat = t;
      }
    }
    if (ry == 0) tb_printf(&flat, "0");
    for (int a = 0; a < rx; a++) {
      /* stride of axis a = product of dims after it */
      tb st;
      tb_reset(&st);
      for (int q = a + 1; q < rx; q++) tb_printf(&st, "%s%s", st.n ? " * " : "", dim_s(k, x->dims[q], s));
      if (a) tb_printf(&b, ", ");
      if (st.n) tb_printf(&b, "(%s) // (%s)", flat.s, st.s);
      else tb_printf(&b, "(%s)", flat.s);
      if (a > 0) tb_printf(&b, " %% %s", dim_s(k, x->dims[a], s));
    }
  }
  tb_printf(&b, "]");
  stmt(k, &b);
}

static void emit_concat(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *y = OUTV(0);
  int r = y->ndim;
  int a = norm_axis(tg_attr_int(n, "axis", 0), r);
  if (a < 0 || a >= r) {
    fail(k, TS_EINVAL, n, "axis out of range");
    return;
  }
  int cnt = 0;
  int ids[64];
  const char *nm[64];
  for (int i = 0; i < n->nin && cnt < 64; i++)
    if (n->inputs[i] >= 0) {
      ids[cnt] = n->inputs[i];
      nm[cnt++] = IN(i);
    }
  /* offsets along the axis as text */
  char off[64][256];
  char s[48];
  snprintf(off[0], sizeof off[0], "0");
  for (int i = 1; i < cnt; i++) {
    tg_dim dd = V(k, ids[i - 1])->dims[a];
    if (!strcmp(off[i - 1], "0")) snprintf(off[i], sizeof off[i], "%s", dim_s(k, dd, s));
    else snprintf(off[i], sizeof off[i], "%s + %s", off[i - 1], dim_s(k, dd, s));
  }
  tb e;
  tb_reset(&e);
  for (int i = cnt - 1; i >= 0; i--) {
    const tg_value *v = V(k, ids[i]);
    tb ld;
    tb_reset(&ld);
    tb_printf(&ld, "%s[", nm[i]);
    for (int q = 0; q < r; q++) {
      if (q) tb_printf(&ld, ", ");
      if (q != a) tb_printf(&ld, "i%d", q);
      else if (i == 0) tb_printf(&ld, "min(i%d, %s - 1)", q, dim_s(k, v->dims[a], s));
      else tb_printf(&ld, "min(max(i%d - (%s), 0), %s - 1)", q, off[i], dim_s(k, v->dims[a], s));
    }
    tb_printf(&ld, "]");
    if (i == cnt - 1) {
      e = ld;
    } else {
      tb t;
      tb_reset(&t);
      tb_printf(&t, "select(i%d < %s, %s, %s)", a, off[i + 1], ld.s, e.s);
      e = t;
    }
  }
  tb b;
  tb_reset(&b);
  lhs(&b, o, r);
  tb_printf(&b, " = %s", e.s);
  if (e.over) b.over = true;
  stmt(k, &b);
}

static void emit_split(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim;
  int a = norm_axis(tg_attr_int(n, "axis", 0), r);
  if (a < 0 || a >= r) {
    fail(k, TS_EINVAL, n, "axis out of range");
    return;
  }
  char off[512] = "0", s[48];
  for (int i = 0; i < n->nout; i++) {
    const tg_value *y = OUTV(i);
    if (out[i]) {
      tb b;
      tb_reset(&b);
      lhs(&b, out[i], r);
      tb_printf(&b, " = %s[", IN(0));
      for (int q = 0; q < r; q++) {
        if (q) tb_printf(&b, ", ");
        if (q == a && strcmp(off, "0")) tb_printf(&b, "i%d + %s", q, off);
        else tb_printf(&b, "i%d", q);
      }
      tb_printf(&b, "]");
      stmt(k, &b);
    }
    char t[512];
    if (!strcmp(off, "0")) snprintf(t, sizeof t, "%s", dim_s(k, y->dims[a], s));
    else snprintf(t, sizeof t, "%s + %s", off, dim_s(k, y->dims[a], s));
    snprintf(off, sizeof off, "%s", t);
  }
}

static void emit_slice(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]);
  int r = x->ndim, cs, ce, ca, cst;
  const int64_t *starts = tg_attr_ints(n, "starts", &cs), *ends = tg_attr_ints(n, "ends", &ce);
  const int64_t *axes = tg_attr_ints(n, "axes", &ca), *steps = tg_attr_ints(n, "steps", &cst);
  if (!starts || !ends || cs != ce || (axes && ca != cs) || (steps && cst != cs)) {
    fail(k, TS_EINVAL, n, "starts/ends/axes/steps missing or of different lengths");
    return;
  }
  int64_t start[8] = {0}, step[8];
  for (int a = 0; a < r; a++) step[a] = 1;
  for (int i = 0; i < cs; i++) {
    int a = norm_axis(axes ? axes[i] : i, r);
    if (a < 0 || a >= r) {
      fail(k, TS_EINVAL, n, "axis out of range");
      return;
    }
    int64_t st = steps ? steps[i] : 1, s0 = starts[i];
    if (st == 0) {
      fail(k, TS_EINVAL, n, "step 0");
      return;
    }
    tg_dim D = x->dims[a];
    if (D.sym) {
      if (s0 < 0 || st < 0) {
        fail(k, TS_EUNSUPPORTED, n, "a negative start or step on the symbolic dim '%s'", D.sym);
        return;
      }
    } else {
      if (s0 < 0) s0 += D.value;
      if (st > 0) s0 = s0 < 0 ? 0 : s0 > D.value ? D.value : s0;
      else s0 = s0 < 0 ? -1 : s0 > D.value - 1 ? D.value - 1 : s0;
    }
    start[a] = s0;
    step[a] = st;
  }
  tb b;
  tb_reset(&b);
  lhs(&b, o, r);
  tb_printf(&b, " = %s[", IN(0));
  for (int a = 0; a < r; a++) {
    if (a) tb_printf(&b, ", ");
    if (start[a]) tb_printf(&b, "%" PRId64 " + ", start[a]);
    if (step[a] != 1) tb_printf(&b, "i%d * %" PRId64, a, step[a]);
    else tb_printf(&b, "i%d", a);
  }
  tb_printf(&b, "]");
  stmt(k, &b);
}

static void emit_gather(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]), *ix = V(k, n->inputs[1]);
  int r = x->ndim, q = ix->ndim;
  int a = norm_axis(tg_attr_int(n, "axis", 0), r);
  if (a < 0 || a >= r) {
    fail(k, TS_EINVAL, n, "axis out of range");
    return;
  }
  if (!ir_dtype_is_int(ix->dtype)) {
    fail(k, TS_ETYPE, n, "indices of dtype %s", dtn(ix->dtype));
    return;
  }
  tb idx;
  tb_reset(&idx);
  bool cast = ix->dtype.code != IR_I64;
  tb_printf(&idx, "%s%s[", cast ? "i64(" : "", IN(1));
  for (int j = 0; j < q; j++) tb_printf(&idx, "%si%d", j ? ", " : "", a + j);
  tb_printf(&idx, "]%s", cast ? ")" : "");
  char D[48];
  dim_s(k, x->dims[a], D);
  tb b;
  tb_reset(&b);
  lhs(&b, o, r + q - 1);
  tb_printf(&b, " = %s[", IN(0));
  for (int p = 0; p < r; p++) {
    if (p) tb_printf(&b, ", ");
    if (p < a) tb_printf(&b, "i%d", p);
    else if (p == a)
      tb_printf(&b, "min(max(select(%s < 0, %s + %s, %s), 0), %s - 1)", idx.s, idx.s, D, idx.s, D);
    else tb_printf(&b, "i%d", p + q - 1);
  }
  tb_printf(&b, "]");
  stmt(k, &b);
}

static void emit_pad(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = x->ndim, c, ca;
  const int64_t *pads = tg_attr_ints(n, "pads", &c);
  const int64_t *axes = tg_attr_ints(n, "axes", &ca);
  int64_t pb[8] = {0};
  if (pads) {
    int na = axes ? ca : r;
    if (c != 2 * na) {
      fail(k, TS_EINVAL, n, "pads has %d entries for %d axes", c, na);
      return;
    }
    for (int i = 0; i < na; i++) {
      int a = norm_axis(axes ? axes[i] : i, r);
      if (a < 0 || a >= r) {
        fail(k, TS_EINVAL, n, "axis out of range");
        return;
      }
      pb[a] = pads[i];
    }
  }
  const char *mode = tg_attr_str(n, "mode", "constant");
  bool edge = !strcmp(mode, "edge"), refl = !strcmp(mode, "reflect");
  if (!edge && !refl && strcmp(mode, "constant")) {
    fail(k, TS_EUNSUPPORTED, n, "mode '%s'", mode);
    return;
  }
  char s[48], l[48];
  tb ld, cond;
  tb_reset(&ld);
  tb_reset(&cond);
  tb_printf(&ld, "%s[", IN(0));
  for (int a = 0; a < r; a++) {
    const char *D = dim_s(k, x->dims[a], s);
    if (a) tb_printf(&ld, ", ");
    bool padded = pb[a] != 0 || !tg_dim_eq(x->dims[a], y->dims[a]);
    if (!padded) {
      tb_printf(&ld, "i%d", a);
      continue;
    }
    char j[64];
    snprintf(j, sizeof j, "(i%d - %" PRId64 ")", a, pb[a]);
    if (refl)
      tb_printf(&ld, "min(max(select(%s < 0, 0 - %s, select(%s >= %s, 2 * %s - 2 - %s, %s)), 0), %s - 1)", j, j,
                j, D, D, j, j, D);
    else tb_printf(&ld, "min(max(%s, 0), %s - 1)", j, D);
    if (!edge && !refl) tb_printf(&cond, "%s%s >= 0 && %s < %s", cond.n ? " && " : "", j, j, D);
  }
  tb_printf(&ld, "]");
  tb b;
  tb_reset(&b);
  lhs(&b, o, r);
  if (cond.n) tb_printf(&b, " = select(%s, %s, %s)", cond.s, ld.s, lit(x->dtype, tg_attr_float(n, "value", 0.0), l));
  else tb_printf(&b, " = %s", ld.s);
  stmt(k, &b);
}

static void emit_shape(lg_kernel *k, const tg_node *n, const char *const *in, const char *o) {
  const tg_value *x = V(k, n->inputs[0]), *y = OUTV(0);
  int r = x->ndim;
  int64_t st = tg_attr_int(n, "start", 0), en = tg_attr_int(n, "end", r);
  if (st < 0) st += r;
  if (en < 0) en += r;
  if (st < 0) st = 0;
  if (en > r) en = r;
  if (y->dtype.code != IR_I64) {
    fail(k, TS_ETYPE, n, "output dtype %s (Shape is i64)", dtn(y->dtype));
    return;
  }
  tb e;
  tb_reset(&e);
  char s[48];
  int cnt = (int)(en - st);
  if (cnt <= 0) {
    fail(k, TS_EUNSUPPORTED, n, "an empty shape slice");
    return;
  }
  tb_printf(&e, "%s", dim_s(k, x->dims[en - 1], s));
  for (int64_t i = en - 2; i >= st; i--) {
    tb t;
    tb_reset(&t);
    tb_printf(&t, "select(i0 == %" PRId64 ", %s, %s)", i - st, dim_s(k, x->dims[i], s), e.s);
    e = t;
  }
  tb b;
  tb_reset(&b);
  tb_printf(&b, "%s[i0] = %s", o, e.s);
  stmt(k, &b);
}

ts_status lg_emit(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  tg_op op = lg_node_op(n);
  if (k->st != TS_OK) return k->st;
  for (int i = 0; i < n->nin; i++)
    if (n->inputs[i] >= 0 && !in[i]) {
      fail(k, TS_EINTERNAL, n, "input %d has no name", i);
      return k->st;
    }
  const char *o = out[0];
  if (!o && op != TG_OP_SPLIT) {
    fail(k, TS_EINTERNAL, n, "the first output has no name");
    return k->st;
  }
  int need_in = 1;
  switch (op) {
    case TG_OP_ADD: case TG_OP_SUB: case TG_OP_MUL: case TG_OP_DIV: case TG_OP_POW:
    case TG_OP_MATMUL: case TG_OP_GEMM: case TG_OP_CONV: case TG_OP_CONV_TRANSPOSE: case TG_OP_GATHER:
    case TG_OP_LAYER_NORM:
      need_in = 2;
      break;
    case TG_OP_BATCH_NORM:
      need_in = 5;
      break;
    default:
      break;
  }
  if (n->nin < need_in) {
    fail(k, TS_EINVAL, n, "%d inputs (needs at least %d)", n->nin, need_in);
    return k->st;
  }
  for (int i = 0; i < need_in; i++)
    if (n->inputs[i] < 0) {
      fail(k, TS_EINVAL, n, "required input %d is omitted", i);
      return k->st;
    }
  for (int i = 0; i < n->nin; i++)
    if (n->inputs[i] >= 0 && V(k, n->inputs[i])->ndim > 8) {
      fail(k, TS_EUNSUPPORTED, n, "rank above 8");
      return k->st;
    }
  switch (op) {
    case TG_OP_ADD: case TG_OP_SUB: case TG_OP_MUL: case TG_OP_DIV: case TG_OP_POW:
      emit_binary(k, n, op, in, o);
      break;
    case TG_OP_RELU: case TG_OP_LEAKY_RELU: case TG_OP_SIGMOID: case TG_OP_TANH: case TG_OP_ERF:
    case TG_OP_GELU: case TG_OP_CLIP: case TG_OP_SQRT: case TG_OP_CAST: case TG_OP_IDENTITY:
      emit_unary(k, n, op, in, o);
      break;
    case TG_OP_SOFTMAX: emit_softmax(k, n, in, o); break;
    case TG_OP_LAYER_NORM: emit_layernorm(k, n, in, out); break;
    case TG_OP_BATCH_NORM: emit_batchnorm(k, n, in, o); break;
    case TG_OP_GEMM: emit_gemm(k, n, in, o); break;
    case TG_OP_MATMUL: emit_matmul(k, n, in, o); break;
    case TG_OP_CONV: emit_conv(k, n, in, o); break;
    case TG_OP_CONV_TRANSPOSE: emit_conv_transpose(k, n, in, o); break;
    case TG_OP_MAX_POOL: case TG_OP_AVERAGE_POOL: emit_pool(k, n, op, in, o); break;
    case TG_OP_GLOBAL_AVERAGE_POOL: emit_global_avg(k, n, in, o); break;
    case TG_OP_REDUCE_MEAN: case TG_OP_REDUCE_SUM: emit_reduce(k, n, op, in, o); break;
    case TG_OP_TRANSPOSE: emit_transpose(k, n, in, o); break;
    case TG_OP_FLATTEN: case TG_OP_RESHAPE: case TG_OP_SQUEEZE: case TG_OP_UNSQUEEZE:
      emit_reshape(k, n, in, o);
      break;
    case TG_OP_CONCAT: emit_concat(k, n, in, o); break;
    case TG_OP_SPLIT: emit_split(k, n, in, out); break;
    case TG_OP_SLICE: emit_slice(k, n, in, o); break;
    case TG_OP_GATHER: emit_gather(k, n, in, o); break;
    case TG_OP_PAD: emit_pad(k, n, in, o); break;
    case TG_OP_SHAPE: emit_shape(k, n, in, o); break;
    default:
      fail(k, TS_EUNSUPPORTED, n, "no legalisation for this op");
      break;
  }
  return k->st;
}

/* ---- building the PrimFunc --------------------------------------------------------- */

const char *lg_fresh_name(ir_module *m, const char *base) {
  char buf[256];
  for (int i = 0;; i++) {
    snprintf(buf, sizeof buf, "%s_%d", base, i);
    bool taken = false;
    for (int f = 0; f < m->nfuncs && !taken; f++) taken = !strcmp(m->funcs[f].name, buf);
    if (!taken) return ts_arena_strdup(m->arena, buf);
  }
}

ts_status lg_build(lg_kernel *k, ir_module *m, const char *fname, int nin, const int *in_vids,
                   const char *const *in_names, int nout, const int *out_vids, const char *const *out_names,
                   ir_func **out) {
  *out = NULL;
  if (k->st != TS_OK) return k->st;
  ts_strbuf sb;
  ts_strbuf_init(&sb);
  ts_strbuf_printf(&sb, "kernel %s(", fname);
  for (int i = 0; i < nin; i++) {
    if (i) ts_strbuf_append(&sb, ", ");
    const tg_value *v = V(k, in_vids[i]);
    decl(k, &sb, in_names[i], v->dtype, v->ndim, v->dims);
  }
  ts_strbuf_append(&sb, ") -> ");
  for (int i = 0; i < nout; i++) {
    if (i) ts_strbuf_append(&sb, ", ");
    const tg_value *v = V(k, out_vids[i]);
    decl(k, &sb, out_names[i], v->dtype, v->ndim, v->dims);
  }
  ts_strbuf_append(&sb, " {\n");
  if (k->lets.data) ts_strbuf_append(&sb, k->lets.data);
  if (k->body.data) ts_strbuf_append(&sb, k->body.data);
  ts_strbuf_append(&sb, "}\n");
  if (sb.oom || k->lets.oom || k->body.oom) {
    ts_strbuf_fini(&sb);
    return k->st = ts_diag_set(k->d, TS_ENOMEM, "out of memory writing kernel %s", fname);
  }
  if (k->st != TS_OK) {
    ts_strbuf_fini(&sb);
    return k->st;
  }
  if (ts_debug("legalize"))
    fprintf(stderr, "[legalize] %s", sb.data);
  ir_func *f = NULL;
  char label[300];
  snprintf(label, sizeof label, "<kernel %s>", fname);
  ts_diag pd;
  ts_diag_clear(&pd);
  ts_status st = ir_parse_func(m->arena, sb.data, sb.len, label, &f, &pd);
  if (st != TS_OK) {
    k->st = ts_diag_set(k->d, st, "generated kernel %s does not parse (a tessel bug): %s\n--- kernel text ---\n%.600s",
                        fname, pd.msg, sb.data);
    ts_strbuf_fini(&sb);
    return k->st;
  }
  ts_strbuf_fini(&sb);
  f->name = ts_arena_strdup(m->arena, fname);
  for (int i = 0; i < f->nsyms; i++) {
    int idx;
    if (sscanf(f->syms[i]->name, "sym%d", &idx) == 1 && idx >= 0 && idx < k->nsyms)
      f->syms[i]->name = ts_arena_strdup(m->arena, k->syms[idx]);
  }
  if (!f->name || ir_module_add(m, f) != TS_OK) return k->st = ts_diag_set(k->d, TS_ENOMEM, "out of memory");
  *out = f;
  return TS_OK;
}

ts_status lg_node_func(const tg_graph *g, const tg_node *n, ir_module *m, ir_func **out, ts_diag *d) {
  lg_kernel k;
  lg_init(&k, g, d);
  const char *in[64] = {0}, *on[16] = {0};
  char inb[64][16], onb[16][16];
  int ivid[64], ovid[16], ni = 0, no = 0;
  if (n->nin > 64 || n->nout > 16) {
    lg_fini(&k);
    return ts_diag_set(d, TS_EUNSUPPORTED, "node '%s': too many inputs or outputs", n->name);
  }
  /* one param per input, in order; the same value twice (x * x) is passed twice */
  for (int i = 0; i < n->nin; i++) {
    if (n->inputs[i] < 0) continue;
    snprintf(inb[i], sizeof inb[i], "in%d", ni);
    in[i] = inb[i];
    ivid[ni++] = n->inputs[i];
  }
  const char *inn[64];
  for (int i = 0, j = 0; i < n->nin; i++)
    if (n->inputs[i] >= 0) inn[j++] = in[i];
  for (int i = 0; i < n->nout; i++) {
    if (n->outputs[i] < 0) continue;
    snprintf(onb[i], sizeof onb[i], "out%d", no);
    on[i] = onb[i];
    ovid[no++] = n->outputs[i];
  }
  const char *onn[16];
  for (int i = 0, j = 0; i < n->nout; i++)
    if (on[i]) onn[j++] = on[i];
  ts_status st = lg_emit(&k, n, in, on);
  if (st == TS_OK) {
    const char *fname = lg_fresh_name(m, lg_node_short_name(n));
    st = lg_build(&k, m, fname, ni, ivid, inn, no, ovid, onn, out);
  }
  lg_fini(&k);
  return st;
}

/* ---- the pass ---------------------------------------------------------------------- */

void lg_module_drop_unused(tg_graph *g) {
  ir_module *m = g->mod;
  int w = 0;
  for (int i = 0; i < m->nfuncs; i++) {
    ir_module_entry *e = &m->funcs[i];
    bool keep = e->kind != IR_MOD_PRIM;
    for (int j = 0; !keep && j < g->nnodes; j++) {
      const tg_node *n = g->nodes[j];
      keep = !n->dead && n->op == TG_OP_CALL && n->callee && !strcmp(n->callee, e->name);
    }
    if (keep) m->funcs[w++] = *e;
  }
  m->nfuncs = w;
}

/* Drops optional outputs nobody reads (LayerNorm's Mean/InvStdDev, MaxPool's
 * Indices, BatchNorm's running stats) so the call's outputs are what the
 * PrimFunc writes. */
static void drop_unused_outputs(tg_graph *g, tg_node *n) {
  while (n->nout > 1) {
    int vid = n->outputs[n->nout - 1];
    bool used = vid >= 0 && tg_value_consumers(g, vid, NULL, 0) > 0;
    for (int j = 0; vid >= 0 && j < g->noutputs && !used; j++) used = g->outputs[j] == vid;
    if (used) break;
    if (vid >= 0) g->values[vid]->producer = -1;
    n->nout--;
  }
}

ts_status tg_pass_legalize(tg_graph *g, ts_diag *d) {
  /* compile-time inputs become attributes first, so a shape computed at run
   * time (Shape/Gather/Concat of a symbolic dim feeding a Reshape, whose
   * output dims the graph already knows) loses its last reader and is
   * dropped before anything is written for it */
  bool normalized = false, constants = false;
  for (int i = 0; i < g->nnodes; i++) constants |= !g->nodes[i]->dead && g->nodes[i]->op == TG_OP_CONSTANT;
  if (constants) { /* a hand-built graph run from legalize on: fold them first (this compacts) */
    ts_status st = tg_pass_fold_constants(g, d);
    if (st != TS_OK) return st;
  }
  for (int i = 0; i < g->nnodes; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead || n->op == TG_OP_CALL || n->op == TG_OP_CONSTANT) continue;
    int before = n->nin;
    ts_status st = lg_normalize(g, n, d);
    if (st != TS_OK) return st;
    normalized |= n->nin != before;
  }
  if (normalized) {
    ts_status st = tg_pass_dce(g, d);
    if (st != TS_OK) return st;
  }
  for (int i = 0; i < g->nnodes; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead || n->op == TG_OP_CALL) continue;
    if (n->op == TG_OP_CONSTANT)
      return ts_diag_set(d, TS_EUNSUPPORTED, "node '%s' (Constant): could not be folded into a constant", n->name);
    ts_status st = lg_normalize(g, n, d);
    if (st != TS_OK) return st;
    drop_unused_outputs(g, n);
    for (int j = 1; j < n->nout; j++)
      if (n->outputs[j] < 0)
        return ts_diag_set(d, TS_EUNSUPPORTED, "node '%s' (%s): output %d is omitted but a later one is used",
                           n->name, tg_op_name(n->op), j);
    while (n->nin > 0 && n->inputs[n->nin - 1] < 0) n->nin--;
    for (int j = 0; j < n->nin; j++)
      if (n->inputs[j] < 0)
        return ts_diag_set(d, TS_EUNSUPPORTED,
                           "node '%s' (%s, opset %d): input %d is omitted but a later one is given",
                           n->name, tg_op_name(n->op), g->opset, j);
    ir_func *f = NULL;
    st = lg_node_func(g, n, g->mod, &f, d);
    if (st != TS_OK) return st;
    tg_attr oa = {.name = "tessel.op", .kind = TG_A_STRING, .s = tg_op_name(n->op)};
    st = tg_node_set_attr(g, n, &oa);
    if (st != TS_OK) return ts_diag_set(d, st, "out of memory");
    n->op = TG_OP_CALL;
    n->callee = f->name;
  }
  return TS_OK;
}
