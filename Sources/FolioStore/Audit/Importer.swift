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

/// Reads an export in batches, checking each line's format, the sequence and the hash chain, and the
/// end line. Used by one thread at a time.
private final class ExportReader: @unchecked Sendable {
    private let nextLine: @Sendable () throws -> [UInt8]?
    private var lineNumber = 0
    private(set) var chain = ChainHash.genesis
    private(set) var lastSequence: UInt64 = 0
    private var lastTimestamp = Timestamp(milliseconds: .min)
    private var ended = false

    init(nextLine: @escaping @Sendable () throws -> [UInt8]?) { self.nextLine = nextLine }

    func next() throws -> [(line: Int, event: Event)]? {
        guard !ended else { return nil }
        var batch: [(line: Int, event: Event)] = []
        while batch.count < Store.replayChunk, let line = try nextLine() {
            lineNumber += 1
            let json: JSON
            do { json = try JSONParser.parse(line) } catch { throw ImportError(line: lineNumber, message: "not valid JSON: \(error)") }
            if case .object(let object) = json, object["end"] != nil {
                try checkTrailer(object, line: lineNumber)
                ended = true
                if try nextLine() != nil { throw ImportError(line: lineNumber + 1, message: "data after the end of the export") }
                return batch.isEmpty ? nil : batch
            }
            let event: Event
            do { event = try Event(json: json, allowing: ["hash"]) } catch { throw ImportError(line: lineNumber, message: error.message) }
            guard event.sequence == lastSequence + 1 else {
                throw ImportError(line: lineNumber, message: "event \(event.sequence) where event \(lastSequence + 1) was expected")
            }
            chain = chain.next(event.encoded())
            guard case .string(let hex)? = json.objectValue?["hash"], let stated = ChainHash(hex: hex) else {
                throw ImportError(line: lineNumber, message: "event \(event.sequence) has no valid \"hash\"")
            }
            guard stated == chain else {
                throw ImportError(line: lineNumber, message: "event \(event.sequence) does not match its hash: it or an earlier event was changed")
            }
            // Time travel finds an instant by a binary search of the log, which needs this.
            guard event.timestamp >= lastTimestamp else {
                throw ImportError(line: lineNumber, message: "event \(event.sequence) is dated before event \(lastSequence): \"at\" never decreases in a log")
            }
            lastSequence = event.sequence
            lastTimestamp = event.timestamp
            batch.append((lineNumber, event))
        }
        if batch.isEmpty { throw ImportError(line: lineNumber + 1, message: "the file ends without the export's end line: it is truncated") }
        return batch
    }

    private func checkTrailer(_ object: JSONObject, line: Int) throws {
        guard object["end"] == .bool(true), object["lastSeq"]?.integerValue == Int64(lastSequence) else {
            throw ImportError(line: line, message: "the end line says the export has \(object["lastSeq"]?.description ?? "?") events, the file holds \(lastSequence)")
        }
        guard case .string(let hex)? = object["chainHead"], ChainHash(hex: hex) == chain else {
            throw ImportError(line: line, message: "the end line's chainHead does not match the events")
        }
    }
}
