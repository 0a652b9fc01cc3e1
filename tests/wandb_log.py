"""Reading back what wandb wrote offline: the records of a ``run-*.wandb`` file.

wandb 0.2x+ no longer ships a Python reader, so this follows the file format: a 7-byte
header, then LevelDB-log framed records (32 KiB blocks; 7-byte record headers of crc,
length and type) holding ``wandb_internal_pb2.Record`` protobufs.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[pb.Record]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", "not a wandb run file"
    pos, out, pending = 7, [], b""
    while pos + 7 <= len(data):
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < 7:
            pos += left_in_block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        payload = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        if kind == FULL:
            pending = payload
        elif kind == FIRST:
            pending = payload
            continue
        elif kind == MIDDLE:
            pending += payload
            continue
        elif kind == LAST:
            pending += payload
        record = pb.Record()
        record.ParseFromString(pending)
        out.append(record)
    return out


def history(path: Path) -> list[dict]:
    rows = []
    for record in records(path):
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json)
                    for item in record.history.item
                }
            )
    return rows


def config(path: Path) -> dict:
    out = {}
    for record in records(path):
        if record.WhichOneof("record_type") in ("config", "run"):
            updates = (
                record.config.update if record.HasField("config") else record.run.config.update
            )
            for item in updates:
                out[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return out
