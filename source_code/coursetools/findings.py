"""One line of `make check`: Finding(status, item, finding, fix), status PASS, WARN or FAIL.

check, doctor and ladder all make Findings, so they live here, with `one` (a check's answer when
it has one line) and `peer_status`, the one reading of `nvidia-smi topo -p2p` that all three
need. Standard library only.
"""

from collections import namedtuple

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
NONE_NEEDED = "none needed"

Finding = namedtuple("Finding", "status item finding fix", defaults=(NONE_NEEDED,))


def one(status, item, finding, fix=NONE_NEEDED):
    """[Finding(status, item, finding, fix)]: a check returns a list, most often of one line."""
    return [Finding(status, item, finding, fix)]


def peer_status(p2p_matrix, i, j):
    """Peer access between GPUs i and j as one `nvidia-smi topo -p2p` code, None if unknown.

    `p2p_matrix` is Machine.p2p_matrix: {"read": {"GPU0": {"GPU1": "OK"}}, "write": {...}}.
    Read and write, both directions, must be OK for "OK"; otherwise the first code that is
    not OK ("NS", "CNS", ...) is returned.
    """
    cells = []
    for capability in ("read", "write"):
        for src, dst in ((i, j), (j, i)):
            cell = ((p2p_matrix or {}).get(capability) or {}).get(f"GPU{src}", {}).get(f"GPU{dst}")
            if cell is None:
                return None
            cells.append(cell.strip())
    bad = [c for c in cells if c.upper() != "OK"]
    return bad[0] if bad else "OK"
