/* library_conv.c — the convolution library candidate (library_conv.h):
 * recognise a task whose reduction block is a plain f32 2-d convolution in
 * NCHW with OIHW weights (or channel-blocked) and write oneDNN's convolution (through the
 * runtime's tsrt_dnnl_conv2d_f32, runtime/dnnl_conv.c) as its kernel.
 *
 * The match is structural and strict. The reduction block:
 *   Y[n, k, p, q] = Y[n, k, p, q] + S[n, ch, p*sh + r*dh + c0, q*sw + s*dw + c1] * W[k, rc, r, s]
 * with Y initialised to 0.0, Y a whole compact f32 tensor, W a compact f32
 * input [K, C/G, R, S] (rc the constant 0 when C/G is 1), ch the input
 * channel of output channel k's group: rc (G = 1), k (depthwise: C/G = 1,
 * K = C) or (k // (K/G)) * (C/G) + rc; the spatial indices affine in the
 * iteration variables. S is either the input X itself (no padding: c0 = c1
 * = 0) or a padded copy Xp written by one other block,
 *   Xp[i0, i1, i2, i3] = select(.., X[i0, i1, i2 - pt, i3 - pl] (each
 *   optionally clamped by min/max), 0.0)
 * and read by the convolution only: the kernel then drops that block and
 * gives the padding to oneDNN. Both forms are the built-in conv2d_nchw and
 * depthwise_conv2d workloads' and the model compiler's (ir/graph/op_nn.c)
 * without its polyphase stage; and the channel-blocked form (the nchwc
 * pass's and conv2d_nchwc workloads', blocks of 8 or 16 on both sides:
 * match_loads_blocked). The batch may be symbolic; every other
 * extent is a constant. What does not match (a `where` guard, the polyphase
 * or channel-blocked forms, a cast) has no candidate; a candidate is
 * verified against the interpreter like every kernel. docs/TUNING.md,
 * "Library candidates". */
#include "tuner/library_conv.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "codegen/llvm.h"
#include "ir/print.h"
#include "ir/struct.h"
#include "tuner/build.h"

#define CONV_FN "tsrt_dnnl_conv2d_f32"

typedef struct conv_match {
  const ir_func *f;
  int slot, pad_slot; /* root statements of the convolution and of the pad stage (-1: none) */
  int nrest;          /* other blocks (an epilogue): kept, default schedule */
  ir_buffer *X, *Xp, *W, *Y;
  ir_expr *N;         /* the batch (may be symbolic) */
  int64_t C, H, Wd, K, R, S, st[2], pad[4], dil[2], G;
  int nd;        /* 4: NCHW; 5: channel-blocked [n, c/b, h, w, b] (the nchwc pass's) */
  int64_t blk;   /* the channel block b (nd 5): 8 or 16 */
} conv_match;

/* ---- affine index expressions -------------------------------------------------- */
#define AFF_MAX 8
typedef struct aff {
  int n;
  const ir_var *v[AFF_MAX];
  int64_t c[AFF_MAX];
  int64_t k;
} aff;

static bool aff_add(aff *a, const ir_var *v, int64_t c) {
  for (int i = 0; i < a->n; i++)
    if (a->v[i] == v) return a->c[i] += c, true;
  if (a->n == AFF_MAX) return false;
  a->v[a->n] = v;
  a->c[a->n++] = c;
  return true;
}

/* e * scale added to a; false when e is not affine in vars with constant coefficients. */
static bool affine(const ir_expr *e, int64_t scale, aff *a) {
  int64_t v;
  if (ir_as_int(e, &v)) return a->k += v * scale, true;
  switch (e->kind) {
  case IR_VAR: return aff_add(a, e->u.var, scale);
  case IR_CAST: return e->dtype.code == IR_I64 || e->dtype.code == IR_I32 ? affine(e->u.cast.value, scale, a) : false;
  case IR_ADD: return affine(e->u.bin.a, scale, a) && affine(e->u.bin.b, scale, a);
  case IR_SUB: return affine(e->u.bin.a, scale, a) && affine(e->u.bin.b, -scale, a);
  case IR_MUL:
    if (ir_as_int(e->u.bin.b, &v)) return affine(e->u.bin.a, scale * v, a);
    if (ir_as_int(e->u.bin.a, &v)) return affine(e->u.bin.b, scale * v, a);
    return false;
  case IR_FLOORDIV: return ir_as_int(e->u.bin.b, &v) && v == 1 && affine(e->u.bin.a, scale, a);
  default: return false;
  }
}

