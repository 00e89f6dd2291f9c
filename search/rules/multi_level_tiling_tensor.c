/* multi_level_tiling_tensor.c — MultiLevelTiling with a tensor intrinsic
 * (MetaSchedule's MultiLevelTilingWithIntrin / TensorCore rule, CPU side).
 *
 * For a block that a registered intrinsic (ir/schedule/intrin.h) available
 * on the target describes (sch_tensorize_match_block: same iter structure,
 * same body up to renaming), with one loop per iter var:
 *  - every loop is split [ceil, t] with t the intrinsic's extent for that
 *    iter var (a fixed integer, not a sampled decision, so the tile-size
 *    mutator can never change the intrinsic's shape); an extent that t does
 *    not divide is refused for that intrinsic, except that when no matching
 *    intrinsic divides the block's extents, the VNNI ones get the block
 *    padded first (PadEinsum, ir/schedule/pad.c; the packed weight padded
 *    by its layout map);
 *  - the outer parts are tiled SSRSRS (spatial 4 ways, reduction 2 ways, by
 *    SamplePerfectTile) and reordered S0 S1 R0 S2 R1 S3, with the
 *    intrinsic's loops innermost in its own order; S3 is unrolled and bounded
 *    (at most 16 accumulator vectors) so that the accumulators of several
 *    calls stay in registers across the reduction loop R1 and calls sharing
 *    an operand tile share its loads and shuffles;
 *  - the intrinsic's loops are blockized and the outer block annotated
 *    "meta_schedule.auto_tensorize" = the intrinsic's name (and the tiling
 *    structure, so MultiLevelTiling leaves it alone); the RewriteTensorize
 *    postprocessor (postproc.c) then tensorizes it.
 * The untensorized state is kept as well (MultiLevelTiling tiles it next),
 * so the search weighs tensorized candidates against plain ones. At most the
 * two largest matching intrinsics fork sketches. Off without its rule bit
 * (tessel tune --no-tensorize, for A/B measurements, bench/int8.sh).
 * A channels-last int8 conv matches too (tensorize pairs the intrinsic's
 * iter vars with the block's last ones: the output row, channel and input
 * channel; the batch, output row and window taps stay outside, the taps
 * tiled as reductions). srch_tensor_default is the same preparation with
 * fixed tiles for the default schedule (docs/TENSORIZE.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "ir/schedule/layout.h"
#include "ir/schedule/tensorize.h"
#include "search/search_int.h"

#define MAXL 16

/* The target as the registry wants it: arch, cpu, features. An empty triple
 * is the host: its machine name and, when the target names neither attrs
 * nor a CPU, /proc/cpuinfo flags (mapped to LLVM's feature names). */
static void target_of(const cg_target *t, char *arch, size_t na, const char **cpu, char *feats, size_t nf) {
  feats[0] = 0;
  *cpu = t && t->cpu[0] && strcmp(t->cpu, "native") ? t->cpu : "";
  if (t && t->triple[0]) {
    snprintf(arch, na, "%s", t->triple);
  } else {
    struct utsname u;
    snprintf(arch, na, "%s", uname(&u) == 0 ? u.machine : "");
  }
  if (t && t->attrs[0]) {
    snprintf(feats, nf, "%s", t->attrs);
    return;
  }
  /* a named CPU or another machine: its features come from the CPU table */
  if ((*cpu)[0] || (t && t->triple[0] && !cg_target_is_host(t))) return;
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  static const struct {
    const char *flag, *feat;
  } map[] = {{"avx512f", "+avx512f"}, {"avx512_vnni", "+avx512vnni"}, {"avx512bw", "+avx512bw"},
             {"asimd", "+neon"},      {"asimddp", "+dotprod"},         {"fma", "+fma"},
             {"avx2", "+avx2"}};
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) && strncmp(line, "Features", 8)) continue;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
      char pat[40];
      snprintf(pat, sizeof pat, " %s", map[i].flag);
      const char *p = strstr(line, pat);
      if (p && (p[strlen(pat)] == ' ' || p[strlen(pat)] == '\n')) {
        size_t l = strlen(feats);
        snprintf(feats + l, nf - l, "%s%s", l ? "," : "", map[i].feat);
      }
    }
    break;
  }
  fclose(f);
}

/* The x86 int8 kernel families on a packed weight, best first: VNNI
 * (vpdpbusd, 16 lanes x 4 deep; i8 x i8 shifted to u8 first, the
 * compensation's column sums tensorized) and, without VNNI, AVX2 (vpmaddwd,
 * 8 lanes x 2 deep, both signs as they are, the weight stored as i16 by the
 * packing: the .packed16 kernels). packed: the family's packed kernel (its
 * availability is the family's); prefix: the names padding may use; wide16:
 * the packing widens the weight to i16. docs/TENSORIZE.md. */
typedef struct i8_family {
  const char *packed, *prefix;
  int lanes, depth;
  bool shift, wide16;
} i8_family;

