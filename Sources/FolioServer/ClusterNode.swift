import FolioCluster
import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore
import Foundation
import Glibc
import Synchronization

/// How a cluster node follows the shared log, for `stats`.
struct ClusterStatus: Sendable {
    /// The log's last sequence as last seen in PostgreSQL.
    var logHead: UInt64 = 0
    /// When PostgreSQL last answered (monotonic ms; 0: never).
    var lastContact: UInt64 = 0
    /// Why the last call failed, while PostgreSQL does not answer.
    var unreachable: String?
    /// Set once the node found an event it cannot take: it applies nothing more.
    var diverged: String?
    /// Writes the log refused because another node changed what they read, executed again.
    var retriedWrites = 0
    /// Writes the log took exactly as this node executed them: their transaction was kept.
    var keptWrites = 0
    /// Writes the log took after another node's events, or timed otherwise: this node applied
    /// them from the log, as it applies every other node's.
    var reappliedWrites = 0

    func json(applied: UInt64, now: UInt64) -> JSON {
        var object: JSONObject = [
            "state": .string(diverged != nil ? "diverged" : unreachable != nil ? "unreachable" : "following"),
            "appliedSeq": .int(Int64(applied)),
            "logHeadSeq": .int(Int64(logHead)),
            "behind": .int(Int64(logHead > applied ? logHead - applied : 0)),
            "lagSeconds": lastContact == 0 ? .null : .double(Double(now - min(now, lastContact)) / 1000),
            "retriedWrites": .int(Int64(retriedWrites)),
            "keptWrites": .int(Int64(keptWrites)),
            "reappliedWrites": .int(Int64(reappliedWrites)),
        ]
        if let unreachable { object["unreachable"] = .string(unreachable) }
        if let diverged { object["diverged"] = .string(diverged) }
        return .object(object)
    }
}

/// Cluster mode's writer (docs/CLUSTER.md): in place of the local group commit, one thread that
/// follows the shared log in PostgreSQL and submits this node's writes to it.
///
/// Each round it applies what other nodes appended, then executes the queued writes on the store
/// as a group commit would, without storing them (`Store.propose`), submits the proposals in one
/// `folio_append` call, applies the log up to the call's head, and answers each write from its
/// events as applied. A write refused because another node changed what it read is executed again
/// after catching up, with every write after it in the group (their execution followed it), up to
/// `maxAttempts` times. A second thread LISTENs for the log's notifications, to start a round
/// when another node appends; the round also runs every `pollInterval` in case one is lost.
final class ClusterNode: @unchecked Sendable {
    static let maxAttempts = 8
    static let pollInterval = 0.2
    /// Events fetched and applied per LMDB transaction.
    static let chunk = 1000

    private let store: Store
    private let logStore: ClusterLog
    private let configuration: ServerConfiguration
    private let statistics: ServerStatistics
    private let log: Log
    private let publish: @Sendable ([StoreWriter.Applied]) -> Void
    private let deliver: @Sendable ([Writer.Outcome]) -> Void

    private let lock = ConditionLock()
    private var queue: [Writer.Job] = []
    private var woken = false
    private var stopping = false
    private var thread: pthread_t?
    private var listener: pthread_t?
    private let listening = Atomic<Bool>(false)

    // The writing thread's own.
    private var ids = ObjectIDGenerator()
    private var lastTimestamp: Int64
    /// When this node last found itself at the log's head (monotonic ms): after a catch-up, or
    /// an append whose answer held every event up to the head.
    private var atHeadSince: UInt64 = 0
    /// Whether this node caught up with the log since it took the round's writes: only then is a
    /// write it refuses (`not_found`, `conflict`, ...) refused as fresh as the request.
    private var caughtUpForRound = false
    private var applied: UInt64
    /// While a round answers writes: the events applied since it began, by sequence.
    private var collected: [UInt64: StoreWriter.Applied] = [:]
    private var collecting = false

