import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore
import Glibc
import LMDB
import Synchronization

#if DEBUG
    import Failpoints
#endif

/// The one thread that writes. It takes every queued command, applies them in one LMDB write
/// transaction, each in its own nested transaction, commits once (group commit), and only then hands
/// the outcomes back to the connections' event loops. A command that fails changes nothing and
/// leaves the others in its batch alone; a commit that fails fails every command of the batch.
///
/// With full durability LMDB runs with `MDB_NOMETASYNC`: a commit syncs its data pages, then writes
/// the meta page that makes them current without syncing it. The `SyncConfirmer` syncs that meta
/// page on its own thread and only then lets the batch be answered, while this thread already
/// applies the next batch: the second sync of every commit leaves the writer's path.
/// With the journal (`--journal on`, the default with full durability) this thread hands each
/// batch's events to the journal's thread just before the commit, which LMDB makes without
/// syncing, so the journal's write and sync run while LMDB commits; a commit that fails after that
/// is followed by a cancel of the record. The `Checkpointer` flushes data.mdb now and then.
///
/// A failed flush of `data.mdb` halts it (`halt`): pages already committed may not be on disk,
/// and Linux does not report the failure twice, so no later write can be acknowledged safely.
/// From then on every write is answered `unavailable` without touching LMDB, and `onHalt` asks the
/// daemon to stop; a restart recovers from what is on disk. A commit that failed without a failed
/// flush (a full disk refusing a `pwrite`) left the last commit intact: writes go on.
final class Writer: @unchecked Sendable {
    /// A write on its way from an event loop to its answer. A class: it goes through a queue, a
    /// batch, an outcome, the journal's confirmation and a loop's mailbox, and as a struct each
    /// step copied it, a retain and a release for each of its references (the request's command,
    /// strings and arrays among them).
    final class Job: Sendable {
        let request: WriteRequest
        /// The op's table entry: its name and the role it needs.
        let spec: OperationSpec
        let origin: Origin
        let tag: Tag?
        let connection: Connection
        let arrival: Connection.Arrival
        /// The blob (hex SHA-256) a `file.put` stored and pins until it is answered, so that no
        /// sweep removes it before its event commits.
        let pinnedBlob: String?
        /// Bytes of the request line, to bound batches.
        var size: Int { arrival.size }

        init(
            request: WriteRequest, spec: OperationSpec, origin: Origin, tag: Tag?, connection: Connection,
            arrival: Connection.Arrival,
            pinnedBlob: String? = nil
        ) {
            self.request = request
            self.spec = spec
            self.origin = origin
            self.tag = tag
            self.connection = connection
            self.arrival = arrival
            self.pinnedBlob = pinnedBlob
        }
    }

    struct Outcome {
        let job: Job
        let result: Result<WriteOutcome, ProtocolError>
    }

    private let store: Store
    private let configuration: ServerConfiguration
    private let statistics: ServerStatistics
    private let log: Log
    private var work: WorkThread<Job>?
    private var ids = ObjectIDGenerator()
    private var lastTimestamp: Int64
    /// Syncs committed batches and answers them, in commit order (full durability only).
    private var confirmer: SyncConfirmer?
    /// With `--journal on`: makes data.mdb durable now and then, so the journal can be reused.
    private var checkpointer: Checkpointer?
    /// Keeps the data file longer than its pages, so commits that sync do not grow it.
    private var reserve: ReserveKeeper?
    /// Called after each commit is confirmed, in commit order, with the events it holds.
    private let committed: @Sendable ([StoreWriter.Applied]) -> Void
    /// Why writes stopped (`halt`), once they have.
    private let haltReason = Mutex<String?>(nil)
    /// Called once, by the thread that halts the writer.
    private let onHalt: @Sendable () -> Void
    /// Cluster mode (`--log postgres:`): writes go to the shared log through it instead of the
    /// local group commit.
    private let cluster: ClusterNode?
    /// The writer's thread is applying a batch.
    private let busy = Atomic<Bool>(false)
    /// `submit` woke the journal's thread for the next batch (`SyncConfirmer.expectRecord`).
    private let anticipatedAtSubmit = Atomic<Bool>(false)

