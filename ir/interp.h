/* interp.h — the reference interpreter: executes any PrimFunc (unscheduled,
 * scheduled, or lowered) on host buffers with exact semantics. It is the
 * ground truth for every correctness test, so it favours clarity and checks
 * over speed: every buffer access is bounds-checked (an out-of-bounds access
 * is an error naming the buffer, the index and the statement), allocated
 * buffers start filled with a poison pattern (NaN / 0x5A bytes) so a read of
 * an unwritten element shows up, and f32/f16/bf16 results are rounded to
 * their dtype after every operation. */
#ifndef TESSEL_IR_INTERP_H
#define TESSEL_IR_INTERP_H

#include "ir.h"

/* A host tensor: data is dense row-major in dtype's storage format
 * (f16/bf16 as uint16 bits, bool as uint8). */
typedef struct ir_tensor {
  ir_dtype dtype;
  int ndim;
  int64_t shape[8];
  void *data;
} ir_tensor;

int64_t ir_tensor_numel(const ir_tensor *t);
/* Allocates data (heap, zeroed) for a tensor of the given dtype/shape. */
ts_status ir_tensor_alloc(ir_tensor *t, ir_dtype dt, int ndim, const int64_t *shape);
void ir_tensor_free(ir_tensor *t);
/* Element i (flat) as double / written from double (converted as a cast
 * would: rounded for floats, truncated and wrapped for ints). */
double ir_tensor_get(const ir_tensor *t, int64_t i);
void ir_tensor_set(ir_tensor *t, int64_t i, double v);
/* Fills with seeded random values (deterministic per seed): floats uniform
 * in [-1, 1) (rounded to the dtype), signed ints in [-8, 8), unsigned in
 * [0, 16), bool 0/1 — small enough that accumulations cannot overflow. */
void ir_tensor_fill_random(ir_tensor *t, uint64_t seed);

/* Allocates (zeroed) tensors for every param of f with its shape; out has
 * f->nparams entries, freed by the caller with ir_tensor_free (on error none
 * are left allocated). Symbolic shapes need sym_values (one per f->syms, or
 * NULL if none). */
ts_status ir_tensors_for_func(const ir_func *f, const int64_t *sym_values, ir_tensor *out,
                              ts_diag *d);

/* Runs f with args[i] bound to f->params[i] (nparams entries; the caller
 * keeps ownership of the tensors, outputs are written in place). Symbolic
 * size vars are inferred from argument shapes where a dim is a bare sym var,
 * and every param shape is then evaluated and compared. Errors, each with a
 * message naming the buffer / variable / block:
 *   TS_EINVAL   a sym that cannot be inferred; malformed IR (missing nodes,
 *               wrong index count)
 *   TS_ETYPE    an argument of the wrong dtype; ill-typed IR
 *   TS_ESHAPE   an argument of the wrong shape (or syms that disagree)
 *   TS_EBOUNDS  an out-of-bounds load or store (buffer, indices, dimension)
 *   TS_ERUNTIME integer division by zero, a loop over 2^40 iterations, more
 *               than 2^34 statement executions in all, an iter var outside
 *               its block domain, a buffer used outside its scope
 *   TS_ENOMEM
 * Semantics worth knowing: loops of every kind (thread-bound too) run
 * serially in order; select and && / || evaluate only the taken side (per
 * lane for vectors), so guarded padded loads never fault; a block's init runs
 * when every R iter var is at its domain min; block alloc_buffers and
 * `allocate` buffers start poisoned (NaN / 0x5A bytes); float results are
 * rounded to their dtype after every op (f16/bf16 to nearest even); integer
 * results wrap to their width; float->int casts truncate (NaN -> 0) and
 * wrap; min/max propagate NaN. A 1-d parameter accepts an argument of any
 * shape with the same element count (a flattened view). storage_align is a
 * layout hint with no effect here. */
ts_status ir_interp_run(const ir_func *f, ir_tensor *args, ts_diag *d);

/* Options for ir_interp_run_opts (zero-initialise for defaults). */
typedef struct ir_interp_opts {
  uint64_t max_steps; /* statement executions allowed; 0 = 2^34 */
  uint64_t *steps;    /* if not NULL, receives the statement executions done */
} ir_interp_opts;
ts_status ir_interp_run_opts(const ir_func *f, ir_tensor *args, const ir_interp_opts *opts,
                             ts_diag *d);

/* Compares two tensors: max absolute error, and whether every element is
 * within atol + rtol*|ref| (exact for integer dtypes). NaN != anything. */
bool ir_tensor_allclose(const ir_tensor *got, const ir_tensor *ref, double rtol, double atol,
                        double *max_abs_err);

#endif