    init(
        store: Store, conninfo: String, configuration: ServerConfiguration, statistics: ServerStatistics, log: Log,
        publish: @escaping @Sendable ([StoreWriter.Applied]) -> Void,
        deliver: @escaping @Sendable ([Writer.Outcome]) -> Void
    ) throws {
        self.store = store
        logStore = ClusterLog(conninfo: conninfo, timeout: configuration.clusterTimeoutSeconds)
        self.configuration = configuration
        self.statistics = statistics
        self.log = log
        self.publish = publish
        self.deliver = deliver
        (applied, lastTimestamp) = try store.read { snapshot in
            (try snapshot.head().sequence, (try snapshot.lastTimestamp()?.milliseconds ?? -1) + 1)
        }
        statistics.cluster.withLock { $0 = ClusterStatus() }
    }

    /// Connects, checks that this store's history is a prefix of the log's, and catches up to the
    /// log's head as it was, calling `progress(applied, head)` now and then. Throws when PostgreSQL
    /// cannot be reached or the histories differ: a node does not start on either.
    func join(progress: (UInt64, UInt64) -> Void) throws {
        let head: ClusterLog.Head
        do {
            try logStore.prepare()
            head = try logStore.head()
        } catch let error as ClusterLogError where applied > 0 {
            switch error {
            case .unreachable, .unavailable:
                // A node with a copy serves reads of it while PostgreSQL is away, as it would had it
                // been running: the chain check of the first event it applies later covers the
                // check skipped here.
                log.notice(
                    "cluster: \(error); serving reads of this node's copy (event \(applied)) until PostgreSQL answers")
                noteFailure(error)
                return
            default:
                throw error
            }
        }
        if applied > head.sequence {
            throw ServerError.cluster(
                "this data directory holds \(applied) events and the log in PostgreSQL only \(head.sequence): it belongs to another log, "
                    + "or the log lost events. Start a node of this log from an empty data directory")
        }
        if applied > 0 {
            let local = try store.read { try $0.head().hash }
            guard let logged = try logStore.hash(of: applied), logged == local.bytes else {
                throw ServerError.cluster(
                    "event \(applied) of this data directory differs from the log's (chain hash \(local.hex) here): it belongs to another log. "
                        + "Start a node of this log from an empty data directory")
            }
        }
        var lastReport = 0.0
        let prefetcher =
            head.sequence - applied > UInt64(Self.chunk)
            ? Prefetcher(conninfo: logStore.conninfo, timeout: logStore.timeout, after: applied, through: head.sequence)
            : nil
        defer { prefetcher?.stop() }
        while applied < head.sequence {
            if let prefetcher {
                let events = try prefetcher.next()
                guard !events.isEmpty else { break }
                try applyChunk(events)
            } else {
                try catchUpChunk()
            }
            let now = Date().timeIntervalSince1970
            if now - lastReport >= 1 || applied >= head.sequence {
                lastReport = now
                progress(applied, head.sequence)
            }
        }
        noteContact(head: head.sequence)
    }

    /// Fetches the log's chunks on a thread of its own while the joining node applies the one
    /// before: a fresh node's catch-up costs the larger of the two, not their sum.
    private final class Prefetcher: @unchecked Sendable {
        private let lock = ConditionLock()
        private var ready: [Result<[LoggedEvent], any Error>] = []
        private var stopping = false
        private var thread: pthread_t?

        init(conninfo: String, timeout: Double, after: UInt64, through last: UInt64) {
            thread = startThread(name: "folio-prefetch") { [self] in
                let log = ClusterLog(conninfo: conninfo, timeout: timeout)
                defer { log.close() }
                var position = after
                while position < last {
                    let chunk = Result {
                        var events = try log.events(after: position, limit: ClusterNode.chunk)
                        // Decoded here, while the cluster thread applies the chunk before.
                        for index in events.indices { events[index].decodeAhead() }
                        return events
                    }
                    let done = lock.withLock { () -> Bool in
                        // Two chunks ahead at most.
                        while ready.count >= 2 && !stopping { lock.wait() }
                        ready.append(chunk)
                        lock.broadcast()
                        return stopping
                    }
                    guard !done, case .success(let events) = chunk, let end = events.last?.sequence else { return }
                    position = end
                }
                lock.withLock {
                    ready.append(.success([]))
                    lock.broadcast()
                }
            }
        }

