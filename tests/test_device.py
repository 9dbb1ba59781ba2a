import pytest
import torch

from course_lib.device import environment_report, resolve_device


def test_auto_picks_what_is_there():
    expected = "cuda" if torch.cuda.is_available() else None
    device = resolve_device("auto")
    if expected:
        assert device.type == expected
    assert resolve_device("cpu") == torch.device("cpu")


def test_report_names_versions_and_device():
    report = environment_report()
    assert report["torch"] == torch.__version__
    assert report["device"] in ("cpu", "cuda", "mps")
    assert report["colab"] in ("yes", "no")


def test_bad_device_names():
    with pytest.raises(ValueError, match="device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda"):
            resolve_device("cuda")
