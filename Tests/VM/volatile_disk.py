#!/usr/bin/env python3
"""A disk with a volatile write cache, for the VM of Tests/VM/vm_power_cut.py, served to qemu over
NBD on a Unix socket (fixed newstyle handshake, simple replies).

Writes stay in the cache until the guest flushes (NBD_CMD_FLUSH, or a write with FUA, which is
written through): reads see them, the image file does not. On SIGUSR1 the power is cut: of the
writes since the last flush, each 512-byte sector keeps its flushed content or the content of any
one of the writes to it since, chosen at random and independently of every other sector, as a
drive whose cache is lost may leave it; that is written to the image and the server exits.
SIGTERM keeps everything, as a clean shutdown does. SIGUSR2 arms the disk: it reads a count N from
IMAGE.arm, prints `armed`, and cuts the power itself when the N-th write from then on arrives,
before answering it, so that the cut falls among the guest's writes and flushes rather than at a
moment the cache is likely empty.

    volatile_disk.py IMAGE SOCKET SEED

Prints one line to stdout at the cut: `cut: S sectors unflushed, K kept some write`.
"""
import os
import random
import signal
import socket
import struct
import sys
import threading

SECTOR = 512
NBD_MAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPLY_MAGIC = 0x3E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY = 0x67446698
OPT_EXPORT_NAME, OPT_ABORT, OPT_INFO, OPT_GO = 1, 2, 6, 7
REP_ACK, REP_INFO, REP_ERR_UNSUP = 1, 3, 0x80000001
FLAG_HAS_FLAGS, FLAG_SEND_FLUSH, FLAG_SEND_FUA = 1, 4, 8
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH = 0, 1, 2, 3
CMD_FLAG_FUA = 1
EIO, EINVAL = 5, 22


class Disk:
    def __init__(self, path, seed):
        self.file = open(path, "r+b")
        self.size = os.fstat(self.file.fileno()).st_size
        # sector -> every version written since the last flush, oldest first
        self.pending = {}
        self.lock = threading.Lock()
        self.random = random.Random(seed)
        # Writes left before the disk cuts the power itself (see `arm`); None: only on SIGUSR1.
        self.writes_left = None

    def read(self, offset, length):
        with self.lock:
            data = bytearray(os.pread(self.file.fileno(), length, offset))
            first, last = offset // SECTOR, (offset + length - 1) // SECTOR
            for sector in range(first, last + 1):
                versions = self.pending.get(sector)
                if versions:
                    start = sector * SECTOR
                    data[max(start, offset) - offset:min(start + SECTOR, offset + length) - offset] = \
                        versions[-1][max(start, offset) - start:min(start + SECTOR, offset + length) - start]
            return bytes(data)

    def arm(self, writes):
        """Cut the power when the `writes`-th write from now has been received, before it is answered."""
        with self.lock:
            self.writes_left = writes

    def write(self, offset, data, through):
        with self.lock:
            self._write(offset, data, through)
            if self.writes_left is not None:
                self.writes_left -= 1
                if self.writes_left == 0:
                    self._cut()
                    os._exit(0)

    def _write(self, offset, data, through):
        if through:
            self._flush()
            os.pwrite(self.file.fileno(), data, offset)
            return
        first, last = offset // SECTOR, (offset + len(data) - 1) // SECTOR
        for sector in range(first, last + 1):
            start = sector * SECTOR
            if start >= offset and start + SECTOR <= offset + len(data):
                content = data[start - offset:start - offset + SECTOR]
            else:  # a part of a sector: the rest as the guest would read it
                versions = self.pending.get(sector)
                current = bytearray(versions[-1] if versions else os.pread(self.file.fileno(), SECTOR, start))
                low, high = max(start, offset), min(start + SECTOR, offset + len(data))
                current[low - start:high - start] = data[low - offset:high - offset]
                content = bytes(current)
            self.pending.setdefault(sector, []).append(content)

    def _flush(self):
        for sector, versions in self.pending.items():
            os.pwrite(self.file.fileno(), versions[-1], sector * SECTOR)
        self.pending.clear()

    def flush(self):
        with self.lock:
            self._flush()

    def cut(self):
        with self.lock:
            self._cut()

    def _cut(self):
        kept = 0
        for sector, versions in self.pending.items():
            choice = self.random.randrange(len(versions) + 1)
            if choice:
                os.pwrite(self.file.fileno(), versions[choice - 1], sector * SECTOR)
                kept += 1
        print(f"cut: {len(self.pending)} sectors unflushed, {kept} kept some write", flush=True)
        self.pending.clear()
        self.file.flush()
        os.fsync(self.file.fileno())


