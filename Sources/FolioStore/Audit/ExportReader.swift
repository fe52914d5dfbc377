import FolioJSON
import FolioModel

/// Reads an export in batches, checking each line's format, the sequence and the hash chain, the
/// file contents (`--with-files`) and the end line. Used by one thread at a time. Public so that it
/// can be fuzzed without a store.
///
/// A content line, `{"blob":"<sha256>","size":S,"offset":N,"data":"<base64>"}`, carries at most
/// `maxPiece` bytes of a blob; a blob's lines follow one another from offset 0 to its size (one
/// line with empty data for empty content), and come before the first event that names it. The
/// reader hashes each blob as its pieces pass, holding one piece at a time: the last piece is
/// handed on only if the blob's SHA-256 matches its name.
public final class ExportReader: @unchecked Sendable {
    /// A checked line of an export, in file order.
    public enum Item {
        case event(line: Int, Event)
        /// `bytes` of blob `sha256` from `offset`; `isLast`: the blob is whole, and hashes to its name.
        case blobPiece(line: Int, sha256: String, offset: UInt64, bytes: [UInt8], isLast: Bool)
    }

    /// The most content bytes one line carries: 512 KiB, as `file.read` answers.
    public static let maxPiece = 512 << 10
    /// A batch ends once it holds this many content bytes, so that two batches in flight stay small.
    static let maxBatchBytes = 4 << 20

    private let nextLine: @Sendable () throws -> [UInt8]?
    public private(set) var lineNumber = 0
    public private(set) var chain = ChainHash.genesis
    public private(set) var lastSequence: UInt64 = 0
    private var lastTimestamp = Timestamp(milliseconds: .min)
    private var ended = false
    /// The blob whose pieces are being read: its name, size, bytes so far and their hash.
    private var openBlob: (sha256: String, size: UInt64, done: UInt64, hasher: SHA256Hasher)?
    /// Every whole blob read so far, with its size.
    public private(set) var blobs: [String: UInt64] = [:]
    /// Whether the end line says the export holds the content of every file (`"files":true`).
    public private(set) var includesFiles = false

    public init(nextLine: @escaping @Sendable () throws -> [UInt8]?) { self.nextLine = nextLine }

    /// The next batch of checked items, or nil after the end line; throws `ImportError` for the first
    /// line that is wrong, and for a file that ends without its end line.
    public func next() throws -> [Item]? {
        guard !ended else { return nil }
        var batch: [Item] = []
        var batchBytes = 0
        while batch.count < Store.replayChunk, batchBytes < Self.maxBatchBytes, let line = try nextLine() {
            lineNumber += 1
            let json: JSON
            do { json = try JSONParser.parse(line) } catch {
                throw ImportError(line: lineNumber, message: "not valid JSON: \(error)")
            }
            if case .object(let object) = json, object["blob"] != nil {
                let piece = try blobPiece(object)
                if case .blobPiece(_, _, _, let bytes, _) = piece { batchBytes += bytes.count }
                batch.append(piece)
                continue
            }
            if let open = openBlob {
                throw ImportError(
                    line: lineNumber,
                    message:
                        "blob \(open.sha256) ends at byte \(open.done) of its \(open.size): its content lines must follow one another to the end"
                )
            }
            if case .object(let object) = json, object["end"] != nil {
                try checkTrailer(object, line: lineNumber)
                ended = true
                if try nextLine() != nil {
                    throw ImportError(line: lineNumber + 1, message: "data after the end of the export")
                }
                return batch.isEmpty ? nil : batch
            }
            let event: Event
            do { event = try Event(json: json, allowing: ["hash"]) } catch {
                throw ImportError(line: lineNumber, message: error.message)
            }
            guard event.sequence == lastSequence + 1 else {
                throw ImportError(
                    line: lineNumber, message: "event \(event.sequence) where event \(lastSequence + 1) was expected")
            }
            chain = chain.next(event.encoded())
            guard case .string(let hex)? = json.objectValue?["hash"], let stated = ChainHash(hex: hex) else {
                throw ImportError(line: lineNumber, message: "event \(event.sequence) has no valid \"hash\"")
            }
            guard stated == chain else {
                throw ImportError(
                    line: lineNumber,
                    message: "event \(event.sequence) does not match its hash: it or an earlier event was changed")
            }
            // Time travel finds an instant by a binary search of the log, which needs this.
            guard event.timestamp >= lastTimestamp else {
                throw ImportError(
                    line: lineNumber,
                    message:
                        "event \(event.sequence) is dated before event \(lastSequence): \"at\" never decreases in a log"
                )
            }
            if case .filePut(let binding) = event.change, let size = blobs[binding.sha256], size != binding.size {
                throw ImportError(
                    line: lineNumber,
                    message:
                        "event \(event.sequence) binds \(binding.name) to \(binding.size) bytes of \(binding.sha256), whose content lines hold \(size)"
                )
            }
            lastSequence = event.sequence
            lastTimestamp = event.timestamp
            batch.append(.event(line: lineNumber, event))
        }
        if batch.isEmpty {
            throw ImportError(
                line: lineNumber + 1, message: "the file ends without the export's end line: it is truncated")
        }
        return batch
    }

