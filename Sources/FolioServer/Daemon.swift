import FolioStore
import Foundation
import Glibc

/// `foliod` serving: opens the store, listens, runs the writer and the event loops until SIGTERM
/// or SIGINT, then stops accepting, answers what it received, commits, closes LMDB and removes
/// the socket.
///
/// A failed flush of the data file halts the writer (see `Writer`), which stops the daemon the same
/// way, except that every write still queued is refused; the exit status is then `ioErrorStatus`.
public final class Daemon {
    /// Exit status after a failed flush or meta-page write stopped foliod (`EX_IOERR`).
    public static let ioErrorStatus: Int32 = 74

    private var configuration: ServerConfiguration
    private let log: Log
    /// Reads the configuration again, for SIGHUP.
    private let reload: () throws -> ServerConfiguration

    public init(
        configuration: ServerConfiguration, log: Log = Log(),
        reload: @escaping () throws -> ServerConfiguration = { throw ServerError.noReload }
    ) {
        self.configuration = configuration
        self.log = log
        self.reload = reload
    }

    /// Serves until a stop signal; returns the exit status.
    public func run() throws -> Int32 {
        // Signals are taken by sigwait below, never by an arbitrary thread.
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        sigaddset(&stopSignals, SIGTERM)
        sigaddset(&stopSignals, SIGINT)
        sigaddset(&stopSignals, SIGHUP)
        pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
        log.setLevel(configuration.logLevel)
        signal(SIGPIPE, SIG_IGN)
        let service = ServiceManager()

        try FileManager.default.createDirectory(
            atPath: configuration.dataDirectory, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        let lock = try DataDirectoryLock(directory: configuration.dataDirectory)
        removeLeftoverScratch()
        let unsynced = try prepareUnsyncedCopy()
        service.status("opening the store in \(configuration.dataDirectory)")
        var storeOptions = Store.Options()
        storeOptions.sync = unsynced == nil ? configuration.durability.syncMode : .noSync
        storeOptions.journal = configuration.journaling
        storeOptions.journalSize = configuration.journalSize
        storeOptions.mapSize = configuration.mapSize
        storeOptions.requestKeyRetention = configuration.requestKeyRetentionSeconds * 1000
        let store = try Store(directory: configuration.dataDirectory, options: storeOptions)
        try store.checkUsable()
        if let recovery = store.recovery, recovery.resumed {
            log.notice(
                "resumed at LMDB's last commit: the log ends at event \(recovery.sequence) (the checkpoint was at event "
                    + "\(recovery.checkpointSequence); after a stop, or a crash of foliod alone on this boot, no journal record is applied)"
            )
        } else if let recovery = store.recovery {
            log.notice(
                "recovered from the checkpoint at event \(recovery.checkpointSequence): \(recovery.records) journal record(s) applied"
                    + (recovery.cancelled > 0 ? " (\(recovery.cancelled) skipped: their commit had failed)" : "") + ", "
                    + "the log ends at event \(recovery.sequence)")
        }
        // The views' ops not yet merged, worked out now rather than by the first read of each view.
        let resolving = DispatchTime.now().uptimeNanoseconds
        let resolved = try store.resolvePendingViewOps()
        if resolved.ops > 0 {
            let millis = (DispatchTime.now().uptimeNanoseconds - resolving) / 1_000_000
            log.notice(
                "views: \(resolved.ops) op(s) not yet merged into \(resolved.views) view(s) worked out in \(millis) ms")
        }
        // Puts that a crash interrupted left their content half-way; none can be running now.
        let leftovers = store.blobs.removeTemporaryFiles()
        if leftovers > 0 {
            log.notice("removed \(leftovers) temporary file(s) of puts that did not finish, from blobs/tmp")
        }
        let listener: UnixListener
        if let inherited = try ServiceManager.inheritedListener() {
            listener = UnixListener(inheritedFD: inherited, path: configuration.socketPath)
        } else {
            listener = try UnixListener(
                path: configuration.socketPath, mode: configuration.socketMode, group: configuration.socketGroup)
        }
        let watchdog = service.watchdogInterval.map {
            Watchdog(manager: service, interval: $0, loops: max(1, configuration.eventLoops))
        }

        let statistics = ServerStatistics(loops: max(1, configuration.eventLoops))
        let watchers = WatchRegistry()
        let liveQueries = try LiveQueries(store: store, log: log, resumeHorizon: configuration.liveResumeEvents)
        // A halted writer wakes the sigwait below.
        let writer = try Writer(
            store: store, configuration: configuration, statistics: statistics, log: log,
            onHalt: { kill(getpid(), SIGTERM) }
        ) { applied in
            watchers.publish(applied)
            liveQueries.publish(applied)
        }
        if let conninfo = configuration.clusterLog {
            service.status("joining the cluster's log in PostgreSQL")
            log.notice("cluster: following the log in PostgreSQL (\(ClusterNode.redacted(conninfo)))")
            try writer.joinCluster { applied, head in
                service.status("catching up: \(applied) of \(head) events")
                log.notice("cluster: caught up to event \(applied) of \(head)")
            }
        }
        statistics.applied.advance(to: try store.read { try $0.head().sequence })
        let workers = try WorkerPool(store: store, count: max(1, configuration.workerThreads))
        let decoders = ThreadPool<Void>(name: "folio-decode", contexts: [(), ()])
        let digests = DigestCache()
        let uploads = Uploads(blobs: store.blobs, statistics: statistics)
        let lineBuffers = LineBuffers()
        var loops: [EventLoop] = []
        let loopCount = max(1, configuration.eventLoops)
        for index in 0..<loopCount {
            loops.append(
                try EventLoop(
                    index: index, loops: loopCount, listener: listener, writer: writer, store: store,
                    configuration: configuration,
                    statistics: statistics, log: log, workers: workers, decoders: decoders, watchers: watchers,
                    liveQueries: liveQueries, digests: digests,
                    uploads: uploads, lineBuffers: lineBuffers, watchdog: watchdog, socketGroupID: listener.groupID))
        }
        // Before anything is accepted: a metrics socket that cannot be made stops the start at once,
        // not a daemon already serving, which then exited without draining.
        let metricsEndpoint = try configuration.metricsSocket.map { path in
            try MetricsEndpoint(
                path: path, mode: configuration.socketMode, group: configuration.socketGroup,
                reads: ReadHandler(
                    store: store, configuration: configuration, statistics: statistics, digests: digests), store: store,
                log: log)
        }
        let (maxConnections, descriptorLimit) = connectionLimit()
        try loops[0].acceptConnections(for: loops, maxConnections: maxConnections, descriptorLimit: descriptorLimit)
        writer.start()
        liveQueries.start()
        for loop in loops { loop.start() }
        let flusher =
            configuration.durability == .none || unsynced != nil
            ? PeriodicSync(store: store) { reason in
                unsynced?.markInDoubt(reason)
                writer.halt(reason)
            } : nil
        let trimmer = MemoryTrimmer(lineBuffers: lineBuffers, pressureBytes: configuration.clientMemoryBytes)
        let sweeper = BlobSweeper(
            store: store, uploads: uploads, graceSeconds: Double(configuration.fileGraceSeconds),
            uploadTimeoutSeconds: Double(configuration.uploadTimeoutSeconds), log: log)

        let (head, objects) = try store.read { snapshot in (try snapshot.head(), try snapshot.objectCount()) }
        log.notice(
            "foliod \(ServerVersion.current) serving \(configuration.dataDirectory) on \(configuration.socketPath)"
                + "\(listener.inherited ? " (from systemd)" : "") "
                + "(durability \(configuration.durability.rawValue)\(store.journal == nil ? "" : " through the journal"), \(head.sequence) events, up to \(maxConnections) connections, "
                + "pid \(getpid()))")
        service.notify("READY=1", "STATUS=serving \(head.sequence) events, \(objects) objects", "MAINPID=\(getpid())")

        var received: Int32 = 0
        while true {
            sigwait(&stopSignals, &received)
            guard received == SIGHUP else { break }
            service.notify("RELOADING=1", "MONOTONIC_USEC=\(monotonicMicroseconds())")
            applyReload(to: loops, trimmer: trimmer)
            service.notify("READY=1", "STATUS=serving, configuration reloaded")
        }
        if let reason = writer.halted {
            log.notice("stopping after \(reason): finishing requests in flight, refusing writes")
        } else {
            log.notice("received \(received == SIGTERM ? "SIGTERM" : "SIGINT"): finishing requests in flight")
        }

        service.notify("STOPPING=1", "STATUS=finishing requests in flight")
        metricsEndpoint?.stop()
        for loop in loops { loop.post(.drain) }
        for loop in loops { loop.join() }
        loops.removeAll()
        liveQueries.stop()
        writer.stop()
        flusher?.stop()
        trimmer.stop()
        sweeper.stop()
        workers.stop()
        decoders.stop()
        var status: Int32 = 0
        if let reason = writer.halted {
            status = Self.ioErrorStatus
            log.error("stopped after \(reason); exit status \(status)")
        } else {
            do {
                try store.flushData()
                try unsynced?.clear()
            } catch {
                status = Self.ioErrorStatus
                unsynced?.markInDoubt("the final flush: \(error)")
                log.error("the final flush of data.mdb failed (\(error)): the last commits may not be on disk")
            }
        }
        let final = try? store.read { try $0.head().sequence }
        store.close()
        listener.close()
        withExtendedLifetime(lock) {}
        log.notice("stopped after event \(final.map(String.init) ?? "?")")
        return status
    }
}

extension Daemon {
    /// SIGHUP: reads the configuration again and hands what may change live to the event loops;
    /// logs what only a restart applies. A configuration that does not read keeps the running one.
    private func applyReload(to loops: [EventLoop], trimmer: MemoryTrimmer) {
        let fresh: ServerConfiguration
        do {
            fresh = try reload()
        } catch {
            log.error("SIGHUP: the configuration does not read (\(error)); keeping the running one")
            return
        }
        let applied = configuration.applyingLive(from: fresh)
        let needRestart = configuration.restartOnlyDifferences(from: fresh)
        let changed = configuration.liveDifferences(from: fresh)
        configuration = applied
        log.setLevel(applied.logLevel)
        for loop in loops { loop.post(.reconfigure(applied)) }
        trimmer.pressureBytes.store(applied.clientMemoryBytes, ordering: .relaxed)
        log.notice(
            "SIGHUP: configuration reloaded\(changed.isEmpty ? " (no live setting changed)" : "; applied " + changed.joined(separator: ", "))"
                + (needRestart.isEmpty ? "" : "; a restart is needed for " + needRestart.joined(separator: ", ")))
    }

