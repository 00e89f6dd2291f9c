"""onnx_cases.py — the onnx package's backend test models, as onnx's own runner reads them.

One `Case` per model of the installed wheel's onnx/backend/test/data/{SET}: the model
file, its tolerances (rtol/atol: data.json, else the loader's 1e-3 / 1e-7) and its data
sets (inputs and expected outputs). The rules are those of onnx/backend/test/loader and
runner (read there, not invented here):

- light/: data/real/test_X/data.json names `onnx/backend/test/data/light/light_X.onnx`
  and its tolerances; the inputs are the runner's dummy data
  (`Runner.generate_dummy_data(x, seed=0, random=False)`: arange(n)/n, float32, unknown
  dims 1) for every graph input that is not an initializer; the expected outputs are
  light_X_output_I.pb beside the model.
- pytorch-converted/, pytorch-operator/, simple/, node/: test_X/model.onnx with
  test_data_set_K/input_I.pb and output_I.pb.
- legacy/ is tessel's own (tests/models/gen_models.py, opsets 1 to 6, NumPy
  expected outputs from the operator texts), in the same layout.
- node/ is not shipped in every wheel: when absent, `generate_node` writes it in that
  layout from onnx.backend.test.case.node (the cases onnx's runner runs for kind "node").

Docs: docs/CONFORMANCE.md.
"""
import glob
import json
import os
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

SETS = ["light", "pytorch-converted", "pytorch-operator", "simple", "node", "legacy"]
RTOL, ATOL = 1e-3, 1e-7  # onnx/backend/test/loader's defaults


@dataclass
class DataSet:
    """One run: inputs as (graph input name, array or .pb path), expected .pb paths."""
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)


@dataclass
class Case:
    set: str
    name: str
    model: str
    rtol: float = RTOL
    atol: float = ATOL
    datasets: list = field(default_factory=list)

    @property
    def id(self):
        return f"{self.set}/{self.name}"


def data_dir():
    """The installed wheel's backend test data folder."""
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def free_inputs(model):
    """Graph input names that are not initializers, in order (what input_I.pb feeds)."""
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def light_cases(root):
    """light/: models named by data/real/*/data.json, inputs made as the runner makes them."""
    from onnx.backend.test.runner import Runner
    cases = []
    for meta in sorted(glob.glob(os.path.join(root, "real", "*", "data.json"))):
        with open(meta) as f:
            d = json.load(f)
        url = d.get("url", "")
        if not url.startswith("onnx/backend/test/data/light/"):
            continue
        path = os.path.join(root, "light", os.path.basename(url))
        if not os.path.exists(path):
            continue
        model = onnx.load(path, load_external_data=False)
        ds = DataSet()
        for x in free_inputs(model):
            ds.inputs.append((x.name, Runner.generate_dummy_data(
                x, seed=0, name=d["model_name"], random=False)))
        prefix = os.path.splitext(path)[0]
        ds.outputs = [f"{prefix}_output_{i}.pb" for i in range(len(model.graph.output))]
        if not all(os.path.exists(p) for p in ds.outputs):
            ds.outputs = None  # the runner would use the reference evaluator: done lazily
        cases.append(Case("light", os.path.basename(os.path.dirname(meta)), path,
                          d.get("rtol", RTOL), d.get("atol", ATOL), [ds]))
    return cases


def dir_cases(set_name, set_dir):
    """test_X/model.onnx cases of one set folder (tolerances from test_X/data.json)."""
    cases = []
    for d in sorted(glob.glob(os.path.join(set_dir, "*", "model.onnx"))):
        case_dir = os.path.dirname(d)
        c = Case(set_name, os.path.basename(case_dir), d)
        meta = os.path.join(case_dir, "data.json")
        if os.path.exists(meta):
            with open(meta) as f:
                m = json.load(f)
            c.rtol, c.atol = m.get("rtol", RTOL), m.get("atol", ATOL)
        for t in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
            n_in = len(glob.glob(os.path.join(t, "input_*.pb")))
            n_out = len(glob.glob(os.path.join(t, "output_*.pb")))
            c.datasets.append(DataSet(
                [(None, os.path.join(t, f"input_{i}.pb")) for i in range(n_in)],
                [os.path.join(t, f"output_{i}.pb") for i in range(n_out)]))
        cases.append(c)
    return cases


def load_cases(set_name, node_dir=None, legacy_dir=None):
    """The cases of one set; node/ from node_dir when the wheel lacks it (None: none);
    legacy/ (not onnx's: tests/models/gen_models.py writes it, opsets 1 to 6) from
    legacy_dir."""
    if set_name == "legacy":
        return dir_cases("legacy", legacy_dir) if legacy_dir and os.path.isdir(legacy_dir) else []
    root = data_dir()
    if set_name == "light":
        return light_cases(root)
    if set_name == "node" and not os.path.isdir(os.path.join(root, "node")):
        return dir_cases("node", node_dir) if node_dir and os.path.isdir(node_dir) else []
    return dir_cases(set_name, os.path.join(root, set_name))


def _proto_of(value, vinfo):
    """A value of a node case's data set as the proto cmd_tools would write."""
    t = vinfo.type
    if isinstance(value, onnx.TensorProto):
        return value
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, vinfo.name)
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, vinfo.name)
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, vinfo.name)
    return numpy_helper.from_array(np.asarray(value), vinfo.name)


def generate_node(out_dir):
    """Writes node/ (test_X/model.onnx, data.json, test_data_set_K) into out_dir from the
    wheel's onnx.backend.test.case.node with np.random seeded; once per onnx version
    (out_dir/.onnx-version).
    Returns the number of cases."""
    stamp, version = os.path.join(out_dir, ".onnx-version"), f"onnx {onnx.__version__}, seed 0"
    if os.path.exists(stamp) and open(stamp).read() == version:
        return len(glob.glob(os.path.join(out_dir, "*", "model.onnx")))
    import shutil
    import warnings
    from onnx.backend.test.loader import load_model_tests
    shutil.rmtree(out_dir, ignore_errors=True)
    np.random.seed(0)  # the cases draw their inputs from np.random: the same on every machine
    with warnings.catch_warnings():  # the cases' own numpy overflows (cast, reduce)
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    for c in cases:
        d = os.path.join(out_dir, c.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(c.model.SerializeToString())
        with open(os.path.join(d, "data.json"), "w") as f:
            json.dump({"rtol": c.rtol, "atol": c.atol}, f)
        for k, (ins, outs) in enumerate(c.data_sets):
            t = os.path.join(d, f"test_data_set_{k}")
            os.makedirs(t, exist_ok=True)
            for kind, vals, infos in (("input", ins, c.model.graph.input),
                                      ("output", outs, c.model.graph.output)):
                for i, v in enumerate(vals):
                    with open(os.path.join(t, f"{kind}_{i}.pb"), "wb") as f:
                        f.write(_proto_of(v, infos[i]).SerializeToString())
    with open(stamp, "w") as f:
        f.write(version)
    return len(cases)


def read_tensor(path):
    """A TensorProto .pb file as (name, ndarray); ValueError naming the file otherwise."""
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        data = f.read()
    try:
        t.ParseFromString(data)
        return t.name, numpy_helper.to_array(t)
    except Exception as e:  # a sequence/map/optional proto, or a dtype numpy lacks
        raise ValueError(f"{os.path.basename(path)}: not a tensor numpy can hold ({e})")


def reference_outputs(model_path, feeds):
    """Expected outputs by onnx's ReferenceEvaluator (the runner's fallback for light/)."""
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(onnx.load(model_path)).run(None, feeds)
