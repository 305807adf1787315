"""Is this machine a VM? (notebook 2 says so, since a VM's PCIe tree and affinity are made up.)

Expected answers come from the fixtures themselves, read by hand: the KVM guest's flags line
carries `hypervisor` and systemd-detect-virt printed `kvm`; the bare-metal EPYC's does not.
The DMI names are the ones the hypervisors write (QEMU's q35 machine type describes itself as
"Standard PC (Q35 + ICH9, 2009)"; Hyper-V guests read "Microsoft Corporation" / "Virtual
Machine"); an EC2 bare-metal instance ("i3.metal") is not a VM.
"""

import importlib
from pathlib import Path

import pytest

detect_module = importlib.import_module("coursetools.detect")
from coursetools.machine import Machine  # noqa: E402
from coursetools.banner import virtualization_sentence  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "virt"
KVM_CPUINFO = (FIXTURES / "cpuinfo-kvm-guest.txt").read_text()
BARE_CPUINFO = (FIXTURES / "cpuinfo-epyc7742-bare-metal.txt").read_text()
KVM_DETECT_VIRT = (FIXTURES / "systemd-detect-virt-kvm.txt").read_text()


def test_the_kvm_guest_is_a_vm_by_both_signs():
    found = detect_module.virtualization_from(detect_virt=KVM_DETECT_VIRT, cpuinfo=KVM_CPUINFO)
    assert found["vm"] is True and found["name"] == "kvm"
    assert found["evidence"] == ["systemd-detect-virt --vm: kvm", "the CPU flag 'hypervisor' in /proc/cpuinfo"]


def test_the_cpu_flag_alone_is_enough():
    found = detect_module.virtualization_from(cpuinfo=KVM_CPUINFO)
    assert found["vm"] is True and found["name"] is None


def test_bare_metal_is_not_a_vm():
    assert "hypervisor" not in detect_module.cpu_flags(BARE_CPUINFO)
    assert "svm" in detect_module.cpu_flags(BARE_CPUINFO)  # the flags line was read at all
    found = detect_module.virtualization_from(cpuinfo=BARE_CPUINFO, detect_virt="none\n",
                                              sys_vendor="Dell Inc.\n", product_name="PowerEdge R650\n")
    assert found == {"vm": False, "name": None, "evidence": []}


@pytest.mark.parametrize("vendor, product, name", [
    ("QEMU", "Standard PC (Q35 + ICH9, 2009)", "qemu"),
    ("Microsoft Corporation", "Virtual Machine", "microsoft"),
    ("VMware, Inc.", "VMware Virtual Platform", "vmware"),
    ("innotek GmbH", "VirtualBox", "oracle"),
    ("Xen", "HVM domU", "xen"),
    ("Google", "Google Compute Engine", "google"),
    ("OpenStack Foundation", "OpenStack Nova", "openstack"),
])
def test_firmware_names_of_hypervisors(vendor, product, name):
    found = detect_module.virtualization_from(sys_vendor=vendor + "\n", product_name=product + "\n")
    assert found["vm"] is True and found["name"] == name
    assert vendor in found["evidence"][0]


def test_firmware_of_bare_metal_clouds_is_not_taken_for_a_vm():
    assert detect_module.virtualization_from(sys_vendor="Amazon EC2", product_name="i3.metal")["vm"] is False
    assert detect_module.virtualization_from(sys_vendor="Microsoft Corporation",
                                             product_name="Surface Laptop 5")["vm"] is False


def test_nothing_readable_is_unknown_not_bare_metal():
    assert detect_module.virtualization_from() == {"vm": None, "name": None, "evidence": []}
    assert detect_module.virtualization_from(cpuinfo="processor\t: 0\n")["vm"] is None
    assert detect_module.cpu_flags("") == []


def test_detect_virtualization_reads_the_files_and_survives_a_missing_tool(tmp_path, monkeypatch):
    dmi = tmp_path / "dmi"
    dmi.mkdir()
    (dmi / "sys_vendor").write_text("QEMU\n")
    (dmi / "product_name").write_text("Standard PC (Q35 + ICH9, 2009)\n")
    monkeypatch.setattr(detect_module, "DMI_DIR", str(dmi))
    monkeypatch.setattr(detect_module, "CPUINFO", str(FIXTURES / "cpuinfo-kvm-guest.txt"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # no systemd-detect-virt
    found = detect_module.detect_virtualization()
    assert found["vm"] is True and found["name"] == "qemu"
    assert len(found["evidence"]) == 2 and not any("systemd" in e for e in found["evidence"])

    monkeypatch.setattr(detect_module, "DMI_DIR", str(tmp_path / "gone"))
    monkeypatch.setattr(detect_module, "CPUINFO", str(tmp_path / "gone" / "cpuinfo"))
    assert detect_module.detect_virtualization()["vm"] is None


def test_detect_records_it_on_the_machine(tmp_path, monkeypatch):
    monkeypatch.setattr(detect_module, "CPUINFO", str(FIXTURES / "cpuinfo-epyc7742-bare-metal.txt"))
    monkeypatch.setattr(detect_module, "DMI_DIR", str(tmp_path / "gone"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    machine = detect_module.detect(check_horovod=False, environ={}, use_nvml=False)
    assert machine.mode == "reference"  # no nvidia-smi either: a VM check needs no GPU
    assert machine.virtualization == {"vm": False, "name": None, "evidence": []}


@pytest.mark.parametrize("virtualization, expected", [
    ({"vm": True, "name": "kvm", "evidence": ["systemd-detect-virt --vm: kvm"]},
     "This machine is a virtual machine (kvm): systemd-detect-virt --vm: kvm."),
    ({"vm": False, "name": None, "evidence": []}, "No sign of a virtual machine here"),
    ({"vm": None, "name": None, "evidence": []}, "Could not tell whether this machine is a virtual machine"),
    (None, "Not checked whether this machine is a virtual machine"),
])
def test_the_sentence_says_what_was_found(virtualization, expected):
    sentence = virtualization_sentence(Machine(virtualization=virtualization))
    assert sentence.startswith(expected)
    assert "None" not in sentence
