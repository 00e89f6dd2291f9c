/* legalize.c — legalisation: every ONNX-level op becomes a call of a
 * PrimFunc, written as compute-DSL text (docs/SCRIPT.md) and parsed, so each
 * op reads like its ONNX definition and the parser checks shapes and types;
 * fusion reuses the same writers. This file holds the text builder
 * (legalize_int.h), the dispatch through the operator registry (ops.c: each
 * op's emitter lives in its family file op_*.c), building the PrimFunc and
 * the pass. docs/PASSES.md, docs/IR.md ("Notes by file"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../parse.h"
#include "legalize_int.h"
#include "ops.h"

void tb_printf(tb *b, const char *fmt, ...) {
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

static int sym_index(lg_kernel *k, const char *sym) {
  for (int i = 0; i < k->nsyms; i++)
    if (!strcmp(k->syms[i], sym)) return i;
  if (k->nsyms == LG_MAX_SYMS) {
    if (k->st == TS_OK)
      k->st = ts_diag_set(k->d, TS_EUNSUPPORTED, "more than %d distinct symbolic dims in one kernel", LG_MAX_SYMS);
    return 0;
  }
  char *own = ts_malloc(strlen(sym) + 1);
  if (!own) {
    if (k->st == TS_OK) k->st = ts_diag_set(k->d, TS_ENOMEM, "out of memory");
    return 0;
  }
  k->syms[k->nsyms] = strcpy(own, sym);
  return k->nsyms++;
}

/* A dim as DSL text: the number, a base symbol's DSL name ("sym0"), or a
 * product of symbols (dim.c) as the expression "(12 * sym0 * sym1)", so the
 * kernel's size vars stay the base symbols. */
static void dim_text(lg_kernel *k, tg_dim d, char *buf, size_t n) {
  tg_mono m;
  if (!d.sym) {
    snprintf(buf, n, "%" PRId64, d.value);
  } else if (!tg_mono_parse(d, &m)) {
    if (k->st == TS_OK) k->st = ts_diag_set(k->d, TS_EINVAL, "symbolic dim '%s' is not a product of symbols", d.sym);
    snprintf(buf, n, "1");
  } else if (m.n == 1 && m.coeff == 1) {
    snprintf(buf, n, "sym%d", sym_index(k, m.f[0]));
  } else {
    size_t o = m.coeff == 1 ? (size_t)snprintf(buf, n, "(") : (size_t)snprintf(buf, n, "(%" PRId64 " * ", m.coeff);
    for (int i = 0; i < m.n && o < n; i++) o += (size_t)snprintf(buf + o, n - o, "%ssym%d", i ? " * " : "", sym_index(k, m.f[i]));
    if (o < n) snprintf(buf + o, n - o, ")");
  }
}

void lg_dim_txt(lg_kernel *k, tg_dim d, tb *b) {
  char s[192];
  dim_text(k, d, s, sizeof s);
  tb_printf(b, "%s", s);
}

const char *lg_dim_s(lg_kernel *k, tg_dim d, char buf[48]) {
  if (d.sym && strchr(d.sym, '*')) { /* a product: may not fit buf */
    char *r = k->dimtxt[k->ndimtxt++ % 8];
    dim_text(k, d, r, sizeof k->dimtxt[0]);
    return r;
  }
  dim_text(k, d, buf, 48);
  return buf;
}


