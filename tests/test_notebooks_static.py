"""Static checks of every notebook (Start_Here.ipynb and notebooks/*.ipynb), without running them.

- every relative link and image in markdown resolves: the file exists and a `#anchor` names a
  heading (or an explicit `<a id=...>`/`<a name=...>`) of the target notebook;
- every image has alt text;
- every notebook links home and to its neighbours;
- no stored output is an error, and no stored stream is stderr with a traceback.
"""

import html
import json
import pathlib
import re
import urllib.parse

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = [ROOT / "Start_Here.ipynb"] + sorted((ROOT / "notebooks").glob("*.ipynb"))
NUMBERED = sorted(
    (p for p in NOTEBOOKS if re.match(r"\d+\.", p.name)), key=lambda p: int(p.name.split(".")[0])
)

# [text](target) and ![alt](target), with an optional "title"; plus <img src=...> and <a href=...>.
MD_LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_IMG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
HTML_HREF = re.compile(r"<a\b[^>]*\bhref=[\"']([^\"']+)[\"']", re.IGNORECASE)
HTML_ANCHOR = re.compile(r"<a\b[^>]*\b(?:id|name)=[\"']([^\"']+)[\"']", re.IGNORECASE)
FENCE = re.compile(r"```.*?```", re.DOTALL)


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _markdown(nb):
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            yield index, FENCE.sub("", text)  # code blocks are not links


def heading_anchor(text):
    """The anchor JupyterLab gives a markdown heading: spaces become '-', nothing else changes."""
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = text.replace("`", "").replace("*", "").strip()
    return text.replace(" ", "-")


def anchors(path):
    found = set()
    for _, text in _markdown(_load(path)):
        for line in text.splitlines():
            heading = re.match(r"\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if heading:
                found.add(heading_anchor(heading.group(1)))
        found.update(HTML_ANCHOR.findall(text))
    return found


def links(path):
    """(cell index, is_image, alt or link text, target) for every link and image in markdown."""
    out = []
    for index, text in _markdown(_load(path)):
        for bang, label, target in MD_LINK.findall(text):
            out.append((index, bool(bang), label, target))
        for tag in HTML_IMG.findall(text):
            src = re.search(r"\bsrc=[\"']([^\"']+)", tag)
            alt = re.search(r"\balt=[\"']([^\"']*)", tag)
            out.append((index, True, alt.group(1) if alt else "", src.group(1) if src else ""))
        for target in HTML_HREF.findall(text):
            out.append((index, False, "", html.unescape(target)))
    return out


def _is_external(target):
    return bool(re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE))


def _ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def test_notebooks_are_found():
    # Start_Here, notebooks 1-7 and the appendix, by name: a notebook the glob misses fails here
    names = {p.name for p in NOTEBOOKS}
    assert {"Start_Here.ipynb", "7.Diagnose-the-Node.ipynb", "A.Production-Hygiene.ipynb"} <= names
    assert sum(p.parent.name == "notebooks" for p in NOTEBOOKS) == 8


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_links_and_images_resolve(path):
    problems = []
    for index, is_image, _, target in links(path):
        if _is_external(target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / urllib.parse.unquote(file_part)).resolve() if file_part else path
        if not resolved.exists():
            problems.append(f"cell {index}: {target} -> {resolved} does not exist")
            continue
        if anchor and resolved.suffix == ".ipynb":
            anchor = urllib.parse.unquote(anchor)
            if anchor not in anchors(resolved):
                problems.append(
                    f"cell {index}: {target}: no heading gives #{anchor} in {resolved.name}"
                )
        if is_image and resolved.suffix.lower() not in (".png", ".svg", ".jpg", ".jpeg", ".gif"):
            problems.append(f"cell {index}: image {target} is not a picture file")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_image_has_alt_text(path):
    missing = [
        f"cell {index}: {target}"
        for index, is_image, alt, target in links(path)
        if is_image and len(alt.strip()) < 10
    ]
    assert not missing, "images without (meaningful) alt text: " + ", ".join(missing)


def _target_names(path):
    """Names of the files the notebook's (non-image, local) links point at."""
    return {
        pathlib.PurePosixPath(urllib.parse.unquote(t.partition("#")[0])).name
        for _, is_image, _, t in links(path)
        if not is_image and not _is_external(t) and t.partition("#")[0]
    }


def _number(path):
    return int(path.name.split(".")[0])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_navigation(path):
    """Home, previous and next links, by notebook number (a neighbour may still be being written:
    a link to a file that does not exist yet fails test_links_and_images_resolve instead)."""
    names = _target_names(path)
    numbered = lambda k: any(re.match(rf"{k}\.[^/]*\.ipynb$", name) for name in names)  # noqa: E731
    if path.name == "Start_Here.ipynb":
        assert numbered(1), "Start_Here must link to notebook 1"
        return
    if not re.match(r"\d+\.", path.name):  # an appendix (A.*): outside the sequence, linked home
        assert "Start_Here.ipynb" in names, f"{path.name} has no link home (Start_Here.ipynb)"
        assert re.match(r"[A-Z]\.[^/]*\.ipynb$", path.name), f"{path.name}: neither N.* nor A.*"
        return
    k = _number(path)
    assert "Start_Here.ipynb" in names, f"{path.name} has no link home (Start_Here.ipynb)"
    if k == 1:
        assert "Start_Here.ipynb" in names
    else:
        assert numbered(k - 1), f"{path.name} has no link to the previous notebook ({k - 1}.*)"
    if any(_number(p) > k for p in NUMBERED):
        assert numbered(k + 1), f"{path.name} has no link to the next notebook ({k + 1}.*)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_stored_errors(path):
    problems = []
    for index, cell in enumerate(_load(path)["cells"]):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(
                    f"cell {index}: stored error {output.get('ename')}: {output.get('evalue')}"
                )
            text = output.get("text", "")
            text = "".join(text) if isinstance(text, list) else text
            if (
                output.get("output_type") == "stream"
                and "Traceback (most recent call last)" in text
            ):
                problems.append(f"cell {index}: stored traceback in {output.get('name')}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_valid_json_with_a_python_kernel(path):
    nb = _load(path)
    assert nb.get("nbformat") == 4
    assert nb.get("metadata", {}).get("kernelspec", {}).get("language", "python") == "python"


def test_heading_anchor_rule():
    assert heading_anchor("Reading nvidia-smi topo -m") == "Reading-nvidia-smi-topo--m"
    assert heading_anchor("`NV#` and friends") == "NV#-and-friends"
