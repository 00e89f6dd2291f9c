"""The ctypes binding of libtessel's C API (include/tessel/tessel.h).

Finds the library ($TESSEL_LIB, else the build tree next to this package,
build/tuner/libtessel.so, else the system's), loads it with RTLD_GLOBAL (the
artifacts it loads call the runtime's thread pool through the process's
global symbols) and declares every function's argument and result types.
Nothing else of tessel is imported here.
"""
import ctypes
import ctypes.util
import os
from pathlib import Path

MAX_DIMS = 8
ERROR_MAX = 2048
ECANCELED = 100


class Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * ERROR_MAX)]


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("dim_names", ctypes.c_char_p * MAX_DIMS)]


class TuneResult(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("trials", ctypes.c_int), ("new_trials", ctypes.c_int),
                ("errors", ctypes.c_int), ("best_seconds", ctypes.c_double), ("best_gflops", ctypes.c_double),
                ("baseline_seconds", ctypes.c_double), ("baseline_gflops", ctypes.c_double),
                ("wall_seconds", ctypes.c_double), ("target", ctypes.c_char * 700)]


class TuneModelResult(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("ntasks", ctypes.c_int), ("trials", ctypes.c_int),
                ("new_trials", ctypes.c_int), ("rounds", ctypes.c_int), ("estimated_seconds", ctypes.c_double),
                ("missing", ctypes.c_int), ("wall_seconds", ctypes.c_double), ("target", ctypes.c_char * 700)]


class Record(ctypes.Structure):
    _fields_ = [("workload", ctypes.c_char_p), ("workload_key", ctypes.c_char_p), ("target", ctypes.c_char_p),
                ("trace", ctypes.c_char_p), ("error", ctypes.c_char_p), ("verified", ctypes.c_int),
                ("nruns", ctypes.c_int), ("mean_seconds", ctypes.c_double), ("gflops", ctypes.c_double),
                ("build_seconds", ctypes.c_double), ("time", ctypes.c_double)]


PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_double)


def _find():
    env = os.environ.get("TESSEL_LIB")
    if env:
        return env
    here = Path(__file__).resolve().parent
    for cand in (here.parent.parent / "build" / "tuner" / "libtessel.so", here / "libtessel.so"):
        if cand.exists():
            return str(cand)
    found = ctypes.util.find_library("tessel")
    if found:
        return found
    raise OSError("libtessel.so not found: build tessel (scripts/setup.sh) or set TESSEL_LIB to its path")


lib = ctypes.CDLL(_find(), mode=ctypes.RTLD_GLOBAL)

_P = ctypes.c_void_p
_S = ctypes.c_char_p
_E = ctypes.POINTER(Error)
_I = ctypes.c_int
_SIGS = {
    "tessel_version": (_S, []),
    "tessel_strerror": (_S, [_I]),
    "tessel_func_parse": (_I, [_S, ctypes.POINTER(_P), _E]),
    "tessel_func_from_dsl": (_I, [_S, _S, ctypes.POINTER(_P), _E]),
    "tessel_func_free": (None, [_P]),
    "tessel_func_definition": (_S, [_P]),
    "tessel_func_key": (_S, [_P]),
    "tessel_func_flops": (ctypes.c_double, [_P]),
    "tessel_opts_new": (_I, [ctypes.POINTER(_P), _E]),
    "tessel_opts_free": (None, [_P]),
    "tessel_opts_set": (_I, [_P, _S, _S, _E]),
    "tessel_opts_get": (_S, [_P, _S]),
    "tessel_opts_set_progress": (None, [_P, PROGRESS_FN, _P]),
    "tessel_opts_set_cancel": (None, [_P, ctypes.POINTER(_I)]),
    "tessel_tune": (_I, [_P, _P, ctypes.POINTER(TuneResult), _E]),
    "tessel_tune_model": (_I, [_S, _P, ctypes.POINTER(TuneModelResult), _E]),
    "tessel_build": (_I, [_P, _P, _S, _E]),
    "tessel_build_model": (_I, [_S, _P, _S, _E]),
    "tessel_kernel_load": (_I, [_S, ctypes.POINTER(_P), _E]),
    "tessel_kernel_free": (None, [_P]),
    "tessel_kernel_num_params": (_I, [_P]),
    "tessel_kernel_num_inputs": (_I, [_P]),
    "tessel_kernel_param_info": (_I, [_P, _I, ctypes.POINTER(TensorInfo), _E]),
    "tessel_kernel_run": (_I, [_P, ctypes.POINTER(_P), _E]),
    "tessel_log_open": (_I, [_S, ctypes.POINTER(_P), _E]),
    "tessel_log_close": (None, [_P]),
    "tessel_log_count": (_I, [_P]),
    "tessel_log_skipped": (_I, [_P]),
    "tessel_log_record": (_I, [_P, _I, ctypes.POINTER(Record), _E]),
    "tessel_log_best": (_I, [_P, _S, _S, ctypes.POINTER(Record), _I]),
    "tessel_target_canonical": (_I, [_S, ctypes.c_char_p, ctypes.c_size_t, _E]),
    "tessel_dtype_bytes": (_I, [_I]),
    "tessel_dtype_name": (_S, [_I]),
    "tessel_model_load": (_P, [_S, ctypes.c_char_p, ctypes.c_size_t]),
    "tessel_model_free": (None, [_P]),
    "tessel_model_error": (_S, [_P]),
    "tessel_model_num_inputs": (_I, [_P]),
    "tessel_model_num_outputs": (_I, [_P]),
    "tessel_model_input_info": (_I, [_P, _I, ctypes.POINTER(TensorInfo)]),
    "tessel_model_output_info": (_I, [_P, _I, ctypes.POINTER(TensorInfo)]),
    "tessel_model_bind_input": (_I, [_P, _I, _P, _I, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(_I)]),
    "tessel_model_run": (_I, [_P]),
    "tessel_model_get_output": (_I, [_P, _I, ctypes.POINTER(_P), ctypes.POINTER(_I), ctypes.POINTER(ctypes.c_int64)]),
    "tessel_model_copy_output": (_I, [_P, _I, _P, ctypes.c_size_t]),
}
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args


def enc(s):
    """str/Path -> bytes for a char * (None stays None)."""
    return None if s is None else os.fsencode(s) if isinstance(s, os.PathLike) else str(s).encode()


def dec(b):
    return None if b is None else b.decode(errors="replace")