static int64_t aff_coef(const aff *a, const ir_var *v) {
  for (int i = 0; i < a->n; i++)
    if (a->v[i] == v) return a->c[i];
  return 0;
}

/* a's nonzero terms are exactly the given (var, coef) pairs (NULL vars skipped). */
static bool aff_only(const aff *a, int n, const ir_var *const *v, const int64_t *c) {
  int seen = 0;
  for (int i = 0; i < a->n; i++) {
    if (!a->c[i]) continue;
    bool ok = false;
    for (int j = 0; j < n; j++)
      if (v[j] && v[j] == a->v[i] && c[j] == a->c[i]) ok = true;
    if (!ok) return false;
    seen++;
  }
  int want = 0;
  for (int j = 0; j < n; j++) want += v[j] && c[j] ? 1 : 0;
  return seen == want;
}

/* ---- blocks -------------------------------------------------------------------- */
typedef struct blocks_seen {
  const ir_stmt *root;
  const ir_expr *red_pred; /* the reduction block's realize predicate */
  const ir_block *red, *other[8];
  int n, nreduce, nother;
} blocks_seen;

static bool see_block(void *ctx, const ir_stmt *s) {
  blocks_seen *b = ctx;
  if (s->kind == IR_BLOCK_REALIZE && s != b->root) {
    b->n++;
    if (s->u.realize.block->init) {
      b->red = s->u.realize.block;
      b->red_pred = s->u.realize.predicate;
      b->nreduce++;
    } else if (b->nother < 8) {
      b->other[b->nother++] = s->u.realize.block;
    }
  }
  return true;
}

static bool is_var(const ir_expr *e, const ir_var *v) { return e && e->kind == IR_VAR && e->u.var == v; }

static bool is_param(const ir_func *f, const ir_buffer *b, int first, int last) {
  for (int i = first; i < last; i++)
    if (f->params[i] == b) return true;
  return false;
}

static bool is_root_alloc(const ir_func *f, const ir_buffer *b) {
  const ir_block *root = f->body->u.realize.block;
  for (int i = 0; i < root->nalloc; i++)
    if (root->allocs[i] == b) return !b->scope || !strcmp(b->scope, "global");
  return false;
}

/* The convolution's input: a parameter (X), or a root allocation a block of
 * the task writes (Xp, the pad stage or a computed input). */
static bool set_source(conv_match *m, ir_buffer *src) {
  if (is_param(m->f, src, 0, m->f->ninputs)) {
    m->X = src;
    m->Xp = NULL;
  } else if (is_root_alloc(m->f, src)) {
    m->Xp = src;
  } else {
    return false;
  }
  return true;
}

static bool compactn(const ir_buffer *b, int nd) {
  return b->dtype.code == IR_F32 && b->dtype.lanes == 1 && !b->strides && !b->elem_offset && b->ndim == nd;
}
static bool compact4(const ir_buffer *b) { return compactn(b, 4); }

static bool konst(const ir_expr *e, int64_t *v) { return e && ir_as_int(e, v); }

typedef struct loads_of {
  const ir_buffer *buf;
  int n;
} loads_of;

static bool see_load(void *ctx, const ir_expr *e) {
  loads_of *l = ctx;
  if (e->kind == IR_LOAD && e->u.load.buf == l->buf) l->n++;
  if (e->kind == IR_ACCESS_PTR && e->u.ptr.buf == l->buf) l->n++;
  return true;
}

static int count_loads(const ir_stmt *s, const ir_buffer *b) {
  loads_of l = {b, 0};
  ir_visitor v = {see_load, NULL, &l};
  ir_visit_stmt(&v, s);
  return l.n;
}

/* min(max(e, 0), hi) -> e (the model compiler's clamped pad-stage load). */
static bool is_const(const ir_expr *e, int64_t *v) {
  aff a = {0};
  if (!affine(e, 1, &a)) return false;
  for (int i = 0; i < a.n; i++)
    if (a.c[i]) return false;
  *v = a.k;
  return true;
}

static const ir_expr *unclamp(const ir_expr *e) {
  int64_t v;
  if (e->kind == IR_MIN && is_const(e->u.bin.b, &v)) e = e->u.bin.a;
  if (e->kind == IR_MAX && is_const(e->u.bin.b, &v) && v == 0) e = e->u.bin.a;
  return e;
}

