"""Scoring with a model folder's `model.pt2` and torch alone: no TorchRec, no model rebuilt.

`model.pt2` (ctrnas.supernet.serving) is a `torch.export` program from encoded rows (dense float32
[B, n_dense], ids int64 [B, n_sparse]) to probabilities, whose last operator is the sigmoid of the logits.
`load_program` reads it and runs its graph op by op: each node calls its ATen operator
(`torch.ops.aten.<op>.<overload>`) on the tensors, ints and lists the archive names, with the weights read
as raw bytes. It returns the logits that sigmoid takes (what the rebuilt model gives, and what the metrics
take), and reads the schema from the model card. Where the folder's program is not one it can run this way
it answers None with the reason, and `predict` rebuilds the model from model.pt as before.

Why not `torch.export.load`: it costs ~5 s of CPU (it imports TorchDynamo, and rebuilds every tensor's
shape symbolically with sympy), and it runs code from the archive in places (it `sympify`s, i.e. evals, the
shape expressions, compiles the input guards into Python, unpickles some payloads). A model folder may come
from anyone: here nothing from the archive is evaluated, only ATen operators and `operator`'s integer
arithmetic are called, and the weights are raw bytes.
"""

from __future__ import annotations

import json
import operator
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctrnas.files import one_line, regular_file

PROGRAM_FILE = "model.pt2"
SCHEMA_MAJOR = 8  # torch.export's serialization schema (torch/_export/serde/schema.py SCHEMA_VERSION) read here
# integer arithmetic on the batch size (e.g. the offsets' length B * F + 1)
OPERATORS = {"_operator.add": operator.add, "_operator.sub": operator.sub, "_operator.mul": operator.mul,
             "_operator.floordiv": operator.floordiv, "_operator.mod": operator.mod, "_operator.neg": operator.neg}
# torch/_export/serde/schema.py ScalarType, Layout, MemoryFormat codes, as torch names them
DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16", 7: "float32", 8: "float64",
          12: "bool", 13: "bfloat16"}
LAYOUTS = {7: "strided"}
MEMORY_FORMATS = {1: "contiguous_format", 2: "channels_last", 3: "channels_last_3d", 4: "preserve_format"}


class NotRunnable(Exception):
    """The program holds something this reader does not run (the rebuilt model serves instead)."""


@dataclass
class Program:
    """A folder's serving program without its final sigmoid: `logits(dense [B, n_dense], ids [B, F]) -> [B]`."""

    steps: list  # (function, positional args, keyword args, output names); args are ("ref", name) or values
    inputs: list[str]  # the names of the user inputs (dense, ids)
    output: str  # the name of the logits
    constants: dict  # weights and buffers by name
    schema: Any  # ctrnas.data.schema.DatasetSchema, from model_card.json
    path: str = PROGRAM_FILE  # where it was read

    def logits(self, dense, ids):
        env = {**self.constants, **dict(zip(self.inputs, (dense, ids)))}
        for fn, args, kwargs, outs in self.steps:
            result = fn(*[_value(a, env) for a in args], **{k: _value(a, env) for k, a in kwargs.items()})
            if not outs:  # e.g. aten._assert_tensor_metadata
                continue
            if len(outs) == 1:
                result = (result,)
            for name, value in zip(outs, result):
                if isinstance(name, list):  # a list output (split, unbind): one name per element
                    env.update(zip(name, value))
                elif name is not None:
                    env[name] = value
        return env[self.output]


def _value(arg, env):
    if isinstance(arg, tuple) and arg and arg[0] == "ref":
        return env[arg[1]]
    if isinstance(arg, list):
        return [_value(a, env) for a in arg]
    return arg


def load_program(folder: str | Path) -> tuple[Program | None, str]:
    """(the program, "") or (None, why the rebuilt model serves instead). A card whose sizes disagree with the
    program's tables is refused (ctrnas.data.sizes), as the rebuilt model refuses one that disagrees with
    model.pt."""
    from ctrnas.data.sizes import check_card_sizes

    folder = Path(folder)
    path = folder / PROGRAM_FILE
    if not path.is_file():
        return None, f"no {PROGRAM_FILE} in {folder}"
    card = _card(folder)
    if isinstance(card, str):
        return None, card
    schema, sizes, dim_key = card
    try:
        with os.fdopen(regular_file(path, "serving program"), "rb") as f:  # a FIFO or a device: refused
            program, stored = _program(f, schema)
    except NotRunnable as e:
        return None, f"{path}: {e}"
    except Exception as e:  # noqa: BLE001 - a damaged archive of any kind: the rebuilt model's loader decides
        return None, f"{path}: not a readable torch.export archive ({one_line(e)})"
    # the tables under their model.pt names ("model." is the serving wrapper's attribute)
    tables = {name.removeprefix("model."): t for name, t in stored.items()}
    check_card_sizes(folder / "model_card.json", *sizes, tables, path, dim_key=dim_key)
    program.path = str(path)
    return program, ""


