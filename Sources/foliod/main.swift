import FolioCommandLine
import FolioProtocol
import FolioServer
import FolioStore
import Foundation
import Glibc

let usage = """
    usage: foliod [--data DIR] [--socket PATH] [--max-line BYTES] [--durability full|relaxed|none]
                  [--threads N] [--workers N] [--watch-buffer BYTES] [--map-size BYTES]
                  [--max-connections N] [--client-memory BYTES] [--line-timeout SECONDS]
                  [--request-key-ttl SECONDS]

    Serves a Folio data directory on a Unix-domain socket until SIGTERM or SIGINT.

      --data DIR            data directory (default: \(DefaultPaths(environment: ProcessInfo.processInfo.environment, uid: getuid()).dataDirectory))
      --socket PATH         socket to listen on (default: \(DefaultPaths(environment: ProcessInfo.processInfo.environment, uid: getuid()).socket))
      --max-line BYTES      longest request line accepted (default 1048576)
      --durability MODE     full (default): a write is acknowledged once it is on disk.
                            relaxed: an OS crash or power loss may undo the last acknowledged writes.
                            none: an OS crash or power loss may lose about the last second of writes.
                            A crash of foliod itself loses no acknowledged write in any mode.
      --threads N           event loop threads (default 2)
      --workers N           threads for reads that grow with the data: scans, verify, backup, stats (default 2)
      --watch-buffer BYTES  bytes of events a watcher may fall behind by before its watch is ended (default 8 MiB)
      --map-size BYTES      initial LMDB map size (default 1 GiB); it doubles whenever it fills
      --max-connections N   clients served at once (default: the descriptor limit less 64); others are
                            answered unavailable and closed
      --client-memory BYTES memory for all clients' incomplete lines, queued output and unanswered
                            requests (default 256 MiB); over it, the largest holders are closed first
      --line-timeout SECONDS  a request line must arrive whole within this time of its first byte
                            (default 60; 0: no limit)
      --request-key-ttl SECONDS  how long a write's requestKey is remembered, in event time
                            (default 86400); give offline rebuild and verify the same

    FOLIO_SOCKET and FOLIO_DATA override the default socket and data directory.

    \(OfflineCommands.usage)
    """

func serve(_ argv: [String]) throws -> Int32 {
    var arguments = try Arguments(
        argv,
        valued: [
            "--data", "--socket", "--max-line", "--durability", "--threads", "--workers", "--watch-buffer", "--map-size",
            "--max-connections", "--client-memory", "--line-timeout", "--request-key-ttl",
        ])
    if try arguments.flag("--help", "-h") {
        print(usage)
        return 0
    }
    if try arguments.flag("--version") {
        print("foliod \(ServerVersion.current)")
        return 0
    }
    let defaults = DefaultPaths(environment: ProcessInfo.processInfo.environment, uid: getuid())
    var configuration = ServerConfiguration(
        dataDirectory: arguments.value("--data") ?? defaults.dataDirectory, socketPath: arguments.value("--socket") ?? defaults.socket)
    if let maxLine = try arguments.integer("--max-line") {
        guard maxLine >= 1024 else { throw UsageError("--max-line must be at least 1024") }
        configuration.maxLineBytes = maxLine
    }
    if let durability = arguments.value("--durability") {
        guard let mode = ServerConfiguration.Durability(rawValue: durability) else {
            throw UsageError("--durability must be full, relaxed or none, not '\(durability)'")
        }
        configuration.durability = mode
    }
    if let threads = try arguments.integer("--threads") {
        guard (1...64).contains(threads) else { throw UsageError("--threads must be 1 to 64") }
        configuration.eventLoops = threads
    }
    if let bytes = try arguments.integer("--watch-buffer") { configuration.watchBufferBytes = max(bytes, 1024) }
    if let bytes = try arguments.integer("--map-size") { configuration.mapSize = max(bytes, 1 << 20) }
    if let threads = try arguments.integer("--workers") {
        guard (1...64).contains(threads) else { throw UsageError("--workers must be 1 to 64") }
        configuration.workerThreads = threads
    }
    if let count = try arguments.integer("--max-connections") {
        guard count >= 1 else { throw UsageError("--max-connections must be at least 1") }
        configuration.maxConnections = count
    }
    if let bytes = try arguments.integer("--client-memory") {
        guard bytes >= 1 << 20 else { throw UsageError("--client-memory must be at least 1048576") }
        configuration.clientMemoryBytes = bytes
    }
    if let seconds = try arguments.integer("--request-key-ttl") { configuration.requestKeyRetentionSeconds = Int64(seconds) }
    if let seconds = try arguments.integer("--line-timeout") {
        guard seconds >= 0 else { throw UsageError("--line-timeout must be 0 or more") }
        configuration.lineTimeoutSeconds = seconds
    }
    try arguments.rejectUnused()
    if let extra = arguments.positionals.first { throw UsageError("unexpected argument '\(extra)'") }
    return try Daemon(configuration: configuration).run()
}

let log = Log()
do {
    let argv = Array(CommandLine.arguments.dropFirst())
    switch argv.first {
    case "rebuild"?, "verify"?, "import"?: exit(try OfflineCommands.run(argv[0], Array(argv.dropFirst())))
    default:
        // Everything durable is done and LMDB is closed by now; _exit skips atexit handlers, which
        // must not wait on library threads still parked in the background.
        let status = try serve(argv)
        fflush(nil)
        _exit(status)
    }
} catch let error as ImportError {
    FileHandle.standardError.write(Data("foliod import: \(error)\n".utf8))
    exit(1)
} catch let error as UsageError {
    FileHandle.standardError.write(Data("foliod: \(error)\n\n\(usage)\n".utf8))
    exit(UsageError.exitStatus)
} catch {
    log.error("cannot start: \(error)")
    exit(1)
}
