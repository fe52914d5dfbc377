#!/usr/bin/env python3
"""Runs inside the VM of Tests/VM/vm_power_cut.py, with the standard library only.

    guest_load.py write SOCKET CYCLE OUT    acknowledged writes, one line each, until the power is cut
    guest_load.py check SOCKET CYCLE OUT    what the store holds after the cut, then DONE

OUT is a serial port the host reads. A line is written only after foliod answered the write `ok`,
so every complete line is an acknowledged write:

    C <id>                      a create of Cut/<id>
    U <id> <version> <n>        an update of Cut/<id> to version <version>, setting n
    READY                       the writers are connected and writing

`check` writes `V <ok> <lastSeq> <replayedEvents> <mismatches>` (the answer of verify), `H <id>
<version> <n>` for each object of Cut, and `DONE <count>`.
"""
import json
import socket
import sys
import threading

WRITERS = 4
PAD = "p" * 300


class Connection:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.lines = self.sock.makefile("rb")

    def call(self, request):
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        answer = json.loads(self.lines.readline())
        if not answer.get("ok"):
            raise RuntimeError(f"{request['op']}: {answer}")
        return answer["result"]


def write(path, cycle, out):
    lock = threading.Lock()

    def emit(line):
        with lock:
            out.write(line.encode() + b"\n")
            out.flush()

    def writer(number):
        connection = Connection(path)
        counter = f"k{cycle}-{number}"
        connection.call({"op": "create", "collection": "Cut", "id": counter, "data": {"n": 0, "pad": PAD}})
        emit(f"C {counter}")
        i = 0
        while True:
            i += 1
            if i % 3 == 0:
                result = connection.call({"op": "update", "collection": "Cut", "id": counter, "patch": {"n": i}})
                emit(f"U {counter} {result['version']} {i}")
            else:
                id = f"c{cycle}-{number}-{i}"
                connection.call({"op": "create", "collection": "Cut", "id": id, "data": {"n": i, "pad": PAD}})
                emit(f"C {id}")

    threads = [threading.Thread(target=writer, args=(number,), daemon=True) for number in range(WRITERS)]
    for thread in threads:
        thread.start()
    emit("READY")
    for thread in threads:
        thread.join()


def check(path, out):
    connection = Connection(path)
    verify = connection.call({"op": "verify"})
    out.write(f"V {str(verify['ok']).lower()} {verify['lastSeq']} {verify['replayedEvents']} {len(verify['mismatches'])}\n".encode())
    count = 0
    after = None
    while True:
        request = {"op": "list", "collection": "Cut", "limit": 1000}
        if after:
            request["after"] = after
        page = connection.call(request)
        lines = [f"H {item['id']} {item['version']} {item['n']}\n" for item in page["items"]]
        out.write("".join(lines).encode())
        count += len(lines)
        after = page["next"]
        if after is None:
            break
    out.write(f"DONE {count}\n".encode())
    out.flush()


def main():
    mode, path, cycle, out_path = sys.argv[1:5]
    with open(out_path, "wb", buffering=0) as out:
        if mode == "write":
            write(path, int(cycle), out)
        else:
            check(path, out)


if __name__ == "__main__":
    main()
