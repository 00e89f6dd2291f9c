/* op_contract.c — Einsum: one kernel for the general contraction. The
 * import handler parses the equation (explicit "ab,bc->ac" or implicit
 * "ab,bc", with "..." broadcast dims and repeated letters for diagonals),
 * checks the letters' extents agree across inputs, infers the output, and
 * writes the canonical equation: explicit, no spaces, each "..." replaced
 * by letters the equation does not use. The emitter writes one statement:
 * a loop over the output letters and a sum over the others of the product
 * of the inputs (broadcast dims of extent 1 read at 0). Batched matmul,
 * transposes, reductions, outer products, dot products and diagonals are
 * all this one form. docs/GRAPH.md ("Einsum"). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "legalize_int.h"
#include "onnx_int.h"
#include "ops.h"

#define EQ_MAX 256
#define NLAB 52 /* a-z A-Z */

static int lab_of(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + c - 'A';
  return -1;
}

static char chr_of(int l) { return (char)(l < 26 ? 'a' + l : 'A' + l - 26); }

/* One parsed term: its letters (labels) and where its "..." stands (-1: none). */
typedef struct term {
  int n;         /* letters, not counting the ellipsis */
  int lab[MAX_RANK];
  int ell;       /* position of "..." among the letters, or -1 */
} term;

/* Parses one term s[0..len) into t; false on a bad character or a second "...". */
static bool parse_term(const char *s, size_t len, term *t) {
  t->n = 0;
  t->ell = -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '.') {
      if (t->ell >= 0 || i + 3 > len || strncmp(s + i, "...", 3)) return false;
      t->ell = t->n;
      i += 2;
      continue;
    }
    int l = lab_of(s[i]);
    if (l < 0 || t->n >= MAX_RANK) return false;
    t->lab[t->n++] = l;
  }
  return true;
}

/* Expands term t for an operand of rank r: the ellipsis becomes the last
 * `e` of the ellipsis letters ell_lab[0..E) (right-aligned). */
static int expand_term(const term *t, int e, const int *ell_lab, int E, int *out) {
  int m = 0;
  for (int i = 0; i <= t->n; i++) {
    if (i == t->ell)
      for (int j = E - e; j < E; j++) out[m++] = ell_lab[j];
    if (i < t->n) out[m++] = t->lab[i];
  }
  return m;
}

/* Records extent d for label l (dims of 1 broadcast); false when they conflict. */
static bool note_extent(tg_dim *ext, bool *seen, int l, tg_dim d) {
  if (!seen[l] || dim_is(ext[l], 1)) {
    ext[l] = d;
    seen[l] = true;
    return true;
  }
  return dim_is(d, 1) || tg_dim_eq(ext[l], d);
}

/* The parsed equation: input terms, output term, whether "->" was given. */
typedef struct equation {
  int nin;
  term in[MAX_IO];
  term out;
  bool explicit_out;
} equation;

static ts_status parse_equation(imp *im, nctx *nc, const char *eq, equation *E) {
  char s[EQ_MAX];
  size_t m = 0;
  for (const char *p = eq; *p; p++)
    if (*p != ' ') {
      if (m + 1 >= sizeof s) return imp_nerr(im, nc, TS_EUNSUPPORTED, "equation longer than %d characters", EQ_MAX - 1);
      s[m++] = *p;
    }
  s[m] = '\0';
  const char *arrow = strstr(s, "->");
  size_t lhs = arrow ? (size_t)(arrow - s) : m;
  E->nin = 0;
  for (size_t a = 0; a <= lhs;) {
    size_t b = a;
    while (b < lhs && s[b] != ',') b++;
    if (E->nin >= MAX_IO || !parse_term(s + a, b - a, &E->in[E->nin]))
      return imp_nerr(im, nc, TS_EINVAL, "equation '%s': bad term '%.*s' (letters a-z, A-Z and one '...')", eq,
                      (int)(b - a), s + a);
    E->nin++;
    a = b + 1;
  }
  E->explicit_out = arrow != NULL;
  if (arrow && !parse_term(arrow + 2, strlen(arrow + 2), &E->out))
    return imp_nerr(im, nc, TS_EINVAL, "equation '%s': bad output term '%s'", eq, arrow + 2);
  if (E->nin != nc->nin)
    return imp_nerr(im, nc, TS_EINVAL, "equation '%s' has %d operand terms for %d inputs", eq, E->nin, nc->nin);
  return TS_OK;
}

