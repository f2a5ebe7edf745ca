"""The device setting and the fbgemm check (ctrnas.device), on the CPU with torch.cuda faked where needed."""

import pytest
import torch

from ctrnas.device import check_fbgemm, fbgemm_has_cuda, installed_fbgemm, resolve_device, same_device
from ctrnas.errors import DeviceError


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_cpu_and_auto_without_cuda(no_gpu):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device(None) == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")


def test_cuda_settings_carry_their_index(two_gpus):
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device("cuda") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(DeviceError, match=r"cuda:2.*2 CUDA device\(s\) \(0\.\.1\)"):
        resolve_device("cuda:2")


def test_cuda_without_a_gpu_and_unknown_settings_are_errors(no_gpu):
    with pytest.raises(DeviceError, match="sees no CUDA device"):
        resolve_device("cuda")
    with pytest.raises(DeviceError, match="sees no CUDA device"):
        resolve_device("cuda:0")
    for bad in ("gpu", "cuda:", "cuda:x", "mps0"):
        with pytest.raises(DeviceError, match="expected auto \\| cpu \\| cuda \\| cuda:N"):
            resolve_device(bad)


def test_a_torch_device_passes_through():
    assert resolve_device(torch.device("meta")) == torch.device("meta")


def test_fbgemm_both_wheels_name_which_to_remove():
    with pytest.raises(DeviceError, match="both fbgemm-gpu 1.8.0 and fbgemm-gpu-cpu 1.8.0") as e:
        check_fbgemm(torch.device("cpu"), {"fbgemm-gpu": "1.8.0", "fbgemm-gpu-cpu": "1.8.0"})
    assert "pip uninstall -y fbgemm-gpu`" in str(e.value) and "pip uninstall -y fbgemm-gpu-cpu`" in str(e.value)
    with pytest.raises(DeviceError, match="both"):
        check_fbgemm(None, {"fbgemm-gpu": "1.8.0", "fbgemm-gpu-cpu": "1.8.0"})


def test_fbgemm_without_cuda_kernels_stops_a_cuda_run_only():
    cuda = torch.device("cuda", 0)
    with pytest.raises(DeviceError, match="fbgemm-gpu-cpu 1.8.0 \\(CPU kernels only\\)"):
        check_fbgemm(cuda, {"fbgemm-gpu-cpu": "1.8.0"})
    with pytest.raises(DeviceError, match="fbgemm-gpu 1.8.0\\+cpu"):
        check_fbgemm(cuda, {"fbgemm-gpu": "1.8.0+cpu"})
    with pytest.raises(DeviceError, match="no fbgemm"):
        check_fbgemm(cuda, {})
    check_fbgemm(cuda, {"fbgemm-gpu": "1.8.0+cu128"})
    check_fbgemm(torch.device("cpu"), {"fbgemm-gpu-cpu": "1.8.0"})
    assert fbgemm_has_cuda({"fbgemm-gpu": "1.8.0"}) and not fbgemm_has_cuda({"fbgemm-gpu-cpu": "1.8.0"})


def test_this_environment_has_one_fbgemm_and_passes_on_cpu():
    found = installed_fbgemm()
    assert len(found) <= 1
    check_fbgemm(torch.device("cpu"))


def test_same_device_accepts_inputs_on_a_device_of_the_model():
    model = torch.nn.Linear(2, 1)
    same_device(model, ((torch.zeros(3, 2),), torch.zeros(3)), "here")
    same_device(torch.nn.ReLU(), ((torch.zeros(3, 2, device="meta"),),), "no parameters: nothing to compare")
    with pytest.raises(DeviceError, match="here: the model is on meta but an input tensor is on cpu"):
        same_device(model.to("meta"), [((torch.zeros(3, 2),), torch.zeros(3))], "here")


def test_the_module_reports_the_device_and_fbgemm(no_gpu, capsys, monkeypatch):
    from ctrnas import device

    monkeypatch.setattr(device, "installed_fbgemm", lambda: {"fbgemm-gpu-cpu": "1.8.0"})
    assert device.main() == 0
    assert "auto = cpu" in capsys.readouterr().out
    monkeypatch.setattr(device, "installed_fbgemm", lambda: {"fbgemm-gpu": "1.8.0", "fbgemm-gpu-cpu": "1.8.0"})
    assert device.main() == 1
    assert "pip uninstall -y fbgemm-gpu" in capsys.readouterr().out
