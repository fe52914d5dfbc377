#!/usr/bin/env python3
"""A fixed amount of write work for an instruction count (bench/write_instructions.sh): defines five
views over collection Five (sorted by a, b, c then -d, -e, a then b: bench/views.sh's five), then
sends CREATES creates into COLLECTION (Plain has no view, Five has the five) in pipelined batches of
16, each object {"a","b","c","d","e"} drawn from a fixed seed, reading every answer; exits non-zero
if any failed. CREATES 0 is the set-up alone.

    pipelined_creates.py SOCKET CREATES COLLECTION
"""
import json
import random
import sys

from pipeline import connect

VIEWS = [("fiveA", ["a"]), ("fiveB", ["b"]), ("fiveCD", ["c", "-d"]), ("fiveE", ["-e"]), ("fiveAB", ["a", "b"])]


def main() -> int:
    path, creates, collection = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    exchange = connect(path, "pipelined_creates")

    exchange([json.dumps({"op": "view.define", "name": name, "collection": "Five", "sort": sort}).encode()
              for name, sort in VIEWS])
    draw = random.Random(1)

    def create() -> bytes:
        r = draw.getrandbits(64)
        data = {"a": r % 1000, "b": f"w{r % 9973}", "c": r % 17, "d": r % 101, "e": (r >> 20) % 100000}
        return json.dumps({"op": "create", "collection": collection, "data": data}, separators=(",", ":")).encode()

    for _ in range(creates // 16):
        exchange([create() for _ in range(16)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
