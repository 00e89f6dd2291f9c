/* npy.h — NumPy .npy files for `tessel run` (inputs in, outputs out):
 * versions 1.0-3.0 read with a small bounded header tokenizer, little-endian
 * and byte-order-free numeric dtypes only, every refusal naming the file and
 * what was found; version 1.0 written, data 64-byte aligned. docs/TUNING.md
 * ("Notes by file: tuner/"). */
#ifndef TESSEL_TUNER_NPY_H
#define TESSEL_TUNER_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "base/ts.h"

#define TUN_NPY_MAX_DIMS 8

typedef struct tun_npy {
  int dtype; /* ir_dtype_code (IR_F32, ...) */
  int ndim;
  int64_t shape[TUN_NPY_MAX_DIMS];
  void *data; /* heap (ts_malloc), dense row-major */
  size_t nbytes;
} tun_npy;

/* Parses a whole .npy image (len bytes); label names it in errors. The data
 * is copied. TS_EPARSE / TS_EUNSUPPORTED with the reason. */
ts_status tun_npy_parse(const void *buf, size_t len, const char *label, tun_npy *out, ts_diag *d);
/* Reads a file (TS_EIO if it cannot be read), then as tun_npy_parse. */
ts_status tun_npy_read(const char *path, tun_npy *out, ts_diag *d);
/* Writes a .npy file; dtype an ir_dtype_code NumPy can represent (bf16 is
 * TS_EUNSUPPORTED). */
ts_status tun_npy_write(const char *path, int dtype, int ndim, const int64_t *shape, const void *data,
                        ts_diag *d);
void tun_npy_free(tun_npy *n);

#endif