/* The pad stage: blk writes Xp[i0..i3] = select(_, X[i0, i1, i2 - pt, i3 - pl], 0.0). */
static bool match_pad(conv_match *m, const ir_block *blk) {
  const ir_stmt *st = blk->body;
  int nd = m->nd;
  if (!st || st->kind != IR_STORE || st->u.store.buf != m->Xp || st->u.store.predicate || st->u.store.nidx != nd)
    return false;
  const ir_expr *v = st->u.store.value;
  if (v->kind != IR_SELECT || v->u.sel.f->kind != IR_FLOAT_IMM || v->u.sel.f->u.fval != 0) return false;
  const ir_expr *ld = v->u.sel.t;
  if (ld->kind != IR_LOAD || ld->u.load.nidx != nd) return false;
  m->X = ld->u.load.buf;
  if (!is_param(m->f, m->X, 0, m->f->ninputs) || !compactn(m->X, nd)) return false;
  for (int i = 0; i < nd; i++) {
    const ir_expr *x = st->u.store.idx[i];
    if (x->kind != IR_VAR) return false;
    aff a = {0};
    bool sp = i == 2 || i == 3;
    if (!affine(sp ? unclamp(ld->u.load.idx[i]) : ld->u.load.idx[i], 1, &a)) return false;
    const ir_var *vv = x->u.var;
    int64_t one = 1;
    if (!aff_only(&a, 1, &vv, &one) || (!sp && a.k) || (sp && a.k > 0)) return false;
    if (sp) m->pad[i - 2] = -a.k; /* top, left */
  }
  return true;
}

/* ch: the input channel for output channel vk and reduction channel rc (NULL: none). */
static bool match_chan(conv_match *m, const ir_expr *ch, const ir_var *vk, const ir_var *rc, int64_t cg) {
  aff a = {0};
  if (affine(ch, 1, &a) && !a.k) {
    const ir_var *v1[1] = {rc};
    const ir_var *v2[2] = {vk, rc};
    int64_t c1[2] = {1, 1};
    if (rc && aff_only(&a, 1, v1, c1) && m->C == cg) return m->G = 1, true;
    if (aff_only(&a, 2, v2, c1) && cg == 1 && m->K == m->C) return m->G = m->C, true; /* rc of extent 1 */
    return false;
  }
  /* (vk // kg) * cg + rc */
  if (ch->kind != IR_ADD || !rc) return false;
  const ir_expr *x = is_var(ch->u.bin.b, rc) ? ch->u.bin.a : is_var(ch->u.bin.a, rc) ? ch->u.bin.b : NULL;
  int64_t kg, c2;
  if (!x || x->kind != IR_MUL) return false;
  const ir_expr *d = konst(x->u.bin.b, &c2) ? x->u.bin.a : konst(x->u.bin.a, &c2) ? x->u.bin.b : NULL;
  if (!d || d->kind != IR_FLOORDIV || !is_var(d->u.bin.a, vk) || !konst(d->u.bin.b, &kg) || c2 != cg || kg < 1)
    return false;
  if (m->C % cg || m->K % (m->C / cg) || m->K / (m->C / cg) != kg) return false;
  m->G = m->C / cg;
  return true;
}

static const ir_var *iter_of(const ir_block *blk, const ir_var *v, ir_iter_type t, int64_t *ext) {
  for (int i = 0; i < blk->niter; i++)
    if (blk->iters[i].var == v && blk->iters[i].type == t) {
      if (ext && !konst(blk->iters[i].dom.extent, ext)) *ext = -1;
      return v;
    }
  return NULL;
}

/* The loads of the product and their index variables. */
typedef struct conv_loads {
  const ir_expr *ls, *lw; /* S[n, ch, h, w], W[k, rc, r, s] */
  const ir_var *rc, *rr, *rs;
  int64_t cg;
} conv_loads;