    /// A cluster node commits its copy of the log without flushing it (`UnsyncedCopy`): removes a
    /// copy that an OS crash or a failed flush may have damaged, so that the node catches up from
    /// the log again, and records this boot before the first commit. nil on a single node, or where
    /// the boot id cannot be read (then the copy is flushed as a single node's store is).
    private func prepareUnsyncedCopy() throws -> UnsyncedCopy? {
        guard configuration.clusterLog != nil else { return nil }
        guard let copy = UnsyncedCopy(directory: configuration.dataDirectory) else {
            log.notice("cluster: cannot read \(BootID.path); the copy of the log is flushed at every commit")
            return nil
        }
        if let damage = copy.find().damage {
            try copy.discard()
            log.notice(
                "cluster: removed the copy of the log in \(configuration.dataDirectory), since \(damage); catching up from the log"
            )
        }
        try copy.markThisBoot()
        return copy
    }

    /// Scratch stores of a `verify` that a crash interrupted (`verify-<pid>-<random>`): only this
    /// daemon, which holds the data directory's lock, could be using one.
    private func removeLeftoverScratch() {
        let files = FileManager.default
        guard let entries = try? files.contentsOfDirectory(atPath: configuration.dataDirectory) else { return }
        for entry in entries where entry.hasPrefix("verify-") {
            do {
                try files.removeItem(atPath: configuration.dataDirectory + "/" + entry)
                log.notice("removed \(entry), the scratch store of a verify that did not finish")
            } catch {
                log.error("cannot remove \(entry), the scratch store of an unfinished verify: \(error)")
            }
        }
    }

