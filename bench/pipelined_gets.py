#!/usr/bin/env python3
"""A fixed amount of foliod work for an instruction count (bench/instructions.sh): creates
k0..k999 in collection Bench, then sends GETS gets of them in pipelined batches of 32, reading
every answer, and exits non-zero if any failed.

    pipelined_gets.py SOCKET GETS
"""
import json
import sys

from pipeline import connect


def main() -> int:
    path, gets = sys.argv[1], int(sys.argv[2])
    exchange = connect(path, "pipelined_gets")

    exchange([json.dumps({"op": "create", "collection": "Bench", "id": f"k{i}",
                          "data": {"title": f"task {i}", "n": i, "done": False, "note": "x" * 40}}).encode()
              for i in range(1000)])
    batch = [f'{{"op":"get","collection":"Bench","id":"k{i % 1000}"}}'.encode() for i in range(32)]
    for _ in range(gets // 32):
        exchange(batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
