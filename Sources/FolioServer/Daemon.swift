import Dispatch
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
        let workers = DispatchQueue(label: "folio-workers", attributes: .concurrent)
        let digests = DigestCache()
        var loops: [EventLoop] = []
        for index in 0..<max(1, configuration.eventLoops) {
            loops.append(
                try EventLoop(
                    index: index, listener: listener, writer: writer, store: store, configuration: configuration,
                    statistics: statistics, log: log, workers: workers, watchers: watchers, digests: digests))
        }
        try loops[0].acceptConnections(for: loops)
        writer.start()
        for loop in loops { loop.start() }
        let flusher = configuration.durability == .none ? PeriodicSync(store: store, log: log) : nil

        let head = try store.read { try $0.head() }
        log.notice(
            "foliod \(ServerVersion.current) serving \(configuration.dataDirectory) on \(configuration.socketPath) "
                + "(durability \(configuration.durability.rawValue), \(head.sequence) events, pid \(getpid()))")

        var received: Int32 = 0
        sigwait(&stopSignals, &received)
        log.notice("received \(received == SIGTERM ? "SIGTERM" : "SIGINT"): finishing requests in flight")

        for loop in loops { loop.post(.drain) }
        for loop in loops { loop.join() }
        loops.removeAll()
        writer.stop()
        flusher?.stop()
        workers.sync(flags: .barrier) {}
        try? store.environment.sync()
        let final = try store.read { try $0.head().sequence }
        store.close()
        listener.close()
        withExtendedLifetime(lock) {}
        log.notice("stopped after event \(final)")
        return 0
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
