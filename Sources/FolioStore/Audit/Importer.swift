import FolioJSON
import FolioModel
import Foundation
import LMDB

/// Why an import was refused: the line and what is wrong with it.
public struct ImportError: Error, CustomStringConvertible {
    public let line: Int
    public let message: String

    public var description: String { "line \(line): \(message)" }
}

/// Builds a new store from an export: one event per line, oldest first from sequence 1, then the
/// trailer `{"end":true,"lastSeq":N,"chainHead":"..."}` that `folio export` writes last. Sequences
/// must be continuous, each event's `hash` must match the chain, and the trailer must close it.
/// Content lines (`folio export --with-files`, `ExportReader`) become blobs of the new store.
/// The store is built in a temporary directory beside the target and moved into place only when
/// everything checked out, so a damaged or truncated file leaves nothing behind.
///
/// A `file.put` whose content the export lacks is applied all the same: an export without
/// `--with-files` has none, and one with it leaves out content swept before it was read (its
/// names were gone by then, so a later event of the export unbinds them). An export whose end line
/// says `"files":true` must hold the content of every file bound at its end; one without it is
/// imported with `missingBlobs` counted.
public struct Importer {
    public struct Summary: Sendable {
        public let events: UInt64
        public let chainHead: ChainHash
        public let digest: ChainHash
        /// Blobs written from content lines, and their bytes.
        public let blobs: UInt64
        public let blobBytes: UInt64
        /// Contents the imported names refer to that the export did not hold.
        public let missingBlobs: UInt64
    }

    public let directory: String
    public let requestKeyRetention: Int64
    /// The new store's first map; it doubles whenever the import fills it.
    public let mapSize: Int

    public init(
        directory: String, requestKeyRetention: Int64 = Store.Options().requestKeyRetention,
        mapSize: Int = Store.Options().mapSize
    ) {
        // Without trailing slashes: the store is built beside it, at DIRECTORY.importing-PID, which
        // `DIR/` made a directory inside it, removed with it when the import moved it into place.
        var directory = directory
        while directory.count > 1 && directory.hasSuffix("/") { directory.removeLast() }
        self.directory = directory
        self.requestKeyRetention = requestKeyRetention
        self.mapSize = mapSize
    }

    /// `nextLine` is called from a thread of its own (reading and checking overlap with applying).
    public func run(nextLine: @escaping @Sendable () throws -> [UInt8]?, progress: (UInt64) -> Void = { _ in }) throws
        -> Summary
    {
        let manager = FileManager.default
        if manager.fileExists(atPath: directory), !(try manager.contentsOfDirectory(atPath: directory)).isEmpty {
            throw StoreError.invalid("\(directory) is not empty: import builds a new store")
        }
        let building = directory + ".importing-\(ProcessInfo.processInfo.processIdentifier)"
        try? manager.removeItem(atPath: building)
        do {
            let summary = try build(in: building, nextLine: nextLine, progress: progress)
            if manager.fileExists(atPath: directory) { try manager.removeItem(atPath: directory) }
            try manager.moveItem(atPath: building, toPath: directory)
            do {
                // The new name, so that an import said done survives an OS crash.
                try Environment.flushDirectory(URL(fileURLWithPath: directory).deletingLastPathComponent().path)
            } catch {
                try? manager.removeItem(atPath: directory)
                throw error
            }
            return summary
        } catch {
            try? manager.removeItem(atPath: building)
            throw error
        }
    }

    private func build(in path: String, nextLine: @escaping @Sendable () throws -> [UInt8]?, progress: (UInt64) -> Void)
        throws -> Summary
    {
        var options = Store.Options()
        options.sync = .noSync
        options.requestKeyRetention = requestKeyRetention
        options.mapSize = mapSize
        let store = try Store(directory: path, options: options)
        defer { store.close() }
        let reader = ExportReader(nextLine: nextLine)
        var blob: BlobWriter?
        defer { blob?.abandon() }
        var blobBytes: UInt64 = 0
        try runPipelined(
            produce: { try reader.next() },
            consume: { batch in
                var events: [(line: Int, event: Event)] = []
                for item in batch {
                    switch item {
                    case .event(let line, let event): events.append((line, event))
                    case .blobPiece(_, let sha256, let offset, let bytes, let isLast):
                        if offset == 0 { blob = try BlobWriter(into: store.blobs, sha256: sha256) }
                        try bytes.withUnsafeBytes { try blob!.append($0) }
                        blobBytes += UInt64(bytes.count)
                        if isLast {
                            try blob!.finish()
                            blob = nil
                        }
                    }
                }
                try store.growingMap {
                    try store.write { writer in
                        // By index, not taken apart into a copied tuple (see `Store.rebuild`).
                        for index in events.indices {
                            do {
                                _ = try writer.append(events[index].event, isolated: false)
                            } catch let error as StoreError {
                                throw ImportError(
                                    line: events[index].line,
                                    message: "event \(events[index].event.sequence) does not apply: \(error)")
                            }
                        }
                    }
                }
                if let last = events.last { progress(last.event.sequence) }
            })
        let missing = try store.read { snapshot in
            var missing: [String] = []
            try snapshot.forEachBlob { sha256, _ in if reader.blobs[sha256] == nil { missing.append(sha256) } }
            if reader.includesFiles, let first = missing.first {
                let names = try snapshot.fileNames(boundTo: [first], limit: 1)[first] ?? []
                throw ImportError(
                    line: reader.lineNumber,
                    message:
                        "the export says it holds every file's content, but lacks \(first), bound to \(names.first ?? "?")"
                )
            }
            return UInt64(missing.count)
        }
        try store.flushData()
        try Environment.flushDirectory(path)
        return Summary(
            events: reader.lastSequence, chainHead: reader.chain, digest: try store.read { try $0.digest() },
            blobs: UInt64(reader.blobs.count), blobBytes: blobBytes, missingBlobs: missing)
    }
}