        /// The next chunk in order; empty at the end.
        func next() throws -> [LoggedEvent] {
            try lock.withLock {
                while ready.isEmpty { lock.wait() }
                let first = ready.removeFirst()
                lock.broadcast()
                return first
            }.get()
        }

        func stop() {
            lock.withLock {
                stopping = true
                lock.broadcast()
            }
            if let thread { pthread_join(thread, nil) }
            thread = nil
        }
    }

    func start() {
        thread = startThread(name: "folio-cluster") { [self] in run() }
        listening.store(true, ordering: .releasing)
        listener = startThread(name: "folio-listen") { [self] in listen() }
    }

    func submit(_ jobs: [Writer.Job]) {
        lock.withLock {
            queue.append(contentsOf: jobs)
            lock.signal()
        }
    }

    /// Starts a round now: the log has news.
    func wake() {
        lock.withLock {
            woken = true
            lock.signal()
        }
    }

    /// Answers every queued write, then ends both threads.
    func stop() {
        lock.withLock {
            stopping = true
            lock.signal()
        }
        if let thread { pthread_join(thread, nil) }
        thread = nil
        listening.store(false, ordering: .releasing)
        if let listener { pthread_join(listener, nil) }
        listener = nil
        logStore.close()
    }

    // MARK: The writing thread

    /// A round with nothing to write (a wake-up, the poll) catches up. A round with writes
    /// proposes at once, on the copy as it is, unless this node last knew itself at the log's head
    /// over `pollInterval` ago: a catch-up first would cost one more query to PostgreSQL and one
    /// more LMDB commit per round, while the append answers with every event after the snapshot,
    /// which the node applies with its own in one commit, and refuses only the writes whose read
    /// keys another node changed (executed again after a catch-up). A write this node refuses
    /// itself is refused only after a catch-up (`process`).
    private func run() {
        while true {
            let (jobs, ending): ([Writer.Job], Bool) = lock.withLock {
                if queue.isEmpty && !woken && !stopping { lock.wait(seconds: Self.pollInterval) }
                woken = false
                let count = min(queue.count, configuration.maxBatchCount)
                defer { queue.removeFirst(count) }
                return (Array(queue.prefix(count)), stopping && queue.count == count)
            }
            statistics.writerQueue.subtract(jobs.count, ordering: .relaxed)
            caughtUpForRound = false
            if jobs.isEmpty || monotonicMilliseconds() - atHeadSince >= UInt64(Self.pollInterval * 1000) {
                catchUp()
            }
            if !jobs.isEmpty { process(jobs) }
            if ending { return }
        }
    }

    /// Applies what the log holds beyond this node's last event; gives up quietly on a failure
    /// (noted in the status): the next round tries again.
    private func catchUp() {
        guard diverged == nil else { return }
        do {
            while try catchUpChunk() == Self.chunk {}
            atHeadSince = monotonicMilliseconds()
            caughtUpForRound = true
        } catch let error as ClusterLogError {
            noteFailure(error)
        } catch let error as ClusterDivergence {
            diverge(error)
        } catch {
            log.error("cluster: applying the log failed: \(error); trying again")
        }
    }

    /// Applies the events `folio_append` returned (those after this node's last, which it was at).
    private func apply(_ events: [LoggedEvent]) {
        guard diverged == nil, let first = events.first, first.sequence == applied + 1 else { return }
        do {
            try applyChunk(events)
        } catch let error as ClusterDivergence {
            diverge(error)
        } catch {
            log.error("cluster: applying the log failed: \(error); trying again")
        }
    }

    /// Fetches and applies up to `chunk` events; returns how many.
    @discardableResult
    private func catchUpChunk() throws -> Int {
        let events = try logStore.events(after: applied, limit: Self.chunk)
        noteContact(head: events.last?.sequence ?? applied)
        guard !events.isEmpty else { return 0 }
        try applyChunk(events)
        return events.count
    }

    private func applyChunk(_ events: [LoggedEvent]) throws {
        record(try store.appendLogged(events))
    }

