"""Parser for the throughput lines of a Horovod training run.

Reads two formats:
- the course's CNN script (rank 0), one line per epoch and one summary:
  `EPOCH 2/5 images_per_sec=12345.6 seconds=1.234 ... workers=2 batch_per_worker=64`
  `SUMMARY images_per_sec_median=12345.6 ... workers=2 batch_per_worker=64`
- the old lab's Keras output: `Epoch 4/8` followed later by `Images/sec: 98121.52`.

Returns {format, epochs: [{epoch, epochs_total, images_per_sec, ...}], summary: {...} or None}.
`format` is "cnn-script" or "old-lab". Values that read as numbers become numbers. Lines are
read after `gputopo.parsers.prepare_lines` (escape codes, line numbers, launcher prefixes).
"""

import re

from . import NUMBER, ParseError, nothing_found, prepare_lines

_EPOCH_LINE = re.compile(r"EPOCH (\d+)/(\d+)((?: \S+=\S+)+)\s*$")
_SUMMARY_LINE = re.compile(r"SUMMARY()()((?: \S+=\S+)+)\s*$")
_OLD_EPOCH = re.compile(r"Epoch (\d+)/(\d+)\s*$")
_OLD_THROUGHPUT = re.compile(r"Images/sec:\s*(\S+)\s*$")
# mpirun/horovodrun tag each line with the rank that printed it, e.g. "[1,0]<stdout>:".
_RANK_TAG = re.compile(r"^\[[\d,]+\](?:<std\w+>)?:?\s*")
_INT = re.compile(r"-?\d+")


def parse(text):
    """Parse a training log; raise ParseError if it holds no throughput line or a garbled one."""
    epochs, summary = [], None
    formats = set()
    old_epoch = None  # (epoch, total) of the last Keras "Epoch n/m" line not yet paired
    for lineno, line in enumerate(prepare_lines(text), start=1):
        stripped = _RANK_TAG.sub("", line.strip())
        if stripped.startswith("EPOCH"):
            epochs.append(_read_line(stripped, lineno, _EPOCH_LINE, "epoch", "images_per_sec"))
            formats.add("cnn-script")
        elif stripped.startswith("SUMMARY"):
            if summary is not None:
                raise ParseError("second SUMMARY line", lineno)
            summary = _read_line(
                stripped, lineno, _SUMMARY_LINE, "summary", "images_per_sec_median"
            )
            formats.add("cnn-script")
        elif _OLD_EPOCH.match(stripped):
            match = _OLD_EPOCH.match(stripped)
            old_epoch = (int(match.group(1)), int(match.group(2)))
        elif stripped.startswith("Images/sec"):
            epochs.append(_read_old_throughput(stripped, old_epoch, lineno))
            old_epoch = None
            formats.add("old-lab")
    if not epochs and summary is None:
        raise nothing_found(
            text, "no throughput lines found (EPOCH ..., SUMMARY ... or Images/sec: ...)"
        )
    if len(formats) > 1:
        raise ParseError(
            "log mixes the CNN script's EPOCH lines with the old lab's Images/sec lines"
        )
    return {"format": formats.pop(), "epochs": epochs, "summary": summary}


def _read_line(stripped, lineno, pattern, what, required):
    """An EPOCH line ({epoch, epochs_total, key=value...}) or the SUMMARY line ({key=value...})."""
    match = pattern.match(stripped)
    if not match:
        raise ParseError(f"cannot read {what} line {stripped!r}", lineno)
    values = {}
    for pair in match[3].split():
        key, _, value = pair.partition("=")
        if key in values:
            raise ParseError(f"{key}= appears twice", lineno)
        values[key] = (
            int(value)
            if _INT.fullmatch(value)
            else float(value)
            if NUMBER.fullmatch(value)
            else value
        )
    if not isinstance(values.get(required), (int, float)):
        raise ParseError(f"line has no numeric {required}=", lineno)
    return {"epoch": int(match[1]), "epochs_total": int(match[2]), **values} if match[1] else values


def _read_old_throughput(stripped, old_epoch, lineno):
    match = _OLD_THROUGHPUT.match(stripped)
    if not match or not NUMBER.fullmatch(match.group(1)):
        raise ParseError(f"cannot read throughput line {stripped!r}", lineno)
    epoch, total = old_epoch if old_epoch else (None, None)
    return {"epoch": epoch, "epochs_total": total, "images_per_sec": float(match.group(1))}
