"""Draw the course's diagrams as small PNG files.

    python images/draw_diagrams.py            # redraw every PNG next to this script
    python images/draw_diagrams.py ring       # redraw only the diagrams whose name contains "ring"

One function per diagram; each returns the matplotlib figure so a notebook or a test can reuse
it. Shapes are plain boxes and lines on a 0..1 canvas so anyone can move a box by editing one
coordinate. Licence of the PNGs: CC BY 4.0 (see images/README.md).
"""

import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "source_code"))
from gputopo.alphabeta import ring_schedule  # noqa: E402  (the course's one ring schedule)

DPI = 100

# One colour per kind of part, used by every diagram.
COLOURS = {
    "gpu": "#76b900",  # GPUs
    "cpu": "#4c72b0",  # CPUs and host bridges
    "mem": "#8da0cb",  # host memory
    "switch": "#dd8452",  # PCIe switches and NVSwitch chips
    "nic": "#937860",  # network cards
    "nvlink": "#2ca02c",
    "pcie": "#555555",
    "smp": "#c44e52",  # the CPU-to-CPU link (UPI/QPI/Infinity Fabric)
}


def _box(ax, x, y, w, h, text, kind, fontsize=9, text_colour="white"):
    """A rounded box centred on (x, y) with a label; returns the centre."""
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.005,rounding_size=0.015",
            facecolor=COLOURS[kind],
            edgecolor="black",
            linewidth=0.8,
        )
    )
    ax.text(
        x,
        y,
        text,
        ha="center",
        va="center",
        fontsize=fontsize,
        color=text_colour,
        fontweight="bold",
    )
    return x, y


def _line(ax, a, b, kind, width=2.0, style="-"):
    ax.plot(
        [a[0], b[0]],
        [a[1], b[1]],
        color=COLOURS[kind],
        linewidth=width,
        linestyle=style,
        zorder=0,
        solid_capstyle="round",
    )


def _arrow(ax, a, b, colour, text=None, rad=0.0, fontsize=8, offset=(0.0, 0.0)):
    ax.add_patch(
        FancyArrowPatch(
            a,
            b,
            arrowstyle="-|>",
            mutation_scale=14,
            linewidth=2.2,
            color=colour,
            connectionstyle=f"arc3,rad={rad}",
            zorder=3,
        )
    )
    if text:
        ax.text(
            (a[0] + b[0]) / 2 + offset[0],
            (a[1] + b[1]) / 2 + offset[1],
            text,
            fontsize=fontsize,
            color=colour,
            ha="center",
            va="center",
            bbox=dict(facecolor="white", edgecolor="none", pad=1.0),
            zorder=4,
        )


def _canvas(width_in, height_in, title):
    fig, ax = plt.subplots(figsize=(width_in, height_in))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    ax.set_title(title, fontsize=11, fontweight="bold")
    return fig, ax


