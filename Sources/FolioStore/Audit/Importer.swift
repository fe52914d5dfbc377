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
/// The store is built in a temporary directory beside the target and moved into place only when
/// everything checked out, so a damaged or truncated file leaves nothing behind.
public struct Importer {
    public struct Summary: Sendable {
        public let events: UInt64
        public let chainHead: ChainHash
        public let digest: ChainHash
    }

    public let directory: String
    public let requestKeyRetention: Int64

    public init(directory: String, requestKeyRetention: Int64 = Store.Options().requestKeyRetention) {
        self.directory = directory
        self.requestKeyRetention = requestKeyRetention
    }

    /// `nextLine` is called from a thread of its own (reading and checking overlap with applying).
    public func run(nextLine: @escaping @Sendable () throws -> [UInt8]?, progress: (UInt64) -> Void = { _ in }) throws -> Summary {
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

    private func build(in path: String, nextLine: @escaping @Sendable () throws -> [UInt8]?, progress: (UInt64) -> Void) throws -> Summary {
        var options = Store.Options()
        options.sync = .noSync
        options.requestKeyRetention = requestKeyRetention
        let store = try Store(directory: path, options: options)
        defer { store.close() }
        let reader = ExportReader(nextLine: nextLine)
        try runPipelined(produce: { try reader.next() }, consume: { batch in
            try store.write { writer in
                for (line, event) in batch {
                    do {
                        _ = try writer.append(event, isolated: false)
                    } catch let error as StoreError {
                        throw ImportError(line: line, message: "event \(event.sequence) does not apply: \(error)")
                    }
                }
            }
            progress(batch.last?.event.sequence ?? 0)
        })
        try store.environment.sync()
        try Environment.flushDirectory(path)
        return Summary(events: reader.lastSequence, chainHead: reader.chain, digest: try store.read { try $0.digest() })
    }
}
