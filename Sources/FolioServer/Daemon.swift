import FolioStore
import Foundation
import Glibc

/// `foliod` serving: opens the store, listens, runs the writer and the event loops until SIGTERM
/// or SIGINT, then stops accepting, answers what it received, commits, closes LMDB and removes
/// the socket.
public final class Daemon {
    private let configuration: ServerConfiguration
    private let log: Log

    public init(configuration: ServerConfiguration, log: Log = Log()) {
        self.configuration = configuration
        self.log = log
    }

    /// Serves until a stop signal; returns the exit status.
    public func run() throws -> Int32 {
        // Signals are taken by sigwait below, never by an arbitrary thread.
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        sigaddset(&stopSignals, SIGTERM)
        sigaddset(&stopSignals, SIGINT)
        pthread_sigmask(SIG_BLOCK, &stopSignals, nil)
        signal(SIGPIPE, SIG_IGN)

        try FileManager.default.createDirectory(
            atPath: configuration.dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let lock = try DataDirectoryLock(directory: configuration.dataDirectory)
        var storeOptions = Store.Options()
        storeOptions.sync = configuration.durability.syncMode
        storeOptions.mapSize = configuration.mapSize
        let store = try Store(directory: configuration.dataDirectory, options: storeOptions)
        try store.checkUsable()
        let listener = try UnixListener(path: configuration.socketPath)

        let statistics = ServerStatistics()
        let watchers = WatchRegistry()
        let writer = try Writer(store: store, configuration: configuration, statistics: statistics, log: log) { applied in
            watchers.publish(applied)
        }
        let workers = try WorkerPool(store: store, count: max(1, configuration.workerThreads))
        let decoders = ThreadPool<Void>(name: "folio-decode", contexts: [(), ()])
        let digests = DigestCache()
        var loops: [EventLoop] = []
        let loopCount = max(1, configuration.eventLoops)
        for index in 0..<loopCount {
            loops.append(
                try EventLoop(
                    index: index, loops: loopCount, listener: listener, writer: writer, store: store, configuration: configuration,
                    statistics: statistics, log: log, workers: workers, decoders: decoders, watchers: watchers, digests: digests))
        }
        let maxConnections = connectionLimit()
        try loops[0].acceptConnections(for: loops, maxConnections: maxConnections)
        writer.start()
        for loop in loops { loop.start() }
        let flusher = configuration.durability == .none ? PeriodicSync(store: store, log: log) : nil
        let trimmer = MemoryTrimmer(statistics: statistics)

        let head = try store.read { try $0.head() }
        log.notice(
            "foliod \(ServerVersion.current) serving \(configuration.dataDirectory) on \(configuration.socketPath) "
                + "(durability \(configuration.durability.rawValue), \(head.sequence) events, up to \(maxConnections) connections, "
                + "pid \(getpid()))")

        var received: Int32 = 0
        sigwait(&stopSignals, &received)
        log.notice("received \(received == SIGTERM ? "SIGTERM" : "SIGINT"): finishing requests in flight")

        for loop in loops { loop.post(.drain) }
        for loop in loops { loop.join() }
        loops.removeAll()
        writer.stop()
        flusher?.stop()
        trimmer.stop()
        workers.stop()
        decoders.stop()
        try? store.environment.sync()
        let final = try store.read { try $0.head().sequence }
        store.close()
        listener.close()
        withExtendedLifetime(lock) {}
        log.notice("stopped after event \(final)")
        return 0
    }
}

extension Daemon {
    /// Raises the soft descriptor limit to the hard one (a daemon that serves many clients needs
    /// them; systemd's default soft limit is 1024), and returns how many connections to serve: the
    /// configured number, at most the limit less the descriptors kept for everything else.
    private func connectionLimit() -> Int {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let available = max(1, Int(clamping: limit.rlim_cur) - ServerConfiguration.reservedDescriptors)
        guard let configured = configuration.maxConnections else { return available }
        if configured > available {
            log.error(
                "--max-connections \(configured) is more than the descriptor limit (\(limit.rlim_cur)) allows; serving at most \(available)")
        }
        return min(configured, available)
    }
}

/// With `--durability none`, flushes the environment once a second.
private final class PeriodicSync: @unchecked Sendable {
    private let lock = ConditionLock()
    private var stopping = false
    private var thread: pthread_t?

    init(store: Store, log: Log) {
        thread = startThread(name: "folio-sync") { [self] in
            var sinceSync = 0
            while !lock.withLock({ stopping }) {
                usleep(100_000)
                sinceSync += 100
                guard sinceSync >= 1000 else { continue }
                sinceSync = 0
                do { try store.environment.sync() } catch { log.error("flushing the environment: \(error)") }
            }
        }
    }

    func stop() {
        lock.withLock { stopping = true }
        if let thread { pthread_join(thread, nil) }
    }
}
