"""nvbandwidth beside the course's P2P test: the same GPU pair in both, and how their methods differ.

NVIDIA points users to nvbandwidth (https://github.com/NVIDIA/nvbandwidth) for bandwidth
questions; a learner who has run it can set its number for a pair beside the bundled
p2pBandwidthLatencyTest's. The two do not measure the same thing the same way, so the
comparison states the differences with their sources:

nvbandwidth (README "Usage" and "Measurement Details", and common.h, at tag v0.8):
  - copy method: tests ending in _ce copy with the copy engine (cuMemcpyAsync), tests ending
    in _sm with a copy kernel on the streaming multiprocessors;
  - buffer: 512 MiB per copy by default (--bufferSize, in MiB), loopCount 16 copies per sample
    (common.h: defaultLoopCount = 16);
  - timing: a spin kernel holds the stream on a flag in host memory while the start event,
    the copies and the stop event are queued, then the flag is released; this is repeated 3
    times (--testSamples) and the median is reported (--useMean for the mean);
  - GB/s = 10^9 bytes/s (memcpy.cpp: bytes x loops x 10^6 / microseconds, printed x 10^-9);
  - cells: in a *_read_* test, row r column c is a copy from GPU c into GPU r issued by GPU r;
    in a *_write_* test, a copy from GPU r into GPU c issued by GPU r (testcases_ce.cpp).
The course's P2P test (source_code/p2pBandwidthLatencyTest/README.md, "Method"):
  - copy method: cudaMemcpyPeerAsync on the copy engine (--sm_copy: a copy kernel);
  - buffer: 1 GiB per copy by default (--numElems 268435456 four-byte elements), --iters 4
    copies per timed batch, each into its own destination buffer;
  - timing: the same kind of gate (a spin kernel on a mapped host flag ahead of the start
    event); each cell is the median of --reps 5 batches after 1 warm-up batch;
  - cells: row i column j is a copy from GPU i to GPU j, issued by GPU i (writes) or, with
    --p2p_read, by GPU j.
Both number GPUs as CUDA ordinals under the CUDA_VISIBLE_DEVICES they ran with.
Standard library only.
"""

from typing import Dict, List, Optional

from gputopo.parsers.nvbandwidth import pair_gbs
from gputopo.parsers.p2p import matrix_labels

NVBANDWIDTH_METHOD = {
    "ce": "copy engine (cuMemcpyAsync)",
    "sm": "a copy kernel on the SMs",
    "buffer": "512 MiB per copy by default (--bufferSize), 16 copies per sample",
    "timing": ("spin kernel gate, CUDA events around the queued copies; median of 3 samples "
               "(--testSamples, --useMean for the mean)"),
    "source": "nvbandwidth README 'Measurement Details' and common.h (tag v0.8)",
}
P2P_METHOD = {
    "ce": "copy engine (cudaMemcpyPeerAsync)",
    "sm": "a copy kernel on the SMs (--sm_copy)",
    "buffer": "1 GiB per copy by default (--numElems), 4 copies per batch into separate buffers (--iters)",
    "timing": "spin kernel gate, CUDA events around the batch; median of 5 batches after 1 warm-up (--reps, --warmup)",
    "source": "source_code/p2pBandwidthLatencyTest/README.md, 'Method'",
}
# nvbandwidth's unidirectional device-to-device tests and the p2p parser's matrix of the same kind
# of copy (who issues it): writes are issued by the sending GPU, reads by the receiving one.
_PAIRS = [
    ("device_to_device_memcpy_write_ce", "unidirectional_write"),
    ("device_to_device_memcpy_read_ce", "unidirectional_read"),
    ("device_to_device_memcpy_write_sm", "unidirectional_write"),
    ("device_to_device_memcpy_read_sm", "unidirectional_read"),
]


def _p2p_cell(parsed, key, src, dst) -> Optional[float]:
    matrix = (parsed.get("bandwidth_gbs") or {}).get(key)
    if not matrix:
        return None
    rows, columns = matrix_labels(parsed, key)
    if src not in rows or dst not in columns:
        return None
    return matrix[rows.index(src)][columns.index(dst)]


def compare_pair(nvbandwidth: Dict, p2p: Dict, src: int, dst: int, p2p_copy: str = "ce") -> Dict:
    """nvbandwidth's and the P2P test's GB/s for a copy from GPU src to GPU dst, with the methods.

    `nvbandwidth` and `p2p` are the two parsers' results; `p2p_copy` says how the P2P test
    ran ("ce", or "sm" for --sm_copy; its text does not say). Returns {"src", "dst", "rows":
    [{"tool", "test", "gbs", "issued_by", "method"}], "ratio" (nvbandwidth / P2P test for the
    first matching pair of tests, None without one), "differences": [sentences]}.
    """
    rows: List[Dict] = []
    ratio = None
    for test, key in _PAIRS:
        theirs = pair_gbs(nvbandwidth, test, src, dst)
        if theirs is None:
            continue
        kind = "sm" if test.endswith("_sm") else "ce"
        issuer = dst if "_read_" in test else src
        rows.append({"tool": "nvbandwidth", "test": test, "gbs": theirs, "issued_by": f"GPU{issuer}",
                     "method": f"{NVBANDWIDTH_METHOD[kind]}; {NVBANDWIDTH_METHOD['buffer']}; "
                               f"{NVBANDWIDTH_METHOD['timing']}"})
        ours = _p2p_cell(p2p, key, src, dst)
        if ours is not None:
            rows.append({"tool": "p2p test", "test": key, "gbs": ours, "issued_by": f"GPU{issuer}",
                         "method": f"{P2P_METHOD[p2p_copy]}; {P2P_METHOD['buffer']}; {P2P_METHOD['timing']}"})
            if ratio is None and ours:
                ratio = theirs / ours
    differences = method_differences(nvbandwidth, p2p_copy)
    return {"src": src, "dst": dst, "rows": rows, "ratio": ratio, "differences": differences}


def method_differences(nvbandwidth: Dict, p2p_copy: str = "ce") -> List[str]:
    """Sentences on how the two tools' numbers differ in method, with their sources."""
    methods = set()
    for test in nvbandwidth.get("tests", []):
        for found in test["matrices"]:
            if found["method"]:
                methods.add(found["method"])
    nvb = " and ".join(NVBANDWIDTH_METHOD[m.lower()] for m in sorted(methods)) or "its copy method"
    out = [
        f"Copy method: nvbandwidth used {nvb}; the P2P test used {P2P_METHOD[p2p_copy]}.",
        f"Buffer: nvbandwidth {NVBANDWIDTH_METHOD['buffer']}; the P2P test {P2P_METHOD['buffer']}.",
        f"Timing: nvbandwidth {NVBANDWIDTH_METHOD['timing']}; the P2P test {P2P_METHOD['timing']}.",
        "Cells: nvbandwidth's *_read_* matrices put the copy from GPU c into GPU r in row r, column c "
        "(the receiver issues it); its *_write_* matrices and the P2P test put the copy from GPU i to "
        "GPU j in row i, column j.",
        "Both report GB/s = 10^9 bytes/s and number GPUs as CUDA ordinals under their "
        "CUDA_VISIBLE_DEVICES.",
        f"Sources: {NVBANDWIDTH_METHOD['source']}; {P2P_METHOD['source']}.",
    ]
    return out

