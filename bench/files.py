#!/usr/bin/env python3
"""Puts and reads of files through foliod's three paths against cp on the same disk, in one run.

    bench/files.py SOCKET WORKDIR FOLIOD_PID [--sizes 1K,1M,100M] [--uploaders 8]

For each size: `cp` of a file into WORKDIR, and `cp` followed by fsync of the copy (foliod's puts
are durable: the blob is flushed, renamed and its directory flushed before the answer); then puts
by inline base64 (`file.put {data}`, where the line allows), in pieces (`file.begin`, `file.write`
of 512 KiB with 8 in flight, `file.commit`) and by descriptor (`file.put {fd: true}`); reads by
`file.read` pieces of 512 KiB and by descriptor (`file.read {fd: true}`, then sendfile into a file
in WORKDIR, as `folio file get > out` does), each against cp of the stored file. Every put stores
new content (no deduplication), except the deduplicated put measured at the end. Then 8 clients
upload 100 MiB each in pieces at once, while foliod's RSS is sampled.

Figures are medians of repetitions, in MB/s (10^6 bytes per second), with the ratio to cp. With
FOLIO_BIN set (bench/files.sh sets it), the largest size is also put and got through the folio CLI.
foliod's RSS is sampled every 50 ms during the concurrent uploads and read again 2 s after them.
"""
import base64
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

PIECE = 512 << 10


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.buffer = b""
        self.fds = []

    def send(self, obj, fd=None):
        line = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        if fd is None:
            self.sock.sendall(line)
        else:
            sent = socket.send_fds(self.sock, [line], [fd])
            if sent < len(line):
                self.sock.sendall(line[sent:])

    def read(self):
        while b"\n" not in self.buffer:
            data, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 4)
            self.fds += fds
            if not data:
                raise RuntimeError("foliod closed the connection")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        response = json.loads(line)
        if not response.get("ok"):
            raise RuntimeError(f"foliod: {response['error']}")
        return response["result"]

    def request(self, obj, fd=None):
        self.send(obj, fd)
        return self.read()


def write_file(path, content):
    """Writes and flushes the file: a put timed just after must not compete with its write-back."""
    with open(path, "wb") as out:
        out.write(content)
        out.flush()
        os.fsync(out.fileno())


def fresh(content, counter):
    """The content with its first 8 bytes made unique, so every put stores new content."""
    return counter.to_bytes(8, "little") + content[8:]


def timed(body):
    start = time.perf_counter()
    body()
    return time.perf_counter() - start