/* The weight load W[k, rc, r, s] and the source buffer (X, or the pad stage's Xp). */
static bool match_loads(conv_match *m, const ir_block *blk, conv_loads *c, const ir_var *const *o) {
  const ir_expr *ls = c->ls, *lw = c->lw;
  if (ls->kind != IR_LOAD || lw->kind != IR_LOAD || ls->u.load.nidx != 4 || lw->u.load.nidx != 4) return false;
  m->W = lw->u.load.buf;
  if (!is_param(m->f, m->W, 0, m->f->ninputs) || !compact4(m->W)) return false;
  if (!konst(m->W->shape[0], &m->K) || !konst(m->W->shape[1], &c->cg) || !konst(m->W->shape[2], &m->R) ||
      !konst(m->W->shape[3], &m->S))
    return false;
  ir_expr *const *wi = lw->u.load.idx;
  int64_t z, e;
  c->rc = NULL;
  if (!is_var(wi[0], o[1])) return false;
  if (wi[1]->kind == IR_VAR) {
    if (!(c->rc = iter_of(blk, wi[1]->u.var, IR_ITER_R, &e)) || e != c->cg) return false;
  } else if (!(konst(wi[1], &z) && z == 0 && c->cg == 1)) {
    return false;
  }
  if (wi[2]->kind != IR_VAR || wi[3]->kind != IR_VAR || !(c->rr = iter_of(blk, wi[2]->u.var, IR_ITER_R, &e)) ||
      e != m->R || !(c->rs = iter_of(blk, wi[3]->u.var, IR_ITER_R, &e)) || e != m->S || c->rr == c->rs ||
      c->rr == c->rc || c->rs == c->rc)
    return false;
  ir_buffer *src = ls->u.load.buf;
  if (!compact4(src) || src == m->W || src == m->Y || !is_var(ls->u.load.idx[0], o[0])) return false;
  return set_source(m, src);
}

/* The source's spatial indices p*st + r*dil (no offset: the padding, if
 * any, is the pad stage's), the channel index, and the sizes. */
static bool match_geometry(conv_match *m, const conv_loads *c, const ir_var *const *o) {
  int64_t n;
  m->N = m->Y->shape[0];
  if (!ir_struct_equal_expr(m->X->shape[0], m->N) && !(konst(m->X->shape[0], &n) && konst(m->N, &n)))
    return false;
  int64_t P[2];
  if (!konst(m->X->shape[1], &m->C) || !konst(m->X->shape[2], &m->H) || !konst(m->X->shape[3], &m->Wd) ||
      !konst(m->Y->shape[2], &P[0]) || !konst(m->Y->shape[3], &P[1]))
    return false;
  int64_t k;
  if (!konst(m->Y->shape[1], &k) || k != m->K) return false;
  if (!match_chan(m, c->ls->u.load.idx[1], o[1], c->rc, c->cg)) return false;
  const ir_var *rv[2] = {c->rr, c->rs};
  int64_t ext[2] = {m->H, m->Wd}, ker[2] = {m->R, m->S};
  for (int i = 0; i < 2; i++) {
    aff a = {0};
    if (!affine(c->ls->u.load.idx[2 + i], 1, &a) || a.k) return false;
    m->st[i] = aff_coef(&a, o[2 + i]);
    m->dil[i] = aff_coef(&a, rv[i]);
    const ir_var *vs[2] = {o[2 + i], rv[i]};
    int64_t cs[2] = {m->st[i], m->dil[i]};
    if (m->st[i] < 1 || m->dil[i] < 1 || !aff_only(&a, 2, vs, cs)) return false;
    if (!m->Xp) m->pad[i] = 0;
    /* the far side's padding (negative: the input's last rows unread) */
    m->pad[2 + i] = (P[i] - 1) * m->st[i] + (ker[i] - 1) * m->dil[i] + 1 - ext[i] - m->pad[i];
    if (m->pad[2 + i] > m->pad[i] + m->st[i] + ker[i] * m->dil[i]) return false;
  }
  return true;
}

/* The channel-blocked form (the conv2d_nchwc workloads', the nchwc pass's),
 * blocks of b = 8 or 16 on both sides (oneDNN's nChw8c / nChw16c):
 *   Y[n, ko, p, q, kv] += S[n, co, h, w, cv] * W[ko, co, r, s, cv, kv]   (W [K/b, C/b, R, S, b, b])
 *   Y[n, c, p, q, v] += S[n, c, h, w, v] * W[c, r, s, v]                  (depthwise, W [C/b, R, S, b]) */
