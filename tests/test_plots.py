"""Each plot, drawn from reference data and from synthetic 1- and 16-GPU machines."""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

from gputopo import linkcodes, plots, reference  # noqa: E402
from gputopo.parsers.topo import parse as parse_topo  # noqa: E402


def artists_with_gid(figure, prefix):
    return [a for a in figure.findobj() if (a.get_gid() or "").startswith(prefix)]


def gid_names(figure, prefix):
    return sorted(a.get_gid()[len(prefix) :] for a in artists_with_gid(figure, prefix))


def synthetic_topo_text(gpu_count, nic_count=0):
    """`nvidia-smi topo -m` of an NVSwitch box: NV18 everywhere, half the GPUs per NUMA node."""
    half = max(1, gpu_count // 2)
    gpus = [f"GPU{i}" for i in range(gpu_count)]
    nics = [f"NIC{n}" for n in range(nic_count)]

    # NIC n sits beside the n-th half of the GPUs (PXB) and far from the rest (SYS).
    def nic_code(gpu_index, nic_index):
        return "PXB" if gpu_index // half == nic_index else "SYS"

    lines = ["\t" + "\t".join(gpus + nics) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for i in range(gpu_count):
        cells = ["X" if i == j else "NV18" for j in range(gpu_count)] + [
            nic_code(i, n) for n in range(nic_count)
        ]
        node = i // half
        lines.append(
            f"GPU{i}\t" + "\t".join(cells) + f"\t{node * 56}-{node * 56 + 55}\t{node}\t\tN/A"
        )
    for n in range(nic_count):
        cells = [nic_code(i, n) for i in range(gpu_count)] + [
            "X" if n == m else "SYS" for m in range(nic_count)
        ]
        lines.append(f"NIC{n}\t" + "\t".join(cells))
    lines += ["", "Legend:", "", "  X    = Self", "", "NIC Legend:", ""]
    lines += [f"  NIC{n}: mlx5_{n}" for n in range(nic_count)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- topology graph


def test_v100_server_graph_has_every_gpu_pair_coloured_by_link():
    topo = reference.load("v100-sxm2-8gpu-server", "topo")
    figure = plots.topology_graph(topo, title="8x V100")
    assert isinstance(figure, Figure)
    assert gid_names(figure, "node:GPU") == sorted(str(i) for i in range(8))
    edges = {a.get_gid()[5:]: a for a in artists_with_gid(figure, "edge:GPU")}
    assert len(edges) == 8 * 7 // 2
    for pair, line in edges.items():
        first, second = pair.split("-")
        code = topo["links"][first][second]
        assert line.get_color() == plots.LINK_COLOURS[linkcodes.family(code)]
    # NV2 is drawn wider than NV1, and any NVLink wider than the PCIe path (SYS).
    assert (
        edges["GPU0-GPU3"].get_linewidth()
        > edges["GPU0-GPU1"].get_linewidth()
        > edges["GPU0-GPU4"].get_linewidth()
    )
    # One CPU group (every GPU has affinity 0-95), joined to all eight GPUs.
    assert gid_names(figure, "node:CPUs") == [" 0-95"]
    assert len(artists_with_gid(figure, "cpu-edge:")) == 8
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert legend[:2] == [linkcodes.meaning("NV"), linkcodes.meaning("SYS")]
    assert figure.axes[0].get_title() == "8x V100"


def test_h100_pair_graph_labels_its_nvlink_bond():
    figure = plots.topology_graph(reference.load("h100-pcie-nvlink-pair", "topo"))
    assert gid_names(figure, "node:GPU") == ["0", "1"]
    assert gid_names(figure, "edge:") == ["GPU0-GPU1"]
    (label,) = artists_with_gid(figure, "edge-label:")
    assert label.get_text() == "NV12"
    assert gid_names(figure, "node:NUMA") == [" 1"]


def test_one_gpu_graph_has_no_edges():
    topo = parse_topo(synthetic_topo_text(1))
    figure = plots.topology_graph(topo)
    assert gid_names(figure, "node:GPU") == ["0"]
    assert artists_with_gid(figure, "edge:") == []
    assert figure.axes[0].get_title() == "GPU topology (1 GPU)"


def test_sixteen_gpus_with_nics_and_two_numa_nodes():
    topo = parse_topo(synthetic_topo_text(16, nic_count=2))
    figure = plots.topology_graph(topo)
    assert len(artists_with_gid(figure, "node:GPU")) == 16
    assert len(artists_with_gid(figure, "edge:GPU")) == 16 * 15 // 2
    # Each NIC is joined only to the eight GPUs on its side (PXB), not to the far ones (SYS).
    assert gid_names(figure, "edge:NIC0-") == sorted(f"GPU{i}" for i in range(8))
    assert gid_names(figure, "edge:NIC1-") == sorted(f"GPU{i}" for i in range(8, 16))
    nic_labels = sorted(a.get_text() for a in artists_with_gid(figure, "node:NIC"))
    assert nic_labels == ["NIC0\nmlx5_0", "NIC1\nmlx5_1"]
    assert gid_names(figure, "node:NUMA") == [" 0", " 1"]
    assert len(artists_with_gid(figure, "cpu-edge:NUMA 0-")) == 8
    # Too many pairs to label legibly: no edge labels at 16 GPUs.
    assert artists_with_gid(figure, "edge-label:") == []


def test_graph_draws_on_a_given_axes():
    outer = Figure()
    ax = outer.add_subplot(1, 2, 2)
    figure = plots.topology_graph(reference.load("h100-pcie-nvlink-pair", "topo"), ax=ax)
    assert figure is outer
    assert artists_with_gid(figure, "edge:GPU0-GPU1")


def test_graph_refuses_a_topology_without_gpus():
    with pytest.raises(ValueError, match="no GPUs"):
        plots.topology_graph({"gpus": [], "links": {}})


# ---------------------------------------------------------------- heatmap


def annotations(figure):
    """{(i, j): text} of the heatmap's cell annotations."""
    cells = {}
    for text in artists_with_gid(figure, "cell:"):
        i, j = text.get_gid()[5:].split(",")
        cells[(int(i), int(j))] = text.get_text()
    return cells


def assert_annotations_match(figure, matrix):
    cells = annotations(figure)
    expected = {
        (i, j) for i, row in enumerate(matrix) for j, value in enumerate(row) if value is not None
    }
    assert set(cells) == expected
    for (i, j), text in cells.items():
        decimals = len(text.split(".")[1]) if "." in text else 0
        assert abs(float(text) - matrix[i][j]) <= 0.5 * 10**-decimals + 1e-9


def heatmap(matrix, title, unit="GB/s", row_labels=None):
    """plots.p2p_heatmap on a new Axes, labelled as p2p_test.heatmaps labels a full matrix."""
    row_labels = row_labels or [f"GPU{i}" for i in range(len(matrix))]
    return plots.p2p_heatmap(
        matrix,
        title,
        unit,
        Figure(layout="constrained").add_subplot(),
        row_labels,
        [f"GPU{j}" for j in range(len(matrix[0]))],
    )


def test_h100_bandwidth_heatmap_annotates_every_cell():
    p2p = reference.load("h100-pcie-nvlink-pair", "p2p")
    matrix = p2p["bandwidth_gbs"]["bidirectional_enabled"]
    figure = heatmap(matrix, "H100 pair, bidirectional, P2P on")
    assert isinstance(figure, Figure)
    assert_annotations_match(figure, matrix)
    assert annotations(figure)[(0, 1)] == "509.4"
    image = figure.axes[0].images[0]
    # The colour scale runs from zero to the largest GPU-to-GPU cell; the diagonal is off it.
    assert image.get_clim() == pytest.approx((0.0, 509.35))
    assert figure.axes[1].get_ylabel() == "GB/s"


def test_heatmap_diagonal_is_not_painted_in_the_top_colour():
    # "left off the scale" must be visible: the diagonal cells are masked (drawn grey), not
    # clipped to the scale's maximum, which would paint them the brightest colour.
    p2p = reference.load("h100-pcie-nvlink-pair", "p2p")
    figure = heatmap(p2p["bandwidth_gbs"]["bidirectional_enabled"], "H100 pair")
    image = figure.axes[0].images[0]
    data = image.get_array()
    assert data.mask[0][0] and data.mask[1][1] and not data.mask[0][1]
    top = image.cmap(1.0)
    masked = image.cmap(float("nan"))
    assert tuple(masked) != tuple(top)


def test_latency_heatmap_uses_its_unit():
    p2p = reference.load("h100-pcie-nvlink-pair", "p2p")
    figure = heatmap(p2p["latency_us"]["disabled_gpu"], "latency", unit="us")
    assert figure.axes[1].get_ylabel() == "us"
    assert_annotations_match(figure, p2p["latency_us"]["disabled_gpu"])


def test_single_row_excerpt_keeps_its_row_label():
    p2p = reference.load("dgx1-v100", "p2p")
    matrix = p2p["bandwidth_gbs"]["bidirectional_enabled"]
    labels = [f"GPU{i}" for i in p2p["row_indices"]["bidirectional_enabled"]]
    figure = heatmap(matrix, "DGX-1 GPU0 row", row_labels=labels)
    assert_annotations_match(figure, matrix)
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["GPU0"]
    assert len(ax.get_xticklabels()) == 8
    # GPU0->GPU0 (784.87, a copy within one GPU) stays off the scale of the GPU-to-GPU cells.
    assert ax.images[0].get_clim()[1] == pytest.approx(max(matrix[0][1:]))


def test_sixteen_by_sixteen_with_a_missing_cell():
    matrix = [[(i + 1) * 10.0 + j / 8 for j in range(16)] for i in range(16)]
    matrix[3][5] = None
    figure = heatmap(matrix, "16 GPUs")
    assert_annotations_match(figure, matrix)
    assert len(annotations(figure)) == 16 * 16 - 1


# ---------------------------------------------------------------- bandwidth curve


def test_nccl_tests_busbw_curve_with_an_alpha_beta_fit():
    rows = reference.load("v100-sxm2-8gpu-server", "nccl-tests")["rows"]
    sizes = [row["size"] for row in rows]
    busbw = [row["out_of_place"]["busbw"] for row in rows]
    fit = {"alpha_us": 48.0, "bandwidth_gbs": 130.0}
    figure = plots.bandwidth_curve(sizes, busbw, fit=fit, label="8x V100 all-reduce")
    ax = figure.axes[0]
    assert ax.get_xscale() == "log"
    (measured,) = artists_with_gid(figure, "measured:")
    assert list(measured.get_xdata()) == sizes and list(measured.get_ydata()) == busbw
    (fitted,) = artists_with_gid(figure, "fit:")
    expected = fitted.get_xdata() / (48e-6 + fitted.get_xdata() / 130e9) / 1e9  # n / T(n), in GB/s
    assert fitted.get_ydata() == pytest.approx(expected)
    # The model's bandwidth approaches B for large messages and falls like n / alpha for small.
    assert fitted.get_ydata()[-1] < 130.0
    assert fitted.get_ydata()[0] == pytest.approx(sizes[0] / 48e-6 / 1e9, rel=1e-3)
    assert "alpha = 48 us" in [t.get_text() for t in ax.get_legend().get_texts()][1]


def test_curves_overlay_on_one_axes_and_accept_a_fit_function():
    figure = plots.bandwidth_curve([1024, 2048, 4096], [1.0, 2.0, 3.5], label="a")
    plots.bandwidth_curve(
        [1024, 4096], [0.5, 1.0], fit=lambda n: n / 4096, label="b", ax=figure.axes[0]
    )
    assert gid_names(figure, "measured:") == ["a", "b"]
    (fitted,) = artists_with_gid(figure, "fit:")
    assert fitted.get_ydata() == pytest.approx(fitted.get_xdata() / 4096)


def test_bytes_are_labelled_with_binary_prefixes():
    from gputopo import units

    assert plots.format_bytes is units.format_bytes  # its cases: tests/test_units.py
    assert [plots.format_bytes(n) for n in (8, 1024, 3 * 2**20, 2**30)] == [
        "8 B",
        "1 KiB",
        "3 MiB",
        "1 GiB",
    ]


def test_figures_render_to_png(tmp_path):
    # Drawing (not only building) catches layout errors: render one of each.
    topo = reference.load("v100-sxm2-8gpu-server", "topo")
    for number, figure in enumerate(
        [
            plots.topology_graph(topo),
            heatmap([[1.0, 2.0], [3.0, 4.0]], "m"),
            plots.bandwidth_curve(
                [8, 64, 512], [0.1, 0.5, 1.0], fit={"alpha_us": 5, "bandwidth_gbs": 2}
            ),
        ]
    ):
        path = tmp_path / f"figure-{number}.png"
        figure.savefig(path, dpi=40)
        assert path.stat().st_size > 1000


def test_choice_bands_shade_the_published_4_rank_log_and_draw_busbw():
    # reference_systems/_nccl-dumps/nccl-tuning-4rank-a100-nv12-2.27.3-excerpt.txt, read by hand:
    # Ring/LL from 4 B to 182,092 B, Ring/LL128 at 5,758,372 B, Ring/Simple at 182,095,808 B
    from gputopo.parsers import PARSERS

    text = (
        reference.REFERENCE_DIR / "_nccl-dumps" / "nccl-tuning-4rank-a100-nv12-2.27.3-excerpt.txt"
    ).read_text()
    runs = PARSERS["nccl-tuning"](text)["switches"]["AllReduce"]
    figure = plots.choice_bands(runs, title="published log")
    assert gid_names(figure, "band:") == ["Ring/LL", "Ring/LL128", "Ring/Simple"]
    band = artists_with_gid(figure, "band:Ring/LL")[0]
    # axvspan draws a Rectangle (matplotlib 3.9+) or a Polygon (older)
    xs = (
        [band.get_x(), band.get_x() + band.get_width()]
        if hasattr(band, "get_width")
        else [x for x, _ in band.get_xy()]
    )
    assert min(xs) == pytest.approx(4 / 1.41) and max(xs) == pytest.approx(182092 * 1.41)
    assert band.get_hatch() == "//" and artists_with_gid(figure, "band:Ring/Simple")[
        0
    ].get_hatch() in ("", None)
    assert not artists_with_gid(figure, "busbw")
    rows = [
        {"size": 8, "out_of_place": {"busbw": 0.0}},
        {"size": 2**20, "out_of_place": {"busbw": 31.7}},
    ]
    line = artists_with_gid(plots.choice_bands(runs, rows), "busbw")[0]
    assert list(line.get_xdata()) == [8, 2**20] and list(line.get_ydata()) == [0.0, 31.7]
