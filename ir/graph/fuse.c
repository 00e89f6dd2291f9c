/* fuse.c — operator fusion in the spirit of TVM's FuseOps (one anchor per
 * group, elementwise epilogues, injective prologues, no cycles), and the
 * merging of each group into one PrimFunc whose intermediates are root-block
 * buffers for the search's auto-inline. docs/PASSES.md, docs/IR.md ("Notes
 * by file"). */
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "passes_int.h"

#define TG_FUSE_MAX_NODES 24

typedef struct fctx {
  tg_graph *g;
  int nn;
  int *gid;     /* node -> group id (a node index: the group's representative) */
  int *link;    /* circular list of each group's members */
  int *cstart;  /* consumers of node i: cons[cstart[i] .. cstart[i+1]) (live nodes, distinct) */
  int *cons;
  bool *inset;  /* scratch: membership of the candidate union */
  bool *down;   /* scratch */
  int *stack;
} fctx;

static bool is_anchor(tg_pattern p) { return p == TG_PAT_REDUCE || p == TG_PAT_OUT_EWISE; }

static bool graph_output(const tg_graph *g, int vid) {
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == vid) return true;
  return false;
}

/* Consumer lists of every live node (CSR). */
static ts_status build_consumers(fctx *c, ts_diag *d) {
  tg_graph *g = c->g;
  int *cnt = ts_calloc((size_t)c->nn + 1, sizeof(int));
  int *prod = ts_malloc(((size_t)g->nvalues + 1) * sizeof(int));
  if (!cnt || !prod) {
    ts_free(cnt);
    ts_free(prod);
    return ts_diag_set(d, TS_ENOMEM, "out of memory fusing");
  }
  for (int v = 0; v < g->nvalues; v++) prod[v] = -1;
  for (int i = 0; i < c->nn; i++) {
    const tg_node *n = g->nodes[i];
    if (n->dead) continue;
    for (int j = 0; j < n->nout; j++)
      if (n->outputs[j] >= 0) prod[n->outputs[j]] = i;
  }
  /* two passes: count, then fill (an edge p -> i once per distinct pair) */
  int total = 0;
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) {
      c->cstart[0] = 0;
      for (int i = 0; i < c->nn; i++) c->cstart[i + 1] = c->cstart[i] + cnt[i];
      total = c->cstart[c->nn];
      c->cons = ts_malloc((size_t)total * sizeof(int) + 1);
      if (!c->cons) {
        ts_free(cnt);
        ts_free(prod);
        return ts_diag_set(d, TS_ENOMEM, "out of memory fusing");
      }
      for (int i = 0; i < c->nn; i++) cnt[i] = 0;
    }
    for (int i = 0; i < c->nn; i++) {
      const tg_node *n = g->nodes[i];
      if (n->dead) continue;
      for (int j = 0; j < n->nin; j++) {
        int v = n->inputs[j];
        int p = v >= 0 ? prod[v] : -1;
        if (p < 0 || p == i) continue;
        bool dup = false;
        for (int k = 0; k < j && !dup; k++) dup = n->inputs[k] >= 0 && prod[n->inputs[k]] == p;
        if (dup) continue;
        if (pass == 1) c->cons[c->cstart[p] + cnt[p]] = i;
        cnt[p]++;
      }
    }
  }
  ts_free(cnt);
  ts_free(prod);
  return TS_OK;
}

/* Marks every member of q's group visited and pushes them. */
static void visit_group(fctx *c, int q, int *sp) {
  int m = q;
  do {
    if (!c->down[m]) {
      c->down[m] = true;
      c->stack[(*sp)++] = m;
    }
    m = c->link[m];
  } while (m != q);
}

