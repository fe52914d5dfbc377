import FolioJSON
import FolioProtocol
import FolioStore

/// A running `watch` on one connection: events with sequence ≥ `next` still to deliver, first from
/// the log (catch-up), then as the writer commits them (live). Nothing is queued for a watch beyond
/// its connection's output: a live watch whose client does not keep up goes back to reading the log,
/// and counts the bytes it fell behind by (`lagBytes`) until it catches up or is cut off.
final class Watch {
    let tag: Tag
    let collection: String?
    /// The next sequence this watch delivers; everything before it is in the connection's output
    /// (or was skipped by the filter).
    var next: UInt64
    /// Reading the log; live events are ignored until the log is read to its end.
    var catchingUp = true
    /// Set when a live watch fell behind because its client did not read: from then until it has
    /// caught up, the bytes of the events it wants and has not sent count toward `lagBytes`.
    var fellBehind = false
    var lagBytes = 0

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
    /// The object's collection, which a watch of one collection follows.
    let collection: String?
    /// The collection whose readers may see it (`Snapshot.collection(ofCanonicalEvent:)`: also a view's
    /// or a schema's), as a watch catching up from the log sees it.
    let readableAs: String?
    /// The event's wire JSON (canonical bytes with `hash`).
    let wire: [UInt8]
    /// When its commit returned (monotonic µs).
    let committedAt: UInt64
}
