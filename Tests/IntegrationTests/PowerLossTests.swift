import FolioHarness
import Foundation
import Glibc
import Testing

/// The power-loss model (docs/POWERLOSS.md) as the shim and powerloss_image implement it: what a
/// flush covered survives every image; each page written since holds one of its versions, whole (or
/// torn only at sector bounds with `--unit 512`); sizes and names are ones the files had; and the
/// crash loop with `--power-loss` reports the writes `--durability relaxed` loses, and none of the
/// default's.
@Suite struct PowerLossTests {
    static func bytes(_ character: Character, _ count: Int) -> [UInt8] {
        [UInt8](repeating: character.asciiValue!, count: count)
    }

    /// A flushed page holds its flushed content at least; unflushed writes to it make the other
    /// versions it can hold: every one of them shows up over 100 seeds, and nothing else. A page no
    /// write touched keeps its base.
    @Test func eachPageHoldsItsFlushedVersionOrALaterOne() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory, files: ["f": Self.bytes("O", 8192)])
            try tools.run(
                """
                fd = os.open(D + "/f", os.O_WRONLY)
                os.pwrite(fd, b"a" * 4096, 0)
                os.fdatasync(fd)
                for c in b"bcd":
                    os.pwrite(fd, bytes([c]) * 4096, 0)
                """)
            var seen: Set<UInt8> = []
            for files in try tools.images(100) {
                let file = try #require(files["f"])
                #expect(file.count == 8192)
                #expect(Set(file[0..<4096]).count == 1, "a page is written whole")
                seen.insert(file[0])
                #expect(file[4096...].allSatisfy { $0 == UInt8(ascii: "O") })
            }
            #expect(seen == Set("abcd".utf8))
            #expect(try tools.image(seed: 1, style: "synced").files["f"]?[0] == UInt8(ascii: "a"))
            #expect(try tools.image(seed: 1, style: "latest").files["f"]?[0] == UInt8(ascii: "d"))
        }
    }

    /// With `--unit 512` a page written once and not flushed may be torn at sector bounds, never
    /// inside a sector; with pages of 4096 bytes it is never torn.
    @Test func sectorsTearPagesOnlyWhereAsked() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory, files: ["f": Self.bytes("O", 4096)])
            try tools.run(#"os.pwrite(os.open(D + "/f", os.O_WRONLY), b"x" * 4096, 0)"#)
            var torn = 0
            for files in try tools.images(50, unit: 512) {
                let file = try #require(files["f"])
                for sector in stride(from: 0, to: 4096, by: 512) {
                    #expect(Set(file[sector..<sector + 512]).count == 1)
                }
                if Set(file).count > 1 { torn += 1 }
            }
            #expect(torn > 0)
            for files in try tools.images(20) { #expect(Set(try #require(files["f"])).count == 1) }
        }
    }

    /// An O_DSYNC write is on disk once it returns; a plain write after it to the same page is not.
    @Test func aSynchronousWriteIsDurableWhenItReturns() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory, files: ["f": Self.bytes("O", 4096)])
            try tools.run(
                """
                os.pwrite(os.open(D + "/f", os.O_WRONLY | os.O_DSYNC), b"D" * 10, 100)
                os.pwrite(os.open(D + "/f", os.O_WRONLY), b"u", 200)
                """)
            var plain: Set<UInt8> = []
            for files in try tools.images(40) {
                let file = try #require(files["f"])
                #expect(file[100..<110].allSatisfy { $0 == UInt8(ascii: "D") })
                plain.insert(file[200])
            }
            #expect(plain == Set("Ou".utf8))
        }
    }

    /// A file's size is its flushed one or one it had later (extended by a write, truncated).
    @Test func sizesAreOnesTheFileHad() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory, files: ["f": Self.bytes("O", 8192)])
            try tools.run(
                """
                fd = os.open(D + "/f", os.O_WRONLY)
                os.pwrite(fd, b"e" * 100, 12288)
                os.ftruncate(fd, 20000)
                os.ftruncate(fd, 6000)
                """)
            var sizes: Set<Int> = []
            for files in try tools.images(60) {
                let file = try #require(files["f"])
                sizes.insert(file.count)
                #expect(file[..<min(file.count, 6000)].allSatisfy { $0 == UInt8(ascii: "O") })
            }
            #expect(sizes == [8192, 12388, 20000, 6000])
        }
    }

    /// Changes of names are durable as made by default. With --names-need-dirsync those an fsync of
    /// the directory covered are, and of the later ones a first few: a file made after a removal is
    /// never there without the removal.
    @Test func namesAreDurableOrNeedTheirDirectoryFlushed() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory, files: ["old": Self.bytes("o", 10)])
            try tools.run(
                """
                t = os.open(D + "/new.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.write(t, b"checkpoint")
                os.fsync(t)
                os.rename(D + "/new.tmp", D + "/new")
                d = os.open(D, os.O_RDONLY)
                os.fsync(d)
                os.unlink(D + "/old")
                os.close(os.open(D + "/extra", os.O_WRONLY | os.O_CREAT, 0o600))
                """)
            for files in try tools.images(20) {
                #expect(Set(files.keys) == ["new", "extra"])
                #expect(files["new"] == Array("checkpoint".utf8))
            }
            var shapes: Set<[String]> = []
            for files in try tools.images(60, namesNeedDirectorySync: true) {
                #expect(files["new"] == Array("checkpoint".utf8))
                shapes.insert(files.keys.sorted())
            }
            #expect(shapes == [["new", "old"], ["new"], ["extra", "new"]])
        }
    }

    /// An O_TMPFILE file linked into place (linkat of /proc/self/fd/N) is the file the shim followed.
    @Test func anUnnamedFileLinkedIntoPlace() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory)
            try tools.run(
                """
                t = os.open(D, os.O_WRONLY | os.O_TMPFILE, 0o600)
                os.write(t, b"whole")
                os.fsync(t)
                libc = ctypes.CDLL(None, use_errno=True)
                AT_FDCWD, AT_SYMLINK_FOLLOW = -100, 0x400
                if libc.linkat(AT_FDCWD, b"/proc/self/fd/%d" % t, AT_FDCWD, (D + "/t").encode(), AT_SYMLINK_FOLLOW) != 0:
                    raise OSError(ctypes.get_errno(), "linkat")
                """)
            for files in try tools.images(5) { #expect(files == ["t": Array("whole".utf8)]) }
        }
    }

    /// A flush covers the writes that returned before it began, not those under way then (a writer
    /// thread's pwrite beside another thread's fdatasync) nor those logged after it began. The log
    /// is made by hand: a file of three pages, one write to each, the second under way at the flush
    /// and the third begun after it.
    @Test func aFlushCoversOnlyWhatReturnedBeforeItBegan() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory, files: ["f": Self.bytes("O", 3 * 4096)])
            // The file as the process would have left it, for the check.
            try Data(Self.bytes("a", 4096) + Self.bytes("b", 4096) + Self.bytes("c", 4096))
                .write(to: URL(fileURLWithPath: tools.data + "/f"))
            var status = stat()
            #expect(stat(tools.data + "/f", &status) == 0)
            let file = (UInt64(status.st_dev), UInt64(status.st_ino))
            let log: [UInt8] =
                Self.record(0, kind: 1, file, offset: 3 * 4096, payload: Array("f\0".utf8))  // PL_OPEN
                + Self.record(1, kind: 2, file, offset: 0, length: 4096, payload: Self.bytes("a", 4096))  // PL_WRITE
                + Self.record(2, kind: 2, file, offset: 4096, length: 4096, payload: Self.bytes("b", 4096))
                + Self.record(3, kind: 2, file, offset: 8192, length: 4096, payload: Self.bytes("c", 4096))
                // PL_SYNC of the whole file: began before record 3, with record 2 under way.
                + Self.record(4, kind: 6, file, ref: 3, count: 1, payload: Self.little(UInt64(2)))
            try Data(log).write(to: URL(fileURLWithPath: tools.log))
            var second: Set<UInt8> = []
            var third: Set<UInt8> = []
            for files in try tools.images(40) {
                let file = try #require(files["f"])
                #expect(file[0..<4096].allSatisfy { $0 == UInt8(ascii: "a") })
                second.insert(file[4096])
                third.insert(file[8192])
            }
            #expect(second == Set("Ob".utf8))
            #expect(third == Set("Oc".utf8))
        }
    }

    /// Flushes logged in another order than they began each cover what they covered: the writer's
    /// fdatasync (begun after both writes returned) ends first, the confirming thread's (begun while
    /// the first write was under way) ends after it; the second does not undo the first.
    @Test func aFlushLoggedLaterDoesNotUndoAnEarlierOne() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory, files: ["f": Self.bytes("O", 2 * 4096)])
            try Data(Self.bytes("a", 4096) + Self.bytes("b", 4096)).write(to: URL(fileURLWithPath: tools.data + "/f"))
            var status = stat()
            #expect(stat(tools.data + "/f", &status) == 0)
            let file = (UInt64(status.st_dev), UInt64(status.st_ino))
            let log: [UInt8] =
                Self.record(0, kind: 1, file, offset: 2 * 4096, payload: Array("f\0".utf8))
                + Self.record(1, kind: 2, file, offset: 0, length: 4096, payload: Self.bytes("a", 4096))
                + Self.record(2, kind: 2, file, offset: 4096, length: 4096, payload: Self.bytes("b", 4096))
                + Self.record(3, kind: 6, file, ref: 3, payload: [])
                + Self.record(4, kind: 6, file, ref: 2, count: 1, payload: Self.little(UInt64(1)))
            try Data(log).write(to: URL(fileURLWithPath: tools.log))
            for files in try tools.images(20) {
                let file = try #require(files["f"])
                #expect(Set(file[..<4096]) == [UInt8(ascii: "a")] && Set(file[4096...]) == [UInt8(ascii: "b")])
            }
        }
    }

    /// A write past the end that the kill cut short leaves the file a size between two the log
    /// gives (its first pages written): the check takes it, a size the log cannot explain it does not.
    @Test func theCheckTakesAWritePastTheEndCutShort() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory, files: ["f": Self.bytes("O", 4096)])
            try Data(Self.bytes("O", 4096) + Self.bytes("w", 4096)).write(to: URL(fileURLWithPath: tools.data + "/f"))
            var status = stat()
            #expect(stat(tools.data + "/f", &status) == 0)
            let file = (UInt64(status.st_dev), UInt64(status.st_ino))
            let log: [UInt8] =
                Self.record(0, kind: 1, file, offset: 4096, payload: Array("f\0".utf8))
                + Self.record(1, kind: 2, file, offset: 4096, length: 3 * 4096, payload: Self.bytes("w", 3 * 4096))
            try Data(log).write(to: URL(fileURLWithPath: tools.log))
            #expect(try tools.imageRun(seed: 1).status == 0)
            try Data(Self.bytes("O", 4096) + Self.bytes("w", 4096) + [0]).write(
                to: URL(fileURLWithPath: tools.data + "/f"))
            #expect(try tools.imageRun(seed: 1).status == 0, "a size between two is a write cut short")
            try Data(Self.bytes("O", 5 * 4096)).write(to: URL(fileURLWithPath: tools.data + "/f"))
            #expect(try tools.imageRun(seed: 1).status == 1)
        }
    }

    /// One record of the log (Tests/Faults/powerloss.h), numbered `seq`, of `file` (st_dev, st_ino).
    static func record(
        _ seq: UInt64, kind: UInt32, _ file: (dev: UInt64, ino: UInt64), offset: UInt64 = 0, length: UInt64 = 0,
        ref: UInt64 = 0, count: UInt64 = 0, payload: [UInt8]
    ) -> [UInt8] {
        let padding = (8 - payload.count % 8) % 8
        let size = UInt64(80 + payload.count + padding)
        var header =
            little(UInt32(0x3152_4C50)) + little(kind) + little(size) + little(seq) + little(UInt32(1))
            + little(UInt32(0))
        header += little(file.dev) + little(file.ino) + little(offset) + little(length) + little(ref) + little(count)
        return header + payload + [UInt8](repeating: 0, count: padding)
    }

    static func little<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.littleEndian) { Array($0) }
    }

    /// A record a SIGKILL cut short ends the log: it is of a write not made, and is left out.
    @Test func aRecordCutShortEndsTheLog() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory, files: ["f": Self.bytes("O", 4096)])
            try tools.run(
                """
                fd = os.open(D + "/f", os.O_WRONLY)
                os.pwrite(fd, b"s" * 4096, 0)
                os.fdatasync(fd)
                """)
            let whole = try Data(contentsOf: URL(fileURLWithPath: tools.log))
            // The open's record again (an 80-byte header, the name and padding: 88 bytes), cut short.
            try (whole + whole.prefix(84)).write(to: URL(fileURLWithPath: tools.log))
            let (files, summary) = try tools.image(seed: 1)
            #expect(summary.contains("(the last one cut short)"), "\(summary)")
            #expect(files["f"].map(Set.init) == [UInt8(ascii: "s")])
        }
    }

    /// An open with O_TRUNC empties the file before the shim can log the open: the shim logs the
    /// truncation first, so a kill between the two (here: the log without the open's record) leaves
    /// a size the log gives. (A crash loop's check once failed on a 0-byte journal.new.)
    @Test func anOpenThatTruncatesIsLoggedBeforeItEmptiesTheFile() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory, files: ["f": Self.bytes("O", 4096)])
            try tools.run(#"os.open(D + "/f", os.O_WRONLY | os.O_TRUNC)"#)
            let whole = [UInt8](try Data(contentsOf: URL(fileURLWithPath: tools.log)))
            // The records' sizes (u64 at byte 8 of each): drop the last one, the open's.
            var starts: [Int] = []
            var at = 0
            while at + 16 <= whole.count {
                starts.append(at)
                at += Int(whole[(at + 8)..<(at + 16)].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
            }
            #expect(starts.count >= 2, "a truncation before the open: \(starts.count) records")
            let last = try #require(starts.last)
            try Data(whole[..<last]).write(to: URL(fileURLWithPath: tools.log))
            let run = try tools.imageRun(seed: 1)
            #expect(run.status == 0, "\(run)")
        }
    }

    /// The check against the files the process left fails when they changed where the shim did not
    /// see: here a write by a process without it.
    @Test func theCheckFindsAWriteTheShimMissed() throws {
        try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory, files: ["f": Self.bytes("O", 8192)])
            try tools.run(#"os.pwrite(os.open(D + "/f", os.O_WRONLY), b"seen", 0)"#)
            #expect(try tools.imageRun(seed: 1).status == 0)
            let handle = try #require(FileHandle(forWritingAtPath: tools.data + "/f"))
            handle.seek(toFileOffset: 5000)
            handle.write(Data("unseen".utf8))
            handle.closeFile()
            let run = try tools.imageRun(seed: 1)
            #expect(run.status == 1)
            #expect(run.stderr.contains("page 1 of") && run.stderr.contains("a write the shim missed"), "\(run)")
        }
    }

    /// The crash loop under power loss reports what `--durability relaxed` loses by design: the meta
    /// page of its last commit is not flushed before the answer, so an image that keeps no page the
    /// flushes did not cover (style `synced`) undoes acknowledged writes. (With the default, full
    /// durability, the same run must pass: `fullDurabilityLosesNoAcknowledgedWrite`.)
    @Test func writesLostByRelaxedDurabilityAreReported() throws {
        let run = try powerLossLoop(["--cycles", "3", "--durability", "relaxed", "--power-loss-style", "synced"])
        #expect(run.status == 1, "\(run)")
        #expect(run.stdout.contains("acknowledged write"), "\(run.stdout)")
        #expect(run.stdout.contains("power loss: the data directory's files are the image"), "\(run.stdout)")
    }

    /// Full durability through LMDB's own syncs (`--journal off`).
    @Test func fullDurabilityLosesNoAcknowledgedWrite() throws {
        let run = try powerLossLoop([
            "--cycles", "3", "--power-loss-style", "synced", "--foliod-arg", "--journal", "--foliod-arg", "off",
        ])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("chaos: 3 passed, 0 failed"), "\(run.stdout)")
    }

    /// The journal (docs/DURABILITY.md), full durability's default, under the same power losses, in
    /// every style of image.
    @Test func theJournalLosesNoAcknowledgedWrite() throws {
        let run = try powerLossLoop(["--cycles", "4"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("chaos: 4 passed, 0 failed"), "\(run.stdout)")
    }

    /// Commits that fail after the journal got their record (the shim fails about one in ten of the
    /// writer's page writes with ENOSPC): each leaves a cancel, which recovery after a power loss
    /// must honour. No acknowledged write may be lost, and no write refused as not stored may be
    /// in the log after the restart.
    @Test func commitsThatFailAfterTheirJournalRecordAreCancelled() throws {
        var logs = ""
        let run = try powerLossLoop(["--cycles", "4", "--power-loss-fail-writev", "10", "--keep"]) { chaos in
            for store in (try? FileManager.default.contentsOfDirectory(atPath: chaos)) ?? [] {
                logs += (try? String(contentsOfFile: chaos + "/" + store + "/foliod.log", encoding: .utf8)) ?? ""
            }
        }
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("chaos: 4 passed, 0 failed"), "\(run.stdout)")
        #expect(logs.contains("failed: mdb_txn_commit: No space left on device"), "no commit failed: \(logs)")
    }

    /// Runs folio-chaos under power loss; `inspect` sees its directory before it is removed.
    private func powerLossLoop(_ arguments: [String], inspect: (String) -> Void = { _ in }) throws -> CommandRun {
        try Binaries.require()
        return try withTemporaryDirectory { directory in
            let tools = try PowerLossTools(in: directory)
            let run = try CommandRun.run(
                Binaries.folioChaos,
                arguments + [
                    "--seed", "10", "--workload-ms", "300", "--cycles-per-store", "3", "--power-loss", tools.shim,
                    "--foliod", Binaries.foliod, "--directory", directory + "/chaos",
                ], timeout: 300)
            inspect(directory + "/chaos")
            return run
        }
    }
}
