"""Is this machine a VM? (gputopo.parsers.host.virtualization; make check's doctor says so: a
VM's PCIe tree and affinity are made up.)

Expected answers come from the fixtures themselves, read by hand: the KVM guest's flags line
carries `hypervisor` and systemd-detect-virt printed `kvm`; the bare-metal EPYC's does not.
The DMI names are the ones the hypervisors write (QEMU's q35 machine type describes itself as
"Standard PC (Q35 + ICH9, 2009)"; Hyper-V guests read "Microsoft Corporation" / "Virtual
Machine"); an EC2 bare-metal instance ("i3.metal") is not a VM.
"""

from pathlib import Path

import pytest

from coursetools import doctor
from coursetools.machine import Machine
from gputopo.parsers import host as host_text

FIXTURES = Path(__file__).parent / "fixtures" / "virt"
KVM_CPUINFO = (FIXTURES / "cpuinfo-kvm-guest.txt").read_text()
BARE_CPUINFO = (FIXTURES / "cpuinfo-epyc7742-bare-metal.txt").read_text()
KVM_DETECT_VIRT = (FIXTURES / "systemd-detect-virt-kvm.txt").read_text()


def test_the_kvm_guest_is_a_vm_by_both_signs():
    found = host_text.virtualization(detect_virt=KVM_DETECT_VIRT, cpuinfo=KVM_CPUINFO)
    assert found["vm"] is True and found["name"] == "kvm"
    assert found["evidence"] == [
        "systemd-detect-virt --vm: kvm",
        "the CPU flag 'hypervisor' in /proc/cpuinfo",
    ]


def test_the_cpu_flag_alone_is_enough():
    found = host_text.virtualization(cpuinfo=KVM_CPUINFO)
    assert found["vm"] is True and found["name"] is None


def test_bare_metal_is_not_a_vm():
    assert host_text.virtualization(cpuinfo=BARE_CPUINFO)["vm"] is False  # its flags line was read
    found = host_text.virtualization(
        cpuinfo=BARE_CPUINFO,
        detect_virt="none\n",
        sys_vendor="Dell Inc.\n",
        product_name="PowerEdge R650\n",
    )
    assert found == {"vm": False, "name": None, "evidence": []}


@pytest.mark.parametrize(
    "vendor, product, name",
    [
        ("QEMU", "Standard PC (Q35 + ICH9, 2009)", "qemu"),
        ("Microsoft Corporation", "Virtual Machine", "microsoft"),
        ("VMware, Inc.", "VMware Virtual Platform", "vmware"),
        ("innotek GmbH", "VirtualBox", "oracle"),
        ("Xen", "HVM domU", "xen"),
        ("Google", "Google Compute Engine", "google"),
        ("OpenStack Foundation", "OpenStack Nova", "openstack"),
    ],
)
def test_firmware_names_of_hypervisors(vendor, product, name):
    found = host_text.virtualization(sys_vendor=vendor + "\n", product_name=product + "\n")
    assert found["vm"] is True and found["name"] == name
    assert vendor in found["evidence"][0]


def test_firmware_of_bare_metal_clouds_is_not_taken_for_a_vm():
    assert host_text.virtualization(sys_vendor="Amazon EC2", product_name="i3.metal")["vm"] is False
    assert (
        host_text.virtualization(
            sys_vendor="Microsoft Corporation", product_name="Surface Laptop 5"
        )["vm"]
        is False
    )


def test_nothing_readable_is_unknown_not_bare_metal():
    assert host_text.virtualization() == {"vm": None, "name": None, "evidence": []}
    assert host_text.virtualization(cpuinfo="processor\t: 0\n")["vm"] is None


def host_signs(host):
    return host_text.virtualization(
        host["detect_virt"], host["cpuinfo"], host["dmi_vendor"], host["dmi_product"]
    )


def test_gather_reads_the_signs_and_survives_a_missing_tool(tmp_path, monkeypatch):
    dmi = tmp_path / "dmi"
    dmi.mkdir()
    (dmi / "sys_vendor").write_text("QEMU\n")
    (dmi / "product_name").write_text("Standard PC (Q35 + ICH9, 2009)\n")
    monkeypatch.setattr(doctor, "DMI_DIR", str(dmi))
    monkeypatch.setattr(doctor, "CPUINFO", str(FIXTURES / "cpuinfo-kvm-guest.txt"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # no systemd-detect-virt
    found = host_signs(doctor.gather(Machine(mode="reference")))
    assert found["vm"] is True and found["name"] == "qemu"
    assert len(found["evidence"]) == 2 and not any("systemd" in e for e in found["evidence"])

    monkeypatch.setattr(doctor, "DMI_DIR", str(tmp_path / "gone"))
    monkeypatch.setattr(doctor, "CPUINFO", str(tmp_path / "gone" / "cpuinfo"))
    assert host_signs(doctor.gather(Machine(mode="reference")))["vm"] is None


@pytest.mark.parametrize(
    "virtualization, expected",
    [
        (
            {"vm": True, "name": "kvm", "evidence": ["systemd-detect-virt --vm: kvm"]},
            "running under kvm (systemd-detect-virt --vm: kvm)",
        ),
        (
            {"vm": True, "name": None, "evidence": ["the CPU flag 'hypervisor' in /proc/cpuinfo"]},
            "running under a hypervisor (the CPU flag 'hypervisor' in /proc/cpuinfo)",
        ),
        ({"vm": False, "name": None, "evidence": []}, "bare metal"),
        ({"vm": None, "name": None, "evidence": []}, "unknown: none of systemd-detect-virt"),
    ],
)
def test_the_doctor_line_says_what_was_found(virtualization, expected):
    line = doctor.check_vm(Machine(mode="reference"), virtualization)[0]
    assert (
        line.status == "PASS" and line.finding.startswith(expected) and "None" not in line.finding
    )