    /// Checks a content line: its fields, that it continues the open blob (or starts one at offset 0),
    /// and, at the blob's end, its hash.
    private func blobPiece(_ object: JSONObject) throws -> Item {
        let line = lineNumber
        guard object.fields.count == 4, case .string(let sha256)? = object["blob"], ChainHash(hex: sha256) != nil,
            sha256 == sha256.lowercased(), let size = object["size"]?.integerValue, size >= 0,
            let offset = object["offset"]?.integerValue, offset >= 0, case .string(let text)? = object["data"]
        else {
            throw ImportError(
                line: line,
                message:
                    "a content line has exactly \"blob\" (64 lowercase hex digits), \"size\", \"offset\" and \"data\" (base64)"
            )
        }
        let bytes: [UInt8]
        do { bytes = try Base64.decode(text.utf8, field: "data") } catch {
            throw ImportError(line: line, message: error.message)
        }
        guard bytes.count <= Self.maxPiece else {
            throw ImportError(
                line: line,
                message: "blob \(sha256): a content line holds \(bytes.count) bytes, more than \(Self.maxPiece)")
        }
        var open = openBlob ?? (sha256, UInt64(size), 0, SHA256Hasher())
        guard open.sha256 == sha256, open.size == UInt64(size), open.done == UInt64(offset) else {
            let expected =
                openBlob.map { "byte \($0.done) of blob \($0.sha256) of \($0.size) bytes" } ?? "offset 0 of a new blob"
            throw ImportError(
                line: line,
                message: "blob \(sha256): content of \(size) bytes at offset \(offset), where \(expected) was expected")
        }
        if openBlob == nil, blobs[sha256] != nil {
            throw ImportError(line: line, message: "blob \(sha256) is given twice")
        }
        guard UInt64(bytes.count) <= open.size - open.done, !bytes.isEmpty || open.size == 0 else {
            throw ImportError(
                line: line, message: "blob \(sha256): \(bytes.count) bytes at offset \(offset) do not fit its \(size)")
        }
        open.hasher.update(bytes)
        open.done += UInt64(bytes.count)
        guard open.done == open.size else {
            openBlob = open
            return .blobPiece(line: line, sha256: sha256, offset: UInt64(offset), bytes: bytes, isLast: false)
        }
        openBlob = nil
        let actual = hexString(open.hasher.finalize())
        guard actual == sha256 else {
            throw ImportError(
                line: line, message: "blob \(sha256): its \(size) bytes hash to \(actual): the content was changed")
        }
        blobs[sha256] = open.size
        return .blobPiece(line: line, sha256: sha256, offset: UInt64(offset), bytes: bytes, isLast: true)
    }

    private func checkTrailer(_ object: JSONObject, line: Int) throws {
        guard object["end"] == .bool(true), object["lastSeq"]?.integerValue == Int64(lastSequence) else {
            throw ImportError(
                line: line,
                message:
                    "the end line says the export has \(object["lastSeq"]?.description ?? "?") events, the file holds \(lastSequence)"
            )
        }
        guard case .string(let hex)? = object["chainHead"], ChainHash(hex: hex) == chain else {
            throw ImportError(line: line, message: "the end line's chainHead does not match the events")
        }
        switch object["files"] {
        case nil: includesFiles = false
        case .bool(let value)?: includesFiles = value
        default: throw ImportError(line: line, message: "the end line's \"files\" is not true or false")
        }
    }
}
