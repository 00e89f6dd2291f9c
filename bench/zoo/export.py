#!/usr/bin/env python3
"""export.py OUT_DIR [--only NAME,...] [--opset N] [--force] [--wide]
              [--exporter torchscript|dynamo] [--attention eager|sdpa]

bench/zoo's model set, exported to ONNX from torchvision and transformers with
random weights (nothing is downloaded: torchvision `weights=None`, transformers
models built from their default configs) and fixed seeds (torch.manual_seed(0)
before each model is built), through PyTorch's TorchScript exporter
(`torch.onnx.export(..., dynamo=False)`, where most ONNX models in the wild come
from). Runs in the bench-only virtual environment that bench/zoo/zoo.sh creates
(torch, torchvision, transformers); the tests never need it.

- Vision models: input `input` float32 [1, 3, 224, 224], output `output`;
  ViT-B/16 with a dynamic `batch` axis (PyTorch's fast attention path off, which
  the exporter cannot trace; its classifier head, zero-initialised by
  torchvision, drawn from N(0, 0.02) so that the output is not all zeros).
- Transformers (BERT-base, GPT-2, DistilBERT: the full default configs, eager
  attention): inputs `input_ids` and `attention_mask` int64 [batch, sequence]
  with both axes dynamic, output `last_hidden_state`.

Writes OUT_DIR/NAME.onnx (skipped when present, unless --force) and
OUT_DIR/NAME.json ({"inputs": [{name, dtype, shape}], "vocab": N} with symbolic
dims as strings) for bench/zoo/zoo.py. Each export is checked on onnxruntime
against the PyTorch module at sizes other than the traced ones (transformers:
batch x sequence 1x5 and 3x12 with padding in the mask; ViT batch 2) and
refused above 1e-4 of the output's max |value| ("export_check" in NAME.json).

--wide adds WIDE_VISION and WIDE_TEXT below (Inception v3 at 299x299, the
segmentation models' "out" head, the large language models in small 2-layer
configurations); --exporter dynamo exports through torch.export instead;
--attention sdpa gives the transformers scaled_dot_product_attention (ONNX
Attention from opset 23 with the dynamo exporter). docs/MODEL.md ("zoo") has the rest.
"""
import argparse
import json
import os
import sys
import time
import warnings

import torch

VISION = [  # (name, torchvision constructor name)
    ("resnet50", "resnet50"),
    ("mobilenet_v2", "mobilenet_v2"),
    ("mobilenet_v3_large", "mobilenet_v3_large"),
    ("efficientnet_b0", "efficientnet_b0"),
    ("densenet121", "densenet121"),
    ("shufflenet_v2_x1_0", "shufflenet_v2_x1_0"),
    ("regnet_y_400mf", "regnet_y_400mf"),
    ("convnext_tiny", "convnext_tiny"),
    ("vit_b_16", "vit_b_16"),
]
# --wide adds these: the rest of torchvision's classification families, and
# its segmentation models (Resize, dilated convolutions, two outputs cut to one)
WIDE_VISION = [
    ("alexnet", "alexnet"),
    ("vgg11_bn", "vgg11_bn"),
    ("squeezenet1_1", "squeezenet1_1"),
    ("googlenet", "googlenet"),
    ("inception_v3", "inception_v3"),
    ("mnasnet1_0", "mnasnet1_0"),
    ("mobilenet_v3_small", "mobilenet_v3_small"),
    ("resnext50_32x4d", "resnext50_32x4d"),
    ("efficientnet_v2_s", "efficientnet_v2_s"),
    ("regnet_x_400mf", "regnet_x_400mf"),
    ("swin_t", "swin_t"),
    ("maxvit_t", "maxvit_t"),
    ("fcn_resnet50", "segmentation.fcn_resnet50"),
    ("lraspp_mobilenet_v3_large", "segmentation.lraspp_mobilenet_v3_large"),
]
TEXT = ["bert_base", "gpt2", "distilbert"]
# --wide: more transformer families, small configurations for the large ones
# (same operators, fewer layers): rotary embeddings, RMS norms, gated MLPs,
# relative position buckets, grouped-query attention
WIDE_TEXT = ["roberta", "albert", "electra", "t5_encoder", "llama_small", "qwen2_small", "gpt_neo_small",
             "mistral_small"]
ALL = [n for n, _ in VISION] + TEXT
WIDE = [n for n, _ in WIDE_VISION] + WIDE_TEXT


