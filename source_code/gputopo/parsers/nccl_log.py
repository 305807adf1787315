"""Parser for NCCL_DEBUG=INFO output (NCCL 2.4 to 2.28).

Returns {nccl_version, nccl_build, p2p_level, channels, transports, warnings}.
Each channel is {channel, src, dst, src_device, dst_device, direction, via, transport, line,
launcher_rank}: `via` is the text after "via" exactly as printed (e.g. "P2P/IPC/read",
"direct shared memory", "NET/IB/0/GDRDMA", "COLLNET/SHARP/1/GDRDMA"); `src_device` /
`dst_device` are the bracketed ids, a PCI bus id in older NCCL, a CUDA device number in
newer ones, None where NCCL 2.4 printed ranks only (`Ring 00 : 5 -> 2 [send] via NET/IB/0`);
`direction` is "send", "receive" or None. A CollNet connection (`CollNet 00/0 : 0 [receive]
via COLLNET/SHARP/1/GDRDMA`) has dst None. `transports` is the sorted set of P2P, SHM, NET,
COLLNET, NVLS and other: NVLS counts when NCCL says it connected NVLS ("Connected NVLS" or
"via NVLS"), not when it only reports NVLS support.

Lines may carry a launcher's prefix (mpirun --tag-output / --timestamp-output, horovodrun,
torchrun, srun --label): it is taken off, and `launcher_rank` keeps the rank it named.
"""
import re

from . import ParseError
from .launcher import split as split_prefix

_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)(\S*)")
_P2P_LEVEL = re.compile(r"NCCL_P2P_LEVEL set by environment to (\S+)")
# "Channel 00 : 0[6000] -> 1[b000] via P2P/IPC" (2.7) up to
# "Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0" (2.19+).
# NCCL 2.4 printed ranks without device ids: "Ring 00 : 5 -> 2 [send] via NET/IB/0".
_CONNECTION = re.compile(
    r"(?:Channel|Ring) (\d+)(?:/\d+)? : (\d+)(?:\[([^\]]*)\])? -> (\d+)(?:\[([^\]]*)\])?"
    r"(?: \[(send|receive)\])? via (\S.*?)\s*$"
)
# "CollNet 00/0 : 0 [receive] via COLLNET/SHARP/1/GDRDMA": one rank and the network.
_COLLNET = re.compile(r"CollNet (\d+)(?:/\d+)? : (\d+)(?:\[([^\]]*)\])?(?: \[(send|receive)\])? via (\S.*?)\s*$")
# NVLS in use (not merely supported): "Connected NVLS tree", "... via NVLS".
_NVLS_USED = re.compile(r"Connected NVLS|via NVLS")
# Enough of a connection line to notice one that was cut off or garbled.
_CONNECTION_START = re.compile(r"(?:Channel|Ring) \d+(?:/\d+)? : \d+(?:\[[^\]]*\])? ->")
_WARNING = re.compile(r"NCCL WARN (.*?)\s*$")


def transport_of(via):
    """P2P, SHM, NET, COLLNET, NVLS or other, for the text after "via" in a connection line."""
    if via.startswith("COLLNET"):
        return "COLLNET"
    if via.startswith("NVLS"):
        return "NVLS"
    if via.startswith("P2P"):
        return "P2P"
    # "direct shared memory" is the pre-2.12 spelling of "SHM/direct/direct".
    if via.startswith("SHM") or "shared memory" in via:
        return "SHM"
    if via.startswith("NET"):
        return "NET"
    return "other"


def parse(text):
    """Parse an NCCL_DEBUG=INFO log; raise ParseError if it holds no NCCL lines at all."""
    nccl_version = nccl_build = p2p_level = None
    channels, warnings = [], []
    extra_transports = set()
    saw_nccl = False
    for lineno, raw_line in enumerate(text.splitlines(), start=1):
        launcher_rank, line = split_prefix(raw_line)
        connection = _CONNECTION.search(line)
        collnet = _COLLNET.search(line)
        if connection:
            # Also without the "NCCL INFO" prefix, as in text trimmed for a slide or a post.
            channels.append(_channel(connection, lineno, launcher_rank))
        elif collnet:
            channel, src, src_device, direction, via = collnet.groups()
            channels.append({"channel": int(channel), "src": int(src), "dst": None, "src_device": src_device,
                             "dst_device": None, "direction": direction, "via": via,
                             "transport": transport_of(via), "line": lineno, "launcher_rank": launcher_rank})
        elif _CONNECTION_START.search(line):
            raise ParseError(f"connection line without a readable 'via' transport: {line.strip()!r}", lineno)
        if "NCCL" not in line:
            continue
        saw_nccl = True
        version = _VERSION.search(line)
        if version and nccl_version is None:
            nccl_version = version.group(1)
            nccl_build = version.group(1) + version.group(2)
        level = _P2P_LEVEL.search(line)
        if level and p2p_level is None:
            p2p_level = level.group(1)
        warning = _WARNING.search(line)
        if warning:
            warnings.append(warning.group(1))
        if _NVLS_USED.search(line):
            extra_transports.add("NVLS")
    if not saw_nccl and not channels:
        if not text.strip():
            raise ParseError("empty input")
        raise ParseError("no NCCL lines found (was NCCL_DEBUG=INFO set?)")
    return {
        "nccl_version": nccl_version,
        "nccl_build": nccl_build,
        "p2p_level": p2p_level,
        "channels": channels,
        "transports": sorted({channel["transport"] for channel in channels} | extra_transports),
        "warnings": warnings,
    }


def _channel(connection, lineno, launcher_rank=None):
    channel, src, src_device, dst, dst_device, direction, via = connection.groups()
    return {
        "channel": int(channel),
        "src": int(src),
        "dst": int(dst),
        "src_device": src_device,
        "dst_device": dst_device,
        "direction": direction,
        "via": via,
        "transport": transport_of(via),
        "line": lineno,
        "launcher_rank": launcher_rank,
    }
