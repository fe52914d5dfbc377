import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore
import Synchronization

/// The thread that keeps live queries (`watch {query}`) current. It receives every confirmed commit
/// while a live query runs, with the objects before and after each event, and moves each window
/// by them (`LiveWindow`): O(log w) per event of the query's collection, no query run again. The
/// store is read only to fill a window that removals emptied below its limit, and for first pages
/// and resumes. Live queries with the same query share one window, and one encoded change.
///
/// Event loops subscribe and unsubscribe; this thread posts first pages, change lines and ends
/// back to the subscriber's loop, which owns the connection and its output (`EventLoop+LiveQueries`).
final class LiveQueries: @unchecked Sendable {
    /// A live query as its connection's loop asked for it.
    struct Subscription: @unchecked Sendable {
        let id: UInt64
        let connection: Connection
        let tag: Tag
        let query: Query
        let resumeAfter: UInt64?
    }

    /// What the thread tells a loop.
    enum Delivery {
        /// The answer to the `watch`: its line, and on success the query's collection and the
        /// sequence its window reflects, on failure the error's code.
        case started(
            Connection, id: UInt64, response: [UInt8], collection: String?, sequence: UInt64, failure: ErrorCode?)
        /// A change of a live query's window: `payload` is the `change` object; `committedAt`, when
        /// the commit it reflects was confirmed (monotonic µs; 0 for a window read again).
        case changed(Connection, id: UInt64, sequence: UInt64, payload: [UInt8], committedAt: UInt64)
        /// The live query ended (its view was dropped, or it failed): the error to send.
        case ended(Connection, id: UInt64, error: ProtocolError)
    }

    private enum Message {
        case commit([StoreWriter.Applied], committedAt: UInt64)
        case subscribe(Subscription)
        case unsubscribe(UInt64)
        /// Commits were dropped while the thread was behind: bring every window to the head.
        case resync
    }

    /// Subscribers whose queries have equal windows at this window's sequence.
    final class Group {
        var window: LiveWindow
        var subscribers: [Subscription] = []

        init(window: LiveWindow) { self.window = window }
    }

    /// Commits waiting beyond this are dropped, and every window is brought to the head at once.
    static let maxQueuedCommits = 4096

    private let reader: Store.Reader
    private let log: Log
    /// A resume reads at most this many events since `resumeAfter`; older positions get a fresh
    /// page. Windows behind by more are read again at the head.
    private let resumeHorizon: Int
    private var thread: WorkThread<Message>?
    /// Subscriptions the loops hold: commits are handed over only while there are some.
    private let subscriptions = Atomic<Int>(0)
    private let queuedCommits = Atomic<Int>(0)
    private let resyncPending = Atomic<Bool>(false)
    private let nextID = Atomic<UInt64>(1)
    /// On the thread only.
    private var groups = LiveGroups()
    private var groupOfSubscription: [UInt64: Group] = [:]
    /// The last commit handled. A window reflects it, or a later sequence it was read at, whether
    /// the commits since touched it or not: its `sequence` is only brought up to date when one does.
    private var processed: UInt64 = 0
    private var outbox: [ObjectIdentifier: (loop: EventLoop, deliveries: [Delivery])] = [:]

    init(store: Store, log: Log, resumeHorizon: Int) throws {
        reader = try store.makeReader()
        self.log = log
        self.resumeHorizon = resumeHorizon
    }

    func start() {
        thread = WorkThread(name: "folio-live") { [self] messages in
            for message in messages { handle(message) }
            sendOutbox()
        }
    }

    /// Handles what is queued, then ends the thread.
    func stop() {
        thread?.stop()
        thread = nil
    }

    var count: Int { subscriptions.load(ordering: .relaxed) }

    /// Called by a loop: starts a live query. Counted before it reaches the thread, so that every
    /// commit after the head the thread reads for it is handed over.
    func subscribe(connection: Connection, tag: Tag, query: Query, resumeAfter: UInt64?) -> UInt64 {
        let id = nextID.add(1, ordering: .relaxed).oldValue
        subscriptions.add(1, ordering: .releasing)
        thread?.enqueue([
            .subscribe(Subscription(id: id, connection: connection, tag: tag, query: query, resumeAfter: resumeAfter))
        ])
        return id
    }

    /// Called by a loop: ends a live query it has not been told ended. (The count goes down on
    /// the thread, once for each subscription, whichever way it ends.)
    func unsubscribe(_ id: UInt64) {
        thread?.enqueue([.unsubscribe(id)])
    }