static bool match_loads_blocked(conv_match *m, const ir_block *blk, conv_loads *c, const ir_var *const *o) {
  const ir_expr *ls = c->ls, *lw = c->lw;
  if (ls->kind != IR_LOAD || lw->kind != IR_LOAD || ls->u.load.nidx != 5) return false;
  m->W = lw->u.load.buf;
  int wd = m->W->ndim;
  if (!is_param(m->f, m->W, 0, m->f->ninputs) || !(wd == 6 || wd == 4) || !compactn(m->W, wd) ||
      lw->u.load.nidx != wd || !konst(m->Y->shape[4], &m->blk) || (m->blk != 8 && m->blk != 16))
    return false;
  ir_expr *const *wi = lw->u.load.idx, *const *si = ls->u.load.idx;
  int64_t e, b2, ko, co = 0;
  bool dw = wd == 4;
  int kr = dw ? 1 : 2;
  if (!konst(m->W->shape[kr], &m->R) || !konst(m->W->shape[kr + 1], &m->S) || !konst(m->W->shape[0], &ko) ||
      !konst(m->W->shape[wd - 1], &b2) || b2 != m->blk || !is_var(wi[0], o[1]))
    return false;
  if (!dw && (!konst(m->W->shape[1], &co) || !konst(m->W->shape[4], &b2) || b2 != m->blk)) return false;
  if (wi[kr]->kind != IR_VAR || wi[kr + 1]->kind != IR_VAR ||
      !(c->rr = iter_of(blk, wi[kr]->u.var, IR_ITER_R, &e)) || e != m->R ||
      !(c->rs = iter_of(blk, wi[kr + 1]->u.var, IR_ITER_R, &e)) || e != m->S || c->rr == c->rs)
    return false;
  m->K = ko * m->blk;
  if (dw) {
    c->rc = NULL;
    if (!is_var(wi[3], o[4]) || !is_var(si[1], o[1]) || !is_var(si[4], o[4])) return false;
    m->C = m->K;
    m->G = m->C;
  } else {
    const ir_var *cv;
    if (wi[1]->kind != IR_VAR || wi[4]->kind != IR_VAR || !is_var(wi[5], o[4]) ||
        !(c->rc = iter_of(blk, wi[1]->u.var, IR_ITER_R, &e)) || e != co ||
        !(cv = iter_of(blk, wi[4]->u.var, IR_ITER_R, &e)) || e != m->blk || !is_var(si[1], c->rc) ||
        !is_var(si[4], cv) || cv == c->rc || cv == c->rr || cv == c->rs || c->rc == c->rr || c->rc == c->rs)
      return false;
    m->C = co * m->blk;
    m->G = 1;
  }
  ir_buffer *src = ls->u.load.buf;
  if (!compactn(src, 5) || src == m->W || src == m->Y || !is_var(si[0], o[0])) return false;
  return set_source(m, src);
}

static bool match_geometry_blocked(conv_match *m, const conv_loads *c, const ir_var *const *o) {
  int64_t n, cb, xb, yk, P[2];
  m->N = m->Y->shape[0];
  if (!ir_struct_equal_expr(m->X->shape[0], m->N) && !(konst(m->X->shape[0], &n) && konst(m->N, &n)))
    return false;
  if (!konst(m->X->shape[1], &cb) || cb * m->blk != m->C || !konst(m->X->shape[4], &xb) || xb != m->blk ||
      !konst(m->X->shape[2], &m->H) || !konst(m->X->shape[3], &m->Wd) || !konst(m->Y->shape[1], &yk) ||
      yk * m->blk != m->K || !konst(m->Y->shape[2], &P[0]) || !konst(m->Y->shape[3], &P[1]))
    return false;
  const ir_var *rv[2] = {c->rr, c->rs};
  int64_t ext[2] = {m->H, m->Wd}, ker[2] = {m->R, m->S};
  for (int i = 0; i < 2; i++) {
    aff a = {0};
    if (!affine(c->ls->u.load.idx[2 + i], 1, &a) || a.k) return false;
    m->st[i] = aff_coef(&a, o[2 + i]);
    m->dil[i] = aff_coef(&a, rv[i]);
    const ir_var *vs[2] = {o[2 + i], rv[i]};
    int64_t cs[2] = {m->st[i], m->dil[i]};
    if (m->st[i] < 1 || m->dil[i] < 1 || !aff_only(&a, 2, vs, cs)) return false;
    if (!m->Xp) m->pad[i] = 0;
    m->pad[2 + i] = (P[i] - 1) * m->st[i] + (ker[i] - 1) * m->dil[i] + 1 - ext[i] - m->pad[i];
    /* a blocked input cannot be cut short (the runtime's strided view is
     * plain): fewer unread rows than the stride only (oneDNN's floor division) */
    if (m->pad[2 + i] <= -m->st[i] || m->pad[2 + i] > m->pad[i] + m->st[i] + ker[i] * m->dil[i]) return false;
  }
  return true;
}

/* A source computed in the task: written whole by one block of its own
 * (every index a bare iteration variable, no reduction), before the
 * convolution in the root's sequence (tun_library_root_slot of both). */
