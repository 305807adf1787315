#!/usr/bin/env python3
"""Source edits that Horovod 0.28.1 needs to build for PyTorch with current compilers.

Usage: environment/patch-horovod.py HOROVOD_SOURCE_DIR   (the unpacked horovod-0.28.1 sdist)

install.sh --framework pytorch applies them; the TensorFlow 2.15 build needs none. Each edit is
one exact text replacement; an edit already applied is skipped, and a file whose text is neither
the original nor the edited one stops the build with one line (a different Horovod release).
Horovod's later sources contain the same fixes.

  1. include-stdexcept: horovod/common/common.h throws std::logic_error/std::runtime_error
     without including <stdexcept>; gcc 13's libstdc++ no longer pulls it in through <string>.
  2. include-string: horovod/common/group_table.h uses std::string without including <string>
     (same cause).
  3. cxx17-top, cxx17-torch: PyTorch >= 2.1 headers need C++17; Horovod 0.28.1 asks CMake for
     C++14 in the top-level CMakeLists.txt and in horovod/torch/CMakeLists.txt.
Exit status: 0 applied (or already applied), 1 an edit does not fit, 2 bad usage.
"""

import sys
from pathlib import Path

EDITS = (
    (
        "include-stdexcept",
        "horovod/common/common.h",
        "#include <memory>\n#include <string>\n",
        "#include <memory>\n#include <stdexcept>\n#include <string>\n",
    ),
    (
        "include-string",
        "horovod/common/group_table.h",
        "#include <queue>\n#include <unordered_map>\n",
        "#include <queue>\n#include <string>\n#include <unordered_map>\n",
    ),
    ("cxx17-top", "CMakeLists.txt", "set(CMAKE_CXX_STANDARD 14)\n", "set(CMAKE_CXX_STANDARD 17)\n"),
    (
        "cxx17-torch",
        "horovod/torch/CMakeLists.txt",
        "    set(CMAKE_CXX_STANDARD 14)\n",
        "    set(CMAKE_CXX_STANDARD 17)\n",
    ),
)


def apply(root):
    """Apply EDITS under `root`; returns a list of (name, 'applied' | 'already applied')."""
    root = Path(root)
    done = []
    for name, relative, old, new in EDITS:
        path = root / relative
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"edit {name}: cannot read {relative} ({exc.strerror})") from None
        if new in text:
            done.append((name, "already applied"))
        elif text.count(old) == 1:
            path.write_text(text.replace(old, new), encoding="utf-8")
            done.append((name, "applied"))
        else:
            raise ValueError(
                f"edit {name}: {relative} does not contain the expected text once "
                f"(not Horovod 0.28.1?)"
            )
    return done


def main(argv):
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    if not Path(argv[0]).is_dir():
        print(f"patch-horovod.py: error: not a directory ({argv[0]})", file=sys.stderr)
        return 2
    try:
        for name, state in apply(argv[0]):
            print(f"patch-horovod.py: {name}: {state}")
    except ValueError as exc:
        print(f"patch-horovod.py: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
