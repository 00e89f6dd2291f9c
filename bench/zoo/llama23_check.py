#!/usr/bin/env python3
"""llama23_check.py - the small Llama (bench/zoo/export.py's llama_small, sdpa attention) exported by
torch at opset 23 (Attention, RotaryEmbedding, RMSNormalization) to /tmp/llama23.onnx, with a b3 s12
input (last row padded) and torch's output in /tmp/l23/; onnxruntime 1.32 cannot run that file, so
the check is `tessel build`/`tessel run` against want.npy. Runs in bench/.venv-zoo from the
repository root. bench/RESULTS.md."""
import sys, numpy as np, torch
sys.path.insert(0, "bench/zoo")
import export
torch.manual_seed(0)
model, vocab = export.text_model("llama_small", "sdpa")
model.eval()
ids = torch.randint(0, vocab, (2, 8)); mask = torch.ones(2, 8, dtype=torch.int64)
B, S = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("sequence", min=1, max=4096)
with torch.no_grad():
    p = torch.onnx.export(model, (ids, mask), input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
                          dynamic_shapes=({0: B, 1: S}, {0: B, 1: S}), opset_version=23, dynamo=True, optimize=True)
p.save("/tmp/llama23.onnx")
g = torch.Generator().manual_seed(1)
ids = torch.randint(0, vocab, (3, 12), generator=g); mask = torch.ones(3, 12, dtype=torch.int64); mask[-1, 9:] = 0
with torch.no_grad():
    want = model(ids, mask).numpy()
import os
os.makedirs("/tmp/l23", exist_ok=True)
np.save("/tmp/l23/input_ids.npy", ids.numpy()); np.save("/tmp/l23/attention_mask.npy", mask.numpy()); np.save("/tmp/l23/want.npy", want)
import onnx, collections
m = onnx.load("/tmp/llama23.onnx")
print(collections.Counter(n.op_type for n in m.graph.node).most_common(12))
