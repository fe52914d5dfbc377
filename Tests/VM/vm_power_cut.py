#!/usr/bin/env python3
"""Power cuts of a real VM (docs/POWERLOSS.md, "Power cuts of a VM").

A Debian VM under qemu (software emulation by default, KVM with --accel kvm) runs a release foliod
on its defaults (durability full, through the journal) on ext4 on a virtio disk, with four writers that report each acknowledged write on a serial port. At a random moment
the host kills the VM's qemu with SIGKILL: the guest's memory, its page cache included, is gone at
once, as in a power cut. The disk is served by Tests/VM/volatile_disk.py, whose write cache the cut
loses too: of what the guest wrote since its last flush, each sector keeps its flushed content or
any one of the writes since (`--disk kept` serves the image file instead, where every write that
reached qemu stays). The VM then boots again on the same disk, foliod opens what the disk held,
and the check reports `verify`'s answer and every object. Each cycle checks every write
acknowledged in every cycle so far:

- every acknowledged create is there;
- every acknowledged update is there: the object's version is at least the acknowledged one, and
  at that version its field holds what the update set;
- `verify` (hash chain, replay of the whole log, comparison with the live state) finds nothing.

    Tests/VM/vm_power_cut.py [--cycles N] [--seed S] [--work DIR] [--up-min S] [--up-max S]
                             [--accel tcg|kvm] [--durability full|relaxed|none] [--disk volatile|kept]
                             [--foliod-arg ARG]... [--foliod PATH]

`--durability none` is the control: foliod then answers before anything is flushed, and a cut
within ext4's write-back delay (30 s) must lose acknowledged writes, which this reports (exit 1).

Needs root (debootstrap, and /dev/kvm for --accel kvm), qemu-system-x86 and debootstrap (installed
when missing), and a release build of foliod. The VM's root file system is made once under WORK/rootfs (a few
minutes); each run starts from a fresh disk image.
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*command, **options):
    return subprocess.run(command, check=True, **options)


def prepare(work, foliod):
    rootfs = os.path.join(work, "rootfs")
    if not os.path.exists(os.path.join(rootfs, ".complete")):
        for tool, package in (("debootstrap", "debootstrap"), ("qemu-system-x86_64", "qemu-system-x86")):
            if shutil.which(tool) is None:
                run("apt-get", "install", "-y", "-q", package)
        shutil.rmtree(rootfs, ignore_errors=True)
        print("vm: making the root file system (debootstrap)", flush=True)
        run("debootstrap", "--variant=minbase", "--include=linux-image-amd64,python3", "bookworm", rootfs,
            "http://deb.debian.org/debian", stdout=subprocess.DEVNULL)
        open(os.path.join(rootfs, ".complete"), "w").close()
    # foliod and the libraries it needs that the guest lacks (the Swift runtime, LMDB, libpq...).
    opt = os.path.join(rootfs, "opt/folio")
    shutil.rmtree(opt, ignore_errors=True)
    os.makedirs(os.path.join(opt, "bin"))
    os.makedirs(os.path.join(opt, "lib"))
    shutil.copy2(foliod, os.path.join(opt, "bin/foliod"))
    for line in subprocess.run(["ldd", foliod], check=True, capture_output=True, text=True).stdout.splitlines():
        match = re.match(r"\s*(\S+) => (/\S+)", line)
        if not match:
            continue
        name, path = match.groups()
        if not os.path.exists(os.path.join(rootfs, "lib/x86_64-linux-gnu", name)) and not os.path.exists(os.path.join(rootfs, "usr/lib/x86_64-linux-gnu", name)):
            shutil.copy2(path, os.path.join(opt, "lib", name))
    here = os.path.dirname(os.path.abspath(__file__))
    shutil.copy2(os.path.join(here, "guest_load.py"), os.path.join(opt, "guest_load.py"))
    shutil.copy2(os.path.join(here, "guest-init.sh"), os.path.join(rootfs, "sbin/folio-init"))
    shutil.rmtree(os.path.join(rootfs, "var/lib/folio"), ignore_errors=True)
    kernel = sorted(f for f in os.listdir(os.path.join(rootfs, "boot")) if f.startswith("vmlinuz-"))[-1]
    initrd = kernel.replace("vmlinuz-", "initrd.img-")
    image = os.path.join(work, "disk.img")
    if os.path.exists(image):
        os.remove(image)
    run("mke2fs", "-q", "-t", "ext4", "-d", rootfs, image, "3G", stdout=subprocess.DEVNULL)
    return os.path.join(rootfs, "boot", kernel), os.path.join(rootfs, "boot", initrd), image


class VolatileDisk:
    """Tests/VM/volatile_disk.py serving the image to qemu, with a write cache a cut loses."""

    def __init__(self, image, socket_path, seed):
        self.socket = socket_path
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "volatile_disk.py"), image, socket_path, str(seed)],
            stdout=subprocess.PIPE, text=True)
        if self.process.stdout.readline().strip() != "listening":
            sys.exit("vm: the volatile disk did not start")

    def arm(self, image, writes):
        """The disk cuts the power itself when the `writes`-th write from now arrives."""
        with open(image + ".arm", "w") as file:
            file.write(str(writes))
        self.process.send_signal(signal.SIGUSR2)
        if self.process.stdout.readline().strip() != "armed":
            sys.exit("vm: the volatile disk did not arm")

    def has_cut(self):
        return self.process.poll() is not None

    def cut(self):
        """The power goes (unless the armed disk cut it already): what the guest did not flush is
        partly lost. Returns the disk's report."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGUSR1)
        report = self.process.stdout.read().strip()
        self.process.wait()
        return report

    def stop(self):
        """A clean shutdown: everything the guest wrote is kept."""
        self.process.send_signal(signal.SIGTERM)
        self.process.stdout.read()
        self.process.wait()