static bool match_computed(conv_match *m, const ir_block *wr) {
  const ir_stmt *st = wr->body;
  if (!is_root_alloc(m->f, m->X) || st->u.store.predicate || st->u.store.nidx != m->X->ndim) return false;
  for (int i = 0; i < st->u.store.nidx; i++) {
    const ir_expr *x = st->u.store.idx[i];
    int64_t e, d;
    if (x->kind != IR_VAR || !iter_of(wr, x->u.var, IR_ITER_S, &e) || !konst(m->X->shape[i], &d) || e != d)
      return false;
    for (int j = 0; j < i; j++)
      if (is_var(st->u.store.idx[j], x->u.var)) return false;
  }
  int ws = tun_library_root_slot(m->f->body->u.realize.block, wr);
  return ws >= 0 && ws < m->slot;
}

/* Matches f (the reduction block, then the pad stage when there is one). */
static bool match_conv(const ir_func *f, conv_match *m) {
  memset(m, 0, sizeof *m);
  m->f = f;
  m->pad_slot = -1;
  if (!f->body || f->body->kind != IR_BLOCK_REALIZE) return false;
  blocks_seen bs = {f->body, NULL, NULL, {NULL}, 0, 0, 0};
  ir_visitor v = {NULL, see_block, &bs};
  ir_visit_stmt(&v, f->body);
  const ir_block *blk = bs.red;
  int64_t pv;
  if (bs.nreduce != 1 || !blk->body || bs.n > 8) return false;
  if (bs.red_pred && !(ir_as_int(bs.red_pred, &pv) && pv == 1)) return false; /* a guard (`where`) */
  const ir_block *root = f->body->u.realize.block;
  if ((m->slot = tun_library_root_slot(root, blk)) < 0) return false;
  const ir_stmt *st = blk->body, *in = blk->init;
  if (st->kind != IR_STORE || in->kind != IR_STORE || st->u.store.predicate || in->u.store.predicate) return false;
  m->Y = st->u.store.buf;
  m->nd = m->Y->ndim;
  int nd = m->nd;
  if (!(is_param(f, m->Y, f->ninputs, f->nparams) || is_root_alloc(f, m->Y)) || !(nd == 4 || nd == 5) ||
      !compactn(m->Y, nd) || st->u.store.nidx != nd || in->u.store.buf != m->Y || in->u.store.nidx != nd ||
      blk->niter > 9)
    return false;
  const ir_var *o[5];
  for (int i = 0; i < nd; i++) {
    const ir_expr *x = st->u.store.idx[i];
    if (x->kind != IR_VAR || !iter_of(blk, x->u.var, IR_ITER_S, NULL) || !is_var(in->u.store.idx[i], x->u.var))
      return false;
    o[i] = x->u.var;
    for (int j = 0; j < i; j++)
      if (o[j] == o[i]) return false;
  }
  const ir_expr *z = in->u.store.value, *val = st->u.store.value;
  if (z->kind != IR_FLOAT_IMM || z->u.fval != 0 || val->kind != IR_ADD) return false;
  const ir_expr *acc = val->u.bin.a, *prod = val->u.bin.b;
  if (!(acc->kind == IR_LOAD && acc->u.load.buf == m->Y)) {
    acc = val->u.bin.b;
    prod = val->u.bin.a;
  }
  if (acc->kind != IR_LOAD || acc->u.load.buf != m->Y || acc->u.load.nidx != nd || prod->kind != IR_MUL) return false;
  for (int i = 0; i < nd; i++)
    if (!is_var(acc->u.load.idx[i], o[i])) return false;
  conv_loads c = {prod->u.bin.a, prod->u.bin.b, NULL, NULL, NULL, 0};
  bool (*loads)(conv_match *, const ir_block *, conv_loads *, const ir_var *const *) =
      nd == 4 ? match_loads : match_loads_blocked;
  if (!loads(m, blk, &c, o)) {
    c.ls = prod->u.bin.b;
    c.lw = prod->u.bin.a;
    if (!loads(m, blk, &c, o)) return false;
  }
  m->nrest = bs.n - 1;
  if (m->Xp) { /* its one writer, read by the convolution only */
    const ir_block *pad = NULL;
    for (int i = 0; i < bs.nother; i++)
      if (bs.other[i]->body && bs.other[i]->body->kind == IR_STORE && bs.other[i]->body->u.store.buf == m->Xp) {
        if (pad) return false;
        pad = bs.other[i];
      }
    if (!pad) return false;
    if (!match_pad(m, pad)) {
      /* an input computed in the task (a layout transform into the blocked
       * form): the call reads the allocation, its writer stays */
      m->X = m->Xp;
      m->Xp = NULL;
      m->pad[0] = m->pad[1] = 0;
      return match_computed(m, pad) && (nd == 4 ? match_geometry(m, &c, o) : match_geometry_blocked(m, &c, o));
    }
    if ((m->pad_slot = tun_library_root_slot(root, pad)) < 0 || count_loads(f->body, m->Xp) != 1) return false;
    m->nrest--;
    int64_t e, xc;
    if (!konst(m->Xp->shape[1], &e) || !konst(m->X->shape[1], &xc) || e != xc ||
        !(ir_struct_equal_expr(m->Xp->shape[0], m->X->shape[0])))
      return false;
  }
  return nd == 4 ? match_geometry(m, &c, o) : match_geometry_blocked(m, &c, o);
}

