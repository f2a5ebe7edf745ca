"""Which device ctrnas computes on: `auto | cpu | cuda | cuda:N`, resolved once per run, and the fbgemm check.

`auto` is CUDA when torch sees a GPU, else the CPU. `cuda` means the current CUDA device (index 0 unless
CUDA_VISIBLE_DEVICES or torch.cuda.set_device say otherwise); the resolved device always carries its
index, so `param.device == device` comparisons hold.

fbgemm (TorchRec's embedding kernels) comes in two wheels, `fbgemm-gpu` (CUDA) and `fbgemm-gpu-cpu`,
that install into the same `fbgemm_gpu/` folder: with both installed one has overwritten part of the
other. `check_fbgemm` says which to remove, and stops a CUDA run whose fbgemm has no CUDA kernels before
any training starts. Only the TorchRec path needs fbgemm; the vision harness and the proxies on plain
torch modules do not call it.
"""

from __future__ import annotations

from importlib import metadata

import torch

from ctrnas.errors import DeviceError

DEVICE_CHOICES = "auto | cpu | cuda | cuda:N"
FBGEMM_CUDA, FBGEMM_CPU = "fbgemm-gpu", "fbgemm-gpu-cpu"


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """The torch.device for a setting; a torch.device passes through unchanged (tests use `meta`)."""
    if isinstance(spec, torch.device):
        return spec
    text = "auto" if spec is None else str(spec).strip().lower()
    if text == "auto":
        return _cuda(None) if torch.cuda.is_available() else torch.device("cpu")
    if text == "cpu":
        return torch.device("cpu")
    if text == "cuda":
        return _cuda(None)
    if text.startswith("cuda:") and text[5:].isdigit():
        return _cuda(int(text[5:]))
    raise DeviceError(f"device {spec!r}: expected {DEVICE_CHOICES}")


def _cuda(index: int | None) -> torch.device:
    if not torch.cuda.is_available():
        raise DeviceError(f"device 'cuda' requested but torch {torch.__version__} sees no CUDA device "
                          "(torch.cuda.is_available() is False); use --device cpu or auto")
    count = torch.cuda.device_count()
    if index is None:
        index = torch.cuda.current_device()
    if index >= count:
        raise DeviceError(f"device 'cuda:{index}' requested but torch sees {count} CUDA device(s) (0..{count - 1})")
    return torch.device("cuda", index)


def configure(device: torch.device) -> None:
    """Full float32 matrix products and convolutions on CUDA (no TF32), so CUDA scores match the CPU's to
    float rounding; cuDNN may still pick other algorithms (other summation orders) than the CPU kernels."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def installed_fbgemm() -> dict[str, str]:
    """{distribution name: version} of the fbgemm wheels installed in this environment."""
    found = {}
    for name in (FBGEMM_CUDA, FBGEMM_CPU):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def fbgemm_has_cuda(found: dict[str, str] | None = None) -> bool:
    """True when the installed fbgemm is the CUDA build (`fbgemm-gpu` without a `+cpu` local version)."""
    found = installed_fbgemm() if found is None else found
    return FBGEMM_CUDA in found and FBGEMM_CPU not in found and "+cpu" not in found[FBGEMM_CUDA]


def check_fbgemm(device: torch.device | None = None, found: dict[str, str] | None = None) -> None:
    """Raise DeviceError for two fbgemm wheels at once, or for a CUDA device with a CPU-only fbgemm."""
    found = installed_fbgemm() if found is None else found
    if FBGEMM_CUDA in found and FBGEMM_CPU in found:
        raise DeviceError(
            f"both {FBGEMM_CUDA} {found[FBGEMM_CUDA]} and {FBGEMM_CPU} {found[FBGEMM_CPU]} are installed and share "
            f"the folder fbgemm_gpu/; remove one: for CPU `pip uninstall -y {FBGEMM_CUDA}`, for CUDA "
            f"`pip uninstall -y {FBGEMM_CPU}`, then reinstall the one kept with --force-reinstall --no-deps")
    if device is not None and device.type == "cuda" and not fbgemm_has_cuda(found):
        have = ", ".join(f"{n} {v}" for n, v in found.items()) or "no fbgemm"
        raise DeviceError(
            f"device {device} needs fbgemm's CUDA kernels for TorchRec's embedding tables, but this environment has "
            f"{have} (CPU kernels only); install the GPU build (`make install CUDA=cu128`) or use --device cpu")


def same_device(module: torch.nn.Module, tensors, where: str) -> None:
    """Raise DeviceError when a tensor in `tensors` (nested tuples/lists, KeyedJaggedTensors) lies on a device
    that holds none of the module's parameters (a model split over devices may take inputs on any of them)."""
    held = {p.device for p in module.parameters()}
    if not held:
        return
    for t in _tensors(tensors):
        if t.device not in held:
            on = ", ".join(sorted(str(d) for d in held))
            raise DeviceError(f"{where}: the model is on {on} but an input tensor is on {t.device}; "
                              "move the batches with the model (one --device for both)")


def _tensors(obj):
    if torch.is_tensor(obj):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensors(o)
    elif hasattr(obj, "values") and callable(obj.values) and hasattr(obj, "lengths"):  # KeyedJaggedTensor
        yield obj.values()


def main() -> int:
    """`python -m ctrnas.device`: the device `auto` resolves to and the fbgemm check (exit 1 on a problem)."""
    try:
        device = resolve_device("auto")
        check_fbgemm(device)
    except DeviceError as e:
        print(f"ctrnas device: error: {e}")
        return 1
    have = ", ".join(f"{n} {v}" for n, v in installed_fbgemm().items()) or "no fbgemm"
    print(f"ctrnas device: auto = {device}; torch {torch.__version__}; {have}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
