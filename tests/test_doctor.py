"""The machine doctor (coursetools.doctor) and its readers (gputopo.parsers.lspci, .host): each
reader on recorded or published text, each finding's status.

lspci fixtures and their sources: tests/fixtures/doctor/README.md. Expected bridges, buses and
flags below were read by hand from those files.
"""

import json
from pathlib import Path

from coursetools import check, doctor
from coursetools.gpus import Gpu
from coursetools.machine import Machine
from gputopo.parsers import host as host_text
from gputopo.parsers import lspci
from gputopo.parsers.nvidia_smi import parse_gpu_query, throttle_reasons

FIXTURES = Path(__file__).parent / "fixtures" / "doctor"
GiB = 2**30


def text(name):
    return (FIXTURES / name).read_text()


def pair(**fields):
    """A two-GPU Machine as detect() would make it (hand-made: the doctor only reads fields)."""
    gpus = [
        Gpu(index=0, name="NVIDIA A100", cuda_ordinal=0),
        Gpu(index=1, name="NVIDIA A100", cuda_ordinal=1),
    ]
    base = dict(
        mode="multi-gpu",
        gpu_count=2,
        visible_gpu_count=2,
        gpus=gpus,
        topology={
            "best_pair": [0, 1],
            "worst_pair": [0, 1],
            "links": {"GPU0": {"GPU1": "PIX"}, "GPU1": {"GPU0": "PIX"}},
            "nics": {},
        },
    )
    base.update(fields)
    return Machine(**base)


# --- ACS ------------------------------------------------------------------------------


def test_redirect_on_the_switch_port_above_the_gpu_warns():
    machine = pair(gpu_bus_ids=["00000000:82:00.0", "00000000:83:00.0"])
    found = doctor.check_acs(machine, text("lspci-plx-switch-acs-redirect.txt"))[0]
    assert found.status == "WARN"
    assert "0000:02:08.0 (Downstream Port, above GPU bus 0000:82)" in found.finding
    assert "0000:01:00.0" not in found.finding  # the upstream port shows no ACS control
    assert "pci=noacs" in found.fix and "troubleshooting" in found.fix


def test_nccl_2079_root_ports_found_from_lspci_alone():
    """No bus ids from nvidia-smi: lspci's own NVIDIA VGA controllers are the GPUs."""
    found = lspci.acs_above_gpus(lspci.parse(text("lspci-amd-gpp-root-ports-acs-redirect.txt")))
    assert found["gpus"] == ["0000:41", "0000:61"]
    assert [(b["bdf"], b["port"], b["redirect"]) for b in found["bridges"]] == [
        ("0000:40:01.1", "Root Port", True),
        ("0000:60:01.1", "Root Port", True),
    ]
    warn = doctor.check_acs(pair(), text("lspci-amd-gpp-root-ports-acs-redirect.txt"))[0]
    assert (
        warn.status == "WARN"
        and "0000:40:01.1 (Root Port" in warn.finding
        and "0000:60:01.1" in warn.finding
    )


def test_acs_off_passes_and_non_root_is_said():
    machine = pair(gpu_bus_ids=["00000000:01:00.0", "00000000:02:00.0"])
    ok = doctor.check_acs(machine, text("lspci-root-port-acs-off.txt"))[0]
    assert ok.status == "PASS" and "no redirect bits in ACSCtl of the 1 bridge(s)" in ok.finding
    denied = doctor.check_acs(
        pair(gpu_bus_ids=["00000000:82:00.0"]), text("lspci-not-root-access-denied.txt")
    )[0]
    assert (
        denied.status == "WARN"
        and "<access denied>" in denied.finding
        and "sudo lspci -vvv" in denied.fix
    )
    absent = doctor.check_acs(pair(), None, "lspci not installed (package pciutils)")[0]
    assert absent.status == "WARN" and "lspci not installed" in absent.finding
    assert doctor.check_acs(Machine(mode="single-gpu"), None)[0].status == "PASS"


# --- IOMMU, VM, container ------------------------------------------------------------
# Kernel facts: iommu=pt and intel_iommu=/amd_iommu= in
# Documentation/admin-guide/kernel-parameters.txt; an IOMMU group's type ("identity", "DMA",
# "DMA-FQ") in Documentation/ABI/testing/sysfs-kernel-iommu_groups.