static const i8_family i8_families[] = {
    {"x86.avx512.vnni.u8i8.packed.1x16x4", "x86.avx512.vnni.", 16, 4, true, false},
    {"x86.avx2.pmaddwd.u8i8.packed16.1x8x2", "x86.avx2.pmaddwd.", 8, 2, false, true},
};

/* The best int8 family the target has, or NULL. */
static const i8_family *i8_family_of(const char *arch, const char *cpu, const char *feats) {
  for (size_t i = 0; i < sizeof i8_families / sizeof i8_families[0]; i++)
    if (sch_intrin_available(sch_intrin_get(i8_families[i].packed), arch, cpu, feats, NULL)) return &i8_families[i];
  return NULL;
}

/* One loop per iter var, in iter order (loop l binds iter l). sym (the
 * default schedule of a symbolic kernel): a spatial loop whose extent is not
 * a constant is accepted with ext 1 and its bit set in *symmask; otherwise
 * (sym NULL) every extent must be a constant. */
static bool trivial_nest(const ir_stmt *r, const sch_loop *cl, int nl, int64_t *ext, const ir_func *f,
                         uint32_t *sym) {
  const ir_block *b = r->u.realize.block;
  if (nl != b->niter || nl == 0 || nl > MAXL) return false;
  if (sym) *sym = 0;
  for (int l = 0; l < nl; l++) {
    const ir_expr *e = r->u.realize.iter_values[l];
    const ir_stmt *ls = srch_find_loop(f, cl[l].var);
    int64_t mn;
    if (e->kind != IR_VAR || e->u.var != cl[l].var || !ls || !ir_as_int(ls->u.loop.min, &mn) || mn != 0 ||
        ls->u.loop.kind != IR_FOR_SERIAL)
      return false;
    if (ir_as_int(ls->u.loop.extent, &ext[l])) continue;
    if (!sym || b->iters[l].type != IR_ITER_S) return false;
    ext[l] = 1;
    *sym |= 1u << l;
  }
  return true;
}

/* Tiles, blockizes and annotates block `block` of t for intrinsic in with
 * per-iter extents ie; false when a step is refused. */
static bool apply(const srch_rule_ctx *c, sch_traced *t, const char *block, const ir_block *blk,
                  const sch_intrin *in, const int64_t *ie) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  int loops[MAXL];
  if (sch_t_get_block(t, block, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q) || nl != blk->niter) return false;
  memcpy(loops, lp, sizeof(int) * (size_t)nl);
  /* S3 (innermost spatial tiles, around the intrinsic inside the reduction
   * loop) is unrolled: it multiplies the accumulators kept in registers, so
   * its factors are bounded to at most 16 accumulator vectors: 8/m rows
   * (first spatial iter) times 2 (the others) */
  srch_tile_levels lvl = {0};
  int intrin_loops[MAXL], ni = 0;
  bool first_s = true;
  for (int l = 0; l < nl; l++) {
    bool sp = blk->iters[l].type == IR_ITER_S;
    int o[4];
    if (ie[l] == 0) { /* outside the intrinsic (a batch, a conv's output row or window taps): tiled as its type */
      if (srch_sample_split(t, loops[l], sp ? 4 : 2, 1, o, &q)) return false;
      srch_tile_levels_add(&lvl, sp, o);
      continue;
    }
    sch_arg f2[2] = {sch_arg_none(), sch_arg_int(ie[l])};
    int o2[2];
    if (sch_t_split(t, loops[l], 2, f2, o2, &q)) return false;
    intrin_loops[ni++] = o2[1];
    int n = sp ? 4 : 2;
    int64_t maxin = c->max_innermost;
    if (sp) {
      maxin = first_s ? (in->m >= 8 ? 1 : 8 / in->m) : 2;
      first_s = false;
    }
    if (srch_sample_split(t, o2[0], n, maxin, o, &q)) return false;
    srch_tile_levels_add(&lvl, sp, o);
  }
  int order[7 * MAXL];
  int no = srch_tile_levels_order(&lvl, order, 0);
  for (int l = 0; l < ni; l++) order[no++] = intrin_loops[l];
  if (sch_t_reorder(t, no, order, &q)) return false;
  for (int k = 0; k < lvl.n[5]; k++)
    if (sch_t_unroll(t, lvl.at[5][k], &q)) return false;
  int ob;
  if (sch_t_blockize(t, intrin_loops[0], &ob, &q)) return false;
  sch_t_annotate(t, ob, SRCH_ANN_TILING, sch_arg_str("SSRSRS+intrin"), &q);
  return sch_t_annotate(t, ob, SRCH_ANN_AUTO_TENSORIZE, sch_arg_str(in->name), &q) == TS_OK;
}

/* The intrinsics available on the target that match block of t with
 * extents ext (the largest, m * n * k, first; at most max), their extents
 * per iter var in cext. pad false: only those whose extents divide; true:
 * only the int8 family's (prefix) whose extents do not (the block is padded
 * for them). */