def qemu(accel, durability, foliod_args, kernel, initrd, image, mode, cycle, console, acks, disk=None):
    drive = f"file=nbd:unix:{disk.socket},format=raw,if=virtio" if disk else f"file={image},format=raw,if=virtio,cache=none,aio=threads"
    return subprocess.Popen([
        "qemu-system-x86_64", "-accel", "kvm" if accel == "kvm" else "tcg,thread=multi", "-cpu", "host" if accel == "kvm" else "max",
        "-smp", "2", "-m", "1024",
        "-display", "none", "-monitor", "none", "-no-reboot",
        "-kernel", kernel, "-initrd", initrd,
        "-append", f"root=/dev/vda rw console=ttyS0 init=/sbin/folio-init folio.mode={mode} folio.cycle={cycle} folio.durability={durability}"
        + (f" folio.args={','.join(foliod_args)}" if foliod_args else ""),
        "-drive", drive,
        "-serial", f"file:{console}", "-serial", f"file:{acks}",
    ], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def complete_lines(path):
    with open(path, "rb") as file:
        data = file.read()
    return data.decode(errors="replace").replace("\r", "").split("\n")[:-1]


def wait_for(path, text, process, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and text in open(path, "rb").read().decode(errors="replace"):
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", default=os.path.join(ROOT, ".build/vm"))
    parser.add_argument("--up-min", type=float, default=0.5, help="least time writing before the cut, seconds")
    parser.add_argument("--up-max", type=float, default=20.0)
    parser.add_argument("--accel", choices=["tcg", "kvm"], default="tcg",
                        help="tcg (software emulation, works everywhere) or kvm (much faster where KVM works)")
    parser.add_argument("--foliod", default=None)
    parser.add_argument("--durability", choices=["full", "relaxed", "none"], default="full")
    parser.add_argument("--foliod-arg", action="append", default=[],
                        help="one more argument for foliod in the VM, e.g. --foliod-arg=--journal --foliod-arg=off (no spaces or commas)")
    parser.add_argument("--arm-max", type=int, default=3000,
                        help="half the cuts fall on the N-th write the disk receives after the writers start, N up to this")
    parser.add_argument("--disk", choices=["volatile", "kept"], default="volatile",
                        help="volatile: a write cache the cut loses (Tests/VM/volatile_disk.py); kept: every write that reached qemu stays")
    options = parser.parse_args()
    os.makedirs(options.work, exist_ok=True)
    foliod = options.foliod or os.path.join(
        subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip(),
        "foliod")
    kernel, initrd, image = prepare(options.work, foliod)
    logs = os.path.join(options.work, "logs")
    shutil.rmtree(logs, ignore_errors=True)
    os.makedirs(logs)
    randomness = random.Random(options.seed)
    created = set()
    updated = {}  # id -> (version, n) of the last acknowledged update
    acknowledged_total = 0
    started = time.monotonic()
    for cycle in range(1, options.cycles + 1):
        console, acks = os.path.join(logs, f"write-{cycle}.console"), os.path.join(logs, f"write-{cycle}.acks")
        disk = VolatileDisk(image, os.path.join(options.work, "disk.sock"), options.seed * 100000 + cycle) if options.disk == "volatile" else None
        vm = qemu(options.accel, options.durability, options.foliod_arg, kernel, initrd, image, "write", cycle, console, acks, disk)
        if not wait_for(acks, "READY", vm, 600):
            vm.kill()
            vm.wait()
            if disk:
                disk.stop()
            sys.exit(f"vm: cycle {cycle}: the writers did not start (see {console})")
        up = randomness.uniform(options.up_min, options.up_max)
        armed = disk is not None and randomness.random() < 0.5
        if armed:
            # Half the cuts fall on a write the disk receives, among the guest's writes and
            # flushes; the others at a moment, when the cache is most often empty.
            writes = randomness.randint(1, options.arm_max)
            disk.arm(image, writes)
            deadline = time.monotonic() + options.up_max
            while time.monotonic() < deadline and not disk.has_cut():
                time.sleep(0.005)
            up = options.up_max - (deadline - time.monotonic())
        else:
            time.sleep(up)
        vm.send_signal(signal.SIGKILL)
        vm.wait()
        how = "" if not armed else f" at write {writes}" if disk.has_cut() else f" (write {writes} not reached)"
        lost = f"{how}, {disk.cut().removeprefix('cut: ')}" if disk else ""
        acknowledged = 0
        for line in complete_lines(acks):
            fields = line.split()
            if fields[:1] == ["C"]:
                created.add(fields[1])
                acknowledged += 1
            elif fields[:1] == ["U"]:
                updated[fields[1]] = (int(fields[2]), int(fields[3]))
                acknowledged += 1
        console, report = os.path.join(logs, f"check-{cycle}.console"), os.path.join(logs, f"check-{cycle}.report")
        disk = VolatileDisk(image, os.path.join(options.work, "disk.sock"), 0) if options.disk == "volatile" else None
        vm = qemu(options.accel, options.durability, options.foliod_arg, kernel, initrd, image, "check", cycle, console, report, disk)
        try:
            vm.wait(timeout=600)
        except subprocess.TimeoutExpired:
            vm.kill()
            vm.wait()
            sys.exit(f"vm: cycle {cycle}: the check did not finish (see {console})")
        finally:
            if disk:
                disk.stop()
        lines = complete_lines(report)
        if not any(line.startswith("DONE ") for line in lines):
            sys.exit(f"vm: cycle {cycle}: the check did not report (see {console} and {report})")
        held = {}
        problems = []
        for line in lines:
            fields = line.split()
            if fields[:1] == ["H"]:
                held[fields[1]] = (int(fields[2]), int(fields[3]))
            elif fields[:1] == ["V"]:
                if fields[1] != "true" or fields[4] != "0":
                    problems.append(f"verify: {line}")
        for id in created:
            if id not in held:
                problems.append(f"acknowledged create of {id} is missing")
        for id, (version, n) in updated.items():
            if id not in held:
                problems.append(f"acknowledged update of {id} (version {version}) is missing")
            elif held[id][0] < version:
                problems.append(f"{id} is at version {held[id][0]}, acknowledged {version}")
            elif held[id][0] == version and held[id][1] != n:
                problems.append(f"{id} at version {version} holds n {held[id][1]}, acknowledged {n}")
        acknowledged_total += acknowledged
        print(f"vm: cycle {cycle}: cut after {up:.2f} s{lost}, {acknowledged} writes acknowledged in it "
              f"({acknowledged_total} in all), {len(held)} objects held, {len(created)} acknowledged creates and the last "
              f"acknowledged update of {len(updated)} objects checked, {len(problems)} problems "
              f"({time.monotonic() - started:.0f} s)", flush=True)
        if problems:
            for problem in problems[:20]:
                print(f"vm:   {problem}")
            sys.exit(f"vm: cycle {cycle}: an acknowledged write was lost or verify failed (logs in {logs})")
    print(f"vm: {options.cycles} power cuts, seed {options.seed}: no acknowledged write lost, verify clean every time "
          f"({acknowledged_total} acknowledged writes)")


if __name__ == "__main__":
    main()