    /// Called in commit order, on the thread that confirms commits.
    func publish(_ applied: [StoreWriter.Applied]) {
        guard subscriptions.load(ordering: .acquiring) > 0, !applied.isEmpty else { return }
        if queuedCommits.load(ordering: .relaxed) >= Self.maxQueuedCommits {
            if !resyncPending.exchange(true, ordering: .acquiringAndReleasing) { thread?.enqueue([.resync]) }
            return
        }
        queuedCommits.add(1, ordering: .relaxed)
        thread?.enqueue([.commit(applied, committedAt: monotonicMicroseconds())])
    }

    // MARK: On the thread

    private func handle(_ message: Message) {
        switch message {
        case .commit(let applied, let committedAt):
            queuedCommits.subtract(1, ordering: .relaxed)
            process(applied, committedAt: committedAt)
        case .subscribe(let subscription):
            start(subscription)
        case .unsubscribe(let id):
            remove(id)
        case .resync:
            resyncPending.store(false, ordering: .releasing)
            do {
                let head = try reader.read { try $0.head().sequence }
                for group in groups.all { recompute(group, to: head) }
                processed = max(processed, head)
            } catch {
                endAll(ProtocolError(error))
            }
        }
    }

    /// The sequence a window reflects (see `processed`).
    private func sequence(of group: Group) -> UInt64 { max(group.window.sequence, processed) }

    private func start(_ subscription: Subscription) {
        let response: [UInt8]
        do {
            response = try reader.read { snapshot in try firstLine(subscription, snapshot) }
        } catch {
            var line: [UInt8] = []
            let failure = ProtocolError(error)
            Response.appendFailure(tag: subscription.tag, error: failure, to: &line)
            subscriptions.subtract(1, ordering: .releasing)
            post(
                .started(
                    subscription.connection, id: subscription.id, response: line, collection: nil, sequence: 0,
                    failure: failure.code))
            return
        }
        let window = groupOfSubscription[subscription.id]!.window
        post(
            .started(
                subscription.connection, id: subscription.id, response: response, collection: window.query.collection,
                sequence: window.sequence,
                failure: nil))
    }

    /// The answer to a live query: its first page at the head, or, resumed, the change from the
    /// window at `resumeAfter`. Joins or makes the group at the head.
    private func firstLine(_ subscription: Subscription, _ snapshot: Snapshot) throws -> [UInt8] {
        let head = try snapshot.head().sequence
        if let resumeAfter = subscription.resumeAfter, resumeAfter > head {
            throw ProtocolError(.badRequest, "resumeAfter \(resumeAfter) is beyond the last event, \(head)")
        }
        let live = try snapshot.liveQuery(for: subscription.query)
        let existing = groups.group(identity: live.identity) { sequence(of: $0) == head }
        // Untouched by the commits since it was last moved, it reflects the head.
        existing?.window.advance(to: head)
        let group =
            try existing
            ?? Group(
                window: LiveWindow(
                    live, snapshot: snapshot, rewind: snapshot.liveRewind(of: live.collection, to: head, maxEvents: 0)!)
            )
        let window = group.window
        var since: LiveWindow?
        if let resumeAfter = subscription.resumeAfter,
            let rewind = try snapshot.liveRewind(of: live.collection, to: resumeAfter, maxEvents: resumeHorizon)
        {
            since = try LiveWindow(live, snapshot: snapshot, rewind: rewind)
        }
        if existing == nil { groups.add(group) }
        group.subscribers.append(subscription)
        groupOfSubscription[subscription.id] = group
        var line: [UInt8] = []
        Response.appendSuccess(tag: subscription.tag, to: &line) { writer in
            writer.writeRaw("{\"watching\":true,\"seq\":")
            writer.write(window.sequence)
            if let since {
                writer.writeRaw(",\"resumed\":true")
                let change = LiveChange(
                    from: since.visibleVersions, to: window.visible, sequence: window.sequence, total: window.total)
                if !change.isEmpty || since.total != window.total {
                    writer.writeRaw(",\"change\":")
                    change.write(to: &writer)
                }
            } else {
                writer.writeRaw(",\"items\":[")
                for (index, entry) in window.visible.enumerated() {
                    if index > 0 { writer.bytes.append(UInt8(ascii: ",")) }
                    writer.bytes.append(contentsOf: entry.object)
                }
                writer.writeRaw("],\"total\":")
                writer.write(UInt64(window.total))
                if subscription.resumeAfter != nil { writer.writeRaw(",\"reset\":true") }
            }
            writer.bytes.append(UInt8(ascii: "}"))
        }
        return line
    }

    private func remove(_ id: UInt64) {
        guard let group = groupOfSubscription.removeValue(forKey: id) else { return }
        subscriptions.subtract(1, ordering: .releasing)
        group.subscribers.removeAll { $0.id == id }
        if group.subscribers.isEmpty { groups.remove(group) }
    }