/* Is the union of groups a and b a legal fused group? */
static bool can_merge(fctx *c, int a, int b) {
  tg_graph *g = c->g;
  int cnt = 0, anchor = -1, anchors = 0;
  for (int i = 0; i < c->nn; i++) {
    c->inset[i] = !g->nodes[i]->dead && (c->gid[i] == a || c->gid[i] == b);
    if (!c->inset[i]) continue;
    cnt++;
    tg_pattern p = lg_pattern(g, g->nodes[i]);
    if (p == TG_PAT_OPAQUE) return false;
    if (is_anchor(p)) {
      anchors++;
      anchor = i;
    }
  }
  if (cnt > TG_FUSE_MAX_NODES || anchors > 1) return false;
  /* epilogue / prologue patterns */
  for (int i = 0; i < c->nn; i++) c->down[i] = false;
  for (int i = 0; i < c->nn; i++) {
    if (!c->inset[i]) continue;
    const tg_node *n = g->nodes[i];
    bool dn = false;
    for (int j = 0; j < n->nin && !dn; j++) {
      int v = n->inputs[j];
      int p = v >= 0 ? g->values[v]->producer : -1;
      if (p >= 0 && c->inset[p] && (p == anchor || c->down[p])) dn = true;
    }
    c->down[i] = dn;
    if (i == anchor) continue;
    tg_pattern pt = lg_pattern(g, n);
    if (dn && pt > TG_PAT_BROADCAST) return false;
    if (!dn && pt > TG_PAT_INJECTIVE) return false;
    const tg_op_def *od = tg_op_def_of(lg_node_op(n));
    if (!dn && anchor >= 0 && od && (od->flags & TG_OPF_COSTLY) &&
        lg_pattern(g, g->nodes[anchor]) == TG_PAT_OUT_EWISE)
      return false; /* recomputed per output tile: stays before the anchor's kernel */
  }
  /* cycle: walk forward from the union through outside nodes, where
   * entering any node of another group reaches all of it (each group runs
   * as one call); arriving back in the union means the fused call would
   * need a result that needs the call */
  int sp = 0;
  for (int i = 0; i < c->nn; i++) c->down[i] = false; /* reused as "visited" */
  for (int i = 0; i < c->nn; i++) {
    if (!c->inset[i]) continue;
    for (int k = c->cstart[i]; k < c->cstart[i + 1]; k++) {
      int q = c->cons[k];
      if (!c->inset[q] && !c->down[q]) visit_group(c, q, &sp);
    }
  }
  while (sp > 0) {
    int u = c->stack[--sp];
    for (int k = c->cstart[u]; k < c->cstart[u + 1]; k++) {
      int q = c->cons[k];
      if (c->inset[q]) return false;
      if (!c->down[q]) visit_group(c, q, &sp);
    }
  }
  return true;
}

static void merge(fctx *c, int a, int b) {
  int keep = a < b ? a : b, drop = a < b ? b : a;
  for (int i = 0; i < c->nn; i++)
    if (c->gid[i] == drop) c->gid[i] = keep;
  int t = c->link[a]; /* splice the two circular member lists */
  c->link[a] = c->link[b];
  c->link[b] = t;
}

