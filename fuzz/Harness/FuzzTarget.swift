import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore

/// The fuzz targets: each takes any bytes and either returns quietly, or names the property that
/// failed. A crash (a trap, a sanitizer report) is a finding too. The libFuzzer entry points in
/// `fuzz/Sources` and the replay of `fuzz/regressions` in `swift test` both call `run`.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// `RequestDecoder.decode` on one line.
    case requestDecoder = "request-decoder"
    /// `JSONParser.parse`, and what it parsed written and parsed again.
    case jsonParser = "json-parser"
    /// `Filter.parse` and `Query` for a `where`, `SortOrder(parsing:)` for a `sort`, and the order
    /// of values and of their sort keys.
    case query
    /// `PageCursor(token:)` and `Base64URL.decode`.
    case pageCursor = "page-cursor"
    /// The reader of `folio export` lines that `import` uses.
    case exportReader = "export-reader"
    /// `Event(decoding:)`: an object event read by its canonical layout against the general decoder.
    case eventDecoder = "event-decoder"
    /// A counted tree's record as LMDB would hand it over, damaged or not (`TreeRecordFuzzing`):
    /// checked, read in place, searched, edited.
    case treeRecord = "tree-record"

    /// Nil when every property held; otherwise what failed, for the crash report.
    public func run(_ bytes: UnsafeRawBufferPointer) -> String? {
        switch self {
        case .requestDecoder: return Self.requestDecoder(bytes)
        case .jsonParser: return Self.jsonParser(bytes)
        case .query: return Self.query(bytes)
        case .pageCursor: return Self.pageCursor(bytes)
        case .exportReader: return Self.exportReader(bytes)
        case .eventDecoder: return Self.eventDecoder(bytes)
        case .treeRecord: return TreeRecordFuzzing.run(bytes)
        }
    }

    /// For the libFuzzer entry points: a failed property stops the run as a crash, with its input.
    public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
        if let failure = run(UnsafeRawBufferPointer(start: data, count: size)) { fatalError("\(rawValue): \(failure)") }
        return 0
    }
}