    init(
        store: Store, configuration: ServerConfiguration, statistics: ServerStatistics, log: Log,
        onHalt: @escaping @Sendable () -> Void = {}, committed: @escaping @Sendable ([StoreWriter.Applied]) -> Void
    ) throws {
        #if DEBUG
            try Failpoint.checkConfiguration()
        #endif
        self.store = store
        self.configuration = configuration
        self.statistics = statistics
        self.log = log
        self.onHalt = onHalt
        self.committed = committed
        // One past the last event's time: ids made now sort after every id made before a restart.
        lastTimestamp = (try store.read { try $0.lastTimestamp()?.milliseconds } ?? -1) + 1
        cluster = try configuration.clusterLog.map { conninfo in
            try ClusterNode(
                store: store, conninfo: conninfo, configuration: configuration, statistics: statistics, log: log,
                publish: committed,
                deliver: { Writer.deliver($0) })
        }
    }

    /// Cluster mode: checks this store against the shared log and catches up with it (see
    /// `ClusterNode.join`). Call before `start`.
    func joinCluster(progress: (UInt64, UInt64) -> Void) throws {
        try cluster?.join(progress: progress)
    }

    func start() {
        if let cluster {
            cluster.start()
            return
        }
        if configuration.durability == .full {
            let durability: SyncConfirmer.Durability = store.journal.map { .journal($0) } ?? .lmdb(store.environment)
            confirmer = SyncConfirmer(
                durability, metrics: statistics.metrics, halt: { [self] reason in halt(reason) },
                release: { [self] outcomes in release(outcomes) })
            if let journal = store.journal {
                checkpointer = Checkpointer(journal: journal) { [self] reason in halt(reason) }
            }
        }
        // Only commits that sync pay for growing the file; journaled ones sync nothing.
        if configuration.durability != .none && store.journal == nil {
            reserve = ReserveKeeper(environment: store.environment, log: log)
        }
        let (maxCount, maxBytes) = (configuration.maxBatchCount, configuration.maxBatchBytes)
        let statistics = self.statistics
        // The writer waits for a whole write's round trip (the journal's sync included) where a
        // loop waits for one client's next request: four times the loops' window.
        let idlePoll = UInt64(configuration.idlePollMicroseconds) * Self.idlePollFactor
        work = WorkThread(
            name: "folio-writer", idlePollMicroseconds: idlePoll,
            foundWhilePolling: { statistics.writerPollFinds.add(1, ordering: .relaxed) },
            // After a lone write only: a client writing one at a time waits for the writer's
            // wake-up; when writes come in batches, they queue while the writer works, and a look
            // would take the CPU that the event loops need (measured: 11% more CPU a create at 16
            // clients with the writer looking after every batch).
            pollsAfter: { $0.count == 1 },
            take: { queue in
                // As many as wait, up to the batch's bounds in count and bytes (at least one).
                var count = 0
                var bytes = 0
                while count < queue.count && count < maxCount && (count == 0 || bytes + queue[count].size <= maxBytes) {
                    bytes += queue[count].size
                    count += 1
                }
                defer { queue.removeFirst(count) }
                statistics.writerQueue.subtract(count, ordering: .relaxed)
                return Array(queue.prefix(count))
            },
            handle: { [self] batch in
                busy.store(true, ordering: .relaxed)
                defer { busy.store(false, ordering: .relaxed) }
                // The journal's thread was woken when the write was submitted, or now.
                if !anticipatedAtSubmit.exchange(false, ordering: .relaxed) {
                    confirmer?.expectRecord(
                        writes: batch.count, waiting: statistics.writerQueue.load(ordering: .relaxed))
                }
                let processed = halted.map { refuse(batch, because: $0) } ?? process(batch)
                reserve?.topUpIfLow()
                if let confirmer {
                    confirmer.confirm(
                        processed.outcomes, needsSync: processed.committedData, cancelled: processed.cancelled)
                } else {
                    release(processed.outcomes)
                }
            })
    }

    /// The writer's thread looks for its next write before it sleeps for up to this many times
    /// `--idle-poll` (`WorkThread.idlePollMicroseconds`).
    static let idlePollFactor: UInt64 = 4

    /// Finishes every queued job, then ends the thread.
    func stop() {
        cluster?.stop()
        work?.stop()
        work = nil
        confirmer?.stop()
        confirmer = nil
        checkpointer?.stop(final: halted == nil)
        checkpointer = nil
        reserve?.stop()
        reserve = nil
    }