/* Builds the fused PrimFunc of group gidv and rewires the graph. */
static ts_status emit_group(fctx *c, int gidv, ts_diag *d) {
  tg_graph *g = c->g;
  int members[TG_FUSE_MAX_NODES], nm = 0;
  for (int i = 0; i < c->nn && nm < TG_FUSE_MAX_NODES; i++)
    if (!g->nodes[i]->dead && c->gid[i] == gidv) members[nm++] = i;
  if (nm < 2) return TS_OK;
  bool *mine = c->inset;
  for (int i = 0; i < c->nn; i++) mine[i] = false;
  for (int i = 0; i < nm; i++) mine[members[i]] = true;

  /* inputs (first use order), outputs (production order), intermediates */
  int ins[256], outs[64], nin = 0, nout = 0;
  for (int m = 0; m < nm; m++) {
    const tg_node *n = g->nodes[members[m]];
    for (int j = 0; j < n->nin; j++) {
      int v = n->inputs[j];
      if (v < 0) continue;
      int p = g->values[v]->producer;
      if (p >= 0 && mine[p]) continue;
      bool seen = false;
      for (int q = 0; q < nin && !seen; q++) seen = ins[q] == v;
      if (!seen) {
        if (nin == 256) return ts_diag_set(d, TS_EUNSUPPORTED, "fused group with over 256 inputs");
        ins[nin++] = v;
      }
    }
  }
  for (int m = 0; m < nm; m++) {
    const tg_node *n = g->nodes[members[m]];
    for (int j = 0; j < n->nout; j++) {
      int v = n->outputs[j];
      if (v < 0) continue;
      bool ext = graph_output(g, v);
      for (int q = 0; q < c->nn && !ext; q++) {
        const tg_node *u = g->nodes[q];
        if (u->dead || mine[q]) continue;
        for (int k = 0; k < u->nin && !ext; k++) ext = u->inputs[k] == v;
      }
      if (ext) {
        if (nout == 64) return ts_diag_set(d, TS_EUNSUPPORTED, "fused group with over 64 outputs");
        outs[nout++] = v;
      }
    }
  }
  if (nout == 0) return TS_OK; /* dead group; dce drops it */

  /* names: in<k>, out<k>, t<value id> */
  ts_arena *ar = g->mod->arena;
  const char **vname = ts_calloc((size_t)g->nvalues + 1, sizeof(char *));
  if (!vname) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  const char *in_names[256], *out_names[64];
  for (int i = 0; i < nin; i++) vname[ins[i]] = in_names[i] = ts_arena_printf(ar, "in%d", i);
  for (int i = 0; i < nout; i++) vname[outs[i]] = out_names[i] = ts_arena_printf(ar, "out%d", i);
  lg_kernel k;
  lg_init(&k, g, d);
  ts_status st = TS_OK;
  int ntmp = 0;
  for (int m = 0; m < nm && st == TS_OK; m++) {
    const tg_node *n = g->nodes[members[m]];
    for (int j = 0; j < n->nout; j++) {
      int v = n->outputs[j];
      if (v >= 0 && !vname[v]) {
        /* positional names: block names are part of the structural hash,
         * so equal groups must name their intermediates alike */
        vname[v] = ts_arena_printf(ar, "t%d", ntmp++);
        lg_let(&k, vname[v], v);
      }
    }
  }
  /* the function name: fused_<ops> (at most 6 named) */
  char base[200] = "fused";
  for (int m = 0; m < nm && m < 6; m++) {
    strncat(base, "_", sizeof base - strlen(base) - 1);
    strncat(base, lg_node_short_name(g->nodes[members[m]]), sizeof base - strlen(base) - 1);
  }
  char opsbuf[1024] = "";
  for (int m = 0; m < nm && st == TS_OK; m++) {
    const tg_node *n = g->nodes[members[m]];
    const char *in[64] = {0}, *on[16] = {0};
    for (int j = 0; j < n->nin && j < 64; j++) in[j] = n->inputs[j] >= 0 ? vname[n->inputs[j]] : NULL;
    for (int j = 0; j < n->nout && j < 16; j++) on[j] = n->outputs[j] >= 0 ? vname[n->outputs[j]] : NULL;
    st = lg_emit(&k, n, in, on);
    snprintf(opsbuf + strlen(opsbuf), sizeof opsbuf - strlen(opsbuf), "%s%s", m ? "," : "",
             tg_op_name(lg_node_op(n)));
  }
  ir_func *f = NULL;
  if (st == TS_OK) {
    const char *fname = lg_fresh_name(g->mod, base);
    st = lg_build(&k, g->mod, fname, nin, ins, in_names, nout, outs, out_names, &f);
  }
  lg_fini(&k);
  ts_free(vname);
  if (st != TS_OK) return st;

  /* the call replaces the last member */
  tg_node *last = g->nodes[members[nm - 1]];
  int *ni = TS_ANEWN(ar, int, nin), *no = TS_ANEWN(ar, int, nout);
  if (!ni || !no) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  memcpy(ni, ins, (size_t)nin * sizeof(int));
  memcpy(no, outs, (size_t)nout * sizeof(int));
  for (int m = 0; m < nm - 1; m++) g->nodes[members[m]]->dead = true;
  last->op = TG_OP_CALL;
  last->callee = f->name;
  last->nin = nin;
  last->inputs = ni;
  last->nout = nout;
  last->outputs = no;
  last->nattr = 0;
  last->attrs = NULL;
  if (tg_node_rename(g, last, f->name) != TS_OK) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  tg_attr fa = {.name = "tessel.fused", .kind = TG_A_STRING, .s = opsbuf};
  if (tg_node_set_attr(g, last, &fa) != TS_OK) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  for (int i = 0; i < nout; i++) g->values[outs[i]]->producer = last->id;
  return TS_OK;
}

