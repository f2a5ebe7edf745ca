"""The memory the final stage needs, checked before it starts N training workers (`final.workers`).

A training worker holds the final template (the supernet the top-k are exported from, its tables included) and
one model in training: its embedding tables with one Adagrad sum per weight (Adagrad is the trainer's only
optimizer), the gradient rows of one batch, the dense weights with their gradients and Adagrad sums, and the
activations of one batch. The stage's own process holds the template and the weights of the best model so far.
A worker builds the template from its shape (`ctrnas.pipeline.final.workers`): with `final.layernorm: auto`
both settings are built, each with its own tables until they share the first's, so while a worker starts it
may hold two copies; the estimate counts two per worker, and one more in the stage's process
(`tests/pipeline/test_final_memory.py` measures the worker's). What depends on the model is counted on the model itself, built on a copy
of the schema whose tables have one or two rows (exported from the template with its stem swapped for a tiny
one), so no full-size table, and no second template, is allocated to estimate it. Archs with their own
embedding width export from a dense part of the template's space at that width, built beside the template
and counted with it (`width_bytes`); their wider tables are counted on the model itself.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from dataclasses import dataclass

from ctrnas.data.schema import DatasetSchema
from ctrnas.errors import NotEnoughMemory

GIB = 2**30
FLOAT_BYTES = 4
ADAGRAD_SLOTS = 1  # Adagrad keeps one running sum of squared gradients per weight
# a training worker's RSS after its imports (torch, TorchRec, scikit-learn): 475 MiB measured on Linux, CPU torch
WORKER_BYTES = 512 * 2**20


@dataclass(frozen=True)
class ModelSize:
    """What one model of the final stage is made of (weights are float32)."""

    table_params: int  # embedding weights, all tables
    dense_params: int  # every other weight
    row_width: int  # embedding weights one field's id looks up, over the tables it has
    fields: int  # sparse fields (one id each per example)
    saved_per_example: int  # bytes autograd saves for backward per example (the activations)

    @property
    def weight_bytes(self) -> int:
        return FLOAT_BYTES * (self.table_params + self.dense_params)

    def training_bytes(self, cfg) -> int:
        """Peak bytes of training it with TrainConfig `cfg`: tables with their Adagrad sums (and whole-table
        gradients with `embedding_update: dense`), else the gradient rows of one batch and the squares
        Adagrad makes of them; dense weights, gradients and Adagrad sums; the activations of one training
        batch and their gradients, or of one evaluation batch when that is larger; with `restore_best`, one
        copy of every weight (the best evaluation's, `ctrnas.train.trainer`)."""
        dense_tables = cfg.embedding_update == "dense"
        best_copy = bool(cfg.restore_best)
        tables = self.table_params * (1 + ADAGRAD_SLOTS + dense_tables + best_copy)
        grad_rows = 0 if dense_tables else 2 * cfg.batch_size * self.fields * self.row_width
        dense = self.dense_params * (2 + ADAGRAD_SLOTS + best_copy)
        activations = max(2 * cfg.batch_size, cfg.eval_batch_size) * self.saved_per_example
        return FLOAT_BYTES * (tables + grad_rows + dense) + activations


def tiny_schema(schema: DatasetSchema, rows: int) -> DatasetSchema:
    """`schema` with every table `rows` rows long."""
    return dataclasses.replace(schema, sparse=tuple(dataclasses.replace(f, cardinality=rows) for f in schema.sparse))


def model_size(build, schema: DatasetSchema, row_cap: int | None) -> ModelSize:
    """The ModelSize of a model on `schema` (tables one per field, of the field's cardinality capped at
    `row_cap`, each of its own width), counted on `build(rows)`, the model on `tiny_schema(schema,
    rows)`, for 1 and 2 rows: one more row in every table adds one row's width per field; the rest is dense."""
    one, two = build(1), build(2)
    p1, p2 = (sum(p.numel() for p in m.parameters()) for m in (one, two))
    fields = len(schema.sparse)
    width = (p2 - p1) // max(fields, 1)
    rows = {f.name: max(min(f.cardinality, row_cap) if row_cap else f.cardinality, 1) for f in schema.sparse}
    saved = (saved_bytes(one, schema, 4) - saved_bytes(one, schema, 2)) // 2  # per example, constants cancel
    return ModelSize(_table_params(one, two, rows, width, p2 - p1), p1 - width * fields, width, fields, max(saved, 0))


def _table_params(one, two, rows: dict[str, int], width: int, growth: int) -> int:
    """Embedding weights at full size: each table's width (its growth from 1 to 2 rows) times its field's
    rows, so tables of different widths (`Arch.table_dims`) count as they are; tables named otherwise than
    the stem's `t_<field>` count at the mean width."""
    import re

    grown = {n: p.numel() for n, p in two.named_parameters()}
    total, seen = 0, 0
    for n, p in one.named_parameters():
        step = grown.get(n, p.numel()) - p.numel()
        if step <= 0:
            continue
        m = re.search(r"(?:^|\.)t_(.+)\.weight$", n)
        if m is None or m.group(1) not in rows:
            return width * sum(rows.values())
        total += step * rows[m.group(1)]
        seen += step
    return total if seen == growth else width * sum(rows.values())


def saved_bytes(model, schema: DatasetSchema, batch: int) -> int:
    """Bytes autograd saves for backward over one forward of `batch` rows (all ids 0) and its log loss;
    tensors that share a parameter's storage are weights, not activations."""
    import torch
    from torch.autograd.graph import saved_tensors_hooks

    from ctrnas.train.batches import make_batch

    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen, total = set(), 0

    def pack(t):
        nonlocal total
        if t.layout == torch.strided:
            ptr = t.untyped_storage().data_ptr()
            if ptr not in weights and ptr not in seen:
                seen.add(ptr)
                total += t.untyped_storage().nbytes()
        return t

    b = make_batch(torch.zeros(batch, schema.dense_dim), torch.zeros(batch, len(schema.sparse), dtype=torch.long),
                   torch.zeros(batch), schema.sparse_names)
    model.train()
    with saved_tensors_hooks(pack, lambda t: t):
        logits = model(b.dense_features, b.sparse_features)
        torch.nn.functional.binary_cross_entropy_with_logits(logits, b.labels)
    return total


def tensor_bytes(*modules) -> int:
    """Bytes of the parameters and buffers of `modules`, a storage shared between them counted once."""
    seen, total = set(), 0
    for m in modules:
        for t in (*m.parameters(), *m.buffers()):
            ptr = t.untyped_storage().data_ptr()
            if ptr not in seen:
                seen.add(ptr)
                total += t.untyped_storage().nbytes()
    return total


def available_memory() -> int:
    """Bytes this process may still allocate: the machine's available memory (psutil), or the room left under
    this process's cgroup limit (a container's) when that is lower."""
    import psutil

    room = psutil.virtual_memory().available
    cgroup = _cgroup_room()
    return min(room, cgroup) if cgroup is not None else room


def _cgroup_room(own: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int | None:
    """Room left under the lowest cgroup memory limit over this process (v2 or v1), or None without one: its
    own cgroup's and every parent's up to the mount root (a container's own cgroup is often mounted there)."""
    from pathlib import Path

    root = Path(root)
    try:
        lines = Path(own).read_text().splitlines()
    except OSError:
        return None
    rooms = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            base, files = root, ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):
            base, files = root / "memory", ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        parts = [] if ".." in path.split("/") else [p for p in path.split("/") if p]  # "..": outside this view
        rooms += [cgroup_room(base.joinpath(*parts[:i]), *files) for i in range(len(parts), -1, -1)]
    rooms = [r for r in rooms if r is not None]
    return min(rooms) if rooms else None


def cgroup_room(folder, limit_file: str, usage_file: str, cache_key: str) -> int | None:
    """Limit - usage + inactive file cache (reclaimable, as `docker stats` counts it) of one cgroup folder;
    None when it has no limit ("max", or v1's huge number) or cannot be read."""
    from pathlib import Path

    folder = Path(folder)
    try:
        limit, usage = (folder / limit_file).read_text().strip(), int((folder / usage_file).read_text())
    except (OSError, ValueError):
        return None
    if not limit.isdigit() or int(limit) >= 2**60:
        return None
    cache = 0
    try:
        for line in (folder / "memory.stat").read_text().splitlines():
            key, value = line.split()
            cache = int(value) if key == cache_key else cache
    except (OSError, ValueError):
        pass
    return max(int(limit) - usage + cache, 0)


def worker_bytes(model: int, template: int) -> int:
    """One training worker: imports, the template, and the larger of a model in training and the template's
    second copy while the worker starts (both LayerNorm settings' tables, before they share one)."""
    return WORKER_BYTES + template + max(model, template)


def fit_workers(requested: int, model: int, weights: int, template: int, available: int,
                may_run_here: bool) -> tuple[int, str | None]:
    """(workers to start, a one-line note when fewer than `requested`) for `requested` training workers, each
    needing `WORKER_BYTES + template + max(model, template)` bytes (a model in training, or the second copy of
    the template while it starts), beside this process's template and the larger of its second copy (built
    for both LayerNorm settings) and two models' `weights` (one arriving, the best so far). 0 workers: train in this process
    (allowed when `may_run_here`), which needs `model + weights` more. Raises NotEnoughMemory when not even
    that fits."""
    per_worker = worker_bytes(model, template)
    here = template + max(template, 2 * weights)
    fit = max((available - here) // per_worker, 0) if requested > 0 else 0
    if requested > 0 and fit >= requested:
        return requested, None
    in_process = model + weights
    if fit >= 2 or (fit == 1 and not may_run_here):
        n = int(fit)
    elif may_run_here and in_process <= available:
        n = 0
    else:
        one = per_worker + here if requested > 0 and not may_run_here else in_process
        raise NotEnoughMemory(f"final stage: training one model needs ~{_gib(one)} GiB ({_gib(model)} GiB for the "
                              f"model with its optimizer state and activations), {_gib(available)} GiB available; "
                              "use fewer hash buckets or a final.train.row_cap, or set final.memory_limit_gb when "
                              "more memory is free than the machine reports")
    if requested == 0:
        return 0, None
    where = f"{n} at a time" if n else "one at a time in this process"
    return n, (f"final stage: {requested} training workers would need ~{_gib(here + requested * per_worker)} GiB "
               f"({_gib(per_worker)} GiB each: model {_gib(model)}, template {_gib(template)}), "
               f"{_gib(available)} GiB available: training {where} (final.memory_limit_gb sets the memory to assume)")


def _gib(n: int) -> str:
    return f"{n / GIB:.1f}"


def workers_that_fit(recipe, data, template, jobs: list[tuple], workers: int) -> int:
    """How many training workers the final stage starts for `jobs` (("arch", Arch) | ("baseline", name)) when
    it asks for `workers`: that many, fewer (saying why on stderr) or 0 (train in this process), after
    `fit_workers`. Actors of a Ray cluster (`execution.address` set) may run on other machines: their count is
    kept; a private local Ray's run here and are counted as worker processes."""
    backend, n = recipe.execution.resolve(workers)
    if backend == "ray" and recipe.execution.address is not None:
        return n
    limit = recipe.final.memory_limit_gb
    available = int(limit * GIB) if limit is not None else available_memory()
    sizes = job_sizes(recipe, data, template, jobs)
    model = max(s.training_bytes(recipe.final_train) for s in sizes)
    weights = max(s.weight_bytes for s in sizes)
    held = tensor_bytes(*(template.values() if isinstance(template, dict) else [template]))
    held += width_bytes(template, jobs)
    requested = min(n, len(jobs)) if backend != "serial" else 0
    # workers asked for by name (execution.backend) are not swapped for this process; "serial" is this process
    fit, note = fit_workers(requested, model, weights, held, available, recipe.execution.backend in (None, "serial"))
    if note:
        print(note, file=sys.stderr)
    return fit


def width_bytes(template, jobs: list[tuple]) -> int:
    """Bytes of the dense parts at the archs' own embedding widths (`Arch.emb_dim`) that exporting them
    builds beside the template (`ctrnas.supernet.widths`; kept with it, so counted with it)."""
    from ctrnas.supernet.widths import dense_at

    shapes = list(template.values()) if isinstance(template, dict) else [template]
    dims = {x.emb_dim for kind, x in jobs if kind == "arch" and x.emb_dim not in (None, shapes[0].emb_dim)}
    return sum(tensor_bytes(dense_at(t, d)) for t in shapes for d in sorted(dims))


def job_sizes(recipe, data, template, jobs: list[tuple]) -> list[ModelSize]:
    """The ModelSize of each job's model, counted on models built on tiny tables (`model_size`)."""
    from ctrnas.pipeline.fitness.scratch import job_model

    tiny = {rows: (dataclasses.replace(data, schema=tiny_schema(data.schema, rows)),
                   _tiny_template(template, tiny_schema(data.schema, rows))) for rows in (1, 2)}
    return [model_size(lambda rows, what=what: job_model(recipe, *tiny[rows], what), data.schema,
                       recipe.final_train.row_cap) for what in jobs]


def _tiny_template(template, schema: DatasetSchema):
    """`template` with tiny tables: a shallow copy whose stem is a new one on `schema`, every other module
    shared (nothing is copied: a final template's dense part alone can take a GiB)."""
    from ctrnas.supernet.stem import EmbeddingStem

    shapes = template if isinstance(template, dict) else {None: template}
    old = next(iter(shapes.values())).stem
    stem = EmbeddingStem(schema, old.dim, old.row_cap)  # final.layernorm "auto": both shapes share one stem
    # the first-order term's 1-wide tables (`Arch.first_order`) are tables too: tiny as well
    first = EmbeddingStem(schema, 1, old.row_cap) if getattr(next(iter(shapes.values())), "first_order", None) \
        is not None else None
    tiny = {}
    for key, supernet in shapes.items():
        tiny[key] = copy.copy(supernet)
        tiny[key]._modules = {**supernet._modules, "stem": stem, "first_order": first}
    return tiny if isinstance(template, dict) else tiny[None]