def receive(connection, length):
    data = bytearray()
    while len(data) < length:
        chunk = connection.recv(length - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def handshake(connection, disk):
    connection.sendall(struct.pack(">QQH", NBD_MAGIC, IHAVEOPT, 1 | 2))  # fixed newstyle, no zeroes
    (client_flags,) = struct.unpack(">I", receive(connection, 4))
    transmission = FLAG_HAS_FLAGS | FLAG_SEND_FLUSH | FLAG_SEND_FUA
    while True:
        magic, option, length = struct.unpack(">QII", receive(connection, 16))
        if magic != IHAVEOPT:
            raise EOFError
        payload = receive(connection, length)
        if option == OPT_EXPORT_NAME:
            reply = struct.pack(">QH", disk.size, transmission)
            if not client_flags & 2:
                reply += bytes(124)
            connection.sendall(reply)
            return
        if option in (OPT_INFO, OPT_GO):
            info = struct.pack(">HQH", 0, disk.size, transmission)
            connection.sendall(struct.pack(">QIII", REPLY_MAGIC, option, REP_INFO, len(info)) + info)
            connection.sendall(struct.pack(">QIII", REPLY_MAGIC, option, REP_ACK, 0))
            if option == OPT_GO:
                return
            continue
        if option == OPT_ABORT:
            connection.sendall(struct.pack(">QIII", REPLY_MAGIC, option, REP_ACK, 0))
            raise EOFError
        connection.sendall(struct.pack(">QIII", REPLY_MAGIC, option, REP_ERR_UNSUP, 0))


def serve(connection, disk):
    handshake(connection, disk)
    while True:
        magic, flags, kind, handle, offset, length = struct.unpack(">IHHQQI", receive(connection, 28))
        if magic != REQUEST_MAGIC:
            return
        in_range = offset + length <= disk.size
        if kind == CMD_READ:
            if not in_range:
                connection.sendall(struct.pack(">IIQ", SIMPLE_REPLY, EINVAL, handle))
                continue
            connection.sendall(struct.pack(">IIQ", SIMPLE_REPLY, 0, handle) + disk.read(offset, length))
        elif kind == CMD_WRITE:
            data = receive(connection, length)
            if in_range:
                disk.write(offset, data, bool(flags & CMD_FLAG_FUA))
            connection.sendall(struct.pack(">IIQ", SIMPLE_REPLY, 0 if in_range else EINVAL, handle))
        elif kind == CMD_FLUSH:
            disk.flush()
            connection.sendall(struct.pack(">IIQ", SIMPLE_REPLY, 0, handle))
        elif kind == CMD_DISC:
            return
        else:
            connection.sendall(struct.pack(">IIQ", SIMPLE_REPLY, EINVAL, handle))


def main():
    image, path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    disk = Disk(image, seed)

    def cut(*_):
        disk.cut()
        os._exit(0)

    def arm(*_):
        with open(image + ".arm") as file:
            disk.arm(int(file.read()))
        print("armed", flush=True)

    def stop(*_):
        disk.flush()
        os._exit(0)

    signal.signal(signal.SIGUSR1, cut)
    signal.signal(signal.SIGUSR2, arm)
    signal.signal(signal.SIGTERM, stop)
    if os.path.exists(path):
        os.remove(path)
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)

    def accept():
        while True:
            connection, _ = server.accept()
            try:
                serve(connection, disk)
            except (EOFError, ConnectionError):
                pass
            connection.close()

    # Requests are served on a thread of their own: the signals' handlers run on this one and take
    # the disk's lock, which a request may hold.
    threading.Thread(target=accept, daemon=True).start()
    print("listening", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
