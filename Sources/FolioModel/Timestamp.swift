import FolioJSON

/// When an event was accepted: milliseconds since the Unix epoch, the precision of `createdAt` and
/// `updatedAt`. Decided by the writer when it accepts a command, never when an event is applied.
public struct Timestamp: Sendable, Hashable, Comparable {
    public let milliseconds: Int64

    public init(milliseconds: Int64) { self.milliseconds = milliseconds }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.milliseconds < rhs.milliseconds }

    public var instant: Instant { Instant(milliseconds: milliseconds) }

    /// `2026-11-29T10:00:00.000Z`
    public var rfc3339: String { instant.rfc3339Milliseconds }

    /// Parses the RFC 3339 form Folio writes; nil unless it names a whole millisecond.
    public init?(rfc3339 text: String) {
        guard let instant = Instant(rfc3339: text), instant.nanoseconds % 1_000_000 == 0 else { return nil }
        self.init(milliseconds: instant.milliseconds)
    }

    /// The same, from the text's UTF-8 bytes.
    public init?(rfc3339 bytes: UnsafeRawBufferPointer) {
        guard let instant = Instant(rfc3339: bytes), instant.nanoseconds % 1_000_000 == 0 else { return nil }
        self.init(milliseconds: instant.milliseconds)
    }
}

extension JSONWriter {
    /// Writes the timestamp as an RFC 3339 string.
    public mutating func write(_ timestamp: Timestamp) {
        bytes.append(UInt8(ascii: "\""))
        timestamp.instant.appendRFC3339Milliseconds(to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }
}