    /// Queues jobs for the writer's thread. A write that will be a batch of its own (one job, none
    /// queued, the writer idle) wakes the journal's thread too, so that it is up, waiting for the
    /// record, when the writer hands it over (`SyncConfirmer.expectRecord`): the two threads wake
    /// in parallel instead of one after the other.
    func submit(_ jobs: [Job]) {
        let queued = statistics.writerQueue.add(jobs.count, ordering: .relaxed).oldValue
        if let cluster { return cluster.submit(jobs) }
        if jobs.count == 1, queued == 0, !busy.load(ordering: .relaxed),
            confirmer?.expectRecord(writes: 1, waiting: 0) == true
        {
            anticipatedAtSubmit.store(true, ordering: .relaxed)
        }
        work?.enqueue(jobs)
    }

    /// Stops taking writes for good, after a failure that leaves the disk in doubt (`reason` says
    /// which, e.g. "a failed flush of data.mdb (…)"). The first reason wins; logged once.
    func halt(_ reason: String) {
        let first = haltReason.withLock { current in
            guard current == nil else { return false }
            current = reason
            return true
        }
        guard first else { return }
        log.error(
            "\(reason): writes committed before it may not be on disk, and a later flush cannot tell; "
                + "refusing every write and stopping. Restart foliod to recover from what is on disk")
        onHalt()
    }

    /// Why writes stopped, if they did.
    var halted: String? { haltReason.withLock { $0 } }

    /// Answers a batch, and shows its events to watchers. Called in commit order.
    private func release(_ outcomes: [Outcome]) {
        let applied = outcomes.flatMap { (try? $0.result.get())?.appended ?? [] }
        if let last = applied.last { statistics.applied.advance(to: last.event.sequence) }
        if !applied.isEmpty { committed(applied) }
        Self.deliver(outcomes)
    }

    /// What became of a batch.
    private struct Processed {
        let outcomes: [Outcome]
        /// The commit stored at least one write.
        let committedData: Bool
        /// A record of it went to the journal and was cancelled (its commit failed).
        var cancelled = false
    }

