#!/usr/bin/env python3
"""resnet18_gen.py OUT.onnx [--seed S] [--batch N]

ResNet-18 v1 (torchvision's topology) with seeded random weights, built with
the onnx helper API at opset 17 (no torch needed): conv 7x7/2 + bn + relu +
maxpool 3x3/2, four stages of two BasicBlocks (64, 128, 256, 512 channels;
the first block of stages 2-4 strides by 2 and has a 1x1/2 conv + bn
downsample on its shortcut), global average pool, flatten, gemm 512 -> 1000.
Input "data" float32 [N, 3, 224, 224], output "logits" [N, 1000].
Weights: He-normal convs, batch-norm statistics drawn near (1, 0) so the
activations keep a sane scale through 18 layers.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(seed=0, batch=1):
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    counter = {}

    def fresh(prefix):
        counter[prefix] = counter.get(prefix, 0) + 1
        return "%s%d" % (prefix, counter[prefix])

    def const(arr, prefix):
        name = fresh(prefix)
        inits.append(numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name))
        return name

    def conv(x, cin, cout, k, stride, pad):
        w = const(rng.normal(0.0, (2.0 / (cin * k * k)) ** 0.5, (cout, cin, k, k)), "conv_w")
        y = fresh("conv")
        nodes.append(helper.make_node("Conv", [x, w], [y], kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[pad] * 4, name=y))
        return y

    def bn(x, c):
        ins = [x, const(rng.uniform(0.5, 1.5, c), "bn_scale"), const(rng.normal(0.0, 0.1, c), "bn_bias"),
               const(rng.normal(0.0, 0.1, c), "bn_mean"), const(rng.uniform(0.5, 1.5, c), "bn_var")]
        y = fresh("bn")
        nodes.append(helper.make_node("BatchNormalization", ins, [y], epsilon=1e-5, name=y))
        return y

    def relu(x):
        y = fresh("relu")
        nodes.append(helper.make_node("Relu", [x], [y], name=y))
        return y

    def basic_block(x, cin, cout, stride):
        y = relu(bn(conv(x, cin, cout, 3, stride, 1), cout))
        y = bn(conv(y, cout, cout, 3, 1, 1), cout)
        short = x if stride == 1 and cin == cout else bn(conv(x, cin, cout, 1, stride, 0), cout)
        z = fresh("add")
        nodes.append(helper.make_node("Add", [y, short], [z], name=z))
        return relu(z)

    y = relu(bn(conv("data", 3, 64, 7, 2, 3), 64))
    p = fresh("maxpool")
    nodes.append(helper.make_node("MaxPool", [y], [p], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4, name=p))
    y, c = p, 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        y = basic_block(y, c, cout, stride)
        y = basic_block(y, cout, cout, 1)
        c = cout
    g = fresh("gap")
    nodes.append(helper.make_node("GlobalAveragePool", [y], [g], name=g))
    f = fresh("flatten")
    nodes.append(helper.make_node("Flatten", [g], [f], axis=1, name=f))
    w = const(rng.normal(0.0, (1.0 / 512) ** 0.5, (1000, 512)), "fc_w")
    b = const(rng.normal(0.0, 0.01, 1000), "fc_b")
    nodes.append(helper.make_node("Gemm", [f, w, b], ["logits"], transB=1, name="fc"))
    graph = helper.make_graph(nodes, "resnet18",
                              [helper.make_tensor_value_info("data", TensorProto.FLOAT, [batch, 3, 224, 224])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 1000])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tessel-bench")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        return 2
    seed, batch, i = 0, 1, 2
    while i < len(argv):
        if argv[i] == "--seed" and i + 1 < len(argv):
            seed = int(argv[i + 1])
        elif argv[i] == "--batch" and i + 1 < len(argv):
            batch = int(argv[i + 1])
        else:
            sys.stderr.write("resnet18_gen.py: unexpected argument %r\n" % argv[i])
            return 2
        i += 2
    onnx.save(build(seed, batch), argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