def cp(source, target, sync):
    def run():
        os.system(f"cp '{source}' '{target}'")
        if sync:
            fd = os.open(target, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            directory = os.open(os.path.dirname(target), os.O_RDONLY)
            os.fsync(directory)
            os.close(directory)

    seconds = timed(run)
    os.unlink(target)
    return seconds


def put_inline(client, content, name):
    client.request({"op": "file.put", "name": name, "data": base64.b64encode(content).decode()})


def put_pieces(client, content, name):
    upload = client.request({"op": "file.begin", "name": name, "size": len(content)})["upload"]
    in_flight = 0
    for offset in range(0, len(content), PIECE):
        # The line written out rather than through json.dumps: the client, not foliod, is what
        # would be measured otherwise.
        piece = base64.b64encode(content[offset:offset + PIECE])
        client.sock.sendall(b'{"op":"file.write","upload":"%s","offset":%d,"data":"%s"}\n' % (upload.encode(), offset, piece))
        in_flight += 1
        if in_flight >= 8:
            client.read()
            in_flight -= 1
    for _ in range(in_flight):
        client.read()
    client.request({"op": "file.commit", "upload": upload})


def put_descriptor(client, path, name):
    fd = os.open(path, os.O_RDONLY)
    try:
        client.request({"op": "file.put", "name": name, "fd": True}, fd)
    finally:
        os.close(fd)


def read_pieces(client, name, target):
    with open(target, "wb") as out:
        offset = 0
        while True:
            # The data sliced out of the line rather than through json.loads: the client, not
            # foliod, is what would be measured otherwise.
            client.send({"op": "file.read", "name": name, "offset": offset})
            while b"\n" not in client.buffer:
                data, _, _, _ = socket.recv_fds(client.sock, 1 << 20, 4)
                if not data:
                    raise RuntimeError("foliod closed the connection")
                client.buffer += data
            line, client.buffer = client.buffer.split(b"\n", 1)
            start = line.find(b'"data":"')
            if start < 0:
                raise RuntimeError(f"foliod: {line[:300]}")
            end = line.index(b'"', start + 8)
            out.write(base64.b64decode(line[start + 8:end]))
            # What follows the data: ,"offset":…,"length":…,"size":…}}
            piece = json.loads(b"{" + line[end + 2:-2] + b"}")
            offset += piece["length"]
            if offset >= piece["size"] or piece["length"] == 0:
                break
    os.unlink(target)


def read_descriptor(client, name, target):
    result = client.request({"op": "file.read", "name": name, "fd": True})
    fd = client.fds.pop(0)
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        offset = 0
        while offset < result["size"]:
            offset += os.sendfile(out, fd, offset, result["size"] - offset)
    finally:
        os.close(out)
        os.close(fd)
    os.unlink(target)


def cpu_seconds(pid):
    """User and system CPU time of the process so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid, field="VmRSS:"):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def main():
    socket_path, work, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sizes = ["1K", "1M", "100M"]
    uploaders = 8
    args = sys.argv[4:]
    while args:
        if args[0] == "--sizes":
            sizes = args[1].split(",")
        elif args[0] == "--uploaders":
            uploaders = int(args[1])
        args = args[2:]
    client = Client(socket_path)
    max_line = client.request({"op": "hello"})["maxLine"]
    counter = 0
    rows = []

    cpu = {}

    def median_seconds(body, reps, kind):
        before = cpu_seconds(pid)
        seconds = statistics.median(timed(body) for _ in range(reps))
        cpu[(label, kind)] = (cpu_seconds(pid) - before) / reps
        return seconds

    for label in sizes:
        size = parse_size(label)
        reps = 200 if size <= 64 << 10 else 20 if size <= 8 << 20 else 3
        base = os.urandom(size)
        source = os.path.join(work, f"source-{label}")
        write_file(source, base)
        mb = size / 1e6
        cp_plain = statistics.median(cp(source, os.path.join(work, "cp-copy"), False) for _ in range(reps))
        cp_sync = statistics.median(cp(source, os.path.join(work, "cp-copy"), True) for _ in range(reps))
        row = {"size": label, "cp": mb / cp_plain, "cp+fsync": mb / cp_sync}

        def put_with(kind):
            nonlocal counter
            times = []
            before = cpu_seconds(pid)
            for _ in range(reps):
                counter += 1
                content = fresh(base, counter)
                name = f"bench/{label}/{kind}/{counter}"
                if kind == "fd":
                    write_file(source, content)
                    times.append(timed(lambda: put_descriptor(client, source, name)))
                elif kind == "pieces":
                    times.append(timed(lambda: put_pieces(client, content, name)))
                else:
                    times.append(timed(lambda: put_inline(client, content, name)))
            cpu[(label, "put " + kind)] = (cpu_seconds(pid) - before) / reps
            return mb / statistics.median(times), name

        if 4 * ((size + 2) // 3) + 200 <= max_line:
            row["put inline"], _ = put_with("inline")
        row["put pieces"], _ = put_with("pieces")
        row["put fd"], stored = put_with("fd")
        target = os.path.join(work, "read-copy")
        blob = client.request({"op": "file.get", "name": stored})["sha256"]
        blob_path = os.path.join(work, "data", "blobs", blob[:2], blob[2:])
        row["cp of blob"] = mb / statistics.median(cp(blob_path, target, False) for _ in range(reps))
        row["read pieces"] = mb / median_seconds(lambda: read_pieces(client, stored, target), reps, "read pieces")
        row["read fd"] = mb / median_seconds(lambda: read_descriptor(client, stored, target), reps, "read fd")
        folio = os.environ.get("FOLIO_BIN")
        if folio and label == sizes[-1]:
            # The same paths through the Swift CLI, a client that costs less than this script.
            environment = dict(os.environ, FOLIO_SOCKET=socket_path)
            cli = {}
            for kind, flags in [("put pieces", ["--pieces"]), ("put fd", [])]:
                times = []
                for _ in range(reps):
                    counter += 1
                    write_file(source, fresh(base, counter))
                    command = [folio, "file", "put", source, "--name", f"bench/cli/{counter}"] + flags
                    times.append(timed(lambda: subprocess.run(command, env=environment, check=True, stdout=subprocess.DEVNULL)))
                cli[kind] = mb / statistics.median(times)
            for kind, flags in [("read pieces", ["--pieces"]), ("read fd", [])]:
                with open(target, "wb") as out:
                    command = [folio, "file", "get", stored] + flags
                    cli[kind] = mb / statistics.median(
                        timed(lambda: subprocess.run(command, env=environment, check=True, stdout=out)) for _ in range(reps))
                os.unlink(target)
            cli_line = (f"the folio CLI, {label}: put in pieces {cli['put pieces']:.1f} MB/s ({row['cp+fsync'] / cli['put pieces']:.2f}x cp+fsync's time), "
                        f"put by descriptor {cli['put fd']:.1f} MB/s ({row['cp+fsync'] / cli['put fd']:.2f}x), "
                        f"get in pieces {cli['read pieces']:.1f} MB/s ({row['cp of blob'] / cli['read pieces']:.2f}x cp's time), "
                        f"get by descriptor {cli['read fd']:.1f} MB/s ({row['cp of blob'] / cli['read fd']:.2f}x)")
        rows.append(row)
        if label == sizes[-1]:
            # The same content again under a new name: hashed, found, not stored again.
            dedup = statistics.median(timed(lambda: put_descriptor(client, source, f"bench/dedup/{time.time_ns()}")) for _ in range(reps))
            dedup_pieces = statistics.median(
                timed(lambda: put_pieces(client, open(source, "rb").read(), f"bench/dedup-pieces/{time.time_ns()}")) for _ in range(reps))
            dedup_line = f"deduplicated put of an existing {label} file: {dedup * 1000:.0f} ms by descriptor, {dedup_pieces * 1000:.0f} ms in pieces"

    columns = ["size", "cp", "cp+fsync", "put inline", "put pieces", "put fd", "cp of blob", "read pieces", "read fd"]
    print("MB/s (median); ratios are to cp and to cp+fsync of the same file in the same run")
    print(" ".join(f"{c:>11}" for c in columns))
    for row in rows:
        print(" ".join(f"{row[c]:>11.1f}" if isinstance(row.get(c), float) else f"{row.get(c, '-'):>11}" for c in columns))
    print()
    for row in rows:
        parts = [f"{row['size']}:"]
        for kind in ["put inline", "put pieces", "put fd"]:
            if kind in row:
                parts.append(f"{kind} {row['cp'] / row[kind]:.2f}x cp's time ({row['cp+fsync'] / row[kind]:.2f}x cp+fsync's)")
        for kind in ["read pieces", "read fd"]:
            parts.append(f"{kind} {row['cp of blob'] / row[kind]:.2f}x cp's time")
        print("  ".join(parts))
    print(dedup_line)
    if os.environ.get("FOLIO_BIN"):
        print(cli_line)
    print()
    print("foliod's CPU time per operation (ms; user + system, all its threads; the rest of each operation's time is the client's and the disk's)")
    kinds = ["put inline", "put pieces", "put fd", "read pieces", "read fd"]
    print(" ".join(f"{c:>11}" for c in ["size"] + kinds))
    for row in rows:
        print(" ".join([f"{row['size']:>11}"] + [f"{cpu[(row['size'], k)] * 1000:>11.1f}" if (row["size"], k) in cpu else f"{'-':>11}" for k in kinds]))

    # Memory: N clients upload 100 MiB each in pieces at once.
    content = os.urandom(100 << 20)
    peak = [rss_kib(pid), rss_kib(pid, "RssAnon:"), rss_kib(pid, "RssFile:")]
    before = peak[0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            peak[1] = max(peak[1], rss_kib(pid, "RssAnon:"))
            peak[2] = max(peak[2], rss_kib(pid, "RssFile:"))
            time.sleep(0.05)

    def upload(index):
        put_pieces(Client(socket_path), fresh(content, 1_000_000 + index), f"bench/concurrent/{index}")

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=upload, args=(index,)) for index in range(uploaders)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    time.sleep(2)
    settled = rss_kib(pid)
    print(f"{uploaders} clients uploading 100 MiB each in pieces at once: {seconds:.1f} s "
          f"({uploaders * 100 * 1.048576 / seconds:.0f} MB/s together); foliod RSS {before / 1024:.0f} MiB before, "
          f"{peak[0] / 1024:.0f} MiB at most (anonymous {peak[1] / 1024:.0f}, file-backed {peak[2] / 1024:.0f}), {settled / 1024:.0f} MiB 2 s after")


if __name__ == "__main__":
    main()