static int matching(sch_traced *t, const char *block, int nl, const int64_t *ext, const char *arch, const char *cpu,
                    const char *feats, bool pad, const char *prefix, const sch_intrin **cand, int64_t (*cext)[MAXL],
                    int max) {
  ts_diag q;
  int nc = 0;
  for (int i = 0; i < sch_intrin_count() && nc < max; i++) {
    const sch_intrin *in = sch_intrin_at(i);
    if (!sch_intrin_available(in, arch, cpu, feats, NULL)) continue;
    if (pad && (!prefix || strncmp(in->name, prefix, strlen(prefix)))) continue; /* padding: the int8 family only */
    ts_diag_clear(&q);
    if (sch_tensorize_match_block(sch_traced_state(t), (sch_block){.name = block}, in, cext[nc], &q)) continue;
    bool divides = true;
    for (int l = 0; l < nl; l++) divides = divides && (cext[nc][l] == 0 || ext[l] % cext[nc][l] == 0);
    if (divides == pad) continue;
    cand[nc++] = in;
    for (int j = nc - 1; j > 0 && (int64_t)cand[j]->m * cand[j]->n * cand[j]->k >
                                      (int64_t)cand[j - 1]->m * cand[j - 1]->n * cand[j - 1]->k;
         j--) {
      const sch_intrin *x = cand[j];
      cand[j] = cand[j - 1];
      cand[j - 1] = x;
      int64_t tmp[MAXL];
      memcpy(tmp, cext[j], sizeof tmp);
      memcpy(cext[j], cext[j - 1], sizeof tmp);
      memcpy(cext[j - 1], tmp, sizeof tmp);
    }
  }
  return nc;
}

typedef struct vnni_find {
  const ir_buffer *buf;
  const ir_block *blk;
  int kdim, ndim, nloads;
  bool bad;
} vnni_find;

static int iter_of(const ir_block *b, const ir_expr *e) {
  if (e->kind != IR_VAR) return -1;
  for (int i = 0; i < b->niter; i++)
    if (b->iters[i].var == e->u.var) return i;
  return -1;
}

/* every load of the weight: indices plain iter vars, one the block's last
 * reduction iter (the intrinsic's k: a conv's input channel, its window taps
 * leading), one the block's last spatial iter (the intrinsic's lanes: n) */
static bool vnni_visit(void *ctx, const ir_expr *e) {
  vnni_find *v = ctx;
  if (e->kind != IR_LOAD || e->u.load.buf != v->buf) return true;
  int last_s = -1, last_r = -1, kd = -1, nd = -1;
  for (int i = 0; i < v->blk->niter; i++) {
    if (v->blk->iters[i].type == IR_ITER_S) last_s = i;
    else last_r = i;
  }
  for (int d = 0; d < e->u.load.nidx; d++) {
    int it = iter_of(v->blk, e->u.load.idx[d]);
    if (it < 0) v->bad = true;
    else if (it == last_r) kd = kd < 0 ? d : -2;
    else if (it == last_s) nd = d;
  }
  if (kd < 0 || nd < 0 || (v->nloads && (kd != v->kdim || nd != v->ndim))) v->bad = true;
  v->kdim = kd;
  v->ndim = nd;
  v->nloads++;
  return true;
}

/* Re-lays t's int8 weight (an input the function marks layout-free,
 * docs/LAYOUT.md, read by block as W[.., k, .., n, ..]) into the VNNI
 * layout by a traced TransformLayout (sch_layout_vnni: [.., n/16, k/4,
 * 64]; AVX2's [.., n/8, k/2, 16], stored as i16 when the family widens and
 * wide is set): the packed intrinsics then load their operand directly. A
 * model build packs the constant once (docs/LAYOUT.md, "Build"). False
 * (t unchanged) when there is no such weight or the layout is refused. */
static bool vnni_pack(sch_traced *t, const char *block, const i8_family *fm, bool wide) {
  const ir_func *f = sch_traced_func(t);
  int nl;
  sch_loop *cl;
  const ir_stmt *r = srch_block_loops(t, block, &cl, &nl);
  if (!r) return false;
  const ir_block *blk = r->u.realize.block;
  const ir_annot *lf = ir_annot_find(f->nannot, f->annots, IR_FUNC_ANN_LAYOUT_FREE);
  const ir_annot *done = ir_annot_find(f->nannot, f->annots, SCH_ANN_LAYOUT_REWRITTEN);
  if (!lf || lf->kind != IR_ANN_INT) return false;
  for (int p = 0; p < f->ninputs && p < 63; p++) {
    const ir_buffer *b = f->params[p];
    if (!(lf->v.i >> p & 1) || (done && done->kind == IR_ANN_INT && (done->v.i >> p & 1)) ||
        (b->dtype.code != IR_I8 && b->dtype.code != IR_U8))
      continue;
    vnni_find v = {.buf = b, .blk = blk};
    ir_visit_stmt(&(ir_visitor){.expr = vnni_visit, .ctx = &v}, blk->body);
    if (v.bad || !v.nloads) continue;
    sch_layout_map m;
    ts_diag q;
    ts_diag_clear(&q);
    if (sch_layout_vnni(f, p, v.kdim, v.ndim, fm->lanes, fm->depth, &m, &q) != TS_OK) continue;
    if (fm->wide16 && wide) m.dtype = ir_dt(IR_I16);
    if (sch_t_transform_layout(t, &m, &q) == TS_OK) return true;
  }
  return false;
}

