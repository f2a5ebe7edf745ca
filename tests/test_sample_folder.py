"""The tests' own real-format samples live in a temporary folder that goes when the test process ends."""

import subprocess
import sys
from pathlib import Path


def test_the_samples_folder_is_removed_when_its_process_ends():
    code = "from tests.helpers.samples import _folder, criteo_sample; p = criteo_sample(); print(_folder(), p)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    folder, sample = out.stdout.split()
    assert Path(sample).is_relative_to(folder)  # the sample was written there
    assert not Path(folder).exists()