void lg_fail(lg_kernel *k, ts_status st, const tg_node *n, const char *fmt, ...) {
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
void lg_lhs(tb *b, const char *name, int r) {
  tb_printf(b, "%s[", name);
  for (int i = 0; i < r; i++) tb_printf(b, "%si%d", i ? ", " : "", i);
  tb_printf(b, "]");
}

/* A load of value vid (named name) broadcast against an output of rank r
 * with dims od. */
void lg_load_bcast(lg_kernel *k, tb *b, const char *name, int vid, int r, const tg_dim *od) {
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

void lg_stmt(lg_kernel *k, tb *b) {
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
  for (int i = 0; i < k->nsyms; i++) ts_free((void *)k->syms[i]);
  k->nsyms = 0;
  ts_strbuf_fini(&k->lets);
  ts_strbuf_fini(&k->body);
}

void lg_decl(lg_kernel *k, ts_strbuf *sb, const char *name, ir_dtype dt, int nd, const tg_dim *dims) {
  tb b;
  tb_reset(&b);
  tb_printf(&b, "%s: %s[", name, dtn(dt));
  for (int i = 0; i < nd; i++) {
    if (i) tb_printf(&b, ", ");
    lg_dim_txt(k, dims[i], &b);
  }
  tb_printf(&b, "]");
  ts_strbuf_append(sb, b.s);
}

void lg_let(lg_kernel *k, const char *name, int vid) {
  const tg_value *v = V(k, vid);
  ts_strbuf_append(&k->lets, "  let ");
  lg_decl(k, &k->lets, name, v->dtype, v->ndim, v->dims);
  ts_strbuf_append(&k->lets, "\n");
}

void lg_let_dims(lg_kernel *k, const char *name, ir_dtype dt, int nd, const tg_dim *dims) {
  ts_strbuf_append(&k->lets, "  let ");
  lg_decl(k, &k->lets, name, dt, nd, dims);
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


tg_pattern lg_pattern(const tg_graph *g, const tg_node *n) {
  const tg_op_def *def = tg_op_def_of(lg_node_op(n));
  if (!def) return TG_PAT_OPAQUE;
  return def->pattern_fn ? def->pattern_fn(g, n) : def->pattern;
}

const char *lg_node_short_name(const tg_node *n) {
  tg_op op = lg_node_op(n);
  if (op == TG_OP_CONV && tg_attr_int(n, "tessel.winograd", 0)) return "conv2d_winograd";
  if (op == TG_OP_CONV && tg_attr_int(n, "tessel.nchwc", 0)) return "conv2d_nchwc";
  if (op == TG_OP_MAX_POOL && tg_attr_int(n, "tessel.nchwc", 0)) return "max_pool2d_nchwc";
  return lg_short_name(op);
}

const char *lg_short_name(tg_op op) {
  const tg_op_def *def = tg_op_def_of(op);
  return def ? def->kernel : "op";
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

bool lg_const_scalar(const tg_value *v, double *out) {
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
  const tg_op_def *def = tg_op_def_of(op);
  return def && (def->flags & TG_OPF_PARAM_INPUTS) ? 1 : -1;
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
          if (lg_const_scalar(v, &f)) st = set_float(g, n, "value", f), what = NULL;
        } else {
          what = "axes";
          if (const_ints(v, ints, 64, &cnt)) st = set_ints(g, n, "axes", ints, cnt), what = NULL;
        }
        break;
      case TG_OP_CLIP:
        what = i == 1 ? "min" : "max";
        if (lg_const_scalar(v, &f)) st = set_float(g, n, what, f), what = NULL;
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

/* ---- reductions, for the emitters ------------------------------------------------ */

/* Reduction helper: writes "T[kept axes] OP= SRC[...] for r.." where the
 * axes in red[] of value x (rank r) are reduced. kept indices are i<axis>. */
void lg_red_index(tb *b, const char *name, int r, const bool *red) {
  tb_printf(b, "%s[", name);
  int j = 0, first = 1;
  for (int a = 0; a < r; a++) {
    if (red[a]) tb_printf(b, "%sr%d", first ? "" : ", ", j++);
    else tb_printf(b, "%si%d", first ? "" : ", ", a);
    first = 0;
  }
  tb_printf(b, "]");
}

void lg_kept_index(tb *b, const char *name, int r, const bool *red) {
  tb_printf(b, "%s[", name);
  int first = 1;
  for (int a = 0; a < r; a++)
    if (!red[a]) {
      tb_printf(b, "%si%d", first ? "" : ", ", a);
      first = 0;
    }
  tb_printf(b, "]");
}

void lg_red_for(lg_kernel *k, tb *b, const tg_value *x, const bool *red) {
  int j = 0;
  char s[48];
  for (int a = 0; a < x->ndim; a++)
    if (red[a]) {
      tb_printf(b, "%s r%d in 0..%s", j ? "," : " for", j, lg_dim_s(k, x->dims[a], s));
      j++;
    }
}

/* kept dims of x (axes not reduced). */
int lg_kept_dims(const tg_value *x, const bool *red, tg_dim *out) {
  int m = 0;
  for (int a = 0; a < x->ndim; a++)
    if (!red[a]) out[m++] = x->dims[a];
  return m;
}

/* Product of the reduced dims as f32-able text: "12.0" or "f32(sym0 * 4)". */
void lg_red_count(lg_kernel *k, tb *b, const tg_value *x, const bool *red, ir_dtype dt) {
  int64_t c = 1;
  tb syms;
  tb_reset(&syms);
  char s[48];
  for (int a = 0; a < x->ndim; a++)
    if (red[a]) {
      if (x->dims[a].sym) tb_printf(&syms, "%s%s", syms.n ? " * " : "", lg_dim_s(k, x->dims[a], s));
      else c *= x->dims[a].value;
    }
  if (!syms.n) tb_printf(b, "%s", lit(dt, (double)c, s));
  else tb_printf(b, "%s(%s * %" PRId64 ")", dtn(dt), syms.s, c);
}

void lg_tmpname(char *buf, size_t n, const char *o, const char *tag) { snprintf(buf, n, "%s_%s", o, tag); }

/* "DST[kept] OP SRC[...] for r.." : src (shaped like x) reduced over the
 * axes in red[] into dst (the kept axes of x). */
void lg_reduce_stmt(lg_kernel *k, const char *dst, const char *op, const char *src, const tg_value *x,
                        const bool *red) {
  tb b;
  tb_reset(&b);
  lg_kept_index(&b, dst, x->ndim, red);
  tb_printf(&b, " %s ", op);
  lg_red_index(&b, src, x->ndim, red);
  lg_red_for(k, &b, x, red);
  lg_stmt(k, &b);
}

/* ---- dispatch through the registry --------------------------------------------- */

ts_status lg_emit(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  tg_op op = lg_node_op(n);
  if (k->st != TS_OK) return k->st;
  for (int i = 0; i < n->nin; i++)
    if (n->inputs[i] >= 0 && !in[i]) {
      lg_fail(k, TS_EINTERNAL, n, "input %d has no name", i);
      return k->st;
    }
  const tg_op_def *def = tg_op_def_of(op);
  if (!def || !def->emit) {
    lg_fail(k, TS_EUNSUPPORTED, n, "no legalisation for this op");
    return k->st;
  }
  if (!out[0] && !(def->flags & TG_OPF_ANY_OUTPUT)) {
    lg_fail(k, TS_EINTERNAL, n, "the first output has no name");
    return k->st;
  }
  int need_in = def->lg_min_in;
  if (n->nin < need_in) {
    lg_fail(k, TS_EINVAL, n, "%d inputs (needs at least %d)", n->nin, need_in);
    return k->st;
  }
  for (int i = 0; i < need_in; i++)
    if (n->inputs[i] < 0) {
      lg_fail(k, TS_EINVAL, n, "required input %d is omitted", i);
      return k->st;
    }
  for (int i = 0; i < n->nin; i++)
    if (n->inputs[i] >= 0 && V(k, n->inputs[i])->ndim > 8) {
      lg_fail(k, TS_EUNSUPPORTED, n, "rank above 8");
      return k->st;
    }
  def->emit(k, n, in, out);
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
    lg_decl(k, &sb, in_names[i], v->dtype, v->ndim, v->dims);
  }
  ts_strbuf_append(&sb, ") -> ");
  for (int i = 0; i < nout; i++) {
    if (i) ts_strbuf_append(&sb, ", ");
    const tg_value *v = V(k, out_vids[i]);
    lg_decl(k, &sb, out_names[i], v->dtype, v->ndim, v->dims);
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