/* The compensation block of ShiftToUnsigned (B_sum[j] += i32(B[k, j]), k
 * outer) on the packed weight: 16 columns x 4 k per vpdpbusd with an
 * all-ones operand (x86.avx512.vnni.colsum.packed.16x4), tensorized here
 * (no other rule visits the block). Left scalar when a step is refused. */
static void colsum_vnni(sch_traced *t, int sum) {
  ts_diag q;
  ts_diag_clear(&q);
  const int *lp;
  int nl, l[2], k[2], j[2];
  if (sch_t_get_loops(t, sum, &lp, &nl, &q) || nl != 2) return;
  memcpy(l, lp, sizeof l);
  /* k and n the colsum tile divides (a padded weight's sums stay scalar:
   * they must not add its padding) */
  const ir_stmt *lk = srch_find_loop(sch_traced_func(t), sch_t_loop(t, l[0]).var),
                *lj = srch_find_loop(sch_traced_func(t), sch_t_loop(t, l[1]).var);
  int64_t ek, ej;
  if (!lk || !lj || !ir_as_int(lk->u.loop.extent, &ek) || !ir_as_int(lj->u.loop.extent, &ej) || ek % 4 || ej % 16)
    return;
  sch_arg fk[2] = {sch_arg_none(), sch_arg_int(4)}, fj[2] = {sch_arg_none(), sch_arg_int(16)};
  if (sch_t_split(t, l[0], 2, fk, k, &q) || sch_t_split(t, l[1], 2, fj, j, &q)) return;
  int order[4] = {j[0], k[0], j[1], k[1]};
  if (sch_t_reorder(t, 4, order, &q)) return;
  sch_t_tensorize(t, j[1], "x86.avx512.vnni.colsum.packed.16x4", &q);
}

/* PadEinsum of block up to the intrinsic's extents ie (0: an iter var
 * outside the intrinsic, not padded). */
static bool pad_for(sch_traced *t, const char *block, int nl, const int64_t *ie) {
  ts_diag q;
  ts_diag_clear(&q);
  int64_t mult[MAXL];
  for (int l = 0; l < nl; l++) mult[l] = ie[l] ? ie[l] : 1;
  int b, ob;
  return sch_t_get_block(t, block, &b, &q) == TS_OK && sch_t_pad_einsum(t, b, nl, mult, &ob, &q) == TS_OK;
}

/* The block that writes buf at root level (a pad stage), or NULL. */
static const ir_block *writer_of(const ir_func *f, const ir_buffer *buf) {
  const ir_stmt *body = f->body && f->body->kind == IR_BLOCK_REALIZE ? f->body->u.realize.block->body : f->body;
  int n = body && body->kind == IR_SEQ ? body->u.seq.n : 1;
  for (int i = 0; i < n; i++) {
    const ir_stmt *x = body->kind == IR_SEQ ? body->u.seq.stmts[i] : body;
    while (x && x->kind == IR_FOR) x = x->u.loop.body;
    if (!x || x->kind != IR_BLOCK_REALIZE) continue;
    const ir_block *b = x->u.realize.block;
    for (int w = 0; w < b->nwrites; w++)
      if (b->writes[w].buf == buf) return b;
  }
  return NULL;
}

/* The operand the i16 weight multiplies (A, the block's one 8-bit read)
 * widened once to i16 (SetDType; docs/TENSORIZE.md "Activations widened
 * once"), so the kernel broadcasts its pair with no widening: the buffer of
 * the root block that writes it (a pad stage: the same pass, wider), else a
 * copy (CacheRead), the latter only where each element of A feeds at least
 * 128 multiply-adds (the copy is one pass over A). False (t unchanged
 * where nothing was applied) when it does not fit. */