EXPORT_FORMAT = "ctrnas-export/2"  # ctrnas.supernet.io.EXPORT_FORMAT (which imports TorchRec)


def _card(folder: Path):
    """(schema, (schema JSON, embedding width, row cap), the width's name) of model_card.json (an export's or a
    baseline's), or why not: the rebuilt model's loader then reads it, and names what is wrong."""
    from ctrnas.data.schema import DatasetSchema
    from ctrnas.files import read_json

    try:
        card = read_json(folder / "model_card.json", "model card")
        if card.get("kind") == "baseline":
            dim, row_cap, key = card["build"]["dim"], card["build"]["row_cap"], "build.dim"
        elif card.get("format") == EXPORT_FORMAT:
            dim, row_cap, key = card["emb_dim"], card["row_cap"], "emb_dim"
        else:
            return f"{folder}/model_card.json: not a card of this ctrnas"
        return DatasetSchema.from_json(card["schema"]), (card["schema"], dim, row_cap), key
    except Exception as e:  # noqa: BLE001
        return f"{folder}/model_card.json: {one_line(e)}"


def _program(f, schema) -> tuple[Program, dict]:
    """The program of the archive in file `f`, and its stored tensors by their names in the module."""
    with zipfile.ZipFile(f) as z:
        files = {n.split("/", 1)[1]: n for n in z.namelist() if "/" in n}  # below the archive's one top folder
        if len(files) != len(z.namelist()):
            raise NotRunnable("its zip directory is not one archive folder")

        def read(name: str) -> bytes:
            return z.read(files[name])

        if read("byteorder").decode() != sys.byteorder:
            raise NotRunnable("written on a machine of the other byte order")
        if any(n.startswith(("data/aotinductor/", "data/executorch/")) or n.startswith("models/") and
               n != "models/model.json" for n in files):
            raise NotRunnable("holds more than one plain program")
        program = json.loads(read("models/model.json"))
        major = (program.get("schema_version") or {}).get("major")
        if major != SCHEMA_MAJOR:
            raise NotRunnable(f"written in torch.export schema {major}, not {SCHEMA_MAJOR}")
        stored = {}
        for where in ("weights", "constants"):
            config = json.loads(read(f"data/{where}/model_{where}_config.json"))["config"]
            for fqn, payload in config.items():
                if payload.get("use_pickle"):
                    raise NotRunnable("holds a pickled payload")
                stored[fqn] = _tensor(read(f"data/{where}/{payload['path_name']}"), payload["tensor_meta"])
    return _compile(program["graph_module"], stored, schema), stored


def _tensor(raw: bytes, meta: dict):
    """A weight or buffer as torch.export.save lays it out in its file (dtype, sizes, strides, offset), in a
    tensor of its own: kernels such as aten.linear round differently on a view of a larger buffer, and on a
    tensor not requiring grad, than on the model's own parameters."""
    import warnings

    import torch

    dtype, sizes, strides = _dtype(meta["dtype"]), _ints(meta["sizes"]), _ints(meta["strides"])
    if not raw:  # torch.export.save writes no bytes for an empty or all-zero-size tensor
        t = torch.zeros(sizes, dtype=dtype)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # read-only bytes: only read
            values = torch.frombuffer(raw, dtype=dtype)
        t = torch.empty_strided(sizes, strides, dtype=dtype)
        t.copy_(torch.as_strided(values, sizes, strides, _ints([meta["storage_offset"]])[0]))  # bounds checked
    return t.requires_grad_(bool(meta.get("requires_grad")) and t.is_floating_point())


def _ints(values: list) -> list[int]:
    if not all(isinstance(v, dict) and isinstance(v.get("as_int"), int) for v in values):
        raise NotRunnable("a stored tensor of symbolic shape")
    return [v["as_int"] for v in values]


def _dtype(code):
    import torch

    if code not in DTYPES:
        raise NotRunnable(f"a tensor of dtype code {code}")
    return getattr(torch, DTYPES[code])


