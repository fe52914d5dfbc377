import FolioJSON
import Synchronization

extension Query {
    /// The query's window (its first `limit` records, 100 by default) kept up to date by the server
    /// (a live query, `/work/notes/live-queries.md`): the first element is the window, each later one
    /// the window after a committed transaction that changed it or `total`.
    ///
    /// ```swift
    /// for try await snapshot in TodoListItem.query(\.done == false).sort(\.title).limit(20).live(on: folio) {
    ///     show(snapshot.items)
    /// }
    /// ```
    ///
    /// After a dropped connection or a `lagging` end, it reconnects and resumes where it stopped
    /// (`resumeAfter`): the next element brings the window up to date, with nothing lost. Leaving
    /// the loop ends the live query on the server. Throws `notFound` if its view is dropped.
    public func live(on folio: Folio) -> LiveQuery<Record> {
        LiveQuery(query: self, folio: folio)
    }
}

/// One state of a live query's window.
public struct LiveSnapshot<Record: FolioRecord> {
    /// The window: the first `limit` records of the query's order.
    public let items: [Record]
    /// How many records match the query in all.
    public let total: Int
    /// The log position the window reflects.
    public let seq: Int
    /// How the window changed since the previous snapshot; nil for a whole new window (the first,
    /// or after the server could not resume and sent it again).
    public let change: LiveChange?
}

extension LiveSnapshot: Sendable where Record: Sendable {}

/// The difference between two windows of a live query, as the server sent it.
public struct LiveChange: Sendable, Equatable {
    public struct Removal: Sendable, Equatable {
        /// Index in the previous window.
        public let index: Int
        public let id: String
    }
    public struct Move: Sendable, Equatable {
        /// Index in the previous window.
        public let from: Int
        /// Index in the new window.
        public let to: Int
        public let id: String
    }
    public let removed: [Removal]
    /// Indices in the new window of the records that entered it.
    public let inserted: [Int]
    /// Indices in the new window of the records that changed in place (or moved and changed).
    public let updated: [Int]
    public let moved: [Move]
}

/// The snapshots of a live query (`Query.live(on:)`).
public struct LiveQuery<Record: FolioRecord>: AsyncSequence, Sendable {
    public typealias Element = LiveSnapshot<Record>
    let query: Query<Record>
    let folio: Folio

    public func makeAsyncIterator() -> Iterator { Iterator(query: query, folio: folio) }

    /// Keeps the window by applying the server's change lines; ends the server's live query when
    /// it is released.
    public final class Iterator: AsyncIteratorProtocol {
        private let query: Query<Record>
        private let folio: Folio
        private var window = LiveWindow<Record>()
        /// The last seq applied: what a resume starts after.
        private var seq: Int?
        private var watch: (connection: Connection, tag: Int64)?
        private var lines: AsyncStream<Connection.StreamEvent>.Iterator?
        private var isFinished = false
        /// Set when more change lines waited than `bufferedLines`: the live query is then resumed
        /// rather than buffered without bound (the client's own `lagging`).
        private var overflow: Overflow?

        /// Change lines buffered for a consumer that does not keep up, at most.
        static var bufferedLines: Int { 10_000 }

        init(query: Query<Record>, folio: Folio) {
            self.query = query
            self.folio = folio
        }

        deinit { stopWatching() }

        public func next() async throws -> LiveSnapshot<Record>? { try await next(isolation: nil) }

        public func next(isolation actor: isolated (any Actor)?) async throws -> LiveSnapshot<Record>? {
            while !isFinished {
                guard var lines else {
                    if let snapshot = try await start(isolation: actor) { return snapshot }
                    continue
                }
                let event = await lines.next(isolation: actor)
                self.lines = lines
                switch event {
                case nil where overflow?.happened == true:
                    // Too many lines waited: resume from the last one applied.
                    stopWatching()
                    self.lines = nil
                case nil:
                    // The consuming task was cancelled.
                    isFinished = true
                    stopWatching()
                case .ended?:
                    // The connection dropped: resume on a new one.
                    self.lines = nil
                    watch = nil
                case .line(let object)?:
                    if case .object(let change)? = object["change"] { return try apply(change) }
                    guard case .object(let error)? = object["error"] else { continue }
                    // The server ended the live query; its tag is free again.
                    self.lines = nil
                    watch?.connection.removeStream(watch!.tag)
                    watch = nil
                    let failure = FolioError(serverError: error)
                    guard case .lagging = failure else {
                        isFinished = true
                        throw failure
                    }
                }
            }
            return nil
        }

