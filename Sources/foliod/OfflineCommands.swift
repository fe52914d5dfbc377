import FolioCommandLine
import FolioProtocol
import FolioServer
import FolioStore
import Foundation
import Glibc

/// `foliod rebuild`, `foliod verify` and `foliod import`: run with the daemon stopped; each takes
/// the data directory's lock, so they refuse to run beside a daemon.
enum OfflineCommands {
    /// How long request keys are remembered (`--request-key-ttl`), in ms: the request index is
    /// derived from the log and this, so verify and rebuild must use the daemon's.
    nonisolated(unsafe) static var retention = Store.Options().requestKeyRetention
    /// The LMDB map to open with (`--map-size`, as the daemon's); each grows as it fills.
    nonisolated(unsafe) static var mapSize = Store.Options().mapSize

    static let usage = """
        usage: foliod rebuild --data DIR     derive current state and every view again from the log
               foliod verify --data DIR      check the hash chain, replay the log and compare, re-hash every file's content (exit 1 on any mismatch)
               foliod import --data NEWDIR [FILE]   build a new store from `folio export` output (default: stdin)
        Each takes --request-key-ttl SECONDS (default 86400), as the daemon that serves the store does,
        and --map-size BYTES (default 1 GiB, at least 1 MiB): the first LMDB map of the store (verify: of its scratch
        copy; import: of the new store), which doubles whenever it fills.
        """

    static func run(_ command: String, _ argv: [String]) throws -> Int32 {
        var arguments = try Arguments(argv, valued: ["--data", "--request-key-ttl", "--map-size"])
        if try arguments.flag("--help", "-h") {
            print(usage)
            return 0
        }
        let defaults = DefaultPaths(environment: ProcessInfo.processInfo.environment, uid: getuid())
        let directory = arguments.value("--data") ?? defaults.dataDirectory
        if let seconds = try arguments.integer("--request-key-ttl") { retention = Int64(seconds) * 1000 }
        // At least 1 MiB, as the daemon's.
        if let bytes = try arguments.integer("--map-size") { mapSize = max(bytes, 1 << 20) }
        try arguments.rejectUnused()
        switch command {
        case "rebuild":
            try expectNoArguments(arguments)
            return try rebuild(directory)
        case "verify":
            try expectNoArguments(arguments)
            return try verify(directory)
        default:
            var rest = arguments
            let file = rest.takePositional()
            try expectNoArguments(rest)
            return try importLog(into: directory, from: file)
        }
    }

    private static func expectNoArguments(_ arguments: Arguments) throws {
        if let extra = arguments.positionals.first { throw UsageError("unexpected argument '\(extra)'") }
    }

    private static func openExisting(_ directory: String) throws -> (DataDirectoryLock, Store) {
        guard FileManager.default.fileExists(atPath: directory + "/data.mdb") else {
            throw StoreError.unusable("\(directory) holds no Folio store")
        }
        let lock = try DataDirectoryLock(directory: directory)
        // Each commit flushes its pages before its meta page is written, so an OS crash during a
        // rebuild leaves the store intact (at an earlier commit); with no flush at all it could
        // leave a meta page pointing at pages never written, the log's among them.
        var options = Store.Options()
        options.sync = .noMetaSync
        options.requestKeyRetention = retention
        options.mapSize = mapSize
        return (lock, try Store(directory: directory, options: options))
    }

    private static func rebuild(_ directory: String) throws -> Int32 {
        let (lock, store) = try openExisting(directory)
        let meter = ProgressMeter(label: "rebuild")
        try store.rebuild { meter.update(done: $0.done, total: $0.total) }
        let (head, digest) = try store.read { (try $0.head(), try $0.digest()) }
        store.close()
        withExtendedLifetime(lock) {}
        meter.finish()
        print("rebuilt \(head.sequence) events in \(meter.elapsedText) (\(meter.rateText))")
        print("chain head \(head.hash.hex)")
        print("digest     \(digest.hex)")
        return 0
    }

