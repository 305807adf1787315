"""images/draw_diagrams.py: every diagram draws, and the cube mesh matches the recorded machine."""

import importlib.util
import pathlib

import pytest

from gputopo.parsers.topo import parse as parse_topo

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location(
        "draw_diagrams", ROOT / "images" / "draw_diagrams.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


draw = _load_script()


@pytest.mark.parametrize("name", sorted(draw.DIAGRAMS))
def test_every_diagram_draws_and_its_png_is_committed(name):
    import matplotlib.pyplot as plt

    fig = draw.DIAGRAMS[name]()
    assert fig.axes
    plt.close(fig)
    png = ROOT / "images" / f"{name}.png"
    assert png.is_file(), f"run: python images/draw_diagrams.py {name}"
    assert png.stat().st_size < 300_000, "keep PNGs commit-sized (dpi ~100)"


def test_cube_mesh_edges_match_the_recorded_topology():
    text = (
        ROOT / "source_code/reference_systems/v100-sxm2-8gpu-server/nvidia-smi-topo-m.txt"
    ).read_text()
    links = parse_topo(text)["links"]
    recorded = set()
    for row, cells in links.items():
        for column, code in cells.items():
            if code.startswith("NV") and column.startswith("GPU"):
                i, j = sorted((int(row[3:]), int(column[3:])))
                recorded.add((i, j, int(code[2:])))
    assert set(draw.CUBE_MESH_EDGES) == recorded


def test_ring_simulation_ends_with_every_gpu_holding_the_full_sum():
    for n in (2, 3, 4, 8):
        states = draw._ring_states(n)
        assert len(states) == 1 + 2 * (n - 1)
        _, final, _ = states[-1]
        assert all(chunk == set(range(n)) for gpu in final for chunk in gpu)
        # After reduce-scatter each GPU owns exactly one fully reduced chunk.
        _, middle, _ = states[n - 1]
        assert all(sum(chunk == set(range(n)) for chunk in gpu) == 1 for gpu in middle)