/* Implicit output: the ellipsis, then the letters used exactly once, in order. */
static void implicit_output(equation *E) {
  int cnt[NLAB] = {0};
  bool ell = false;
  for (int i = 0; i < E->nin; i++) {
    for (int j = 0; j < E->in[i].n; j++) cnt[E->in[i].lab[j]]++;
    ell |= E->in[i].ell >= 0;
  }
  E->out.n = 0;
  E->out.ell = ell ? 0 : -1;
  /* ASCII order as numpy sorts: upper case first */
  for (int pass = 0; pass < 2; pass++)
    for (int l = pass ? 0 : 26; l < (pass ? 26 : NLAB); l++)
      if (cnt[l] == 1 && E->out.n < MAX_RANK) E->out.lab[E->out.n++] = l;
}

/* Appends the expanded term lab[0..n) to the canonical equation text. */
static void put_term(char *s, size_t *m, const int *lab, int n) {
  for (int i = 0; i < n; i++) s[(*m)++] = chr_of(lab[i]);
}

ts_status imp_einsum(imp *im, nctx *nc) {
  const char *eq = astr(nc, "equation", NULL);
  if (!eq) return imp_nerr(im, nc, TS_EINVAL, "attribute 'equation' is required");
  equation E;
  ts_status st = parse_equation(im, nc, eq, &E);
  if (st) return st;
  if (!E.explicit_out) implicit_output(&E);
  const tg_value *x0 = IN(im, nc, 0);
  int erank = 0;
  bool used[NLAB] = {false};
  for (int i = 0; i < E.nin; i++) {
    const tg_value *x = IN(im, nc, i);
    if (!x) return imp_nerr(im, nc, TS_EINVAL, "input %d is omitted", i);
    if (!ir_dtype_eq(x->dtype, x0->dtype))
      return imp_nerr(im, nc, TS_ETYPE, "inputs %s and %s differ in type", x0->name, x->name);
    int e = x->ndim - E.in[i].n;
    if (e < 0 || (e > 0 && E.in[i].ell < 0))
      return imp_nerr(im, nc, TS_EINVAL, "equation '%s': term %d has %d letters for input %s of rank %d", eq, i,
                      E.in[i].n, x->name, x->ndim);
    if (e > erank) erank = e;
    for (int j = 0; j < E.in[i].n; j++) used[E.in[i].lab[j]] = true;
  }
  int ell_lab[MAX_RANK], ne = 0;
  for (int l = 0; l < NLAB && ne < erank; l++)
    if (!used[l]) ell_lab[ne++] = l;
  if (ne < erank) return imp_nerr(im, nc, TS_EUNSUPPORTED, "equation '%s': no letters left for the '...' dims", eq);
  tg_dim ext[NLAB];
  bool seen[NLAB] = {false};
  char canon[EQ_MAX * 2];
  size_t m = 0;
  for (int i = 0; i < E.nin; i++) {
    const tg_value *x = IN(im, nc, i);
    int lab[MAX_RANK];
    int n = expand_term(&E.in[i], x->ndim - E.in[i].n, ell_lab, erank, lab);
    for (int a = 0; a < n; a++)
      if (!note_extent(ext, seen, lab[a], x->dims[a])) {
        char d1[64], d2[64];
        imp_dims_str(d1, sizeof d1, 1, &ext[lab[a]]);
        imp_dims_str(d2, sizeof d2, 1, &x->dims[a]);
        return imp_nerr(im, nc, TS_ESHAPE, "equation '%s': letter '%c' is %s in one operand and %s in %s", eq,
                        chr_of(lab[a]), d1, d2, x->name);
      }
    if (i) canon[m++] = ',';
    put_term(canon, &m, lab, n);
  }
  int olab[MAX_RANK], on = 0;
  if (E.out.n + (E.out.ell >= 0 ? erank : 0) > MAX_RANK)
    return imp_nerr(im, nc, TS_EUNSUPPORTED, "output rank above %d", MAX_RANK);
  on = expand_term(&E.out, E.out.ell >= 0 ? erank : 0, ell_lab, erank, olab);
  tg_dim od[MAX_RANK];
  for (int a = 0; a < on; a++) {
    for (int b = 0; b < a; b++)
      if (olab[b] == olab[a])
        return imp_nerr(im, nc, TS_EINVAL, "equation '%s': output letter '%c' repeats", eq, chr_of(olab[a]));
    if (!seen[olab[a]])
      return imp_nerr(im, nc, TS_EINVAL, "equation '%s': output letter '%c' is in no operand", eq, chr_of(olab[a]));
    od[a] = ext[olab[a]];
  }
  canon[m++] = '-';
  canon[m++] = '>';
  put_term(canon, &m, olab, on);
  canon[m] = '\0';
  set_out(nc, 0, x0->dtype, on, od);
  const char *keep = ts_arena_strdup(im->a, canon); /* attributes hold their strings until the node is made */
  if (!keep) return imp_oom(im);
  return imp_set_str(im, nc, "equation", keep);
}