static bool widen_a(sch_traced *t, const char *block) {
  const ir_stmt *r = srch_find_realize(sch_traced_func(t), block);
  if (!r) return false;
  const ir_block *blk = r->u.realize.block;
  int ai = -1;
  for (int i = 0; i < blk->nreads; i++) {
    ir_dtype_code c = blk->reads[i].buf->dtype.code;
    if (c != IR_U8 && c != IR_I8) continue;
    if (ai >= 0) return false;
    ai = i;
  }
  if (ai < 0) return false;
  const ir_buffer *a = blk->reads[ai].buf;
  const ir_func *f = sch_traced_func(t);
  ts_diag q;
  ts_diag_clear(&q);
  const ir_block *w = writer_of(f, a);
  if (w) {
    int wb, wi = -1;
    for (int i = 0; i < w->nwrites; i++)
      if (w->writes[i].buf == a) wi = i;
    return w->nwrites == 1 && !w->init && sch_t_get_block(t, w->name, &wb, &q) == TS_OK &&
           sch_t_set_dtype(t, wb, wi, ir_dt(IR_I16), &q) == TS_OK;
  }
  /* a param: copied, where the reuse pays for the pass */
  int64_t iters = 1, elems = 1, e;
  for (int i = 0; i < blk->niter; i++) {
    if (!ir_as_int(blk->iters[i].dom.extent, &e)) return false;
    iters *= e;
  }
  for (int k = 0; k < a->ndim; k++) {
    if (!ir_as_int(a->shape[k], &e)) return false;
    elems *= e;
  }
  if (iters < 128 * elems) return false;
  int b, cb;
  return sch_t_get_block(t, block, &b, &q) == TS_OK && sch_t_cache_read(t, b, ai, "global", 0, NULL, &cb, &q) == TS_OK &&
         sch_t_set_dtype(t, cb, 0, ir_dt(IR_I16), &q) == TS_OK;
}

/* ---- the default schedule's int8 kernel (tuner/build.c) ---- */

typedef struct int8_find {
  int n8;
} int8_find;

static bool int8_visit(void *ctx, const ir_expr *e) {
  if (e->kind == IR_LOAD && (e->u.load.buf->dtype.code == IR_U8 || e->u.load.buf->dtype.code == IR_I8))
    ((int8_find *)ctx)->n8++;
  return true;
}

/* The register tile of the default int8 kernel: fr calls of the intrinsic
 * stacked on its row iter (the first spatial one it covers), fh more rows
 * from the spatial iter before it that it does not cover (a conv's output
 * rows h, where w alone is short: 7 or 14), and fc column vectors on its
 * column iter (the last), each dividing what the intrinsic leaves of its
 * extent. */
typedef struct i8_tile {
  int64_t fr, fc, fh;
} i8_tile;

/* The largest divisor of n that is at most cap (at least 1). */
static int64_t divisor_upto(int64_t n, int64_t cap) {
  for (int64_t c = cap; c > 1; c--)
    if (n % c == 0) return c;
  return 1;
}

/* What is left of the row and column iters' extents ext once the
 * intrinsic's extents ie take their part (0 when in covers no such iter),
 * and *rh the extent of the spatial iter the intrinsic does not cover just
 * before the row iter (1: none). */
static void tile_rest(const ir_block *blk, const int64_t *ie, const int64_t *ext, int nl, int64_t *rr, int64_t *rc,
                      int64_t *rh) {
  *rr = *rc = 0;
  *rh = 1;
  bool first = true;
  for (int l = 0; l < nl; l++) {
    if (blk->iters[l].type != IR_ITER_S) continue;
    if (ie[l] == 0) {
      if (first) *rh = ext[l];
      continue;
    }
    if (first) *rr = ext[l] / ie[l];
    else *rc = ext[l] / ie[l];
    first = false;
  }
}

/* AVX-512 (32 zmm): up to 8 rows x 2 column vectors of accumulators. */
static i8_tile tile_wide(const sch_intrin *in, int64_t rr, int64_t rc) {
  return (i8_tile){divisor_upto(rr, in->m >= 8 ? 1 : 8 / in->m), divisor_upto(rc, 2), 1};
}

/* AVX2 (16 ymm): per k pair an R x C tile issues R·C vpmaddwd and vpaddd,
 * R widenings of A's pair (vpmovzxbw) and, on a byte weight, C of the
 * weight's (vpmovsxbw). Byte weight: the shape with the fewest widenings per
 * multiply (1/R + 1/C) that holds R·C accumulators, C weight vectors and A's
 * pair in 16 registers (R·C + C < 16) wins. Weight stored as i16
 * (.packed16): no weight widening, the weight vectors may be vpmaddwd's
 * memory operand (R·C accumulators, A's pair and one product: R·C + 2 <= 16),
 * and the cost is 1/C (A's widenings per multiply) + 1/(2R) (the weight
 * panel re-read per row: a one-row tile streams 32 bytes of weight per
 * vpmaddwd, what the caches cannot feed on big layers). A widened once to
 * i16 as well (.i16i16.packed16): no widening at all, so the cost counts
 * loads per multiply, 1/C of A's pairs and 1/R of the weight's vectors
 * (1/R + 1/C), with R·C accumulators, C weight vectors and A's pair in 16
 * registers. The larger tile wins a tie; rows from the iter before (fh)
 * only where the row iter's own do not reach it. *cost: that of the pick. */