def _compile(module: dict, stored: dict, schema) -> Program:
    """The graph's nodes as calls, its inputs bound to the stored tensors and the user's (dense, ids)."""
    graph, signature = module["graph"], module["signature"]
    constants, inputs = {}, []
    for spec in signature["input_specs"]:
        (kind, body), = spec.items()
        if kind == "user_input":
            inputs.append(body["arg"]["as_tensor"]["name"])
        elif kind in ("parameter", "buffer", "tensor_constant"):
            fqn = body.get("parameter_name") or body.get("buffer_name") or body.get("tensor_constant_name")
            if fqn not in stored:
                raise NotRunnable(f"{fqn} is not stored in it")
            constants[body["arg"]["name"]] = stored[fqn]
        else:
            raise NotRunnable(f"an input of kind {kind}")
    outputs = signature["output_specs"]
    if len(inputs) != 2 or len(outputs) != 1 or "user_output" not in outputs[0]:
        raise NotRunnable("not a program of (dense, ids) -> probabilities")
    if graph.get("custom_obj_values"):
        raise NotRunnable("holds custom objects")
    steps, made_by, known = [], {}, {*constants, *inputs}
    for node in graph["nodes"]:
        fn = _function(node["target"])
        args, kwargs = [], {}
        for named in node["inputs"]:
            value = _argument(named["arg"])
            unknown = _refs(value) - known
            if unknown:
                raise NotRunnable(f"uses {sorted(unknown)[0]!r} before any node makes it")
            if named.get("kind") == 2:
                kwargs[named["name"]] = value
            else:
                args.append(value)
        outs = [_output(o) for o in node["outputs"]]
        for o in outs:
            known.update(o if isinstance(o, list) else [o] if o else [])
            if isinstance(o, str):
                made_by[o] = (node["target"], args)
        steps.append((fn, args, kwargs, outs))
    last = outputs[0]["user_output"]["arg"].get("as_tensor", {}).get("name")
    target, args = made_by.get(last, (None, []))
    if target != "torch.ops.aten.sigmoid.default" or not (args and isinstance(args[0], tuple)):
        raise NotRunnable("does not end in the sigmoid of the logits")
    steps = [s for s in steps if s[3] != [last]]  # the sigmoid itself: predict applies its own
    return Program(steps, inputs, args[0][1], constants, schema)


def _refs(value) -> set[str]:
    """The names an argument refers to."""
    if isinstance(value, tuple) and value and value[0] == "ref":
        return {value[1]}
    if isinstance(value, list):
        return set().union(*map(_refs, value)) if value else set()
    return set()


def _function(target: str):
    """The ATen operator (or integer `operator`) a node names; nothing else is called."""
    import torch

    if target in OPERATORS:
        return OPERATORS[target]
    parts = target.split(".")
    if len(parts) != 5 or parts[:3] != ["torch", "ops", "aten"]:
        raise NotRunnable(f"calls {target[:80]!r}, not an ATen operator")
    try:
        fn = getattr(getattr(torch.ops.aten, parts[3]), parts[4])
    except (AttributeError, RuntimeError):
        raise NotRunnable(f"calls {target[:80]!r}, unknown to this torch") from None
    if not isinstance(fn, torch._ops.OpOverload):
        raise NotRunnable(f"calls {target[:80]!r}, not an ATen operator")
    return fn


def _argument(arg: dict):
    """An argument as the call gets it: ("ref", name) for a value the graph made, else the value."""
    import torch

    (kind, v), = arg.items()
    if kind in ("as_tensor", "as_sym_int", "as_sym_bool", "as_optional_tensor"):
        return _ref(v)
    if kind in ("as_tensors", "as_sym_ints", "as_sym_bools", "as_optional_tensors"):
        return [_ref(x) for x in v]
    if kind in ("as_none",):
        return None
    if kind in ("as_int", "as_ints", "as_float", "as_floats", "as_bool", "as_bools", "as_string", "as_strings"):
        return v
    if kind == "as_scalar_type":
        return _dtype(v)
    if kind == "as_layout" and v in LAYOUTS:
        return getattr(torch, LAYOUTS[v])
    if kind == "as_memory_format" and v in MEMORY_FORMATS:
        return getattr(torch, MEMORY_FORMATS[v])
    if kind == "as_device" and v.get("type") == "cpu":
        return torch.device("cpu")
    raise NotRunnable(f"an argument {kind} {str(v)[:60]}")


def _ref(v: dict):
    """A tensor / symbolic int by name, or the literal of a mixed list ([s0, 1]) or an absent optional."""
    if "name" in v:
        return ("ref", v["name"])
    if "as_name" in v:
        return ("ref", v["as_name"])
    if "as_tensor" in v:
        return ("ref", v["as_tensor"]["name"])
    if "as_none" in v:
        return None
    for key in ("as_int", "as_bool"):
        if key in v:
            return v[key]
    raise NotRunnable(f"an argument {str(v)[:60]}")


def _output(o: dict):
    """The name(s) a node's result is bound to: one name, a list of names, or None (unused)."""
    (kind, v), = o.items()
    if kind in ("as_tensor", "as_sym_int", "as_sym_bool"):
        return v.get("name") or v.get("as_name")
    if kind == "as_tensors":
        return [x["name"] for x in v]
    if kind == "as_none":
        return None
    raise NotRunnable(f"an output {kind}")