class TextWrapper(torch.nn.Module):
    """(input_ids, attention_mask) -> last_hidden_state, so that every
    transformer exports with the same two inputs (GPT-2's mask is otherwise
    an optional keyword the exporter drops)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class SegWrapper(torch.nn.Module):
    """A segmentation model's dict output -> its "out" tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def image_side(name):
    return 299 if name == "inception_v3" else 224


def text_model(name, attention="eager"):
    import transformers as tf

    small = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, use_cache=False)
    if name == "bert_base":
        cfg = tf.BertConfig()
        model = tf.BertModel(cfg, add_pooling_layer=False)
    elif name == "gpt2":
        cfg = tf.GPT2Config(use_cache=False)
        model = tf.GPT2Model(cfg)
    elif name == "distilbert":
        cfg = tf.DistilBertConfig()
        model = tf.DistilBertModel(cfg)
    elif name == "roberta":
        cfg = tf.RobertaConfig()
        model = tf.RobertaModel(cfg, add_pooling_layer=False)
    elif name == "albert":
        cfg = tf.AlbertConfig()
        model = tf.AlbertModel(cfg, add_pooling_layer=False)
    elif name == "electra":
        cfg = tf.ElectraConfig()
        model = tf.ElectraModel(cfg)
    elif name == "t5_encoder":
        cfg = tf.T5Config(num_layers=2, use_cache=False)
        model = tf.T5EncoderModel(cfg)
    elif name == "llama_small":
        cfg = tf.LlamaConfig(**small)
        model = tf.LlamaModel(cfg)
    elif name == "qwen2_small":
        cfg = tf.Qwen2Config(**small)
        model = tf.Qwen2Model(cfg)
    elif name == "mistral_small":
        cfg = tf.MistralConfig(**small)
        model = tf.MistralModel(cfg)
    else:
        cfg = tf.GPTNeoConfig(hidden_size=256, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]],
                              use_cache=False)
        model = tf.GPTNeoModel(cfg)
    model.config._attn_implementation = attention
    return TextWrapper(model), cfg.vocab_size


def export_one(name, path, meta_path, opset, exporter, attention="eager"):
    import torchvision

    torch.manual_seed(0)
    meta = {"model": name, "opset": opset, "exporter": exporter, "attention": attention}
    if name in TEXT + WIDE_TEXT:
        model, vocab = text_model(name, attention)
        ids = torch.randint(0, vocab, (2, 8), dtype=torch.int64)
        mask = torch.ones(2, 8, dtype=torch.int64)
        args, names = (ids, mask), ["input_ids", "attention_mask"]
        dyn = {n: {0: "batch", 1: "sequence"} for n in names}
        dyn["last_hidden_state"] = {0: "batch", 1: "sequence"}
        out_names = ["last_hidden_state"]
        meta["vocab"] = vocab
        meta["inputs"] = [{"name": n, "dtype": "int64", "shape": ["batch", "sequence"]} for n in names]
    else:
        ctor = torchvision.models
        for part in dict(VISION + WIDE_VISION)[name].split("."):
            ctor = getattr(ctor, part)
        model = ctor(weights=None, **({"weights_backbone": None} if "." in dict(VISION + WIDE_VISION)[name] else {}))
        if name == "googlenet":
            # its N(0, 0.01) initialisation, through eval-mode batch norms of unit
            # variance, leaves activations near zero: the output is the classifier's
            # bias whatever the input (which every runtime matches exactly)
            for m in model.modules():
                if isinstance(m, torch.nn.Conv2d):
                    torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        if hasattr(model, "aux_classifier") or name.startswith("lraspp"):
            model = SegWrapper(model)
        side = image_side(name)
        args, names, out_names = (torch.randn(1, 3, side, side),), ["input"], ["output"]
        dyn = None
        shape = [1, 3, side, side]
        if name == "vit_b_16":
            # torchvision zero-initialises the classifier head: the output
            # would be all zeros, which matches anything
            torch.nn.init.normal_(model.heads.head.weight, std=0.02)
            torch.backends.mha.set_fastpath_enabled(False)
            dyn = {"input": {0: "batch"}, "output": {0: "batch"}}
            shape[0] = "batch"
        meta["inputs"] = [{"name": "input", "dtype": "float32", "shape": shape}]
    model.eval()
    with torch.no_grad():
        if exporter == "dynamo":
            # torch.export's dynamic shapes: the same axes, by name
            shapes = None
            if dyn:
                dims = {}
                shapes = tuple({ax: dims.setdefault(nm, torch.export.Dim(nm, min=1, max=4096))
                                for ax, nm in dyn[n].items()} if n in dyn else None for n in names)
            onnx_prog = torch.onnx.export(model, args, input_names=names, output_names=out_names,
                                          dynamic_shapes=shapes, opset_version=opset, dynamo=True,
                                          optimize=True, external_data=False)
            onnx_prog.save(path)
        else:
            torch.onnx.export(model, args, path, input_names=names, output_names=out_names,
                              dynamic_axes=dyn, opset_version=opset, dynamo=False,
                              do_constant_folding=True)
    meta["export_check"] = check_export(name, model, path, meta)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    return meta["export_check"]


