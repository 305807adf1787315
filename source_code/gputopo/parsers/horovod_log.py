"""Parser for the throughput lines of a Horovod training run.

Reads two formats:
- the course's CNN script (rank 0), one line per epoch and one summary:
  `EPOCH 2/5 images_per_sec=12345.6 seconds=1.234 ... workers=2 batch_per_worker=64`
  `SUMMARY images_per_sec_median=12345.6 ... workers=2 batch_per_worker=64`
- the old lab's Keras output: `Epoch 4/8` followed later by `Images/sec: 98121.52`.

Returns {format, epochs: [{epoch, epochs_total, images_per_sec, ...}], summary: {...} or None}.
`format` is "cnn-script" or "old-lab". Values that read as numbers become numbers.
"""
import re

from . import ParseError

_EPOCH_LINE = re.compile(r"EPOCH (\d+)/(\d+)((?: \S+=\S+)+)\s*$")
_SUMMARY_LINE = re.compile(r"SUMMARY((?: \S+=\S+)+)\s*$")
_OLD_EPOCH = re.compile(r"Epoch (\d+)/(\d+)\s*$")
_OLD_THROUGHPUT = re.compile(r"Images/sec:\s*(\S+)\s*$")
# mpirun/horovodrun tag each line with the rank that printed it, e.g. "[1,0]<stdout>:".
_RANK_TAG = re.compile(r"^\[[\d,]+\](?:<std\w+>)?:?\s*")
_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_REQUIRED_EPOCH_KEY = "images_per_sec"
_REQUIRED_SUMMARY_KEY = "images_per_sec_median"


def parse(text):
    """Parse a training log; raise ParseError if it holds no throughput line or a garbled one."""
    epochs, summary = [], None
    formats = set()
    old_epoch = None  # (epoch, total) of the last Keras "Epoch n/m" line not yet paired
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = _RANK_TAG.sub("", line.strip())
        if stripped.startswith("EPOCH"):
            epochs.append(_read_epoch(stripped, lineno))
            formats.add("cnn-script")
        elif stripped.startswith("SUMMARY"):
            if summary is not None:
                raise ParseError("second SUMMARY line", lineno)
            summary = _read_summary(stripped, lineno)
            formats.add("cnn-script")
        elif _OLD_EPOCH.match(stripped):
            match = _OLD_EPOCH.match(stripped)
            old_epoch = (int(match.group(1)), int(match.group(2)))
        elif stripped.startswith("Images/sec"):
            epochs.append(_read_old_throughput(stripped, old_epoch, lineno))
            old_epoch = None
            formats.add("old-lab")
    if not epochs and summary is None:
        if not text.strip():
            raise ParseError("empty input")
        raise ParseError("no throughput lines found (EPOCH ..., SUMMARY ... or Images/sec: ...)")
    if len(formats) > 1:
        raise ParseError("log mixes the CNN script's EPOCH lines with the old lab's Images/sec lines")
    return {"format": formats.pop(), "epochs": epochs, "summary": summary}


def _read_epoch(stripped, lineno):
    match = _EPOCH_LINE.match(stripped)
    if not match:
        raise ParseError(f"cannot read epoch line {stripped!r}", lineno)
    epoch = {"epoch": int(match.group(1)), "epochs_total": int(match.group(2))}
    epoch.update(_key_values(match.group(3), lineno))
    _require_number(epoch, _REQUIRED_EPOCH_KEY, lineno)
    return epoch


def _read_summary(stripped, lineno):
    match = _SUMMARY_LINE.match(stripped)
    if not match:
        raise ParseError(f"cannot read summary line {stripped!r}", lineno)
    summary = _key_values(match.group(1), lineno)
    _require_number(summary, _REQUIRED_SUMMARY_KEY, lineno)
    return summary


def _read_old_throughput(stripped, old_epoch, lineno):
    match = _OLD_THROUGHPUT.match(stripped)
    if not match or not _FLOAT.fullmatch(match.group(1)):
        raise ParseError(f"cannot read throughput line {stripped!r}", lineno)
    epoch, total = old_epoch if old_epoch else (None, None)
    return {"epoch": epoch, "epochs_total": total, "images_per_sec": float(match.group(1))}


def _require_number(values, key, lineno):
    if not isinstance(values.get(key), (int, float)):
        raise ParseError(f"line has no numeric {key}=", lineno)


def _key_values(text, lineno):
    values = {}
    for pair in text.split():
        key, _, value = pair.partition("=")
        if key in values:
            raise ParseError(f"{key}= appears twice", lineno)
        values[key] = _number_or_text(value)
    return values


def _number_or_text(value):
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    return value
