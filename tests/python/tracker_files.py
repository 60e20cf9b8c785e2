"""Reading back what the trackers wrote, with their own readers, and the truth to hold it to: the
windows' JSONL, which the core writes for the same windows before any listener sees them."""

import json
import struct
from pathlib import Path

import steptrace


def jsonl_windows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


KEYS = (
    "steptrace/steps",
    "steptrace/step_p50_ms",
    "steptrace/compute_ms",
    "steptrace/compute_share",
    "steptrace/input_share",
    "steptrace/label_code",
)


def truth(line):
    """A window's figures read straight from its JSONL line: the keys the trackers hold, each
    found in the summary's JSON by hand (not by steptrace's own mapping). A window without counted
    steps (the first one may hold only warm-up steps: it ends at the first wall-clock boundary) has
    its step count and label only; a window without a label has code 0 (docs/python.md)."""
    label = line["diagnosis"]["label"]
    code = steptrace.LABELS.index(label) + 1 if label in steptrace.LABELS else 0
    out = {"steptrace/steps": line["steps"], "steptrace/label_code": code}
    if line["steps"]:
        phases = line["phases"]
        out["steptrace/step_p50_ms"] = line["step_ms"]["p50"]
        out["steptrace/compute_ms"] = phases["compute"]["mean_ms"]
        out["steptrace/compute_share"] = phases["compute"]["share"]
        out["steptrace/input_share"] = phases["input"]["share"]
    return out


def holding(lines, key):
    """The windows whose figures include `key`, in order: what a tracker's series of it holds."""
    return [line for line in lines if key in truth(line)]


def tensorboard_scalars(root):
    """{tag: [(step, value)]} from every TensorBoard event file under `root`, read by TensorBoard's
    own EventAccumulator."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = {}
    for folder in sorted({p.parent for p in Path(root).rglob("events.out.tfevents.*")}):
        acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
        for tag in acc.Tags()["tensors"]:
            out.setdefault(tag, []).extend((e.step, e.tensor_proto.string_val) for e in acc.Tensors(tag))
    return out


def wandb_history(root):
    """Every history row of the offline W&B runs under `root`: their .wandb files are a LevelDB
    log (a 7-byte header, 32 KiB blocks of CRC/length/kind chunks) of W&B's protobuf records."""
    from wandb.proto import wandb_internal_pb2

    rows = []
    for path in sorted(Path(root).rglob("*.wandb")):
        data, pos, block, chunk = path.read_bytes(), 7, 32768, b""
        assert data[:4] == b":W&B", path
        while pos + 7 <= len(data):
            if block - pos % block < 7:  # a block's tail too short for a header is padding
                pos += block - pos % block
                continue
            _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
            if length == 0 and kind == 0:
                break
            chunk += data[pos + 7 : pos + 7 + length]
            pos += 7 + length
            if kind in (1, 4):  # a whole record, or the last piece of one
                record = wandb_internal_pb2.Record()
                record.ParseFromString(chunk)
                chunk = b""
                if record.WhichOneof("record_type") == "history":
                    rows.append(
                        {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
                    )
    return rows
