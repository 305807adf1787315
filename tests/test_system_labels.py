"""A recorded system's label ("machine" in system.json) names the driver its own nvidia-smi printed.

Review R1 m7: h100-single-gpu read "driver and CUDA 13.0" while its nvidia-smi.txt says
"Driver Version: 580.159.04". The expected version is read from each system's own recorded
nvidia-smi.txt (the banner's "Driver Version:" field), never from the code under test.
"""

import re

import pytest

from gputopo import reference

WITH_SMI = [s for s in reference.list_systems() if "nvidia-smi.txt" in reference.files(s)]


def test_some_system_has_a_plain_nvidia_smi_recording():
    assert "h100-single-gpu" in WITH_SMI


@pytest.mark.parametrize("system", WITH_SMI)
def test_a_label_that_mentions_the_driver_gives_its_recorded_version(system):
    found = re.search(r"Driver Version:\s*(\S+)", reference.read_text(system, "nvidia-smi.txt"))
    label = reference.system_info(system)["machine"]
    if not found or "driver" not in label.lower():
        pytest.skip("no driver version recorded, or a label that does not mention the driver")
    assert found.group(1) in label, f"{system}: label {label!r} lacks driver {found.group(1)}"
