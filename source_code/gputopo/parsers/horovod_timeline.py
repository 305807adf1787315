"""Parser for Horovod's timeline: the Chrome-trace JSON that `HOROVOD_TIMELINE=file.json` writes.

What Horovod 0.28.1 writes (horovod/common/timeline.cc at tag v0.28.1; names in common.h):
- only the coordinator (rank 0) writes the file (operations.cc:492-506), so it shows rank 0's view;
- every tensor is a Chrome "process": a `process_name` metadata record names its pid
  (timeline.cc:240-256, TimelineWriter::DoWriteEvent);
- per tensor and per operation: `NEGOTIATE_<REQUEST>` B..E (timeline.cc NegotiateStart/End,
  "NEGOTIATE_" + RequestType_Name, e.g. NEGOTIATE_ALLREDUCE) with one `X` event per rank that
  reported ready (NegotiateRankReady, its name is the rank); then the operation itself B..E, named
  by Response::ResponseType_Name (message.cc:296-327: ALLREDUCE, ALLGATHER, BROADCAST, ...), whose
  E carries args {"dtype", "shape"} (timeline.cc End); inside it the activities B..E
  (timeline.cc ActivityStart/End) named in common.h:79-112: INIT_FUSION_BUFFER, WAIT_FOR_DATA,
  WAIT_FOR_OTHER_TENSOR_DATA (ops/collective_operations.cc:41,49), QUEUE (ops/gpu_operations.cc:55),
  MEMCPY_IN_FUSION_BUFFER, NCCL_ALLREDUCE, MEMCPY_OUT_FUSION_BUFFER (ops/nccl_operations.cc:236,
  263,274), GLOO_ALLREDUCE (ops/gloo_operations.cc:202), MPI_ALLREDUCE, CCL_ALLREDUCE, ...;
- with HOROVOD_TIMELINE_MARK_CYCLES=1 (operations.cc:514) one instant event `CYCLE_START`
  (ph "i", timeline.cc MarkCycleStart) per background cycle, which the step split does not need;
- timestamps are microseconds since Horovod started (timeline.cc TimeSinceStartMicros).
Horovod ends every record with "}]" and seeks back over the "]" before the next one
(timeline.cc DoWriteEvent), so a whole file is valid JSON; a run killed mid-write leaves it cut
off. A cut-off file is read up to its last whole record and reported with "incomplete": true
(and "truncated": true, the key every parser of this package uses for a cut-off text: the CLI
then prints what was read and exits 2).

Steps. The gradient tensors are all-reduced once per training step each, so the "step tensors"
are the ALLREDUCE tensors with the highest count of completed operations (at least 2) that two or
more tensors share (a model has a weight and a bias; a framework's barriers, metric
averages and test counts are one tensor each or run once: with one worker Horovod reduces no
gradient and the timeline has no step, count 0); in a cut-off file also those one operation
behind. Should a framework tensor happen to run exactly as often as the gradients, it is counted
among them: `steps.tensors` names them, check it. Step k is the k-th
operation of every step tensor, with the negotiation before it. A step that not every step tensor
completed (a cut-off file) is left out of `steps.per_step`. For each step the parser gives, in
microseconds of rank 0's background thread, each instant counted once (the tensors of a fused
operation share the same intervals) and given to the first category that covers it:
  collective_us   the library's reduction: *_ALLREDUCE activities (NCCL_ALLREDUCE,
                  GLOO_ALLREDUCE, ...)
  fusion_copy_us  MEMCPY_IN/OUT_FUSION_BUFFER, INIT_FUSION_BUFFER (and the host-buffer copies)
  wait_us         WAIT_FOR_DATA, WAIT_FOR_OTHER_TENSOR_DATA, QUEUE
  negotiate_us    NEGOTIATE_ALLREDUCE: from rank 0 announcing the tensor until every rank has
                  (it includes waiting for the slower rank and for the next cycle)
  other_us        inside the ALLREDUCE operation but in none of the activities above
  busy_us         the sum: time in which some step tensor was negotiating or being reduced
  span_us         first negotiation start to last operation end of the step
  operations      the step's collective operations: a fused one counts once. Horovod fuses only
                  the tensors ready in the same cycle (docs/tensor-fusion.rst at v0.28.1, steps
                  1 and 6), so with fusion on a step may still take several
These times may overlap the framework's own compute (backward runs while early gradients are
negotiated), so they are not a split of the step time by themselves.
"""

import json
import re

from . import ParseError

# Categories in priority order (an instant covered by two goes to the first).
_COLLECTIVE = (
    "NCCL_ALLREDUCE",
    "GLOO_ALLREDUCE",
    "MPI_ALLREDUCE",
    "CCL_ALLREDUCE",
    "MPI_ADASUM_ALLREDUCE",
)
_FUSION_COPY = (
    "MEMCPY_IN_FUSION_BUFFER",
    "MEMCPY_OUT_FUSION_BUFFER",
    "INIT_FUSION_BUFFER",
    "MEMCPY_IN_HOST_BUFFER",
    "MEMCPY_OUT_HOST_BUFFER",
)
_WAIT = ("WAIT_FOR_DATA", "WAIT_FOR_OTHER_TENSOR_DATA", "QUEUE")
# Where Horovod starts a record (timeline.cc DoWriteEvent/DoWriteMarker/WriteAtFileStart).
_RECORD_START = re.compile(r'\{"(?:ph|name)": ')
CATEGORIES = ("collective_us", "fusion_copy_us", "wait_us", "negotiate_us", "other_us")


