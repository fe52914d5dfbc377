import FolioJSON
import FolioModel

/// A request's correlation tag: a string or a number, echoed in every line answering it exactly as
/// the client wrote it (`1.50` stays `1.50`, 18446744073709551615 stays an integer).
public struct Tag: Sendable, CustomStringConvertible {
    /// The tag as a value, to match an `unwatch` against.
    public let value: JSON
    /// The tag's JSON text as it appeared in the request.
    public let text: [UInt8]

    public init(value: JSON, text: [UInt8]) {
        self.value = value
        self.text = text
    }

    /// A tag made by the server (tests, tools): its text is its serialization.
    public init(_ value: JSON) {
        self.init(value: value, text: value.serialized())
    }

    /// Whether `other` names this tag: equal strings, or numbers of equal value.
    public func matches(_ other: JSON) -> Bool {
        Value(value) == Value(other)
    }

    public var description: String { String(decoding: text, as: UTF8.self) }
}
