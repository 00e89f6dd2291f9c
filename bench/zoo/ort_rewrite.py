#!/usr/bin/env python3
"""ort_rewrite.py qoperator|optimize SRC.onnx DST.onnx [MODEL_TYPE NUM_HEADS HIDDEN]

The two forms onnxruntime itself writes, for tessel's import (bench/RESULTS.md, real-model survey):
- qoperator: quantize_static in the QOperator format (QLinearConv, com.microsoft QLinearAdd,
  QLinearConcat, ...), u8 activations, s8 weights with reduce_range (7 bits: onnxruntime's AVX2
  u8 x s8 products saturate past them), calibrated on two seeded [1, 3, 224, 224] inputs named
  "input"; the model is pre-processed first (shape inference, without the symbolic pass);
- optimize: onnxruntime.transformers.optimizer.optimize_model(model_type=bert|gpt2|t5, num_heads,
  hidden_size, opt_level=0) (com.microsoft Attention, SkipLayerNormalization, ...; needs sympy:
  run it in bench/.venv-zoo).
Prints the written model's operator counts by domain.
"""
import collections
import sys

import numpy as np
import onnx


def main(argv):
    if len(argv) < 4 or argv[1] not in ("qoperator", "optimize"):
        sys.exit(__doc__)
    mode, src, dst = argv[1:4]
    if mode == "qoperator":
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
        from onnxruntime.quantization.shape_inference import quant_pre_process

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.it = iter([{"input": np.random.default_rng(i).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)}
                                for i in range(2)])

            def get_next(self):
                return next(self.it, None)

        quant_pre_process(src, dst + ".pre.onnx", skip_symbolic_shape=True)
        quantize_static(dst + ".pre.onnx", dst, Reader(), quant_format=QuantFormat.QOperator,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, reduce_range=True)
    else:
        from onnxruntime.transformers import optimizer
        m = optimizer.optimize_model(src, model_type=argv[4], num_heads=int(argv[5]), hidden_size=int(argv[6]),
                                     opt_level=0, use_gpu=False)
        m.save_model_to_file(dst)
    counts = collections.Counter((n.domain or "ai.onnx", n.op_type)
                                 for n in onnx.load(dst, load_external_data=False).graph.node)
    print(dict(counts.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