def check_export(name, model, path, meta):
    """The exported file against the PyTorch module it came from, on
    onnxruntime, at sizes other than the traced ones (a trace can freeze a
    size): returns max |ort - torch| / max |torch| over the sizes."""
    import numpy as np
    import onnxruntime as ort

    if name in TEXT + WIDE_TEXT:
        sizes = [(1, 5), (3, 12)]
    else:
        sizes = [(2, 0)] if name == "vit_b_16" else [(1, 0)]
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for b, s in sizes:
        if name in TEXT + WIDE_TEXT:
            ids = torch.randint(0, meta["vocab"], (b, s), generator=g)
            mask = torch.ones(b, s, dtype=torch.int64)
            mask[-1, s - s // 3:] = 0
            args = (ids, mask)
        else:
            side = image_side(name)
            args = (torch.rand(b, 3, side, side, generator=g) * 2 - 1,)
        with torch.no_grad():
            want = model(*args).numpy()
        got = sess.run(None, {i.name: a.numpy() for i, a in zip(sess.get_inputs(), args)})[0]
        if got.shape != want.shape:
            raise RuntimeError("%s: onnxruntime gives %s, torch %s" % (path, got.shape, want.shape))
        scale = float(np.abs(want).max())
        if not scale > 0:
            raise RuntimeError("%s: the output is all zeros (a zero-initialised layer?)" % path)
        worst = max(worst, float(np.abs(got - want).max()) / scale)
        if b >= 2 or name in TEXT + WIDE_TEXT:
            continue
        with torch.no_grad():  # a constant output matches anything: it must depend on the input
            other = model(-args[0]).numpy()
        if float(np.abs(other - want).max()) < 1e-3 * scale:
            raise RuntimeError("%s: the output hardly depends on the input (vanishing activations?)" % path)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(ALL))
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--wide", action="store_true", help="also the wider set: " + ",".join(WIDE))
    ap.add_argument("--exporter", choices=["torchscript", "dynamo"], default="torchscript",
                    help="torch.onnx.export(dynamo=False), the default, or torch.export's dynamo=True")
    ap.add_argument("--attention", choices=["eager", "sdpa"], default="eager",
                    help="the transformers' attention: eager (explicit MatMul/Softmax) or sdpa "
                         "(scaled_dot_product_attention: Attention from opset 23 with --exporter dynamo)")
    a = ap.parse_args()
    known = ALL + WIDE
    names = [n for n in a.only.split(",") if n] or (known if a.wide else ALL)
    bad = [n for n in names if n not in known]
    if bad:
        sys.stderr.write("export.py: unknown model(s) %s (known: %s)\n" % (",".join(bad), ",".join(known)))
        return 2
    os.makedirs(a.out_dir, exist_ok=True)
    torch.set_num_threads(1)
    failed = 0
    warnings.filterwarnings("ignore")  # the exporter's tracer notices; check_export is the real check
    for n in names:
        path = os.path.join(a.out_dir, n + ".onnx")
        if os.path.exists(path) and not a.force:
            print("%-20s kept %s" % (n, path))
            continue
        t0 = time.time()
        tmp = path + ".part"
        try:
            err = export_one(n, tmp, os.path.join(a.out_dir, n + ".json"), a.opset, a.exporter, a.attention)
        except Exception as e:  # the exporter's own failure: the others still export
            msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
            sys.stderr.write("export.py: %s: the %s exporter failed: %s\n" % (n, a.exporter, msg))
            failed += 1
            continue
        if err > 1e-4:
            sys.stderr.write("export.py: %s: onnxruntime differs from torch by %.1e of the max\n" % (n, err))
            return 1
        os.replace(tmp, path)
        print("%-20s %6.1f s  %s (%.0f MB), onnxruntime vs torch %.1e" % (
            n, time.time() - t0, path, os.path.getsize(path) / 1e6, err), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