    /// Notes events now stored on this node, in order: applied from the log, or kept as executed.
    private func record(_ done: [StoreWriter.Applied]) {
        guard let last = done.last?.event else { return }
        applied = last.sequence
        // The log times a write no earlier than its last event (`greatest(at, head.at)`): a write
        // accepted here is timed so too, so that its execution can be kept as the log composes it.
        lastTimestamp = max(lastTimestamp, last.timestamp.milliseconds)
        if collecting { for event in done { collected[event.event.sequence] = event } }
        statistics.applied.advance(to: applied)
        publish(done)
    }

    /// Whether the log appended exactly the events of `writes` as this node executed them after
    /// `snapshot`: every write accepted, nothing of another node's in between, and each event with
    /// the same sequence, canonical bytes (so the same time) and chain hash.
    static func logHolds(_ writes: [ProposedWrite], exactlyAs decision: ClusterLog.Decision, after snapshot: UInt64)
        -> Bool
    {
        guard decision.firstSequences.allSatisfy({ $0 != nil }) else { return false }
        var sequence = snapshot
        var index = 0
        for write in writes {
            for executed in write.appended {
                sequence += 1
                guard index < decision.events.count else { return false }
                let logged = decision.events[index]
                guard logged.sequence == sequence, executed.event.sequence == sequence,
                    sameBytes(logged.canonical, executed.canonicalEvent),
                    sameBytes(logged.hash, executed.chainHash.bytes)
                else { return false }
                index += 1
            }
        }
        return index == decision.events.count && decision.head == sequence
    }

