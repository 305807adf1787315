"""Words of prose per notebook: the main path, and what sits in collapsed "Go deeper" blocks.

    python tools/notebook_words.py [NOTEBOOK ...]      (default: Start_Here and notebooks/*.ipynb)

The main path is every markdown cell's text outside <details>...</details>; a word is a run of
non-space characters that holds a letter or a digit (table rules and markup alone are not words).
Code is not counted. The course's budget: about 2,500 words of main path per notebook.
"""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "source_code"))
from gputopo.cliutil import OneLineParser, parse_args_or_exit  # noqa: E402

DETAILS = re.compile(r"<details>.*?</details>", re.S | re.I)
WORD = re.compile(r"\S*[A-Za-z0-9]\S*")


def words(path):
    cells = json.loads(Path(path).read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    deeper = sum(len(WORD.findall(block)) for block in DETAILS.findall(text))
    main = len(WORD.findall(DETAILS.sub(" ", text)))
    return main, deeper


def main(argv):
    parser = OneLineParser(
        prog="notebook_words.py",
        description="Words of prose per notebook: main path and Go-deeper blocks.",
    )
    parser.add_argument(
        "notebooks", nargs="*", help="notebooks (default: Start_Here and notebooks/*.ipynb)"
    )
    argv = parse_args_or_exit(parser, argv).notebooks
    paths = argv or [str(ROOT / "Start_Here.ipynb")] + sorted(
        str(p) for p in (ROOT / "notebooks").glob("*.ipynb")
    )
    print(f"{'notebook':45} {'main path':>9} {'go deeper':>9}")
    for path in paths:
        try:
            main_words, deeper = words(path)
        except (OSError, ValueError, KeyError) as exc:
            print(f"notebook_words: error: {path}: {exc}", file=sys.stderr)
            return 1
        print(f"{Path(path).name:45} {main_words:9d} {deeper:9d}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
