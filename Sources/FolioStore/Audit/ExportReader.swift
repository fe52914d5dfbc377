import FolioJSON
import FolioModel

/// Reads an export in batches, checking each line's format, the sequence and the hash chain, and the
/// end line. Used by one thread at a time. Public so that it can be fuzzed without a store.
public final class ExportReader: @unchecked Sendable {
    private let nextLine: @Sendable () throws -> [UInt8]?
    private var lineNumber = 0
    public private(set) var chain = ChainHash.genesis
    public private(set) var lastSequence: UInt64 = 0
    private var lastTimestamp = Timestamp(milliseconds: .min)
    private var ended = false

    public init(nextLine: @escaping @Sendable () throws -> [UInt8]?) { self.nextLine = nextLine }

    /// The next batch of checked events, or nil after the end line; throws `ImportError` for the first
    /// line that is wrong, and for a file that ends without its end line.
    public func next() throws -> [(line: Int, event: Event)]? {
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
