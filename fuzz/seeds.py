#!/usr/bin/env python3
"""Writes a seed corpus for each fuzz target into OUT/<target>/, from the examples in proto/PROTOCOL.md:
the request lines (after "→ "), the answers (after "← "), the `where`, `sort` and cursors they hold,
and the events they show, as export files; and records of a counted tree laid out as the store lays
them out (tree-record). Usage: seeds.py PROTOCOL.md OUT"""
import hashlib
import json
import os
import struct
import sys

def lines_after(text, arrow):
    """The JSON value at the start of each line after `arrow` (example lines may end with a comment)."""
    decoder = json.JSONDecoder()
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith(arrow + " {"):
            continue
        raw = line[len(arrow) + 1:]
        try:
            value, end = decoder.raw_decode(raw)
        except ValueError:
            continue  # an elided example such as "xxxx…(1100 x)…"
        yield raw[:end].encode(), value

def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

def walk(value):
    yield value
    if isinstance(value, dict):
        for child in value.values():
            yield from walk(child)
    elif isinstance(value, list):
        for child in value:
            yield from walk(child)

def tree_records():
    """Records of a counted tree as the store lays them out (FolioStore's TreeNode and header): leaves of
    keys like a view's (sort key, then an id), branches over them, and headers."""
    def node(kind, header, entries):
        offsets, end = [0], 0
        for entry in entries:
            end += len(entry)
            offsets.append(end)
        return bytes([kind]) + struct.pack("<H", len(entries)) + header + b"".join(struct.pack("<H", o) for o in offsets) + b"".join(entries)

    keys = [b"\x02" + struct.pack(">q", n * 37) + b"\x00" + b"01J%023d" % n for n in range(40)]
    for count in (0, 1, 2, 7, 40):
        yield node(0, struct.pack("<QQ", 3, 5), keys[:count])
    children = [struct.pack("<QQ", 10 + n, 100 + n) + (keys[n * 8] if n else b"") for n in range(5)]
    for count in (1, 2, 5):
        yield node(1, b"", children[:count])
    yield struct.pack("<QQQQ", 1, 0, 2, 0)
    yield struct.pack("<QQQQQ", 7, 2, 40, 1234, 1)


def main():
    protocol, out = sys.argv[1], sys.argv[2]
    text = open(protocol, encoding="utf-8").read()
    requests = list(lines_after(text, "→"))
    answers = list(lines_after(text, "←"))
    seeds = {name: set() for name in ["request-decoder", "json-parser", "query", "page-cursor", "export-reader", "event-decoder"]}

    for raw, value in requests:
        seeds["request-decoder"].add(raw)
        seeds["json-parser"].add(raw)
        for key in ("where", "sort"):
            if key in value:
                seeds["query"].add(compact(value[key]))
        if isinstance(value.get("after"), str):
            seeds["page-cursor"].add(value["after"].encode())
        # Values a where compares with, as an array the query target orders.
        if isinstance(value.get("data"), dict):
            seeds["query"].add(compact(list(value["data"].values())))
    for raw, value in answers:
        seeds["json-parser"].add(raw)
        for node in walk(value):
            if isinstance(node, dict) and isinstance(node.get("next"), str):
                seeds["page-cursor"].add(node["next"].encode())
            if isinstance(node, dict) and isinstance(node.get("events"), list):
                events = node["events"]
                # As shown (a chain from genesis only if the first is event 1), and renumbered from 1
                # with the harness fixing the hashes (first byte odd).
                lines = [compact(event) for event in events]
                # Each event's canonical bytes: the export line without its hash.
                for event in events:
                    seeds["event-decoder"].add(compact({key: value for key, value in event.items() if key != "hash"}))
                trailer = compact({"end": True, "lastSeq": events[-1]["seq"] if events else 0, "chainHead": events[-1]["hash"] if events else "0" * 64})
                seeds["export-reader"].add(b"\x00" + b"\n".join(lines + [trailer]) + b"\n")
                renumbered = [dict(event, seq=i + 1) for i, event in enumerate(events)]
                lines = [compact(event) for event in renumbered]
                trailer = compact({"end": True, "lastSeq": len(events), "chainHead": ""})
                seeds["export-reader"].add(b"\x01" + b"\n".join(lines + [trailer]) + b"\n")
    seeds["export-reader"].add(b"\x00" + compact({"end": True, "lastSeq": 0, "chainHead": "0" * 64}) + b"\n")

    # Requests near the 1 MiB limit, for the bounded-cost runs (each must be answered within the
    # -timeout of fuzz/run.sh however it is mutated): many keys, a long escaped string, a long $in,
    # deep nesting, a wide $or.
    seeds["request-decoder-large"] = {
        compact({"op": "create", "collection": "T", "data": {f"k{i}": i for i in range(60000)}}),
        compact({"op": "create", "collection": "T", "data": {"s": "\u00e9\"\\\n" * 120000}}),
        compact({"op": "list", "collection": "T", "where": {"n": {"$in": list(range(100000))}}}),
        b'{"op":"update","collection":"T","id":"x","patch":{"a":' + b"[" * 126 + b"]" * 126 + b"}}",
        compact({"op": "count", "collection": "T", "where": {"$or": [{f"f{i}": {"$gte": i}} for i in range(120)]}}),
        compact({"op": "create", "collection": "T", "data": {"a": [{"$date": "2026-11-30T01:41:09.675Z"}] * 24000}}),
    }

    seeds["tree-record"] = set(tree_records())

    for name, items in seeds.items():
        directory = os.path.join(out, name)
        os.makedirs(directory, exist_ok=True)
        for item in items:
            with open(os.path.join(directory, hashlib.sha1(item).hexdigest()), "wb") as file:
                file.write(item)
        print(f"{name}: {len(items)} seeds")

main()
