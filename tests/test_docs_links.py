"""Links and recorded-data paths in the course's Markdown documents resolve.

The documents: README.md, CONTRIBUTING.md, docs/*.md, evidence/**/README.md and every README.md
under source_code/. For each:
- every relative Markdown link `[text](target)` names a file or folder that exists, and a
  `#anchor` into a Markdown file names one of its headings (GitHub's slug: lower case, spaces to
  '-', punctuation other than '-' and '_' dropped);
- every path written in backticks under `source_code/reference_systems/` or `evidence/` exists
  (a trailing `..` range such as `run1..3.txt` or a `<placeholder>` is not a path).
Notebooks have their own link test (tests/test_notebooks_static.py).
"""

import re
import urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(
    {
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "evidence").rglob("README.md"),
        *(ROOT / "source_code").rglob("README.md"),
    }
)
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
CODE_PATH = re.compile(r"`((?:source_code/reference_systems|evidence)/[^`\s*<>]*)`")


def _ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            found.add(slug(heading.group(1)))
    return found


def test_slug_matches_githubs_rule():
    # GitHub's anchors for headings of this repository's README, written out by hand.
    assert slug("How `make lab` and `make test` install") == "how-make-lab-and-make-test-install"
    assert slug("HPC clusters: Apptainer and Slurm") == "hpc-clusters-apptainer-and-slurm"


def test_documents_are_found():
    names = _ids(DOCS)
    assert "README.md" in names and "docs/instructor.md" in names and "docs/maintainer.md" in names


@pytest.mark.parametrize("path", DOCS, ids=_ids(DOCS))
def test_relative_links_resolve(path):
    problems = []
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / urllib.parse.unquote(file_part)).resolve() if file_part else path
        if not resolved.exists():
            problems.append(f"{target}: {resolved} does not exist")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: no heading '{anchor}' in {resolved.name}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", DOCS, ids=_ids(DOCS))
def test_recorded_data_paths_exist(path):
    missing = []
    for written in CODE_PATH.findall(path.read_text(encoding="utf-8")):
        if ".." in written:
            continue
        if not (ROOT / written).exists():
            missing.append(written)
    assert not missing, f"{path.relative_to(ROOT)} names paths that do not exist: {missing}"