static i8_tile tile_avx2(const sch_intrin *in, int64_t rr, int64_t rc, int64_t rh, double *cost) {
  bool w16 = strstr(in->name, ".packed16.") != NULL, a16 = strstr(in->name, ".i16i16.") != NULL;
  i8_tile best = {1, 1, 1};
  double bc = 1e9;
  for (int64_t fh = 1; fh <= 12 && fh <= rh; fh++) {
    if (rh % fh) continue;
    for (int64_t fc = 1; fc <= (w16 ? 14 : 4); fc++) {
      if (rc % fc) continue;
      for (int64_t fr = 1; fr * in->m * fh <= 12; fr++) {
        int64_t r = fr * in->m * fh, br = best.fr * in->m * best.fh;
        if (rr % fr || (a16 ? r * fc + fc + 1 > 16 : w16 ? r * fc + 2 > 16 : r * fc + fc >= 16)) continue;
        double c = w16 && !a16 ? 1.0 / (double)fc + 0.5 / (double)r : 1.0 / (double)r + 1.0 / (double)fc;
        /* a tie: the larger tile, then (A widened) more rows: the weight's
         * vectors reused from registers, A's pairs reloaded (L1) */
        bool more = r * fc > br * best.fc || (a16 && r * fc == br * best.fc && r > br);
        if (c < bc - 1e-9 || (c < bc + 1e-9 && more)) {
          bc = c;
          best = (i8_tile){fr, fc, fh};
        }
      }
    }
  }
  *cost = bc;
  return best;
}

/* The sketch's steps with fixed tiles: the intrinsic's loops innermost, the
 * unrolled tile of intrinsic calls (tl: rows x column vectors of
 * accumulators) around them inside every reduction loop (the block's
 * other reductions, then k's outer part), every other spatial loop outside
 * (fused and parallel). */
static bool apply_fixed(sch_traced *t, const char *block, const ir_block *blk, const sch_intrin *in, const int64_t *ie,
                        i8_tile tl, uint32_t sym) {
  ts_diag q;
  ts_diag_clear(&q);
  int b, nl;
  const int *lp;
  int loops[MAXL];
  if (sch_t_get_block(t, block, &b, &q) || sch_t_get_loops(t, b, &lp, &nl, &q) || nl != blk->niter) return false;
  memcpy(loops, lp, sizeof(int) * (size_t)nl);
  int outer[MAXL], red[MAXL], tile[MAXL], intr[MAXL], no = 0, nr = 0, nt = 0, ni = 0;
  bool first_s = true;
  int hl = -1; /* the spatial iter before the row iter that the intrinsic does not cover */
  for (int l = 0; l < nl && first_s; l++) {
    if (blk->iters[l].type != IR_ITER_S) continue;
    if (ie[l] != 0) break;
    hl = l;
  }
  for (int l = 0; l < nl; l++) {
    bool sp = blk->iters[l].type == IR_ITER_S;
    if (ie[l] == 0 && l == hl && tl.fh > 1) {
      /* fh rows of the tile from this iter */
      sch_arg fh[2] = {sch_arg_none(), sch_arg_int(tl.fh)};
      int oh[2];
      if (sch_t_split(t, loops[l], 2, fh, oh, &q)) return false;
      outer[no++] = oh[0];
      tile[nt++] = oh[1];
      continue;
    }
    if (ie[l] == 0) {
      if (sp) outer[no++] = loops[l];
      else red[nr++] = loops[l];
      continue;
    }
    sch_arg f2[2] = {sch_arg_none(), sch_arg_int(ie[l])};
    int o2[2];
    if (sch_t_split(t, loops[l], 2, f2, o2, &q)) return false;
    intr[ni++] = o2[1];
    if (!sp) {
      red[nr++] = o2[0];
      continue;
    }
    int64_t f = first_s ? tl.fr : tl.fc;
    first_s = false;
    if (f == 1) {
      outer[no++] = o2[0];
      continue;
    }
    sch_arg f3[2] = {sch_arg_none(), sch_arg_int(f)};
    int o3[2];
    if (sch_t_split(t, o2[0], 2, f3, o3, &q)) return false;
    outer[no++] = o3[0];
    tile[nt++] = o3[1];
  }
  /* the symbolic (row) loops inside the others: each column tile's packed
   * weight stays in cache while every row of the call passes over it */
  int order[4 * MAXL], n = 0, ns = 0, symo[MAXL];
  for (int i = 0; i < no; i++) {
    const ir_stmt *ls = srch_find_loop(sch_traced_func(t), sch_t_loop(t, outer[i]).var);
    int64_t e;
    if (sym && ls && !ir_as_int(ls->u.loop.extent, &e)) symo[ns++] = outer[i];
    else order[n++] = outer[i];
  }
  memcpy(order + n, symo, sizeof(int) * (size_t)ns);
  memcpy(outer, order, sizeof(int) * (size_t)no);
  n += ns;
  for (int i = 0; i < nr; i++) order[n++] = red[i];
  for (int i = 0; i < nt; i++) order[n++] = tile[i];
  for (int i = 0; i < ni; i++) order[n++] = intr[i];
  if (sch_t_reorder(t, n, order, &q)) return false;
  for (int i = 0; i < nt; i++) sch_t_unroll(t, tile[i], &q);
  int ob;
  if (sch_t_blockize(t, intr[0], &ob, &q) || sch_t_tensorize(t, ob, in->name, &q)) return false;
  /* the outer loops fused and parallel before the reduction is decomposed
   * (as MetaSchedule's postprocessors: parallel wants the block the only
   * writer of its output under the loop, which the init block is not) */
  ts_diag_clear(&q);
  int init, fused = outer[0];
  int nf = no - ns > 0 ? no - ns : no; /* the symbolic loops stay serial inside (their fused index is not affine) */
  bool fuse_ok = nf <= 1 || sch_t_fuse(t, nf, outer, &fused, &q) == TS_OK;
  ts_diag_clear(&q);
  if (fuse_ok && no > 0) sch_t_parallel(t, fused, &q);
  ts_diag_clear(&q);
  if (nr > 0) sch_t_decompose_reduction(t, ob, red[0], &init, &q);
  return true;
}

