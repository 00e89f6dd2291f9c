/* tessel.h — the public C API for embedding tessel. The IR, parser,
 * printer, interpreter and workload library are declared in the module
 * headers installed beside this one (tessel/ir/...). */
#ifndef TESSEL_TESSEL_H
#define TESSEL_TESSEL_H

#include "tessel/ir/ir.h"
#include "tessel/ir/parse.h"
#include "tessel/ir/print.h"
#include "tessel/ir/struct.h"
#include "tessel/ir/interp.h"
#include "tessel/ir/workloads/workloads.h"

const char *tessel_version(void);

#endif
