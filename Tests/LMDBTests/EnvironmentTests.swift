import Foundation
import Testing

@testable import LMDB

private struct Refused: Error {}

@Suite("LMDB environment and transactions")
struct EnvironmentTests {
    @Test func aCommittedWriteIsReadBackAfterReopening() throws {
        try withTemporaryDirectory { path throws in
            do {
                let environment = try Environment(path: path)
                let db = try environment.openDatabase("things")
                try environment.write { txn throws in try txn.put(db, bytes("a"), bytes("one")) }
                #expect(try environment.read { txn throws in text(try txn.get(db, bytes("a"))) } == "one")
            }
            let reopened = try Environment(path: path)
            let db = try reopened.openDatabase("things", create: false)
            #expect(try reopened.read { txn throws in text(try txn.get(db, bytes("a"))) } == "one")
            #expect(try reopened.read { txn throws in try txn.get(db, bytes("b")) } == nil)
        }
    }

    /// A data.mdb cut short before the pages its meta page names is refused with an error naming it,
    /// where LMDB would fault (SIGBUS) on the first read past the end.
    @Test func aFileEndingBeforeItsRootIsRefusedNotMapped() throws {
        try withTemporaryDirectory { path throws in
            do {
                let environment = try Environment(path: path)
                let db = try environment.openDatabase("things")
                try environment.write { txn throws in
                    for index in 0..<3000 { try txn.put(db, bytes("key \(index)"), [UInt8](repeating: 7, count: 100)) }
                }
            }
            #expect(truncate(path + "/data.mdb", off_t(3 * getpagesize())) == 0)
            #expect {
                _ = try Environment(path: path)
            } throws: { error in
                guard let error = error as? LMDBError else { return false }
                return error.code == .corrupted && "\(error)".contains("past the end of the file (3 pages)")
            }
        }
    }

    @Test func aNewLockFileIsWrittenOutWithLMDBsOwnSize() throws {
        try withTemporaryDirectory { path throws in
            let environment = try Environment(path: path)
            let attributes = try FileManager.default.attributesOfItem(atPath: path + "/lock.mdb")
            #expect(attributes[.size] as? Int == 511 * 64 + 192)
            var status = stat()
            #expect(stat(path + "/lock.mdb", &status) == 0)
            #expect(Int(status.st_blocks) * 512 >= 511 * 64 + 192, "the lock file's blocks are allocated, not a hole")
            #expect(environment.info.maxReaders == 512)
            let reopened = try Environment(path: path)
            #expect(reopened.info.maxReaders == 512)
        }
    }

    @Test func aThrowingWriteLeavesNothingBehind() throws {
        try withThings { environment, db throws in
            #expect(throws: Refused.self) {
                try environment.write { txn throws in
                    try txn.put(db, bytes("a"), bytes("one"))
                    throw Refused()
                }
            }
            #expect(try environment.read { txn throws in try txn.statistics(db).entries } == 0)
        }
    }

    @Test func aFailedChildTransactionLeavesItsParentAsItWas() throws {
        try withThings { environment, db throws in
            try environment.write { txn throws in
                try txn.put(db, bytes("kept"), bytes("1"))
                #expect(throws: Refused.self) {
                    try txn.nested { child throws in
                        try child.put(db, bytes("dropped"), bytes("2"))
                        #expect(try child.delete(db, bytes("kept")))
                        throw Refused()
                    }
                }
                try txn.nested { child throws in try child.put(db, bytes("merged"), bytes("3")) }
            }
            try environment.read { txn throws in
                #expect(try text(txn.get(db, bytes("kept"))) == "1")
                #expect(try txn.get(db, bytes("dropped")) == nil)
                #expect(try text(txn.get(db, bytes("merged"))) == "3")
            }
        }
    }

    @Test func noOverwriteRefusesAnExistingKeyAndDeleteReportsAMissingOne() throws {
        try withThings { environment, db throws in
            try environment.write { txn throws in
                try txn.put(db, bytes("a"), bytes("first"), flags: .noOverwrite)
                do {
                    try txn.put(db, bytes("a"), bytes("second"), flags: .noOverwrite)
                    Issue.record("a second put with noOverwrite succeeded")
                } catch let error as LMDBError {
                    #expect(error.code == .keyExists)
                    #expect(error.call == "mdb_put")
                }
                #expect(try text(txn.get(db, bytes("a"))) == "first")
                #expect(try txn.delete(db, bytes("a")))
                #expect(try !txn.delete(db, bytes("a")))
            }
        }
    }

    /// A value written in the space LMDB reserves for it reads back as written, appended or in
    /// place of an earlier value, and refused like any put (here: out of order with `.append`).
    @Test func aReservedValueIsWrittenWhereLMDBKeepsIt() throws {
        try withThings { environment, db throws in
            try environment.write { txn throws in
                for (key, value) in [("k1", "first value"), ("k2", String(repeating: "x", count: 5000)), ("k3", "")] {
                    try bytes(key).withUnsafeBytes { key in
                        try txn.put(db, key, reserving: value.utf8.count, flags: .append) { space in
                            Array(value.utf8).withUnsafeBytes { space.copyMemory(from: $0) }
                        }
                    }
                }
                try bytes("k1").withUnsafeBytes { key in
                    try txn.put(db, key, reserving: 3) { space in
                        bytes("new").withUnsafeBytes { space.copyMemory(from: $0) }
                    }
                }
            }
            #expect(try environment.read { txn throws in text(try txn.get(db, bytes("k1"))) } == "new")
            #expect(
                try environment.read { txn throws in text(try txn.get(db, bytes("k2"))) }
                    == String(repeating: "x", count: 5000))
            #expect(try environment.read { txn throws in text(try txn.get(db, bytes("k3"))) } == "")
            do {
                try environment.write { txn throws in
                    try bytes("k0").withUnsafeBytes { key in
                        try txn.put(db, key, reserving: 1, flags: .append) { $0[0] = 1 }
                    }
                }
                Issue.record("an appended key before the last was taken")
            } catch let error as LMDBError {
                #expect(error.code == .keyExists)
            }
        }
    }

    @Test func cursorsWalkAndSeekInKeyOrder() throws {
        try withThings { environment, db throws in
            try environment.write { txn throws in
                for key in ["d", "b", "f"] { try txn.put(db, bytes(key), bytes(key.uppercased())) }
            }
            #expect(try keys(in: db, of: environment) == ["b", "d", "f"])
            try environment.read { txn throws in
                try txn.withCursor(db) { cursor throws in
                    #expect(try text(cursor.last()?.value) == "F")
                    #expect(try text(cursor.previous()?.key) == "d")
                    #expect(try text(cursor.seek(atLeast: bytes("c"))?.key) == "d")
                    #expect(try text(cursor.seek(atLeast: bytes("d"))?.key) == "d")
                    #expect(try cursor.seek(atLeast: bytes("g")) == nil)
                    #expect(try text(cursor.seek(atMost: bytes("e"))?.key) == "d")
                    #expect(try text(cursor.seek(atMost: bytes("z"))?.key) == "f")
                    #expect(try cursor.seek(atMost: bytes("a")) == nil)
                }
            }
        }
    }

    @Test func aReaderKeepsItsSnapshotWhileAnotherThreadCommits() throws {
        try withThings { environment, db throws in
            try environment.write { txn throws in try txn.put(db, bytes("a"), bytes("old")) }
            let reader = try environment.makeReader()
            try reader.read { txn throws in
                let committed = DispatchSemaphore(value: 0)
                Thread {
                    #expect(throws: Never.self) {
                        try environment.write { txn throws in try txn.put(db, bytes("a"), bytes("new")) }
                    }
                    committed.signal()
                }.start()
                committed.wait()
                #expect(try text(txn.get(db, bytes("a"))) == "old")
            }
            #expect(try reader.read { txn throws in text(try txn.get(db, bytes("a"))) } == "new")
        }
    }

    /// A reader keeping its snapshot reads in the same transaction while nothing is committed, and
    /// in a new one, holding the commit, as soon as something is: from this thread or another.
    @Test func aReaderKeepingItsSnapshotSeesEveryCommitMadeBeforeARead() throws {
        try withThings { environment, db throws in
            try environment.write { txn throws in try txn.put(db, bytes("a"), bytes("one")) }
            let reader = try environment.makeReader(keepingSnapshot: true)
            let first = try reader.read { txn throws in (txn.id, text(try txn.get(db, bytes("a")))) }
            #expect(first.1 == "one")
            #expect(try reader.read { txn throws in txn.id } == first.0)
            try environment.write { txn throws in try txn.put(db, bytes("a"), bytes("two")) }
            let second = try reader.read { txn throws in (txn.id, text(try txn.get(db, bytes("a")))) }
            #expect(second.0 == first.0 + 1)
            #expect(second.1 == "two")
            let committed = DispatchSemaphore(value: 0)
            Thread {
                #expect(throws: Never.self) {
                    try environment.write { txn throws in try txn.put(db, bytes("a"), bytes("three")) }
                }
                committed.signal()
            }.start()
            committed.wait()
            #expect(try reader.read { txn throws in text(try txn.get(db, bytes("a"))) } == "three")
            // A new database's first read in a kept transaction finds it too.
            let other = try environment.openDatabase("others")
            try environment.write { txn throws in try txn.put(other, bytes("b"), bytes("bee")) }
            #expect(try reader.read { txn throws in text(try txn.get(other, bytes("b"))) } == "bee")
            reader.releaseSnapshot()
            #expect(try reader.read { txn throws in text(try txn.get(db, bytes("a"))) } == "three")
        }
    }

    /// Growing the map waits until no snapshot is kept between reads: a kept one ends at its reader's
    /// next read (which then reads in a snapshot of its own, as before) or `releaseSnapshot()`.
    @Test func growingTheMapWaitsForAKeptSnapshotToEnd() throws {
        try withTemporaryDirectory { path throws in
            var options = Environment.Options()
            options.mapSize = 1 << 20
            let environment = try Environment(path: path, options: options)
            let db = try environment.openDatabase("things")
            try environment.write { txn throws in try txn.put(db, bytes("a"), bytes("one")) }
            let reader = try environment.makeReader(keepingSnapshot: true)
            for round in 1...2 {
                #expect(try reader.read { txn throws in text(try txn.get(db, bytes("a"))) } == "one")
                let grown = DispatchSemaphore(value: 0)
                Thread {
                    #expect(throws: Never.self) { try environment.grow(to: (1 << 20) << round) }
                    grown.signal()
                }.start()
                #expect(grown.wait(timeout: .now() + 0.3) == .timedOut, "the map was resized under a kept snapshot")
                if round == 1 {
                    #expect(try reader.read { txn throws in text(try txn.get(db, bytes("a"))) } == "one")
                } else {
                    reader.releaseSnapshot()
                }
                #expect(grown.wait(timeout: .now() + 10) == .success)
                #expect(environment.currentInfo.mapSize == (1 << 20) << round)
            }
            try environment.write { txn throws in try txn.put(db, bytes("a"), bytes("two")) }
            #expect(try reader.read { txn throws in text(try txn.get(db, bytes("a"))) } == "two")
        }
    }

    @Test func aKeptSnapshotEndsWithItsEnvironment() throws {
        try withThings { environment, db throws in
            try environment.write { txn throws in try txn.put(db, bytes("a"), bytes("one")) }
            var reader: Environment.Reader? = try environment.makeReader(keepingSnapshot: true)
            #expect(try reader?.read { txn throws in text(try txn.get(db, bytes("a"))) } == "one")
            environment.close()
            #expect(throws: LMDBError.self) { try reader?.read { _ in () } }
            reader?.releaseSnapshot()
            reader = nil
        }
    }

    /// foliod's metrics endpoint held a reader until after the store closed; releasing it then
    /// aborted a transaction in the unmapped reader table (SIGSEGV at every shutdown).
    @Test func aReaderOutlivingItsEnvironmentIsReleasedSafelyAndRefusesToRead() throws {
        try withThings { environment, db throws in
            try environment.write { txn throws in try txn.put(db, bytes("a"), bytes("one")) }
            var reader: Environment.Reader? = try environment.makeReader()
            #expect(try reader?.read { txn throws in text(try txn.get(db, bytes("a"))) } == "one")
            environment.close()
            #expect(throws: LMDBError.self) { try reader?.read { _ in () } }
            reader = nil
        }
    }

    @Test func aFullMapIsReportedAsOutOfSpaceAndGrowingItLetsTheWriteThrough() throws {
        try withTemporaryDirectory { path throws in
            var options = Environment.Options()
            options.mapSize = 256 << 10
            let environment = try Environment(path: path, options: options)
            let db = try environment.openDatabase("things")
            let value = [UInt8](repeating: 7, count: 64 << 10)
            let writeHalfAMebibyte = {
                try environment.write { txn throws in
                    for index in 0..<8 { try txn.put(db, bytes("k\(index)"), value) }
                }
            }
            do {
                try writeHalfAMebibyte()
                Issue.record("512 KiB fitted into a 256 KiB map")
            } catch let error as LMDBError {
                #expect(error.code == .mapFull)
                #expect(error.isOutOfSpace)
            }
            #expect(try environment.read { txn throws in try txn.statistics(db).entries } == 0)

            try environment.grow(to: 4 << 20)
            try writeHalfAMebibyte()
            #expect(environment.info.mapSize == 4 << 20)
            #expect(try environment.read { txn throws in try txn.statistics(db).entries } == 8)
        }
    }

    @Test func aCompactingCopyHoldsTheSameEntries() throws {
        try withTemporaryDirectory { path throws in
            let source = path + "/source"
            let target = path + "/target"
            for directory in [source, target] {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
            }
            let key = { (index: Int) in String(format: "%04d", index) }
            let environment = try Environment(path: source)
            let db = try environment.openDatabase("things")
            try environment.write { txn throws in
                for index in 0..<1000 { try txn.put(db, bytes(key(index)), bytes("v\(index)")) }
            }
            try environment.write { txn throws in
                for index in stride(from: 0, to: 1000, by: 2) { _ = try txn.delete(db, bytes(key(index))) }
            }
            try environment.copy(to: target, compact: true)

            let copy = try Environment(path: target)
            let copied = try copy.openDatabase("things", create: false)
            #expect(try keys(in: copied, of: copy) == (0..<1000).filter { $0 % 2 == 1 }.map(key))
        }
    }

    /// Once a flush of data.mdb failed, every later one fails too, without flushing: Linux
    /// reports a failed write-back once, so a later `fdatasync` that succeeds says nothing of the
    /// pages lost before it. (The flush's own descriptor is made a pipe's for one call, where
    /// `fdatasync` fails with EINVAL, and then data.mdb's again, where it would succeed.)
    @Test func aFailedSyncIsFinal() throws {
        try withTemporaryDirectory { path throws in
            let environment = try Environment(path: path)
            let db = try environment.openDatabase("things")
            try environment.write { txn throws in try txn.put(db, bytes("a"), bytes("one")) }
            try environment.sync()
            let saved = dup(environment.syncFile)
            var ends: [Int32] = [0, 0]
            #expect(saved >= 0 && pipe(&ends) == 0)
            defer { for fd in [saved] + ends { close(fd) } }
            #expect(dup2(ends[0], environment.syncFile) == environment.syncFile)
            #expect { try environment.sync() } throws: { ($0 as? LMDBError)?.code.rawValue == EINVAL }
            #expect(dup2(saved, environment.syncFile) == environment.syncFile)
            #expect(fdatasync(environment.syncFile) == 0, "the descriptor flushes again")
            #expect { try environment.sync() } throws: {
                "\($0)".contains("failed before") && ($0 as? LMDBError)?.code.rawValue == EINVAL
            }
            #expect(throws: LMDBError.self) { try environment.checkWritable() }
            try environment.checkUsable()
            #expect(try environment.read { txn throws in text(try txn.get(db, bytes("a"))) } == "one", "reads go on")
        }
    }

    @Test func emptyingADatabaseKeepsItOpen() throws {
        try withThings { environment, db throws in
            try environment.write { txn throws in
                try txn.put(db, bytes("a"), bytes("1"))
                try txn.empty(db)
                try txn.put(db, bytes("b"), bytes("2"))
            }
            #expect(try keys(in: db, of: environment) == ["b"])
        }
    }

    /// A fresh environment in a temporary directory with the database "things" open: what most of
    /// these tests start from.
    private func withThings(_ body: (Environment, Database) throws -> Void) throws {
        try withTemporaryDirectory { path throws in
            let environment = try Environment(path: path)
            try body(environment, try environment.openDatabase("things"))
        }
    }
}