def test_iommu_modes():
    assert host_text.iommu_mode([], [], "BOOT_IMAGE=/vmlinuz ro quiet")["mode"] == "off"
    assert host_text.iommu_mode(["dmar0"], ["DMA"], "intel_iommu=off")["mode"] == "off"
    assert (
        host_text.iommu_mode(["ivhd0"], ["identity", "identity"], "amd_iommu=on iommu=pt")["mode"]
        == "passthrough"
    )
    translated = host_text.iommu_mode(["dmar0", "dmar1"], ["DMA-FQ", "DMA-FQ"], "ro intel_iommu=on")
    assert translated["mode"] == "translated" and "intel_iommu=on" in translated["why"]
    warn = doctor.check_iommu(pair(), ["dmar0", "dmar1"], ["DMA-FQ"], "intel_iommu=on")[0]
    assert warn.status == "WARN" and "iommu=pt" in warn.fix
    # one GPU, or inside a VM (where the hypervisor's IOMMU does the passthrough): said, not warned
    assert (
        doctor.check_iommu(Machine(mode="single-gpu"), ["dmar0"], ["DMA"], "")[0].status == "PASS"
    )
    assert doctor.check_iommu(pair(), ["dmar0"], ["DMA"], "", vm="KVM")[0].status == "PASS"


CPU_FLAGS_VM = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae hypervisor lahf_lm\n"
CPU_FLAGS_METAL = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae lahf_lm\n"


KVM = {"vm": True, "name": "kvm", "evidence": ["systemd-detect-virt --vm: kvm"]}


def test_virtual_machine_and_its_peer_access():
    assert (
        host_text.virtualization(
            cpuinfo=CPU_FLAGS_METAL, sys_vendor="Supermicro", product_name="SYS-4029GP-TRT"
        )["vm"]
        is False
    )
    qemu = host_text.virtualization(
        cpuinfo=CPU_FLAGS_VM, sys_vendor="QEMU", product_name="Standard PC (Q35 + ICH9, 2009)"
    )
    assert qemu["vm"] is True and qemu["name"] == "qemu" and len(qemu["evidence"]) == 2
    assert host_text.virtualization(cpuinfo=CPU_FLAGS_VM) == {
        "vm": True,
        "name": None,
        "evidence": ["the CPU flag 'hypervisor' in /proc/cpuinfo"],
    }
    denied = {
        "read": {"GPU0": {"GPU1": "NS"}, "GPU1": {"GPU0": "NS"}},
        "write": {"GPU0": {"GPU1": "NS"}, "GPU1": {"GPU0": "NS"}},
    }
    warn = doctor.check_vm(pair(p2p_matrix=denied), KVM)[0]
    assert warn.status == "WARN" and "peer access between the chosen pair is NS" in warn.finding
    assert warn.finding.startswith("running under kvm (systemd-detect-virt --vm: kvm)")
    assert doctor.check_vm(pair(), {"vm": False, "name": None, "evidence": []})[0].status == "PASS"
    gns = {c: {"GPU0": {"GPU1": "GNS"}, "GPU1": {"GPU0": "GNS"}} for c in ("read", "write")}
    assert (
        doctor.check_vm(pair(p2p_matrix=gns), KVM)[0].status == "PASS"
    )  # consumer GPUs: not the VM's doing
    unknown = doctor.check_vm(pair(), {"vm": None, "name": None, "evidence": []})[0]
    assert unknown.status == "PASS" and unknown.finding.startswith(
        "unknown: none of systemd-detect-virt"
    )


def test_container_shm_and_ipc_namespace():
    # docker run without --ipc/--shm-size: /.dockerenv, /dev/shm of 64 MiB (Docker's default
    # --shm-size, docs.docker.com "docker run"), an IPC namespace of its own
    kind = host_text.container_kind({"/.dockerenv": True}, {}, "0::/\n")
    assert kind == "docker"
    small = doctor.check_container(kind, 64 * 2**20, "ipc:[4026532201]")[0]
    assert (
        small.status == "WARN"
        and "its own IPC namespace" in small.finding
        and "--ipc=host" in small.fix
    )
    host = doctor.check_container(kind, 8 * GiB, "ipc:[4026531839]")[0]
    assert host.status == "PASS" and "the host's IPC namespace (--ipc=host)" in host.finding
    assert host_text.container_kind({}, {"APPTAINER_CONTAINER": "/c.sif"}, "") == "apptainer"
    assert (
        host_text.container_kind({}, {}, "12:pids:/kubepods/burstable/pod1/abc\n") == "kubernetes"
    )
    assert host_text.container_kind({}, {}, "0::/init.scope\n") is None
    assert doctor.check_container(None, 8 * GiB, None)[0].finding == "not in a container"


# --- GPUDirect RDMA, MIG, clocks, numbering -----------------------------------------


# /proc/modules: name, size, use count, users, state, address (proc(5))
MODULES_PEERMEM = (
    "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n"
    "nvidia 56344576 2 nvidia_peermem, Live 0x0000000000000000 (POE)\n"
)
OPEN_DRIVER = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  "
    "(dvs-builder@U16-I3-D08-1-2)\n"
)
CLOSED_DRIVER = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.08  Tue Mar  5 22:42:15 UTC 2024\n"
)


