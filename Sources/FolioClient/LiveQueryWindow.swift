import FolioJSON
import FolioProtocol

/// A client's copy of a live query's window (`watch {query}`): set from the first answer, moved by
/// each change line (`LiveChangeLine`). `sequence` is where to resume from.
public struct LiveQueryWindow: Sendable {
    public private(set) var items: [JSON] = []
    public private(set) var total: Int64 = 0
    public private(set) var sequence: UInt64 = 0

    public init() {}

    /// Takes the result of the `watch` answer: a first page (`items`), or a resumed window's change.
    public mutating func start(with result: JSON) throws {
        guard let seq = result.objectValue?["seq"]?.integerValue else {
            throw ClientError.malformedResponse("a live query's answer without seq")
        }
        if case .array(let page)? = result.objectValue?["items"] {
            items = page
            total = result.objectValue?["total"]?.integerValue ?? Int64(page.count)
        } else if let change = result.objectValue?["change"] {
            try apply(change)
        }
        sequence = UInt64(seq)
    }

    public mutating func apply(_ change: JSON) throws {
        let line = try LiveChangeLine(parsing: change)
        try line.apply(to: &items) { $0 }
        total = line.total
        sequence = line.sequence
    }
}