    /// Moves the windows a commit's events enter or leave, and sends each changed window's change.
    /// The events' keys are computed once per order (one view and all its ranges); a window the
    /// commit does not touch costs nothing.
    private func process(_ applied: [StoreWriter.Applied], committedAt: UInt64) {
        let first = applied[0].event.sequence
        let last = applied[applied.count - 1].event.sequence
        defer { processed = max(processed, last) }
        // Rare: a dropped view, or commits not handed over (none subscribed then, or dropped while
        // behind), which leave every window older than them to be read again.
        let dropped = applied.compactMap { event -> String? in
            if case .viewDropped(let name) = event.event.change { return name } else { return nil }
        }
        if !dropped.isEmpty || (processed > 0 && first > processed + 1) {
            for group in groups.all {
                if let name = group.window.query.viewName, dropped.contains(name) {
                    if group.window.query.namesView {
                        end(
                            group,
                            ProtocolError(
                                .notFound, "view \(Names.quoted(name)) was dropped; the live query on it ended"))
                        continue
                    }
                    group.window.dropIndex()
                }
                if first > sequence(of: group) + 1 { recompute(group, to: last) }
            }
        }
        for (group, keys) in groups.touched(by: applied) where !group.subscribers.isEmpty && sequence(of: group) < last
        {
            let query = group.window.query
            let before = group.window.visibleVersions
            let totalBefore = group.window.total
            do {
                for (event, (old, new)) in zip(applied, keys) {
                    try group.window.apply(event, keys: (old.flatMap(query.inRange), new.flatMap(query.inRange)))
                }
                group.window.advance(to: last)
                group.window.trim()
                if group.window.broken {
                    recompute(group, to: last)
                    continue
                }
                if group.window.needsEntries {
                    let filled = try reader.read { snapshot -> Bool in
                        guard
                            let rewind = try snapshot.liveRewind(
                                of: query.collection, to: last, maxEvents: resumeHorizon)
                        else { return false }
                        try group.window.fill(from: snapshot, rewind: rewind)
                        return true
                    }
                    if !filled {
                        recompute(group, to: nil)
                        continue
                    }
                }
                send(group, from: before, total: totalBefore, committedAt: committedAt)
            } catch {
                end(group, ProtocolError(error))
            }
        }
    }

    /// Reads the window again at `sequence` (the head when nil, or when `sequence` is too far
    /// back), and sends the change from what its subscribers have.
    private func recompute(_ group: Group, to sequence: UInt64?) {
        let before = group.window.visibleVersions
        let totalBefore = group.window.total
        do {
            group.window = try reader.read { snapshot in
                let head = try snapshot.head().sequence
                let live = group.window.query
                let rewind =
                    try snapshot.liveRewind(
                        of: live.collection, to: min(sequence ?? head, head), maxEvents: resumeHorizon)
                    ?? snapshot.liveRewind(of: live.collection, to: head, maxEvents: 0)!
                return try LiveWindow(live, snapshot: snapshot, rewind: rewind)
            }
        } catch {
            end(group, ProtocolError(error))
            return
        }
        send(group, from: before, total: totalBefore, committedAt: 0)
    }

    private func send(_ group: Group, from before: [(id: String, version: UInt64)], total: Int, committedAt: UInt64) {
        let window = group.window
        let change = LiveChange(from: before, to: window.visible, sequence: window.sequence, total: window.total)
        guard !change.isEmpty || total != window.total else { return }
        var writer = JSONWriter(capacity: 256)
        change.write(to: &writer)
        for subscriber in group.subscribers {
            post(
                .changed(
                    subscriber.connection, id: subscriber.id, sequence: window.sequence, payload: writer.bytes,
                    committedAt: committedAt))
        }
    }

    private func end(_ group: Group, _ error: ProtocolError) {
        for subscriber in group.subscribers {
            post(.ended(subscriber.connection, id: subscriber.id, error: error))
            groupOfSubscription[subscriber.id] = nil
            subscriptions.subtract(1, ordering: .releasing)
        }
        group.subscribers = []
        groups.remove(group)
    }

    private func endAll(_ error: ProtocolError) {
        log.error("live queries: \(error.message); ending them")
        for group in groups.all { end(group, error) }
    }

    private func post(_ delivery: Delivery) {
        let connection: Connection
        switch delivery {
        case .started(let c, _, _, _, _, _), .changed(let c, _, _, _, _), .ended(let c, _, _): connection = c
        }
        let loop = connection.loop
        outbox[ObjectIdentifier(loop), default: (loop, [])].deliveries.append(delivery)
    }

    /// One message per loop for everything a round of messages produced.
    private func sendOutbox() {
        for (loop, deliveries) in outbox.values { loop.post(.live(deliveries)) }
        outbox.removeAll(keepingCapacity: true)
    }
}