/* ---- parameters ------------------------------------------------------------------- */
static json_t *extent_json(const ir_expr *e) {
  int64_t v;
  if (ir_as_int(e, &v)) return json_integer(v);
  char *s = ir_expr_to_string(e);
  json_t *j = json_string(s ? s : "?");
  ts_free(s);
  return j;
}

static json_t *ints(int n, const int64_t *v) {
  json_t *a = json_array();
  for (int i = 0; a && i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

static bool fill_cand(const conv_match *m, tun_lib_cand *c) {
  json_t *o = json_object();
  if (!o) return false;
  json_object_set_new(o, "lib", json_string("dnnl"));
  json_object_set_new(o, "call", json_string(CONV_FN));
  json_object_set_new(o, "layout", json_string(m->nd == 4 ? "nchw" : m->blk == 8 ? "nchw8c" : "nchw16c"));
  json_object_set_new(o, "n", extent_json(m->N));
  int64_t sz[6] = {m->C, m->H, m->Wd, m->K, m->R, m->S};
  static const char *const keys[6] = {"c", "h", "w", "k", "r", "s"};
  for (int i = 0; i < 6; i++) json_object_set_new(o, keys[i], json_integer(sz[i]));
  json_object_set_new(o, "stride", ints(2, m->st));
  json_object_set_new(o, "pad", ints(4, m->pad));
  json_object_set_new(o, "dilation", ints(2, m->dil));
  json_object_set_new(o, "groups", json_integer(m->G));
  json_object_set_new(o, "pad_stage", json_boolean(m->Xp != NULL));
  json_object_set_new(o, "other_blocks", json_integer(m->nrest));
  char *js = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  if (!js || strlen(js) >= sizeof c->params) {
    free(js);
    return false;
  }
  c->lib = "dnnl";
  c->fn = CONV_FN;
  snprintf(c->params, sizeof c->params, "%s", js);
  free(js);
  uint64_t h = XXH3_64bits(c->params, strlen(c->params));
  c->hash = h ? h : 1;
  return true;
}

int tun_conv_candidates(const ir_func *f, tun_lib_cand *out, int max) {
  conv_match m;
  if (max < 1 || !f || !cg_llvm_have_library("dnnl") || !match_conv(f, &m)) return 0;
  return fill_cand(&m, &out[0]) ? 1 : 0;
}

bool tun_conv_is_cand(const tun_lib_cand *c) { return c && c->fn && !strcmp(c->fn, CONV_FN); }

bool tun_conv_same_structure(const char *pa, const char *pb) {
  json_error_t e;
  json_t *a = pa ? json_loads(pa, 0, &e) : NULL, *b = pb ? json_loads(pb, 0, &e) : NULL;
  bool same = a && b && json_is_object(a) && json_is_object(b) && json_object_size(a) == json_object_size(b);
  const char *key;
  json_t *x;
  if (same)
    json_object_foreach(a, key, x) {
      if (!strcmp(key, "n")) continue; /* the batch passes into the call at run time */
      json_t *y = json_object_get(b, key);
      if (!y || !json_equal(x, y)) {
        same = false;
        break;
      }
    }
  json_decref(a);
  json_decref(b);
  return same;
}

/* ---- the kernel ------------------------------------------------------------------- */
static ir_expr *i64c(ts_arena *a, int64_t v) { return ir_i64(a, v); }

static ir_expr *the_call(ts_arena *a, const conv_match *m) {
  ir_expr *n = m->N->dtype.code == IR_I64 ? m->N : ir_cast(a, ir_dt(IR_I64), m->N);
  int64_t v[16] = {m->C,      m->H,      m->Wd,     m->K,      m->R,      m->S,      m->st[0], m->st[1],
                   m->pad[0], m->pad[1], m->pad[2], m->pad[3], m->dil[0], m->dil[1], m->G,     m->nd == 4 ? 0 : m->blk == 8 ? 1 : 2};
  ir_expr *args[20];
  args[0] = n;
  for (int i = 0; i < 16; i++) args[1 + i] = i64c(a, v[i]);
  args[17] = ir_access_ptr(a, m->X, ir_i64(a, 0), IR_ACCESS_READ);
  args[18] = ir_access_ptr(a, m->W, ir_i64(a, 0), IR_ACCESS_READ);
  args[19] = ir_access_ptr(a, m->Y, ir_i64(a, 0), IR_ACCESS_WRITE);
  for (int i = 0; i < 20; i++)
    if (!args[i]) return NULL;
  return ir_call_extern(a, CONV_FN, ir_dt(IR_I32), 20, args);
}

/* The root block with the convolution's statement replaced by s and the pad
 * stage (statement and allocation) dropped. */
static ir_block *new_root(ts_arena *a, const ir_block *old, const conv_match *m, ir_stmt *s) {
  ir_block *root = ir_block_clone(a, old);
  if (!root) return NULL;
  const ir_stmt *b = old->body;
  if (b->kind != IR_SEQ) {
    root->body = s;
  } else {
    ir_stmt **ss = ts_arena_alloc(a, sizeof *ss * (size_t)b->u.seq.n);
    if (!ss) return NULL;
    int k = 0;
    for (int i = 0; i < b->u.seq.n; i++)
      if (i != m->pad_slot) ss[k++] = i == m->slot ? s : b->u.seq.stmts[i];
    if (!(root->body = k == 1 ? ss[0] : ir_seq(a, k, ss))) return NULL;
  }
  if (m->Xp) {
    ir_buffer **al = ts_arena_alloc(a, sizeof *al * (size_t)(old->nalloc + 1));
    if (!al) return NULL;
    int k = 0;
    for (int i = 0; i < old->nalloc; i++)
      if (old->allocs[i] != m->Xp) al[k++] = old->allocs[i];
    root->allocs = al;
    root->nalloc = k;
  }
  return root;
}

sch_traced *tun_conv_schedule(const ir_func *f, const cg_target *t, const tun_lib_cand *c, ts_diag *d) {
  ts_arena a;
  ts_arena_init(&a);
  sch_traced *out = NULL;
  conv_match m;
  tun_lib_cand again = {0};
  ir_func *g = ir_func_copy(&a, f);
  if (!g) {
    ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto done;
  }
  if (!match_conv(g, &m)) {
    ts_diag_set(d, TS_EINVAL, "library: %s is not a convolution a library call covers", f->name ? f->name : "?");
    goto done;
  }
  if (!fill_cand(&m, &again) || strcmp(again.params, c->params)) {
    ts_diag_set(d, TS_EINVAL, "library: the call %s does not fit %s (its parameters are %s)", c->params,
                f->name ? f->name : "?", again.params);
    goto done;
  }
  ir_expr *call = the_call(&a, &m);
  ir_stmt *ev = call ? ir_evaluate(&a, call) : NULL;
  ir_stmt *rs = ev ? ir_stmt_clone(&a, g->body) : NULL;
  ir_block *root = rs ? new_root(&a, g->body->u.realize.block, &m, ev) : NULL;
  if (!root) {
    ts_diag_set(d, TS_ENOMEM, "out of memory");
    goto done;
  }
  rs->u.realize.block = root;
  g->body = rs;
  out = sch_traced_new(g, 1, d);
  if (out && m.nrest > 0) {
    /* the epilogue (bias, activation, a residual add) under the default
     * schedule, best effort; the call's operands are never inlined away */
    const char *keep[3] = {m.X->name, m.W->name, m.Y->name};
    tun_default_opts o = {.keep = keep, .nkeep = 3};
    ts_diag sd;
    ts_diag_clear(&sd);
    if (tun_default_schedule_opts(out, t, &o, &sd) != TS_OK) {
      sch_traced_free(out);
      out = sch_traced_new(g, 1, d);
    }
  }
done:
  ts_arena_fini(&a);
  return out;
}
