"""The two published recordings notebook 2 starts with name their source in full (review J1).

Expected values were read by hand from the sources themselves, not from system.json:
- v100-sxm2-8gpu-server: Konnase Lee's blog post "NCCL", front matter `date: 2019-09-26`,
  published at https://konnase.github.io/2019/09/26/machine_learning/NCCL/ (the page's
  canonical link); its Markdown is source/_posts/deep_learning/NCCL.md on branch hexo of
  github.com/konnase/konnase.github.io, added in commit 17cd9df. No licence is given for the
  post (the page footer says only "(c) 2022"; the only LICENSE files are the themes').
- h100-pcie-nvlink-pair: gpu/h100/mgmt_gpu_on_dl380agen11.md in
  github.com/HPE-Japan-Presales/e-learning, created by Koga Masazumi on 2024-10-01 (commit
  fa55c4a), signed "KOGA MASAZUMI"; its nvidia-smi output is dated Mon Jun 10 2024. The
  repository has no LICENSE file.
"""

from pathlib import Path

import pytest

from gputopo import reference

README = Path(reference.__file__).resolve().parent.parent / "reference_systems" / "README.md"

EXPECTED = {
    "v100-sxm2-8gpu-server": (
        "Konnase Lee",
        '"NCCL"',
        "2019-09-26",
        "https://konnase.github.io/2019/09/26/machine_learning/NCCL/",
        "no licence is stated",
    ),
    "h100-pcie-nvlink-pair": (
        "Koga Masazumi",
        "2024-10-01",
        "2024-06-10",
        "https://github.com/HPE-Japan-Presales/e-learning/blob/main/gpu/h100/"
        "mgmt_gpu_on_dl380agen11.md",
        "states no licence",
    ),
}


@pytest.mark.parametrize("system", sorted(EXPECTED))
def test_source_names_author_date_address_and_licence(system):
    source = reference.describe(system)["source"]
    for part in EXPECTED[system]:
        assert part in source, f"{system}: {part!r} missing from its source"


@pytest.mark.parametrize("system", sorted(EXPECTED))
def test_readme_row_gives_the_same_source(system):
    rows = [
        line
        for line in README.read_text(encoding="utf-8").splitlines()
        if line.startswith(f"| {system} |")
    ]
    assert len(rows) == 1
    published = rows[0].rstrip(" |").rsplit(" | ", 1)[-1]
    for part in EXPECTED[system]:
        assert part in published, f"{system}: {part!r} missing from its README row"
