"""cnn3_gen.py OUT.onnx [--seed S] — a small three-convolution CNN for a quick
smoke test of bench/tvm/model.py: input 1x3x32x32, conv 3->16 3x3 + relu,
conv 16->32 3x3 stride 2 + relu, conv 32->32 3x3 + relu, global average pool,
flatten, dense 32->10. Weights seeded normal (scaled by fan-in). Opset 17.
Runs with any Python that has numpy and onnx."""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    inits, nodes = [], []

    def weight(name, shape):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name))
        return name

    x = "input"
    for i, (ci, co, stride) in enumerate([(3, 16, 1), (16, 32, 2), (32, 32, 1)]):
        w, b = weight("w%d" % i, [co, ci, 3, 3]), weight("b%d" % i, [co])
        nodes.append(helper.make_node("Conv", [x, w, b], ["c%d" % i], pads=[1, 1, 1, 1], strides=[stride, stride],
                                      kernel_shape=[3, 3]))
        nodes.append(helper.make_node("Relu", ["c%d" % i], ["r%d" % i]))
        x = "r%d" % i
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    nodes.append(helper.make_node("Gemm", ["flat", weight("fc_w", [10, 32]), weight("fc_b", [10])], ["logits"],
                                  transB=1))
    g = helper.make_graph(nodes, "cnn3", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, a.out)


if __name__ == "__main__":
    main()