bool srch_tensor_default(sch_traced *t, const char *block, const cg_target *tg, bool pack) {
  if (tg && tg->kind != CG_TARGET_LLVM) return false;
  const ir_func *fn = sch_traced_func(t);
  int nl;
  sch_loop *cl;
  int64_t ext[MAXL];
  uint32_t sym = 0;
  const ir_stmt *r = srch_block_loops(t, block, &cl, &nl);
  if (!r || !trivial_nest(r, cl, nl, ext, fn, &sym)) return false;
  const ir_block *blk = r->u.realize.block;
  const ir_stmt *body = blk->body;
  int8_find f8 = {0};
  if (!blk->init || !body || body->kind != IR_STORE || body->u.store.buf->dtype.code != IR_I32) return false;
  ir_visit_stmt(&(ir_visitor){.expr = int8_visit, .ctx = &f8}, body);
  if (f8.n8 < 2) return false;
  char arch[128], feats[600];
  const char *cpu;
  target_of(tg, arch, sizeof arch, &cpu, feats, sizeof feats);
  const i8_family *fm = i8_family_of(arch, cpu, feats);
  if (!fm) return false;
  /* the rule's preparation: shifted to u8, the weight packed, its column
   * sums tensorized; then the largest kernel that divides, or the block
   * padded for one */
  ts_diag q;
  ts_diag_clear(&q);
  int b, sb[2];
  /* a symbolic kernel (sym: its rows' extents known at run time) takes a
   * kernel of one row per call on those iters, as it is: no shift, no padding */
  bool shifted = fm->shift && !sym && sch_t_get_block(t, block, &b, &q) == TS_OK &&
                 sch_t_shift_to_unsigned(t, b, sb, &q) == TS_OK;
  /* a symbolic kernel's one-row tile streams its weight once per row: it
   * keeps the byte weight (half the bytes; widened in the kernel) */
  bool packed = pack && vnni_pack(t, block, fm, !sym);
  if (shifted && packed) colsum_vnni(t, sb[1]);
  if (packed && fm->wide16 && !sym) widen_a(t, block);
  const sch_intrin *cand[16];
  int64_t cext[16][MAXL];
  int nc = matching(t, block, nl, ext, arch, cpu, feats, false, NULL, cand, cext, 16);
  int pick = nc > 0 ? 0 : -1;
  bool padded = nc == 0;
  if (nc == 0 && sym) return false;
  if (nc == 0) {
    nc = matching(t, block, nl, ext, arch, cpu, feats, true, fm->prefix, cand, cext, 16);
    for (int i = 0; i < nc && pick < 0; i++)
      if (pad_for(t, block, nl, cext[i])) pick = i;
  }
  if (pick < 0) return false;
  /* padded: the iteration domain grew */
  r = srch_block_loops(t, block, &cl, &nl);
  if (!r || !trivial_nest(r, cl, nl, ext, sch_traced_func(t), &sym)) return false;
  const ir_block *pb = r->u.realize.block;
  int64_t rr, rc, rh;
  tile_rest(pb, cext[pick], ext, nl, &rr, &rc, &rh);
  i8_tile tl = tile_wide(cand[pick], rr, rc);
  if (fm->lanes == 8) {
    /* AVX2: the intrinsic and tile with the fewest widenings, among those
     * that divide (a padded block keeps the one it was padded for) */
    double best = 1e9;
    for (int i = 0; i < (padded ? 1 : nc); i++) {
      int j = padded ? pick : i;
      double c;
      tile_rest(pb, cext[j], ext, nl, &rr, &rc, &rh);
      i8_tile x = tile_avx2(cand[j], rr, rc, rh, &c);
      if (c < best - 1e-9) {
        best = c;
        tl = x;
        pick = j;
      }
    }
  }
  for (int l = 0; l < nl; l++)
    if ((sym >> l & 1) && cext[pick][l] > 1) return false;
  return apply_fixed(t, block, pb, cand[pick], cext[pick], tl, sym);
}