def test_gpudirect_rdma_paths():
    with_nics = pair(
        topology={
            "best_pair": [0, 1],
            "worst_pair": [0, 1],
            "links": {},
            "nics": {"NIC0": "mlx5_0"},
        }
    )
    assert (
        doctor.check_rdma(with_nics, MODULES_PEERMEM, "5.15.0-105-generic", CLOSED_DRIVER)[0].status
        == "PASS"
    )
    dmabuf = doctor.check_rdma(with_nics, "", "6.8.0-31-generic", OPEN_DRIVER)[0]
    assert dmabuf.status == "PASS" and dmabuf.finding.startswith("DMA-BUF likely")
    old_kernel = host_text.rdma_paths("", "5.4.0-150-generic", OPEN_DRIVER)
    assert old_kernel["dmabuf"] is False  # DMA-BUF needs Linux 5.12+
    neither = doctor.check_rdma(with_nics, "", "6.8.0-31-generic", CLOSED_DRIVER)[0]
    assert (
        neither.status == "WARN"
        and "1 NIC(s)" in neither.finding
        and "modprobe nvidia-peermem" in neither.fix
    )
    assert (
        doctor.check_rdma(pair(), "", "6.8.0", CLOSED_DRIVER)[0].status == "PASS"
    )  # no NIC: not needed
    # the file NCCL looks for (src/transport/net_ib.cc, v2.28.3-1), without /proc/modules saying so
    files = {path: path == "/sys/module/nvidia_peermem/version" for path in doctor.PEERMEM_FILES}
    assert doctor.check_rdma(with_nics, "", "5.4.0", CLOSED_DRIVER, files)[0].finding.startswith(
        "nvidia-peermem loaded"
    )


def test_mig_on_warns():
    machine = pair(gpus=[Gpu(index=0, mig_mode="Enabled"), Gpu(index=1, mig_mode="Disabled")])
    found = doctor.check_mig(machine)[0]
    assert (
        found.status == "WARN"
        and "MIG on for GPU0" in found.finding
        and "nvidia-smi -i 0 -mig 0" in found.fix
    )
    assert doctor.check_mig(pair())[0].status == "PASS"


# The CSV layout of `nvidia-smi --query-gpu=index,persistence_mode,clocks.sm,clocks.max.sm,
# clocks_throttle_reasons.active --format=csv,noheader` (field names: nvidia-smi --help-query-gpu).
CLOCKS = (
    "0, Disabled, 210 MHz, 1980 MHz, 0x0000000000000001\n"
    "1, Enabled, 1410 MHz, 1980 MHz, 0x0000000000000040\n"
)


def clock_rows(text):
    return parse_gpu_query(text, doctor.CLOCK_FIELDS)


def test_clocks_persistence_and_throttling():
    rows = clock_rows(CLOCKS)
    assert [r["persistence_mode"] for r in rows] == ["Disabled", "Enabled"]
    assert throttle_reasons("0x0000000000000001") == ["GPU idle"]
    assert throttle_reasons("0x0000000000000044") == [
        "software power cap",
        "hardware thermal slowdown",
    ]
    hot = doctor.check_clocks(pair(), rows, "nvidia-smi --query-gpu")[0]
    assert hot.status == "WARN" and "GPU1 slowed by heat or power" in hot.finding
    idle = clock_rows("0, Disabled, 210 MHz, 1980 MHz, 0x0000000000000001\n")
    off = doctor.check_clocks(pair(), idle, "nvidia-smi --query-gpu")[0]
    assert (
        off.status == "WARN"
        and "persistence off on GPU0" in off.finding
        and "nvidia-smi -pm 1" in off.fix
    )
    unknown = doctor.check_clocks(
        pair(), clock_rows("0, [N/A], [N/A], [N/A], [N/A]\n"), "stand-in"
    )[0]
    assert unknown.status == "PASS" and "not reported" in unknown.finding


def test_numbering_under_cuda_visible_devices_and_mixed_gpus():
    gpus = [
        Gpu(index=0, name="NVIDIA GeForce RTX 5090"),
        Gpu(index=1, name="NVIDIA GeForce RTX 3080"),
        Gpu(index=2, name="NVIDIA GeForce RTX 3080"),
    ]
    from coursetools.gpus import apply_visibility

    apply_visibility(gpus, "2,1")
    machine = Machine(
        mode="multi-gpu", gpus=gpus, gpu_count=3, visible_gpu_count=2, cuda_visible_devices="2,1"
    )
    same = doctor.check_numbering(machine, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})[0]
    assert (
        same.status == "PASS"
        and "CUDA_VISIBLE_DEVICES=2,1: cuda:0 = GPU2, cuda:1 = GPU1" in same.finding
    )
    apply_visibility(gpus, None)
    mixed = Machine(mode="multi-gpu", gpus=gpus, gpu_count=3, visible_gpu_count=3)
    warn = doctor.check_numbering(mixed, {})[0]
    assert warn.status == "WARN" and "FASTEST_FIRST" in warn.fix + warn.finding
    assert warn.fix == "export CUDA_DEVICE_ORDER=PCI_BUS_ID"