def _records(text):
    """The JSON objects of the trace in order -> (records, cut_off, skipped).

    A record that does not decode is skipped (counted) when more records follow it; at the end
    of the text it is the record Horovod was writing when the run stopped: cut off.
    """
    decoder = json.JSONDecoder()
    start = text.lstrip("\ufeff \t\r\n")
    if not start.startswith("["):
        raise ParseError("not a Horovod timeline: a Chrome-trace JSON array starts with '['", 1)
    pos, end, records, skipped = len(text) - len(start) + 1, len(text), [], 0
    while True:
        while pos < end and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= end:
            return records, True, skipped  # no closing bracket
        if text[pos] == "]":
            return records, False, skipped
        try:
            record, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            following = _RECORD_START.search(text, pos + 1)
            if following is None:
                return records, True, skipped
            skipped += 1
            pos = following.start()
            continue
        records.append(record)


def _union(intervals):
    merged = []
    for a, b in sorted(map(tuple, intervals)):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def _length(merged):
    return sum(b - a for a, b in merged)


def _step_split(intervals):
    """intervals: [(name, start, end)] of one step -> the categories of the module docstring."""
    groups = {
        "collective_us": [(a, b) for n, a, b in intervals if n in _COLLECTIVE],
        "fusion_copy_us": [(a, b) for n, a, b in intervals if n in _FUSION_COPY],
        "wait_us": [(a, b) for n, a, b in intervals if n in _WAIT],
        "negotiate_us": [(a, b) for n, a, b in intervals if n.startswith("NEGOTIATE_")],
        "other_us": [(a, b) for n, a, b in intervals if n == "ALLREDUCE"],
    }
    split, covered = {}, []
    for key in CATEGORIES:  # what each category adds to the time the ones before it cover
        before = _length(covered)
        covered = _union(covered + groups[key])
        split[key] = _length(covered) - before
    split["busy_us"] = _length(covered)
    # Fused tensors share one collective (their activities overlap); separate operations run one
    # after another on the background thread: the merged collective intervals count operations.
    split["operations"] = len(_union(groups["collective_us"]))
    split["span_us"] = (
        max(b for _, _, b in intervals) - min(a for _, a, _ in intervals) if intervals else 0
    )
    return split


def parse(text):
    """Parse a Horovod timeline (whole or cut off); raise ParseError if it holds no event."""
    records, cut_off, ignored = _records(text)
    names, stacks = {}, {}
    done = {}  # tensor -> number of completed operations (any type)
    intervals = []  # (tensor, op index, name, start, end)
    op_type = {}  # tensor -> type of its operations (ALLREDUCE, BROADCAST, ...)
    events = 0
    for record in records:
        if not isinstance(record, dict):
            ignored += 1
            continue
        ph, pid, ts = record.get("ph"), record.get("pid"), record.get("ts")
        if ph == "M":
            if (
                record.get("name") == "process_name"
                and isinstance(record.get("args"), dict)
                and "name" in record["args"]
            ):
                names[pid] = str(record["args"]["name"])
            continue
        if not isinstance(ts, (int, float)):
            ignored += 1
            continue
        events += 1
        if ph in ("i", "X"):
            pass  # a cycle's start marker; a rank reported ready during negotiation
        elif ph == "B" and isinstance(record.get("name"), str):
            stacks.setdefault(pid, []).append((record["name"], ts))
        elif ph == "E" and stacks.get(pid):
            name, start = stacks[pid].pop()
            tensor = names.get(pid, f"pid {pid}")
            intervals.append((tensor, done.get(tensor, 0), name, start, ts))
            if not stacks[pid] and not name.startswith("NEGOTIATE_"):
                done[tensor] = done.get(tensor, 0) + 1
                op_type[tensor] = name
        else:
            ignored += 1
    if not events:
        raise ParseError(
            "no timeline event in the file (is it a HOROVOD_TIMELINE file?)", truncated=cut_off
        )

    reduced = {t: done[t] for t in done if op_type.get(t) == "ALLREDUCE"}
    counts = list(reduced.values())
    shared = [n for n in set(counts) if n >= 2 and counts.count(n) >= 2]
    busiest = max(shared, default=0)
    # A cut-off file may stop after some tensors of the last step: they lag by one.
    step_tensors = sorted(
        t
        for t, n in reduced.items()
        if busiest and (n == busiest or (cut_off and n == busiest - 1))
    )
    per_step = []
    for k in range(busiest):
        if not all(done[t] > k for t in step_tensors):
            break
        mine = [(n, a, b) for t, i, n, a, b in intervals if i == k and t in step_tensors]
        per_step.append(_step_split(mine))
    return {
        "incomplete": cut_off,
        "truncated": cut_off,
        "records": len(records),
        "ignored": ignored,
        "open_at_end": sum(len(s) for s in stacks.values()),
        "steps": {
            "count": busiest,
            "complete": len(per_step),
            "tensors": step_tensors,
            "per_step": per_step,
        },
    }
