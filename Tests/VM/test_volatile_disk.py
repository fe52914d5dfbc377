"""The volatile disk of the VM power cuts (Tests/VM/volatile_disk.py), driven by a small NBD client:
what a flush, a FUA write, a cut and a clean stop leave in the image."""
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SECTOR = 512
SECTORS = 128


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        magic, option_magic, flags = struct.unpack(">QQH", self.receive(18))
        assert (magic, option_magic) == (0x4E42444D41474943, 0x49484156454F5054) and flags & 1
        self.sock.sendall(struct.pack(">I", 1 | 2))
        # NBD_OPT_GO with the default export and no information requests.
        self.sock.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 6) + struct.pack(">IH", 0, 0))
        while True:
            magic, option, kind, length = struct.unpack(">QIII", self.receive(20))
            assert magic == 0x3E889045565A9 and option == 7
            payload = self.receive(length)
            if kind == 3:
                info, self.size, self.flags = struct.unpack(">HQH", payload)
            else:
                assert kind == 1, kind
                break
        self.handle = 0

    def receive(self, length):
        data = b""
        while len(data) < length:
            chunk = self.sock.recv(length - len(data))
            assert chunk, "the disk closed the connection"
            data += chunk
        return data

    def request(self, kind, offset=0, data=b"", length=None, flags=0):
        self.handle += 1
        self.sock.sendall(struct.pack(">IHHQQI", 0x25609513, flags, kind, self.handle, offset,
                                      len(data) if length is None else length) + data)
        magic, error, handle = struct.unpack(">IIQ", self.receive(16))
        assert magic == 0x67446698 and handle == self.handle
        return error, (self.receive(length) if kind == 0 and error == 0 else b"")

    def read(self, offset, length):
        error, data = self.request(0, offset, length=length)
        assert error == 0
        return data

    def write(self, offset, data, fua=False):
        assert self.request(1, offset, data, flags=1 if fua else 0)[0] == 0

    def flush(self):
        assert self.request(3)[0] == 0


@pytest.fixture
def disk():
    directory = tempfile.mkdtemp(prefix="folio-volatile-")
    image = os.path.join(directory, "disk.img")
    with open(image, "wb") as file:
        file.write(bytes(SECTORS * SECTOR))
    path = os.path.join(directory, "disk.sock")
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "volatile_disk.py"), image, path, "7"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        client = Client(path)

        def on_disk(sector):
            with open(image, "rb") as file:
                file.seek(sector * SECTOR)
                return file.read(SECTOR)

        def stop(how):
            if how is not None:
                server.send_signal(how)
            report = server.stdout.read()
            assert server.wait(timeout=30) == 0
            return report

        def arm(writes):
            with open(image + ".arm", "w") as file:
                file.write(str(writes))
            server.send_signal(signal.SIGUSR2)
            assert server.stdout.readline().strip() == "armed"

        client.arm = arm
        yield client, on_disk, stop
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        subprocess.run(["rm", "-rf", directory], check=True)


def sector(byte):
    return bytes([byte]) * SECTOR


def test_reads_see_cached_writes_that_the_image_does_not_hold(disk):
    client, on_disk, _ = disk
    client.write(0, sector(1) + sector(2))
    assert client.read(0, 2 * SECTOR) == sector(1) + sector(2)
    assert on_disk(0) == sector(0) and on_disk(1) == sector(0)
    client.flush()
    assert on_disk(0) == sector(1) and on_disk(1) == sector(2)


def test_a_fua_write_is_on_the_image_when_answered(disk):
    client, on_disk, _ = disk
    client.write(3 * SECTOR, sector(9), fua=True)
    assert on_disk(3) == sector(9)


def test_a_part_of_a_sector_is_written_over_what_the_guest_would_read(disk):
    client, on_disk, stop = disk
    client.write(0, sector(5))
    client.write(100, b"\x06" * 10)
    assert client.read(0, SECTOR) == b"\x05" * 100 + b"\x06" * 10 + b"\x05" * (SECTOR - 110)
    stop(signal.SIGTERM)
    assert on_disk(0) == b"\x05" * 100 + b"\x06" * 10 + b"\x05" * (SECTOR - 110)


def test_a_cut_keeps_what_was_flushed_and_of_each_sector_any_one_write_since(disk):
    client, on_disk, stop = disk
    for number in range(SECTORS):
        client.write(number * SECTOR, sector(1))
    client.flush()
    for version in (2, 3):
        client.write(0, b"".join(sector(version) for _ in range(SECTORS)))
    report = stop(signal.SIGUSR1)
    assert f"cut: {SECTORS} sectors unflushed" in report
    kept = [on_disk(number)[0] for number in range(SECTORS)]
    # Each sector is whole, flushed or one of the writes since, chosen independently.
    assert all(on_disk(number) == sector(kept[number]) for number in range(SECTORS))
    assert set(kept) == {1, 2, 3}


def test_a_clean_stop_keeps_every_write(disk):
    client, on_disk, stop = disk
    client.write(5 * SECTOR, sector(4))
    stop(signal.SIGTERM)
    assert on_disk(5) == sector(4)


def test_requests_past_the_end_are_refused(disk):
    client, _, _ = disk
    assert client.request(0, SECTORS * SECTOR, length=SECTOR)[0] != 0
    assert client.request(1, SECTORS * SECTOR, sector(1))[0] != 0


def test_an_armed_disk_cuts_the_power_on_the_nth_write_without_answering_it(disk):
    client, on_disk, stop = disk
    client.write(0, sector(1) + sector(1))
    client.flush()
    client.arm(2)
    client.write(0, sector(2))
    client.handle += 1
    client.sock.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, client.handle, SECTOR, SECTOR) + sector(3))
    assert client.sock.recv(16) == b""  # no answer: the power is gone
    assert "cut: 2 sectors unflushed" in stop(None)
    assert on_disk(0) in (sector(1), sector(2))
    assert on_disk(1) in (sector(1), sector(3))