# --- the whole doctor in make check --------------------------------------------------


BARE_METAL = {
    "environ": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
    "lspci": text("lspci-root-port-acs-off.txt"),
    "iommu_units": [],
    "iommu_group_types": [],
    "cmdline": "ro quiet",
    "cpuinfo": CPU_FLAGS_METAL,
    "dmi_vendor": "Supermicro",
    "markers": {},
    "cgroup": "0::/init.scope\n",
    "ipc_namespace": "ipc:[4026531839]",
    "shm_size": 64 * GiB,
    "modules": "",
    "kernel_release": "6.8.0-31-generic",
    "driver_version_text": OPEN_DRIVER,
    "clock_rows": clock_rows(
        "0, Enabled, 1980 MHz, 1980 MHz, 0x0000000000000000\n1, Enabled, 1980 MHz, 1980 MHz, 0x0\n"
    ),
    "clock_source": "nvidia-smi --query-gpu",
}
DOCTOR_ITEMS = [
    "PCIe ACS",
    "IOMMU",
    "virtual machine",
    "container",
    "GPUDirect RDMA",
    "MIG",
    "persistence and clocks",
    "GPU numbering",
]


def test_every_doctor_item_is_one_line_with_a_fix_in_text_and_json(monkeypatch, capsys):
    machine = pair(
        gpu_bus_ids=["00000000:01:00.0", "00000000:02:00.0"],
        horovod={"version": "0.28.1", "tensorflow": True, "nccl": True, "gloo": True},
    )
    found = doctor.findings(machine, BARE_METAL)
    assert [f.item for f in found] == DOCTOR_ITEMS
    assert all(f.status == "PASS" for f in found), found
    monkeypatch.setattr(check, "detect", lambda: machine)
    monkeypatch.setattr(doctor, "gather", lambda machine: BARE_METAL)
    assert check.main(["--skip-smoke", "--json"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    items = {f["item"]: f for f in data["findings"]}
    assert set(DOCTOR_ITEMS) <= set(items)
    assert all(set(items[i]) == {"status", "item", "finding", "fix"} for i in DOCTOR_ITEMS)
    check.main(["--skip-smoke"])
    page = capsys.readouterr().out.splitlines()
    acs = [ln for ln in page if ln.startswith("PASS  PCIe ACS: ")]
    assert len(acs) == 1 and " — fix: none needed" in acs[0]


def test_a_reader_that_breaks_is_one_warn_not_a_traceback(monkeypatch):
    def broken(machine):
        raise RuntimeError("unexpected /proc layout")

    monkeypatch.setattr(doctor, "gather", broken)
    _, found = check.run_checks(pair(), skip_smoke=True, shm_size=8 * GiB)
    line = [f for f in found if f.item == "machine doctor"]
    assert (
        len(line) == 1 and line[0].status == "WARN" and "unexpected /proc layout" in line[0].finding
    )


def test_gather_reads_this_host_without_failing():
    host = doctor.gather(Machine(mode="reference"))
    assert set(host) >= {"cmdline", "cpuinfo", "markers", "shm_size", "modules", "kernel_release"}
    assert all(
        f.status in ("PASS", "WARN") for f in doctor.findings(Machine(mode="reference"), host)
    )


class FakeNvml:
    """The pynvml calls the clock reader makes (names as in nvidia-ml-py), for two GPUs."""

    NVML_CLOCK_SM = 1

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetPersistenceMode(self, handle):
        return 1 if handle == 0 else 0

    def nvmlDeviceGetClockInfo(self, handle, clock):
        assert clock == self.NVML_CLOCK_SM
        return 1980

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return 1980

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):  # older nvidia-ml-py's name
        return 0x1 if handle == 0 else 0x80


def test_clocks_from_nvml_when_pynvml_loads(monkeypatch):
    from coursetools import nvml

    monkeypatch.setattr(nvml, "load", lambda: (FakeNvml(), None))
    rows, source = doctor.clock_rows(pair())
    assert source == "NVML"
    assert rows[1] == {
        "index": "1",
        "persistence_mode": "Disabled",
        "clocks.sm": "1980 MHz",
        "clocks.max.sm": "1980 MHz",
        "clocks_throttle_reasons.active": "0x80",
    }
    found = doctor.check_clocks(pair(), rows, source)[0]
    assert found.status == "WARN" and "GPU1 slowed by heat or power" in found.finding
    assert "hardware power brake" in found.finding