    private func process(_ jobs: [Writer.Job]) {
        defer {
            collecting = false
            collected.removeAll(keepingCapacity: true)
        }
        var outcomes: [Writer.Outcome?] = Array(repeating: nil, count: jobs.count)
        var start = 0
        var attempts = 0
        while start < jobs.count {
            if let reason = diverged {
                let refusal = ProtocolError(
                    .unavailable,
                    "the write was not stored: this node stopped following the log (\(reason)); send it to another node"
                )
                for index in start..<jobs.count {
                    outcomes[index] = Writer.Outcome(job: jobs[index], result: .failure(refusal))
                }
                break
            }
            let round = Array(jobs[start...])
            collecting = true
            let acceptance = nextTimestamp()
            var proposals: [Proposal] = []
            var kept = false
            var decision: ClusterLog.Decision?
            var appendFailure: (any Error)?
            var staleRefusal = false
            do {
                // The log is asked inside the transaction that executed the writes: if it appended
                // exactly their events, that transaction is kept, and nothing is executed twice.
                (proposals, _, kept) = try store.propose(
                    round.map { ($0.request, Acceptance(timestamp: acceptance, origin: $0.origin)) }, ids: &ids
                ) { executed, sequence in
                    proposals = executed
                    // A refusal must be as fresh as the request: another node may have made the
                    // write possible just before it came (created the object, moved the version).
                    if !self.caughtUpForRound,
                        executed.contains(where: { if case .settled(.failure) = $0 { true } else { false } })
                    {
                        staleRefusal = true
                        return false
                    }
                    let writes = executed.compactMap { if case .propose(let write) = $0 { write } else { nil } }
                    guard !writes.isEmpty else { return false }
                    do {
                        let decided = try self.logStore.append(snapshot: sequence, at: acceptance, writes)
                        decision = decided
                        return Self.logHolds(writes, exactlyAs: decided, after: sequence)
                    } catch {
                        appendFailure = error
                        return false
                    }
                }
            } catch {
                if decision == nil {
                    log.error("cluster: executing \(round.count) writes failed: \(error)")
                    let failure = ProtocolError(
                        .unavailable, "the write was not stored: \(ProtocolError(error).message)")
                    for index in start..<jobs.count {
                        outcomes[index] = Writer.Outcome(job: jobs[index], result: .failure(failure))
                    }
                    break
                }
                // The log took the writes, but this node could not keep its transaction: it applies
                // the log's events instead, as for any other round.
                log.error(
                    "cluster: keeping \(round.count) writes the log took failed: \(error); applying them from the log")
                kept = false
            }
            if staleRefusal {
                catchUp()
                // Should PostgreSQL not answer, the refusal is answered from this copy as it is.
                caughtUpForRound = true
                continue
            }
            var proposed: [(index: Int, write: ProposedWrite)] = []
            for (offset, proposal) in proposals.enumerated() {
                if case .propose(let write) = proposal { proposed.append((start + offset, write)) }
            }
            var firstRefused = jobs.count
            if let error = appendFailure {
                let failure: ProtocolError
                switch error {
                case ClusterLogError.behind(let reason):
                    diverge(ClusterDivergence(sequence: applied, "\(reason): PostgreSQL lost events this node applied"))
                    failure = ProtocolError(
                        .unavailable,
                        "the write was not stored: this node stopped following the log (it lost events this node applied); "
                            + "send it to another node")
                case let error as ClusterLogError:
                    noteFailure(error)
                    switch error {
                    case .unavailable(let reason):
                        failure = ProtocolError(
                            .unavailable,
                            "PostgreSQL, which holds the cluster's log, did not answer (\(reason)): the write may or may not have been stored; "
                                + "send it again with the same requestKey to be sure it is stored once")
                    case .unreachable(let reason):
                        failure = ProtocolError(
                            .unavailable,
                            "the write was not stored: PostgreSQL, which holds the cluster's log, cannot be reached (\(reason))"
                        )
                    case .unexpected:
                        // Read from the answer of a call that returned: the log may have taken it.
                        failure = ProtocolError(
                            .unavailable,
                            "the cluster's log took the write or not, and its answer could not be read (\(error)); "
                                + "send it again with the same requestKey to be sure it is stored once")
                    default:
                        failure = ProtocolError(.unavailable, "the write was not stored: \(error)")
                    }
                default:
                    failure = ProtocolError(.unavailable, "the write was not stored: \(error)")
                }
                for index in start..<jobs.count {
                    outcomes[index] = Writer.Outcome(job: jobs[index], result: .failure(failure))
                }
                break
            }
            if let decision {
                noteContact(head: decision.head)
                if kept {
                    // Answered as executed (below): nothing to collect from the log.
                    collecting = false
                    record(proposed.flatMap(\.write.appended))
                } else {
                    apply(decision.events)
                }
                statistics.cluster.withLock { status in
                    let accepted = decision.firstSequences.count(where: { $0 != nil })
                    if kept { status?.keptWrites += accepted } else { status?.reappliedWrites += accepted }
                }
                if decision.head > applied {
                    catchUp()
                } else if applied == decision.head {
                    atHeadSince = monotonicMilliseconds()
                }
                for (slot, first) in decision.firstSequences.enumerated() {
                    let (index, write) = proposed[slot]
                    guard let first else {
                        firstRefused = min(firstRefused, index)
                        continue
                    }
                    outcomes[index] =
                        kept
                        ? Writer.Outcome(job: jobs[index], result: .success(write.executed))
                        : answer(jobs[index], write, first: first)
                }
            }
            for (offset, proposal) in proposals.enumerated() where start + offset < firstRefused {
                if case .settled(let result) = proposal {
                    outcomes[start + offset] = Writer.Outcome(
                        job: jobs[start + offset], result: result.mapError { ProtocolError(storeError: $0) })
                }
            }
            guard firstRefused < jobs.count else { break }
            attempts += 1
            statistics.cluster.withLock { $0?.retriedWrites += jobs.count - firstRefused }
            if attempts >= Self.maxAttempts {
                let refusal = ProtocolError(
                    .unavailable,
                    "the write was not stored: \(Self.maxAttempts) times another node changed what it read before the log took it; send it again"
                )
                for index in firstRefused..<jobs.count {
                    outcomes[index] = Writer.Outcome(job: jobs[index], result: .failure(refusal))
                }
                break
            }
            start = firstRefused
            // Another node appended what this write read; the log holds it now.
            catchUp()
        }
        // Each outcome moved out of `outcomes`, not copied: an outcome holds its request and events.
        var answered: [Writer.Outcome] = []
        answered.reserveCapacity(jobs.count)
        var appended = 0
        for index in jobs.indices {
            var taken: Writer.Outcome? = nil
            swap(&taken, &outcomes[index])
            guard let outcome = taken else {
                answered.append(
                    Writer.Outcome(
                        job: jobs[index], result: .failure(ProtocolError(.internal, "the write got no answer"))))
                continue
            }
            if case .success(let done) = outcome.result { appended += done.appended.count }
            answered.append(outcome)
        }
        if appended > 0 { statistics.commits.add(1, ordering: .relaxed) }
        statistics.committedWrites.add(appended, ordering: .relaxed)
        deliver(answered)
    }