# --- 1. host staging versus peer-to-peer --------------------------------------------------
def host_staging_vs_p2p():
    """Two ways to move a buffer from GPU0 to GPU1: through host memory, or directly."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    titles = ["Host staging: two copies through host memory", "Peer-to-peer: one copy, GPU to GPU"]
    for ax, title in zip(axes, titles):
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
        ax.set_title(title, fontsize=10.5, fontweight="bold")

    # Left: GPU0 -> PCIe -> CPU / host memory -> PCIe -> GPU1
    ax = axes[0]
    mem = _box(ax, 0.5, 0.85, 0.36, 0.12, "host memory\n(pinned buffer)", "mem", 8.5)
    cpu = _box(ax, 0.5, 0.6, 0.3, 0.12, "CPU / root complex", "cpu", 8.5)
    g0 = _box(ax, 0.2, 0.2, 0.22, 0.14, "GPU0", "gpu")
    g1 = _box(ax, 0.8, 0.2, 0.22, 0.14, "GPU1", "gpu")
    _line(ax, mem, cpu, "mem", 4)
    _line(ax, cpu, g0, "pcie", 3)
    _line(ax, cpu, g1, "pcie", 3)
    _arrow(
        ax,
        (0.24, 0.3),
        (0.42, 0.78),
        "#c44e52",
        "copy 1\nGPU0 to host",
        rad=-0.25,
        offset=(-0.09, 0.0),
    )
    _arrow(
        ax,
        (0.58, 0.78),
        (0.76, 0.3),
        "#c44e52",
        "copy 2\nhost to GPU1",
        rad=-0.25,
        offset=(0.09, 0.0),
    )
    ax.text(
        0.5,
        0.04,
        "time ~ 2 x latency + n / PCIe bandwidth (chunks pipelined through host memory)",
        ha="center",
        fontsize=8.5,
    )

    # Right: GPU0 -> NVLink or PCIe switch -> GPU1
    ax = axes[1]
    cpu = _box(ax, 0.5, 0.85, 0.3, 0.12, "CPU / root complex", "cpu", 8.5)
    sw = _box(ax, 0.5, 0.64, 0.3, 0.1, "PCIe switch", "switch", 8.5)
    g0 = _box(ax, 0.2, 0.3, 0.22, 0.14, "GPU0", "gpu")
    g1 = _box(ax, 0.8, 0.3, 0.22, 0.14, "GPU1", "gpu")
    _line(ax, cpu, sw, "pcie", 3)
    _line(ax, sw, g0, "pcie", 3)
    _line(ax, sw, g1, "pcie", 3)
    _line(ax, (0.31, 0.27), (0.69, 0.27), "nvlink", 6)
    ax.text(0.5, 0.215, "NVLink (if present)", ha="center", fontsize=8, color=COLOURS["nvlink"])
    _arrow(
        ax,
        (0.3, 0.38),
        (0.7, 0.38),
        "#c44e52",
        "one copy (NVLink, or through the switch)",
        rad=-0.3,
        offset=(0.0, 0.075),
    )
    ax.text(
        0.5,
        0.04,
        "time ~ latency + n / link bandwidth; host memory untouched",
        ha="center",
        fontsize=8.5,
    )
    fig.tight_layout()
    return fig


# --- 2. PCIe tree with the nvidia-smi topo -m path names ------------------------------------
def pcie_tree():
    """A two-socket server, with one example GPU pair for each path name of `topo -m`."""
    fig, ax = _canvas(
        10, 5.8, "PCIe tree of a two-socket server and the path names of nvidia-smi topo -m"
    )
    ax.set_xlim(-0.03, 1.0)
    ax.set_ylim(-0.08, 1.0)
    cpu0 = _box(ax, 0.3, 0.88, 0.2, 0.08, "CPU0 (NUMA 0)", "cpu", 8.5)
    cpu1 = _box(ax, 0.82, 0.88, 0.2, 0.08, "CPU1 (NUMA 1)", "cpu", 8.5)
    _line(ax, cpu0, cpu1, "smp", 3)
    ax.text(
        0.56, 0.905, "UPI / QPI / Infinity Fabric", ha="center", fontsize=7.5, color=COLOURS["smp"]
    )
    hb0 = _box(ax, 0.17, 0.72, 0.15, 0.07, "host bridge A", "cpu", 7.5)
    hb1 = _box(ax, 0.47, 0.72, 0.15, 0.07, "host bridge B", "cpu", 7.5)
    hb2 = _box(ax, 0.82, 0.72, 0.15, 0.07, "host bridge C", "cpu", 7.5)
    for hb, cpu in ((hb0, cpu0), (hb1, cpu0), (hb2, cpu1)):
        _line(ax, cpu, hb, "cpu", 3)
    sw0 = _box(ax, 0.1, 0.55, 0.12, 0.07, "switch S0", "switch", 7.5)
    sw1 = _box(ax, 0.06, 0.38, 0.1, 0.06, "S1", "switch", 7.5)
    sw2 = _box(ax, 0.2, 0.38, 0.1, 0.06, "S2", "switch", 7.5)
    _line(ax, hb0, sw0, "pcie")
    _line(ax, sw0, sw1, "pcie")
    _line(ax, sw0, sw2, "pcie")
    g = {}
    g[0] = _box(ax, 0.03, 0.2, 0.07, 0.08, "GPU0", "gpu", 7.5)
    g[1] = _box(ax, 0.11, 0.2, 0.07, 0.08, "GPU1", "gpu", 7.5)
    g[2] = _box(ax, 0.2, 0.2, 0.07, 0.08, "GPU2", "gpu", 7.5)
    g[3] = _box(ax, 0.3, 0.38, 0.07, 0.08, "GPU3", "gpu", 7.5)
    g[4] = _box(ax, 0.47, 0.38, 0.07, 0.08, "GPU4", "gpu", 7.5)
    nic = _box(ax, 0.57, 0.38, 0.07, 0.08, "NIC0", "nic", 7.5)
    g[5] = _box(ax, 0.82, 0.38, 0.07, 0.08, "GPU5", "gpu", 7.5)
    _line(ax, sw1, g[0], "pcie")
    _line(ax, sw1, g[1], "pcie")
    _line(ax, sw2, g[2], "pcie")
    _line(ax, hb0, g[3], "pcie")
    _line(ax, hb1, g[4], "pcie")
    _line(ax, hb1, nic, "pcie")
    _line(ax, hb2, g[5], "pcie")
    ax.text(0.26, 0.6, "root port", fontsize=7, color=COLOURS["pcie"], rotation=-52)

    rows = [
        ("PIX", "GPU0-GPU1", "one PCIe switch (S1) between them"),
        ("PXB", "GPU0-GPU2", "several switches (S1, S0, S2), no host bridge"),
        ("PHB", "GPU0-GPU3", "up through host bridge A"),
        ("NODE", "GPU0-GPU4", "across host bridges A and B of one CPU"),
        ("SYS", "GPU0-GPU5", "across the CPU-to-CPU link (other NUMA node)"),
        ("NV#", "(not drawn)", "a bonded set of # NVLinks, beside the tree"),
    ]
    ax.text(
        0.40,
        0.245,
        "path name   example pair    what the traffic crosses",
        fontsize=8,
        fontweight="bold",
        family="monospace",
    )
    for i, (code, pair, what) in enumerate(rows):
        ax.text(
            0.40, 0.2 - i * 0.036, f"{code:<11} {pair:<15} {what}", fontsize=7.8, family="monospace"
        )
    ax.text(
        0.40,
        -0.05,
        "Closest first: NV# > PIX > PXB > PHB > NODE > SYS. "
        "NIC0 with GPU4: PHB (same host bridge B).",
        fontsize=7.5,
    )
    return fig


# --- 3. DGX-1 V100 hybrid cube mesh --------------------------------------------------------
# Edges copied from source_code/reference_systems/v100-sxm2-8gpu-server/nvidia-smi-topo-m.txt
# (the 8x V100-SXM2 server of a 2019 blog post; NOT the DGX-1's wiring, which links 0-4 and
# not 1-7: see reference_systems/dgx1-v100/system.json): (i, j, number of NVLinks). Tests check
# them.
CUBE_MESH_EDGES = [
    (0, 1, 1),
    (0, 2, 1),
    (0, 3, 2),
    (0, 6, 2),
    (1, 2, 2),
    (1, 3, 1),
    (1, 7, 2),
    (2, 3, 2),
    (2, 4, 1),
    (3, 5, 1),
    (4, 5, 2),
    (4, 6, 1),
    (4, 7, 2),
    (5, 6, 2),
    (5, 7, 1),
    (6, 7, 1),
]


def dgx1_cube_mesh():
    """Eight V100s, six NVLinks each: two fully connected quads plus one link pair across."""
    fig, ax = _canvas(
        8,
        5.4,
        "Hybrid cube mesh of the recorded 8x V100 SXM2 server (2019 blog), not the DGX-1 wiring",
    )
    # Left quad 0-3 and right quad 4-7, placed so the cross edges run straight across.
    pos = {
        0: (0.1, 0.78),
        1: (0.38, 0.78),
        2: (0.1, 0.3),
        3: (0.38, 0.3),
        6: (0.62, 0.78),
        7: (0.9, 0.78),
        4: (0.62, 0.3),
        5: (0.9, 0.3),
    }
    for i, j, n in CUBE_MESH_EDGES:
        (x0, y0), (x1, y1) = pos[i], pos[j]
        bend = 0.0
        if {i, j} in ({0, 6}, {1, 7}, {2, 4}, {3, 5}):
            bend = 0.12 if y0 > 0.5 else -0.12  # arc the cross links around the middle
        xs = [x0, (x0 + x1) / 2, x1]
        ys = [y0, (y0 + y1) / 2 + bend, y1]
        ax.plot(xs, ys, color=COLOURS["nvlink"], linewidth=2.2 * n, alpha=0.85, zorder=1)
        ax.text(
            xs[1],
            ys[1],
            f"NV{n}",
            fontsize=7.5,
            ha="center",
            va="center",
            bbox=dict(facecolor="white", edgecolor="none", pad=0.6),
            zorder=2,
        )
    for k, (x, y) in pos.items():
        _box(ax, x, y, 0.11, 0.1, f"GPU{k}", "gpu", 9)
    ax.text(
        0.5,
        0.08,
        "Each GPU: 6 NVLink2 links. Within a quad every pair is linked (NV1 or NV2);\n"
        "across quads only 0-6, 1-7, 2-4, 3-5. Other pairs (e.g. 0-4) have no NVLink: "
        "SYS in topo -m.",
        ha="center",
        fontsize=8.3,
    )
    ax.text(
        0.5,
        0.01,
        "Edges and GPU numbers from reference_systems/v100-sxm2-8gpu-server/nvidia-smi-topo-m.txt",
        ha="center",
        fontsize=7,
        color="#666666",
    )
    return fig


# --- 4. NVSwitch: HGX H100 / H200 8-GPU board ------------------------------------------------
def nvswitch_hgx():
    """Eight GPUs, each wired to every NVSwitch chip: all pairs are equally close."""
    fig, ax = _canvas(9, 5.4, "NVSwitch: HGX H100 / H200 8-GPU board")
    ax.set_ylim(-0.16, 1.0)
    switches = [
        _box(ax, 0.2 + 0.2 * k, 0.5, 0.15, 0.1, f"NVSwitch {k}", "switch", 8) for k in range(4)
    ]
    gpus = []
    for k in range(8):
        y = 0.85 if k < 4 else 0.15
        x = 0.12 + 0.25 * (k % 4)
        gpus.append(_box(ax, x, y, 0.12, 0.1, f"GPU{k}", "gpu", 9))
    for g in gpus:
        for s in switches:
            _line(ax, g, s, "nvlink", 1.4)
    ax.text(
        0.5,
        -0.1,
        "Each H100/H200 SXM GPU has 18 NVLink4 links spread over the 4 NVSwitch chips, "
        "so every pair\n"
        "shows NV18 in topo -m and any GPU can talk to any other at full NVLink speed "
        "at the same time.\n"
        "(Counts: NVIDIA DGX H100 user guide and H100/H200 datasheets.)",
        ha="center",
        fontsize=8,
    )
    return fig


# --- 5. ring all-reduce with 4 GPUs -------------------------------------------------------
def _ring_states(n):
    """Simulate ring all-reduce on n GPUs with n chunks each, step by step as
    gputopo.alphabeta.ring_schedule (the course's one ring schedule) says.

    Returns a list of (label, holdings, sent) where holdings[g][c] is the set of GPUs whose
    chunk c has been summed into GPU g's copy, and sent[g] is the chunk GPU g sent that step.
    """
    hold = [[{g} for _ in range(n)] for g in range(n)]
    states = [("start", [[set(s) for s in row] for row in hold], [None] * n)]
    for step, phase, moves in ring_schedule(n):
        sent = [None] * n
        incoming = []
        for source, destination, chunk in moves:
            sent[source] = chunk
            incoming.append((destination, chunk, set(hold[source][chunk])))
        for destination, chunk, contrib in incoming:
            if phase == "reduce-scatter":
                hold[destination][chunk] |= contrib
            else:
                hold[destination][chunk] = contrib
        number = step if phase == "reduce-scatter" else step - (n - 1)
        states.append((f"{phase} {number}", [[set(s) for s in r] for r in hold], sent))
    return states


def ring_allreduce(n=4):
    """Every GPU's buffer, in n chunks, after each of the 2(n-1) steps of a ring all-reduce."""
    states = _ring_states(n)
    letters = "ABCDEFGH"
    fig, ax = plt.subplots(figsize=(10, 6.4))
    cmap = plt.get_cmap("Greens")
    cell_w, cell_h = 1.0, 0.8
    for row, (label, hold, sent) in enumerate(states):
        y = -row * 1.2
        ax.text(-0.6, y + cell_h / 2, label, ha="right", va="center", fontsize=9)
        for g in range(n):
            x0 = g * (n * cell_w + 0.8)
            for c in range(n):
                who = hold[g][c]
                colour = cmap(0.15 + 0.75 * (len(who) - 1) / (n - 1))
                edge = "#c44e52" if sent[g] == c else "black"
                ax.add_patch(
                    plt.Rectangle(
                        (x0 + c * cell_w, y),
                        cell_w,
                        cell_h,
                        facecolor=colour,
                        edgecolor=edge,
                        linewidth=2.5 if edge != "black" else 0.6,
                    )
                )
                text = "".join(letters[k] for k in sorted(who)) + str(c)
                ax.text(
                    x0 + (c + 0.5) * cell_w,
                    y + cell_h / 2,
                    text,
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="black" if len(who) < n - 1 else "white",
                )
            if row == 0:
                ax.text(
                    x0 + n * cell_w / 2,
                    y + cell_h + 0.35,
                    f"GPU{g} ({letters[g]})",
                    ha="center",
                    fontsize=10,
                    fontweight="bold",
                )
    ax.axhline(-(n - 1) * 1.2 - 0.2, color="#999999", linestyle=":", linewidth=1)
    ax.set_xlim(-3.2, n * (n * cell_w + 0.8))
    ax.set_ylim(-(len(states) - 1) * 1.2 - 1.4, 1.6)
    ax.axis("off")
    ax.set_title(
        f"Ring all-reduce on {n} GPUs: {n - 1} reduce-scatter steps, then {n - 1} all-gather steps",
        fontsize=11,
        fontweight="bold",
    )
    ax.text(
        n * (n * cell_w + 0.8) / 2 - 1.6,
        -(len(states) - 1) * 1.2 - 1.1,
        "Rows show every buffer after the step. "
        "Cell 'ABC2' = chunk 2 holding the sum of GPUs A, B and C.\n"
        "Red border: the chunk that GPU sent to its right-hand neighbour (GPU3 sends to GPU0) "
        "in that step.\n"
        "Every step moves 1/n of the buffer over every link at once.",
        ha="center",
        va="center",
        fontsize=8.5,
    )
    return fig


DIAGRAMS = {
    "host_staging_vs_p2p": host_staging_vs_p2p,
    "pcie_tree": pcie_tree,
    "dgx1_v100_cube_mesh": dgx1_cube_mesh,
    "nvswitch_hgx_8gpu": nvswitch_hgx,
    "ring_allreduce_4gpu": ring_allreduce,
}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, as every command of the course does
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv):
    parser = _Parser(
        prog="draw_diagrams.py",
        description=__doc__.split("\n\n")[0],
        epilog="diagrams: " + ", ".join(DIAGRAMS),
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="redraw only the diagrams whose name contains NAME (default: all)",
    )
    argv = parser.parse_args(argv).names
    wanted = [name for name in DIAGRAMS if not argv or any(a in name for a in argv)]
    if not wanted:
        print(
            f"draw_diagrams.py: error: no diagram matches {argv} (choose from {list(DIAGRAMS)})",
            file=sys.stderr,
        )
        return 2
    for name in wanted:
        fig = DIAGRAMS[name]()
        path = os.path.join(HERE, name + ".png")
        fig.savefig(path, dpi=DPI, bbox_inches="tight")
        plt.close(fig)
        print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