bool srch_feeds_tensorized(sch_traced *t, const char *block) {
  sch_block *cons;
  int nc = 0;
  ts_diag q;
  ts_diag_clear(&q);
  if (sch_get_consumers(sch_traced_state(t), (sch_block){.name = block}, &cons, &nc, &q) != TS_OK) return false;
  for (int i = 0; i < nc; i++) {
    const ir_stmt *cr = srch_find_realize(sch_traced_func(t), cons[i].name);
    const ir_block *cb = cr ? cr->u.realize.block : NULL;
    if (cb && (ir_annot_find(cb->nannot, cb->annots, SRCH_ANN_AUTO_TENSORIZE) ||
               ir_annot_find(cb->nannot, cb->annots, "tessel.tensorized")))
      return true;
  }
  return false;
}

ts_status srch_rule_multi_level_tiling_tensor(const srch_rule_ctx *c, sch_traced *t, const char *block,
                                              ts_vec *out, ts_diag *d) {
  if (c->target && c->target->kind != CG_TARGET_LLVM) return srch_push(out, t, d);
  const ir_func *fn = sch_traced_func(t);
  int nl;
  sch_loop *cl;
  int64_t ext[MAXL];
  const ir_stmt *r = srch_block_loops(t, block, &cl, &nl);
  if (!r || ir_annot_find(r->u.realize.block->nannot, r->u.realize.block->annots, SRCH_ANN_TILING) ||
      !trivial_nest(r, cl, nl, ext, fn, NULL))
    return srch_push(out, t, d);
  const ir_block *blk = r->u.realize.block;
  char arch[128], feats[600];
  const char *cpu;
  target_of(c->target, arch, sizeof arch, &cpu, feats, sizeof feats);
  /* matching intrinsics: on the weight re-laid for VNNI when the function
   * lets us (then only those: they dominate the interleaving ones), else on
   * the layout as it is */
  const sch_intrin *cand[16];
  int64_t cext[16][MAXL];
  sch_traced *base = NULL;
  int nc = 0;
  ts_diag q;
  const i8_family *fm = i8_family_of(arch, cpu, feats);
  if (fm && (base = srch_fork(c, t, &q)) != NULL) {
    /* i8 x i8 (VNNI): A shifted to u8 and the compensation hoisted into its
     * own block (ShiftToUnsigned; a block of another form is left as it is),
     * then the weight packed */
    int b, sb[2];
    ts_diag_clear(&q);
    bool shifted = fm->shift && sch_t_get_block(base, block, &b, &q) == TS_OK &&
                   sch_t_shift_to_unsigned(base, b, sb, &q) == TS_OK;
    bool packed = vnni_pack(base, block, fm, true);
    if (shifted && packed) colsum_vnni(base, sb[1]);
    if (packed && fm->wide16) widen_a(base, block); /* AVX2: A widened once to i16, as the default */
    if (shifted || packed) nc = matching(base, block, nl, ext, arch, cpu, feats, false, NULL, cand, cext, 16);
    if (nc == 0) {
      sch_traced_free(base);
      base = NULL;
    }
  }
  if (!base) nc = matching(t, block, nl, ext, arch, cpu, feats, false, NULL, cand, cext, 16);
  /* no intrinsic divides the extents: VNNI on the block padded up to the
   * intrinsic's tile (PadEinsum: zero-filled input copies, the output's
   * padding computed and dropped), after ShiftToUnsigned for i8 x i8 */
  bool pad = false;
  if (nc == 0 && fm && (base = srch_fork(c, t, &q)) != NULL) {
    int b, sb[2];
    ts_diag_clear(&q);
    bool shifted = fm->shift && sch_t_get_block(base, block, &b, &q) == TS_OK &&
                   sch_t_shift_to_unsigned(base, b, sb, &q) == TS_OK;
    /* the weight packed with its n and k padded (zeros in a model build;
     * the padded block's A reads zeros in the k tail and drops the n tail, so
     * the kernel never depends on them) */
    bool packed = vnni_pack(base, block, fm, true);
    if (shifted && packed) colsum_vnni(base, sb[1]);
    if (packed && fm->wide16) widen_a(base, block);
    nc = matching(base, block, nl, ext, arch, cpu, feats, true, fm->prefix, cand, cext, 16);
    pad = nc > 0;
    if (!pad) {
      sch_traced_free(base);
      base = NULL;
    }
  }
  /* the two largest that apply (a padding a conv's window rows would read
   * out of bounds is refused: the next, smaller kernel is tried) */
  sch_traced *forks[2] = {NULL, NULL};
  int nf = 0;
  for (int i = 0; i < nc && nf < 2; i++) {
    ts_diag_clear(&q);
    sch_traced *f = srch_fork(c, base ? base : t, &q);
    if (f && pad && !pad_for(f, block, nl, cext[i])) {
      sch_traced_free(f);
      f = NULL;
    }
    if (f && !apply(c, f, block, blk, cand[i], cext[i])) {
      sch_traced_free(f);
      f = NULL;
    }
    if (f) forks[nf++] = f;
  }
  if (base) sch_traced_free(base);
  ts_status st = srch_push(out, t, d);
  for (int i = 0; i < nf; i++) {
    if (!st) st = srch_push(out, forks[i], d);
    else sch_traced_free(forks[i]);
  }
  return st;
}