    /// The answer to a write the log accepted at `first`, once this node has applied its events.
    private func answer(_ job: Writer.Job, _ write: ProposedWrite, first: UInt64) -> Writer.Outcome {
        let last = first + UInt64(write.events.count) - 1
        guard applied >= last else {
            return Writer.Outcome(
                job: job,
                result: .failure(
                    ProtocolError(
                        .unavailable,
                        "the write was stored in the cluster's log as events \(first)-\(last), but this node has applied only up to \(applied): "
                            + "read it with minSeq \(last)")))
        }
        do {
            let events = (first...last).compactMap { collected[$0] }
            return Writer.Outcome(job: job, result: .success(try write.outcome(applied: events)))
        } catch {
            return Writer.Outcome(
                job: job,
                result: .failure(
                    ProtocolError(
                        .internal,
                        "the write was stored in the cluster's log as events \(first)-\(last), but its answer failed: \(error)"
                    )))
        }
    }

    private func nextTimestamp() -> Timestamp {
        lastTimestamp = max(lastTimestamp, Timestamp.now.milliseconds)
        return Timestamp(milliseconds: lastTimestamp)
    }

    private var diverged: String? { statistics.cluster.withLock { $0?.diverged } }

    private func diverge(_ error: ClusterDivergence) {
        log.error(
            "cluster: this node stops following the log at \(error): it serves reads of the state up to event \(applied) "
                + "and refuses writes. Rebuild it from an empty data directory")
        statistics.cluster.withLock { $0?.diverged = "\(error)" }
    }

    private func noteContact(head: UInt64) {
        let now = monotonicMilliseconds()
        let recovered = statistics.cluster.withLock { status -> String? in
            guard var current = status else { return nil }
            let was = current.unreachable
            current.lastContact = now
            current.logHead = max(current.logHead, head)
            current.unreachable = nil
            status = current
            return was
        }
        if let recovered { log.notice("cluster: PostgreSQL answers again (it did not: \(recovered))") }
    }

    private func noteFailure(_ error: ClusterLogError) {
        let first = statistics.cluster.withLock { status -> Bool in
            let first = status?.unreachable == nil
            status?.unreachable = "\(error)"
            return first
        }
        if first {
            log.error(
                "cluster: \(error); writes are refused and reads served from this node's copy until it answers again")
        }
    }

    /// The connection string without its password, for the log.
    static func redacted(_ conninfo: String) -> String {
        conninfo.split(separator: " ").map { $0.lowercased().hasPrefix("password=") ? "password=…" : String($0) }
            .joined(separator: " ")
    }

    // MARK: The listening thread

    /// LISTENs on `folio_log` and wakes the writing thread when another node appended; reconnects
    /// after a failure, at most once a second.
    private func listen() {
        var connection: PostgresConnection?
        while listening.load(ordering: .acquiring) {
            do {
                if connection == nil || connection!.isBroken {
                    connection?.close()
                    connection = try PostgresConnection(logStore.conninfo, timeout: configuration.clusterTimeoutSeconds)
                    try connection!.execute("LISTEN folio_log", [], timeout: configuration.clusterTimeoutSeconds)
                    // Whatever was appended while not listening.
                    wake()
                }
                let notes = try connection!.notifications(timeout: 0.5)
                // A node's own appends are announced too: by then it has usually applied them.
                if notes.contains(where: { UInt64($0.payload).map { $0 > statistics.applied.current } ?? true }) {
                    wake()
                }
            } catch {
                connection?.close()
                connection = nil
                var pause = timespec(tv_sec: 1, tv_nsec: 0)
                nanosleep(&pause, nil)
            }
        }
        connection?.close()
    }
}