    private static func verify(_ directory: String) throws -> Int32 {
        let (lock, store) = try openExisting(directory)
        let meter = ProgressMeter(label: "verify")
        let report = try store.verify(scratchDirectory: directory + "/verify-\(getpid())") {
            meter.update(done: $0.done, total: $0.total)
        }
        store.close()
        withExtendedLifetime(lock) {}
        meter.finish()
        print(
            "events     \(report.lastSequence) (replayed \(report.replayedEvents) in \(meter.elapsedText), \(meter.rateText))"
        )
        print("chain head \(report.chainHead.hex)")
        print("digest     \(report.digest.hex)")
        if let broken = report.chainBrokenAt { print("CHAIN BROKEN at event \(broken): \(report.chainProblem ?? "")") }
        for mismatch in report.mismatches { print("MISMATCH \(mismatch.kind): \(mismatch.description)") }
        if report.omittedMismatches > 0 { print("... and \(report.omittedMismatches) more mismatches") }
        print("blobs      \(report.blobsChecked) re-hashed (\(report.blobBytes) bytes)")
        for blob in report.badBlobs {
            let more = blob.omittedNames > 0 ? " and \(blob.omittedNames) more" : ""
            print(
                "BAD BLOB \(blob.problem): \(blob.description); bound to \(blob.names.joined(separator: ", "))\(more)")
        }
        if report.omittedBadBlobs > 0 { print("... and \(report.omittedBadBlobs) more bad blobs") }
        print(
            report.isConsistent
                ? "ok: the live state and views match the log" : "FAILED: the store does not match its log")
        return report.isConsistent ? 0 : 1
    }

    private static func importLog(into directory: String, from file: String?) throws -> Int32 {
        let fd: Int32 = file.map { open($0, O_RDONLY | O_CLOEXEC) } ?? 0
        guard fd >= 0 else { throw SystemError("open \(file!)") }
        defer { if file != nil { close(fd) } }
        let reader = LineReader(fd: fd)
        let meter = ProgressMeter(label: "import")
        let summary = try Importer(directory: directory, requestKeyRetention: retention, mapSize: mapSize).run(
            nextLine: { try reader.next() }) { meter.update(done: $0, total: 0) }
        meter.finish()
        print("imported \(summary.events) events into \(directory) in \(meter.elapsedText) (\(meter.rateText))")
        if summary.blobs > 0 { print("blobs      \(summary.blobs) (\(summary.blobBytes) bytes)") }
        if summary.missingBlobs > 0 {
            print(
                "warning: the export holds no content for \(summary.missingBlobs) blob(s) its files refer to (export with --with-files)"
            )
        }
        print("chain head \(summary.chainHead.hex)")
        print("digest     \(summary.digest.hex)")
        return 0
    }
}

/// Lines of a file descriptor, without their newlines. Used by one thread at a time.
final class LineReader: @unchecked Sendable {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private var finished = false

    init(fd: Int32) { self.fd = fd }

    func next() throws -> [UInt8]? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 0x0A) {
                let line = Array(buffer[start..<newline])
                start = newline + 1
                return line
            }
            if finished {
                guard start < buffer.count else { return nil }
                let line = Array(buffer[start...])
                start = buffer.count
                return line
            }
            buffer.removeFirst(start)
            start = 0
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw SystemError("read")
            }
            if count == 0 { finished = true } else { buffer.append(contentsOf: chunk[..<count]) }
        }
    }
}

/// Progress on stderr when it is a terminal: events done, events/s, time left.
final class ProgressMeter {
    private let label: String
    private let started = Date()
    private let visible = isatty(2) == 1
    private var lastShown = Date.distantPast
    private var done: UInt64 = 0

    init(label: String) { self.label = label }

    var elapsed: Double { max(Date().timeIntervalSince(started), 0.000_001) }
    var elapsedText: String { String(format: "%.2f s", elapsed) }
    var rateText: String { String(format: "%.0f events/s", Double(done) / elapsed) }

    func update(done: UInt64, total: UInt64) {
        self.done = done
        guard visible, Date().timeIntervalSince(lastShown) > 0.2 else { return }
        lastShown = Date()
        let rate = Double(done) / elapsed
        var text = "\r\(label): \(done)"
        if total > 0 {
            let left = rate > 0 ? Double(total - min(done, total)) / rate : 0
            text += String(format: "/%llu events, %.0f events/s, %.0f s left   ", total, rate, left)
        } else {
            text += String(format: " events, %.0f events/s   ", rate)
        }
        FileHandle.standardError.write(Data(text.utf8))
    }

    func finish() {
        if visible { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }
}