/* ---- legalisation --------------------------------------------------------------- */

/* The DSL variable of label l: i<axis> for an output letter, r<j> for a summed one. */
static void var_of(tb *b, const int *slot, const bool *is_out, int l) { tb_printf(b, "%c%d", is_out[l] ? 'i' : 'r', slot[l]); }

/* lab_of for a letter canonical() has checked. */
static int lab_in(char c) {
  int l = lab_of(c);
  return l < 0 ? 0 : l;
}

/* Whether eq is the importer's canonical form for n's inputs: one letter per
 * axis of each input, ',' between them, "->" and the output's letters. */
static bool canonical(const lg_kernel *k, const tg_node *n, const char *eq) {
  const char *p = eq;
  for (int i = 0; i < n->nin; i++) {
    for (int a = 0; a < V(k, n->inputs[i])->ndim; a++, p++)
      if (lab_of(*p) < 0) return false;
    if (*p++ != (i + 1 < n->nin ? ',' : '-')) return false;
  }
  if (*p++ != '>') return false;
  int r = 0;
  for (; *p; p++, r++)
    if (lab_of(*p) < 0) return false;
  return r == OUTV(0)->ndim;
}

void lg_emit_einsum(lg_kernel *k, const tg_node *n, const char *const *in, const char *const *out) {
  const char *eq = tg_attr_str(n, "equation", "");
  const char *arrow = strstr(eq, "->");
  if (!arrow || !canonical(k, n, eq)) {
    lg_fail(k, TS_EINVAL, n, "equation '%s' is not canonical", eq);
    return;
  }
  int slot[NLAB];
  bool is_out[NLAB] = {false}, is_red[NLAB] = {false};
  tg_dim ext[NLAB];
  int r = 0, nred = 0;
  for (const char *p = arrow + 2; *p; p++) {
    is_out[lab_in(*p)] = true;
    slot[lab_in(*p)] = r++;
  }
  /* the summed letters, in order of first use, at their longest extent */
  const char *p = eq;
  for (int i = 0; i < n->nin; i++, p++) {
    const tg_value *x = V(k, n->inputs[i]);
    for (int a = 0; a < x->ndim; a++, p++) {
      int l = lab_in(*p);
      if (!is_out[l] && !is_red[l]) {
        is_red[l] = true;
        slot[l] = nred++;
        ext[l] = x->dims[a];
      } else if (is_red[l] && dim_is(ext[l], 1))
        ext[l] = x->dims[a];
    }
  }
  tb rhs, fr;
  tb_reset(&rhs);
  tb_reset(&fr);
  char D[48];
  p = eq;
  for (int i = 0; i < n->nin; i++, p++) {
    const tg_value *x = V(k, n->inputs[i]);
    tb_printf(&rhs, "%s%s[", i ? " * " : "", in[i]);
    for (int a = 0; a < x->ndim; a++, p++) {
      int l = lab_in(*p);
      tg_dim full = is_out[l] ? OUTV(0)->dims[slot[l]] : ext[l];
      if (a) tb_printf(&rhs, ", ");
      /* an extent-1 dim against a longer one broadcasts: read index 0 */
      if (dim_is(x->dims[a], 1) && !dim_is(full, 1)) tb_printf(&rhs, "0");
      else var_of(&rhs, slot, is_out, l);
    }
    tb_printf(&rhs, "]");
  }
  for (int l = 0, j = 0; l < NLAB; l++)
    if (is_red[l]) tb_printf(&fr, "%s r%d in 0..%s", j++ ? "," : " for", slot[l], lg_dim_s(k, ext[l], D));
  tb s;
  tb_reset(&s);
  lg_lhs(&s, out[0], r);
  tb_printf(&s, " %s %s%s", nred ? "+=" : "=", rhs.s, fr.s);
  lg_stmt(k, &s);
}