    /// Raises the soft descriptor limit to the hard one (a daemon that serves many clients needs
    /// them; systemd's default soft limit is 1024), and returns how many connections to serve: the
    /// configured number, at most the limit less the descriptors kept for everything else.
    private func connectionLimit() -> (limit: Int, available: Int) {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let available = max(1, Int(clamping: limit.rlim_cur) - ServerConfiguration.reservedDescriptors)
        let configured = configuration.maxConnections
        if configured > available {
            log.error(
                "--max-connections \(configured) is more than the descriptor limit (\(limit.rlim_cur)) allows; serving at most \(available)"
            )
        }
        return (min(configured, available), available)
    }
}

/// With `--durability none`, flushes the environment once a second. A failed flush is final (see
/// `Environment.sync`): it calls `halt` and flushes no more.
private final class PeriodicSync: @unchecked Sendable {
    private let lock = ConditionLock()
    private var stopping = false
    private var thread: pthread_t?

    init(store: Store, halt: @escaping @Sendable (String) -> Void) {
        thread = startThread(name: "folio-sync") { [self] in
            var sinceSync = 0
            while !lock.withLock({ stopping }) {
                usleep(100_000)
                sinceSync += 100
                guard sinceSync >= 1000 else { continue }
                sinceSync = 0
                do {
                    try store.environment.sync()
                } catch {
                    halt("a failed flush of data.mdb (\(error))")
                    return
                }
            }
        }
    }

    func stop() {
        lock.withLock { stopping = true }
        if let thread { pthread_join(thread, nil) }
    }
}