ts_status tg_pass_fuse(tg_graph *g, ts_diag *d) {
  fctx c = {.g = g, .nn = g->nnodes};
  if (c.nn == 0) return TS_OK;
  c.gid = ts_malloc((size_t)c.nn * sizeof(int));
  c.link = ts_malloc((size_t)c.nn * sizeof(int));
  c.cstart = ts_malloc(((size_t)c.nn + 1) * sizeof(int));
  c.inset = ts_calloc((size_t)c.nn, sizeof(bool));
  c.down = ts_calloc((size_t)c.nn, sizeof(bool));
  c.stack = ts_malloc((size_t)c.nn * sizeof(int));
  ts_status st = TS_OK;
  if (!c.gid || !c.link || !c.cstart || !c.inset || !c.down || !c.stack) {
    st = ts_diag_set(d, TS_ENOMEM, "out of memory fusing");
    goto out;
  }
  st = build_consumers(&c, d);
  if (st != TS_OK) goto out;
  for (int i = 0; i < c.nn; i++) c.gid[i] = c.link[i] = i;
  for (int i = 0; i < c.nn; i++) {
    tg_node *n = g->nodes[i];
    if (n->dead || n->op != TG_OP_CALL || lg_pattern(g, n) == TG_PAT_OPAQUE) continue;
    /* producers' groups, anchor groups first */
    int cand[64], nc = 0;
    for (int pass = 0; pass < 2; pass++)
      for (int j = 0; j < n->nin && nc < 64; j++) {
        int v = n->inputs[j];
        int p = v >= 0 ? g->values[v]->producer : -1;
        if (p < 0 || g->nodes[p]->dead || g->nodes[p]->op != TG_OP_CALL) continue;
        int pg = c.gid[p];
        bool anch = false;
        for (int q = 0; q < c.nn && !anch; q++)
          anch = c.gid[q] == pg && !g->nodes[q]->dead && is_anchor(lg_pattern(g, g->nodes[q]));
        if ((pass == 0) != anch) continue;
        bool dup = false;
        for (int q = 0; q < nc && !dup; q++) dup = cand[q] == pg;
        if (!dup) cand[nc++] = pg;
      }
    for (int q = 0; q < nc; q++) {
      int pg = cand[q], mg = c.gid[i];
      if (pg == mg) continue;
      if (can_merge(&c, pg, mg)) merge(&c, pg, mg);
    }
  }
  for (int i = 0; i < c.nn && st == TS_OK; i++)
    if (c.gid[i] == i && !g->nodes[i]->dead) st = emit_group(&c, i, d);
  if (st == TS_OK) st = tg_graph_compact(g, d);
  if (st == TS_OK) lg_module_drop_unused(g);
out:
  ts_free(c.gid);
  ts_free(c.link);
  ts_free(c.cstart);
  ts_free(c.cons);
  ts_free(c.inset);
  ts_free(c.down);
  ts_free(c.stack);
  return st;
}
