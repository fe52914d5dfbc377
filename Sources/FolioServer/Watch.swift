import FolioJSON
import FolioProtocol
import FolioStore

/// A running `watch` on one connection: events with sequence ≥ `next` still to deliver, first from
/// the log (catch-up), then as the writer commits them (live).
final class Watch {
    let tag: Tag
    let collection: String?
    /// The next sequence this watch delivers.
    var next: UInt64
    /// Reading the log; live events are ignored until the log is read to its end.
    var catchingUp = true

    init(tag: Tag, after: UInt64, collection: String?) {
        self.tag = tag
        self.collection = collection
        next = after + 1
    }

    /// The last sequence delivered (or skipped by the filter): where a client resumes.
    var lastSequence: UInt64 { next - 1 }

    func wants(collection eventCollection: String?) -> Bool {
        guard let collection else { return true }
        return eventCollection == collection
    }
}

/// Events of one commit, as watches receive them.
struct CommittedEvent: Sendable {
    let sequence: UInt64
    let collection: String?
    /// The event's wire JSON (canonical bytes with `hash`).
    let wire: [UInt8]
    /// When its commit returned (monotonic µs).
    let committedAt: UInt64
}