    /// Applies the batch in one transaction; grows the map and retries when it is full.
    private func process(_ batch: [Job]) -> Processed {
        var attempts = 0
        var isolating = false
        var cancelled = false
        // With the journal, the batch's record goes to the journal's thread before the commit, so
        // that its write and sync overlap LMDB's commit; a commit that fails after it is cancelled.
        let journal = confirmer?.journals == true ? confirmer : nil
        while true {
            let acceptance = nextTimestamp()
            var outcomes: [Outcome] = []
            outcomes.reserveCapacity(batch.count)
            do {
                let started = monotonicMicroseconds()
                // The first sequence of the record handed to the journal, until the commit is done.
                var recorded: UInt64?
                // A lone write's record, handed over as soon as its event was in the log.
                var early: StoreWriter.Applied?
                do {
                    try store.write(
                        { writer in
                            writer.isolatesEveryCommand = isolating
                            if let journal, batch.count == 1 {
                                writer.onLoneEventLogged = { [statistics] applied in
                                    journal.journal(.events([applied]))
                                    early = applied
                                    recorded = applied.event.sequence
                                    statistics.earlyRecords.add(1, ordering: .relaxed)
                                }
                            }
                            for job in batch {
                                do {
                                    let outcome = try writer.execute(
                                        job.request, Acceptance(timestamp: acceptance, origin: job.origin), ids: &ids)
                                    outcomes.append(Outcome(job: job, result: .success(outcome)))
                                } catch let error as StoreError {
                                    outcomes.append(
                                        Outcome(job: job, result: .failure(ProtocolError(storeError: error))))
                                }
                                #if DEBUG
                                    try Failpoint.writerMidBatch.check()
                                #endif
                            }
                            #if DEBUG
                                try Failpoint.writerBeforeCommit.check()
                            #endif
                        },
                        beforeCommit: {
                            guard let journal else { return }
                            let events = outcomes.flatMap { (try? $0.result.get())?.appended ?? [] }
                            if let handed = early {
                                if events.count == 1 && events[0].event.sequence == handed.event.sequence
                                    && events[0].chainHash == handed.chainHash
                                {
                                    #if DEBUG
                                        try Failpoint.writerAfterJournal.check()
                                    #endif
                                    return
                                }
                                // Not what commits (nothing a lone event's write does after its event
                                // is logged should get here; a failure of LMDB leaves by the catch
                                // below): the record is cancelled, and what commits handed over.
                                journal.journal(.cancel(firstSequence: handed.event.sequence))
                                cancelled = true
                                recorded = nil
                            }
                            guard let first = events.first else { return }
                            journal.journal(.events(events))
                            recorded = first.event.sequence
                            #if DEBUG
                                try Failpoint.writerAfterJournal.check()
                            #endif
                        })
                } catch {
                    // Before anything else reaches the journal: the next attempt or batch reuses
                    // these sequences, and recovery must not apply the record.
                    if let recorded, let journal {
                        journal.journal(.cancel(firstSequence: recorded))
                        cancelled = true
                    }
                    throw error
                }
                #if DEBUG
                    _ = Failpoint.writerAfterCommit.hit()
                #endif
                let appended = outcomes.reduce(0) { $0 + ((try? $1.result.get())?.appended.count ?? 0) }
                statistics.metrics.commitSeconds.record(Double(monotonicMicroseconds() - started) / 1_000_000)
                statistics.metrics.batchWrites.record(Double(batch.count))
                if appended > 0 { statistics.commits.add(1, ordering: .relaxed) }
                statistics.committedWrites.add(appended, ordering: .relaxed)
                return Processed(outcomes: outcomes, committedData: appended > 0, cancelled: cancelled)
            } catch let error as StoreWriter.SpoiledTransaction where !isolating {
                // A command failed halfway; run the batch again with every command isolated.
                log.error("\(error); retrying \(batch.count) writes one nested transaction each")
                isolating = true
            } catch let error as LMDBError where error.code == .mapFull && attempts < 16 {
                attempts += 1
                do {
                    try store.growMap()
                    log.notice(
                        "map full: grew it to \(store.environment.info.mapSize) bytes; retrying \(batch.count) writes")
                } catch {
                    log.error("map full and could not grow it: \(error)")
                }
            } catch {
                statistics.failedCommits.add(1, ordering: .relaxed)
                log.error("commit of \(batch.count) writes failed: \(error)")
                // The commit's own fdatasync may be what failed, and a failed flush is final.
                var failure = ProtocolError(.unavailable, "the write was not stored: \(ProtocolError(error).message)")
                do {
                    try store.checkWritable()
                } catch let check {
                    halt(
                        (check as? LMDBError)?.code == .panic
                            ? "a failed write of LMDB's meta page (\(check))" : "a failed flush of data.mdb (\(check))")
                    failure = ProtocolError(
                        .unavailable,
                        "the write was not stored: \(error); foliod is stopping after \(halted ?? "\(check)")")
                }
                return Processed(
                    outcomes: batch.map { Outcome(job: $0, result: .failure(failure)) }, committedData: false,
                    cancelled: cancelled)
            }
        }
    }

    /// Answers for a batch once writes have halted: nothing of it touches LMDB.
    private func refuse(_ batch: [Job], because reason: String) -> Processed {
        let refusal = ProtocolError(.unavailable, "the write was not stored: foliod is stopping after \(reason)")
        return Processed(outcomes: batch.map { Outcome(job: $0, result: .failure(refusal)) }, committedData: false)
    }

    /// Acceptance time: the wall clock in ms, never before the last event's.
    private func nextTimestamp() -> Timestamp {
        lastTimestamp = max(lastTimestamp, Timestamp.now.milliseconds)
        return Timestamp(milliseconds: lastTimestamp)
    }

    /// Hands each outcome to its connection's event loop, one message per loop.
    static func deliver(_ outcomes: [Outcome]) {
        var byLoop: [ObjectIdentifier: (EventLoop, [Outcome])] = [:]
        for outcome in outcomes {
            let loop = outcome.job.connection.loop
            byLoop[ObjectIdentifier(loop), default: (loop, [])].1.append(outcome)
        }
        for (loop, outcomes) in byLoop.values {
            loop.post(.writeOutcomes(outcomes))
        }
    }
}

extension Result where Failure == ProtocolError {
    /// The error's code, if this is a failure.
    var failureCode: ErrorCode? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