        /// Sends the live query (resuming after `seq` if there is one); the fresh window, the
        /// resumed change, or nil when the resume found nothing changed.
        private func start(isolation actor: isolated (any Actor)?) async throws -> LiveSnapshot<Record>? {
            guard !query.hasIncludes else { throw FolioError.badRequest("a live query takes no include") }
            var request: JSONObject = ["op": "watch", "query": .object(try query.fields(paging: true))]
            if let seq { request["resumeAfter"] = .int(Int64(seq)) }
            var attempts = 0
            while true {
                let connection = try await folio.connection(waiting: seq != nil || attempts > 0)
                let tag = connection.makeTag()
                let (stream, continuation) = AsyncStream<Connection.StreamEvent>.makeStream(
                    bufferingPolicy: .bufferingOldest(Self.bufferedLines))
                let overflow = Overflow()
                let envelope: JSONObject
                do {
                    envelope = try await connection.send(request, tag: tag) { event in
                        if case .dropped = continuation.yield(event) {
                            overflow.happened = true
                            continuation.finish()
                        }
                        if case .ended = event { continuation.finish() }
                    }
                } catch FolioError.connectionLost(let reason) {
                    attempts += 1
                    if attempts >= 5 { throw FolioError.connectionLost(reason) }
                    continue
                } catch let error as Connection.NotSent {
                    attempts += 1
                    if attempts >= 5 { throw error.reason }
                    continue
                }
                let result: JSON
                do {
                    result = try Folio.result(of: envelope)
                } catch {
                    connection.removeStream(tag)
                    isFinished = true
                    throw error
                }
                watch = (connection, tag)
                lines = stream.makeAsyncIterator()
                self.overflow = overflow
                guard case .object(let answer) = result, let newSeq = answer["seq"]?.integerValue else {
                    throw FolioError.decoding("a live query answered \(result)")
                }
                if answer["resumed"] == .bool(true) {
                    if case .object(let change)? = answer["change"] { return try apply(change) }
                    seq = Int(newSeq)
                    return nil
                }
                guard case .array(let items)? = answer["items"] else {
                    throw FolioError.decoding("a live query answered \(result)")
                }
                try window.replace(with: items, total: Int(answer["total"]?.integerValue ?? Int64(items.count)))
                seq = Int(newSeq)
                return snapshot(change: nil)
            }
        }

        private func apply(_ change: JSONObject) throws -> LiveSnapshot<Record> {
            let applied = try window.apply(change)
            if let newSeq = change["seq"]?.integerValue { seq = Int(newSeq) }
            return snapshot(change: applied)
        }

        private func snapshot(change: LiveChange?) -> LiveSnapshot<Record> {
            LiveSnapshot(items: window.records, total: window.total, seq: seq ?? 0, change: change)
        }

        /// Ends the server's live query (`unwatch`), without waiting for the answer.
        private func stopWatching() {
            guard let (connection, tag) = watch else { return }
            watch = nil
            connection.removeStream(tag)
            Task { _ = try? await connection.send(["op": "unwatch", "watch": .int(tag)], tag: connection.makeTag()) }
        }
    }
}

/// Whether a live query's buffer overflowed (set on the reading thread, read by the consumer).
private final class Overflow: Sendable {
    private let flag = Mutex(false)
    var happened: Bool {
        get { flag.withLock { $0 } }
        set { flag.withLock { $0 = newValue } }
    }
}
