"""The course's figures, the same for live measurements and recorded reference data.

Each function takes what the parsers return, draws on the given Axes or a new bare
`matplotlib.figure.Figure` (no pyplot: no backend needed, a notebook shows it once) and returns
the Figure; matplotlib and numpy are imported inside. Drawn artists carry a gid ("node:GPU0",
"edge:GPU0-GPU1", "cell:0,1") so tests and readers can find what was drawn.
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence

from gputopo.units import format_bytes  # noqa: F401  (notebook 4 calls plots.format_bytes)

from . import linkcodes

# Link family -> colour (matplotlib's tab10); the families and their meanings are linkcodes'.
LINK_COLOURS = {
    "NV": "#2ca02c",
    "PIX": "#1f77b4",
    "PXB": "#17becf",
    "PHB": "#ff7f0e",
    "NODE": "#9467bd",
    "SYS": "#d62728",
}
NODE_COLOURS = {"gpu": "#d9f2d0", "nic": "#dbe9f6", "cpu": "#eeeeee"}


def _new_axes(ax, figsize):
    from matplotlib.figure import Figure

    if ax is not None:
        return ax.figure, ax
    figure = Figure(figsize=figsize, layout="constrained")
    return figure, figure.add_subplot()


def _cpu_groups(topo: Mapping, gpus: Sequence[str]) -> Dict[str, List[str]]:
    """CPU/NUMA node label -> GPUs attached to it, from the affinity columns."""
    groups: Dict[str, List[str]] = {}
    columns = (("NUMA", topo.get("numa_affinity") or {}), ("CPUs", topo.get("cpu_affinity") or {}))
    for gpu in gpus:
        parts = [
            f"{what} {column[gpu]}"
            for what, column in columns
            if column.get(gpu) and column[gpu] != "N/A"
        ]
        if parts:
            groups.setdefault("\n".join(parts), []).append(gpu)
    return groups


def _mean_direction(angles: Sequence[float]) -> Optional[float]:
    """The mean angle of points on the circle, or None when they surround the centre."""
    x = sum(math.cos(a) for a in angles) / len(angles)
    y = sum(math.sin(a) for a in angles) / len(angles)
    return math.atan2(y, x) if math.hypot(x, y) > 0.3 else None


def _node(ax, position, text, kind, gid, fontsize):
    ax.text(
        position[0],
        position[1],
        text,
        ha="center",
        va="center",
        fontsize=fontsize,
        zorder=5,
        gid=gid,
        bbox={
            "boxstyle": "round,pad=0.35",
            "facecolor": NODE_COLOURS[kind],
            "edgecolor": "#555555",
        },
    )


def _edge(ax, start, end, gid, **style):
    from matplotlib.lines import Line2D

    ax.add_line(Line2D([start[0], end[0]], [start[1], end[1]], gid=gid, **style))


def topology_graph(topo: Mapping, title: Optional[str] = None, ax=None):
    """Draw GPUs on a circle, NICs and CPU/NUMA nodes outside it, links as coloured edges.

    topo is the topo parser's result. Every GPU pair gets one edge coloured by its link
    type; NVLink edges are solid and wider with more bonded links, PCIe paths dashed.
    Each NIC is joined to its closest GPU(s), each CPU/NUMA node to the GPUs whose
    affinity names it (grey dotted lines).
    """
    from matplotlib.lines import Line2D

    gpus = sorted(topo.get("gpus") or [], key=lambda name: int(name[3:]))  # GPU2 before GPU10
    if not gpus:
        raise ValueError("the topology has no GPUs to draw")
    links = topo.get("links") or {}
    count = len(gpus)
    figure, ax = _new_axes(ax, (6.5, 6.5) if count <= 8 else (8.5, 8.5))
    fontsize = 10 if count <= 8 else 8

    # Rotated by half a step so no GPU sits at the top, where a shared CPU node goes.
    angles = {
        gpu: math.pi / 2 + math.pi / count - 2 * math.pi * k / count for k, gpu in enumerate(gpus)
    }
    position = {gpu: (math.cos(a), math.sin(a)) for gpu, a in angles.items()}
    families_seen: Dict[str, None] = {}  # in the order first drawn, for the legend
    # A full NVSwitch mesh of 16 GPUs is 120 edges: thinner lines keep it from merging.
    thinning = min(1.0, 8 / count)

    for a, first in enumerate(gpus):
        for second in gpus[a + 1 :]:
            code = (links.get(first) or {}).get(second) or (links.get(second) or {}).get(first)
            if code is None:
                continue
            family = linkcodes.family(code)
            families_seen[family] = None
            nv = linkcodes.nvlink_count(code)
            _edge(
                ax,
                position[first],
                position[second],
                f"edge:{first}-{second}",
                color=LINK_COLOURS[family],
                linewidth=(1.2 + 1.2 * math.sqrt(nv)) * thinning if nv else 1.0,
                linestyle="-" if nv else "--",
                alpha=(0.9 if count <= 8 else 0.6) if nv else 0.55,
                zorder=2 if nv else 1,
            )
            # Labels stay readable up to 4 GPUs for all links and 8 for NVLink only.
            if count <= 4 or (nv and count <= 8):
                (x1, y1), (x2, y2) = position[first], position[second]
                ax.text(
                    (x1 + x2) / 2,
                    (y1 + y2) / 2,
                    code,
                    fontsize=fontsize - 2,
                    ha="center",
                    va="center",
                    zorder=3,
                    gid=f"edge-label:{first}-{second}",
                    bbox={
                        "boxstyle": "round,pad=0.1",
                        "facecolor": "white",
                        "edgecolor": "none",
                        "alpha": 0.8,
                    },
                )

    outer_spots: Dict[int, int] = {}  # rounded angle -> nodes already placed there

    def outer_position(angle: float, radius: float):
        key = round(math.degrees(angle)) % 360
        taken = outer_spots.get(key, 0)
        outer_spots[key] = taken + 1
        shifted = angle + math.radians(12) * ((taken + 1) // 2) * (1 if taken % 2 else -1)
        return (radius * math.cos(shifted), radius * math.sin(shifted))

    for nic, device in (topo.get("nics") or {}).items():
        row = links.get(nic) or {}
        gpu_codes = {gpu: row[gpu] for gpu in gpus if gpu in row}
        if not gpu_codes:
            continue
        closest = max(linkcodes.rank(code) for code in gpu_codes.values())
        nearest = [gpu for gpu, code in gpu_codes.items() if linkcodes.rank(code) == closest]
        direction = _mean_direction([angles[gpu] for gpu in nearest])
        spot = outer_position(-math.pi / 2 if direction is None else direction, 1.55)
        for gpu in nearest:
            family = linkcodes.family(gpu_codes[gpu])
            families_seen[family] = None
            _edge(
                ax,
                spot,
                position[gpu],
                f"edge:{nic}-{gpu}",
                color=LINK_COLOURS[family],
                linewidth=1.5,
                linestyle="-.",
                zorder=1,
            )
        label = nic if not device or device == nic else f"{nic}\n{device}"
        _node(ax, spot, label, "nic", f"node:{nic}", fontsize - 1)

    cpu_groups = _cpu_groups(topo, gpus)
    for label, members in cpu_groups.items():
        direction = _mean_direction([angles[gpu] for gpu in members])
        spot = (
            outer_position(direction, 1.8)
            if direction is not None
            else outer_position(math.pi / 2, 1.6)
        )
        for gpu in members:
            _edge(
                ax,
                spot,
                position[gpu],
                f"cpu-edge:{label.splitlines()[0]}-{gpu}",
                color="#888888",
                linewidth=0.8,
                linestyle=":",
                zorder=0,
            )
        _node(ax, spot, label, "cpu", f"node:{label.splitlines()[0]}", fontsize - 1)

    for gpu in gpus:
        _node(ax, position[gpu], gpu, "gpu", f"node:{gpu}", fontsize)

    handles = [
        Line2D(
            [],
            [],
            color=LINK_COLOURS[f],
            linewidth=3 if f == "NV" else 1.5,
            linestyle="-" if f == "NV" else "--",
        )
        for f in families_seen
    ]
    labels = [linkcodes.meaning(f) for f in families_seen]
    if cpu_groups:
        handles.append(Line2D([], [], color="#888888", linestyle=":"))
        labels.append("GPU to its CPU / NUMA node")
    if handles:
        ax.legend(
            handles,
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.02),
            ncol=2,
            fontsize=8,
            frameon=False,
        )
    placed = list(position.values()) + [
        text.get_position() for text in ax.texts if (text.get_gid() or "").startswith("node:")
    ]
    ax.set_xlim(min(x for x, _ in placed) - 0.55, max(x for x, _ in placed) + 0.55)
    ax.set_ylim(min(y for _, y in placed) - 0.55, max(y for _, y in placed) + 0.55)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title or f"GPU topology ({count} GPU{'s' if count != 1 else ''})")
    return figure


def p2p_heatmap(
    matrix: Sequence[Sequence[Optional[float]]],
    title: str,
    unit: str,
    ax,
    row_labels: Sequence[str],
    column_labels: Sequence[str],
):
    """An annotated heatmap of a P2P matrix on `ax` (rows = source, columns = destination).

    The colour scale runs from zero to the largest GPU-to-GPU cell; cells where the row and
    column name the same GPU (copies within one GPU) are annotated but kept off the scale,
    which they would otherwise flatten, and painted light grey. None is drawn blank.
    """
    import matplotlib
    import numpy as np

    rows = [list(row) for row in matrix]
    width = len(rows[0])
    values = np.array([[np.nan if v is None else float(v) for v in row] for row in rows])
    self_cells = np.array([[r == c for c in column_labels] for r in row_labels])
    on_scale = values[~self_cells & ~np.isnan(values)]
    on_scale = on_scale if on_scale.size else values[~np.isnan(values)]
    # Anchored at zero: starting the scale at the smallest cell would paint 509.1 and
    # 509.4 GB/s as opposite colours.
    low = min(float(on_scale.min()), 0.0) if on_scale.size else 0.0
    high = float(on_scale.max()) if on_scale.size and on_scale.max() > low else low + 1.0

    colours = matplotlib.colormaps["viridis"].copy()
    colours.set_bad("#e0e0e0")  # masked cells: the diagonal (off the scale) and missing values
    shown = np.ma.masked_array(values, mask=self_cells | np.isnan(values))
    image = ax.imshow(shown, cmap=colours, vmin=low, vmax=high, aspect="auto")
    fontsize = 9 if max(len(rows), width) <= 8 else 6
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            if value is None:
                continue
            # the grey background of a cell off the scale takes dark text
            shade = (
                1.0
                if self_cells[i, j]
                else (min(max(float(value), low), high) - low) / (high - low)
            )
            # about four significant digits, so 16 x 16 annotations still fit their cells
            digits = 0 if abs(value) >= 1000 else 1 if abs(value) >= 100 else 2
            ax.text(
                j,
                i,
                f"{value:.{digits}f}",
                ha="center",
                va="center",
                fontsize=fontsize,
                color="white" if shade < 0.5 else "black",
                gid=f"cell:{i},{j}",
            )
    ax.set(
        xticks=range(width),
        yticks=range(len(rows)),
        yticklabels=row_labels,
        xlabel="destination",
        ylabel="source",
        title=title,
    )
    ax.set_xticklabels(column_labels, rotation=90 if width > 8 else 0)
    ax.figure.colorbar(image, ax=ax, label=unit)
    return ax.figure


def bandwidth_curve(
    sizes_bytes: Sequence[float],
    values: Sequence[float],
    fit=None,
    label: str = "measured",
    unit: str = "GB/s",
    ax=None,
    title: Optional[str] = None,
):
    """Measured bandwidth against message size (log x) and, optionally, a fitted model.

    fit is either a function of the sizes returning bandwidths in `unit`, or a mapping
    {"alpha_us": ..., "bandwidth_gbs": ...} of the alpha-beta model t = alpha + n / B.
    Call again with the same ax to overlay several systems.
    """
    import numpy as np
    from matplotlib.ticker import FuncFormatter, LogLocator

    sizes = np.asarray(sizes_bytes, dtype=float)
    figure, ax = _new_axes(ax, (7, 4.2))
    (line,) = ax.plot(
        sizes,
        np.asarray(values, dtype=float),
        marker="o",
        markersize=4,
        label=label,
        gid=f"measured:{label}",
    )
    if fit is not None:
        dense = np.logspace(np.log2(sizes.min()), np.log2(sizes.max()), 200, base=2)
        if callable(fit):
            predicted = np.asarray(fit(dense), dtype=float)
            fit_label = f"{label}: fit"
        else:
            predicted = (
                dense / (fit["alpha_us"] * 1e-6 + dense / (fit["bandwidth_gbs"] * 1e9)) / 1e9
            )  # n / T(n)
            fit_label = (
                f"{label}: alpha = {fit['alpha_us']:.3g} us, B = {fit['bandwidth_gbs']:.3g} GB/s"
            )
        ax.plot(
            dense,
            predicted,
            linestyle="--",
            color=line.get_color(),
            label=fit_label,
            gid=f"fit:{label}",
        )
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2, numticks=12))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda size, _: format_bytes(size)))
    ax.tick_params(axis="x", labelrotation=45)
    ax.set(xlabel="message size", ylabel=f"bandwidth ({unit})")
    ax.grid(True, which="major", alpha=0.3)
    # Outside the axes, on the right, so that no legend covers a curve however many are drawn.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    if title:
        ax.set_title(title)
    return figure


# NCCL's choice per message size (notebook 6): one shaded band per run of sizes NCCL gave one
# (algorithm, protocol); colour = algorithm, hatch = protocol.
ALGORITHM_COLOURS = {
    "Ring": "tab:blue",
    "Tree": "tab:green",
    "NVLS": "tab:purple",
    "NVLSTree": "tab:pink",
    "CollNetDirect": "tab:brown",
    "CollNetChain": "tab:olive",
    "PAT": "tab:cyan",
}
PROTOCOL_HATCHES = {"LL": "//", "LL128": "..", "Simple": ""}


def choice_bands(runs: Sequence[Mapping], rows: Sequence[Mapping] = (), title: str = "", ax=None):
    """Bands of NCCL's (algorithm, protocol) per size and, when `rows` (an nccl-tests table's rows)
    are given, the out-of-place busbw on top. runs: nccl_tuning's `switches[func]` ({algo, proto,
    from_bytes, to_bytes}); each band reaches half a doubling beyond its first and last size.
    The x axis covers at least the course's 8 B - 128 MiB sweep."""
    figure, ax = _new_axes(ax, (10, 4))
    for run in runs:
        ax.axvspan(
            run["from_bytes"] / 1.41,
            run["to_bytes"] * 1.41,
            color=ALGORITHM_COLOURS.get(run["algo"], "grey"),
            alpha=0.25,
            hatch=PROTOCOL_HATCHES.get(run["proto"], "xx"),
            label=f"{run['algo']} / {run['proto']}",
            gid=f"band:{run['algo']}/{run['proto']}",
        )
    if rows:
        ax.plot(
            [r["size"] for r in rows],
            [r["out_of_place"]["busbw"] for r in rows],
            "o-",
            color="black",
            ms=3,
            label="busbw (out of place)",
            gid="busbw",
        )
        ax.set_ylabel("busbw (GB/s)")
    else:
        ax.set_yticks([])
    sizes = (
        [r["from_bytes"] for r in runs] + [r["to_bytes"] for r in runs] + [r["size"] for r in rows]
    )
    ax.set_xscale("log", base=2)
    ax.set_xlim(min(sizes + [8]) / 2, max(sizes + [2**27]) * 2)
    ax.set_xlabel("message size (bytes)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    return figure
