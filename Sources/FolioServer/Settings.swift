import FolioProtocol
import Foundation
import Glibc

/// Every setting of foliod, declared once: its name (the flag without its dashes, and the key of
/// the configuration file), what it takes, what it does, and whether SIGHUP applies it live. The
/// flag parser, the file reader, `--help` and the man page all read this table.
public struct Setting: Sendable {
    public let name: String
    /// How the value is shown in help: `BYTES`, `SECONDS`, `full|relaxed|none`.
    public let value: String
    public let help: String
    /// SIGHUP applies a changed value without a restart.
    public let live: Bool
    let apply: @Sendable (inout ServerConfiguration, String) throws(SettingError) -> Void

    init(
        _ name: String, _ value: String, live: Bool = false, _ help: String,
        apply: @escaping @Sendable (inout ServerConfiguration, String) throws(SettingError) -> Void
    ) {
        self.name = name
        self.value = value
        self.help = help
        self.live = live
        self.apply = apply
    }
}

/// A value that is not what its setting takes, or a setting that does not exist.
public struct SettingError: Error, CustomStringConvertible {
    public let message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}

public enum Settings {
    /// At most 2^48 (256 TiB, or nine million years of seconds): a value foliod multiplies into
    /// milliseconds or microseconds must not overflow, which would stop the daemon.
    static let largestInteger = 1 << 48

    private static func integer(_ text: String, _ name: String, at minimum: Int = 0) throws(SettingError) -> Int {
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), value >= minimum, value <= largestInteger
        else {
            throw SettingError("\(name) takes an integer from \(minimum) to \(largestInteger), not '\(text)'")
        }
        return value
    }

    private static func seconds(_ text: String, _ name: String) throws(SettingError) -> Double {
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value > 0, value <= 3600 else {
            throw SettingError("\(name) takes a number of seconds above 0 and at most 3600, not '\(text)'")
        }
        return value
    }

    public static let all: [Setting] = [
        Setting("config", "PATH", "the configuration file (default /etc/folio/foliod.conf, read if it exists)") {
            _, _ in
        },
        Setting("data", "DIR", "data directory (default: /var/lib/folio for root, ~/.local/share/folio otherwise)") {
            c, v in
            c.dataDirectory = v
        },
        Setting(
            "socket", "PATH",
            "socket to listen on (default: /run/folio/folio.sock for root, $XDG_RUNTIME_DIR/folio/folio.sock otherwise)"
        ) { c, v in
            c.socketPath = v
        },
        Setting("socket-mode", "OCTAL", "permissions of the socket foliod creates (default 0660)") {
            c, v throws(SettingError) in
            guard let mode = UInt32(v.hasPrefix("0") ? String(v.dropFirst()) : v, radix: 8), mode <= 0o777 else {
                throw SettingError("socket-mode takes an octal mode like 0660, not '\(v)'")
            }
            c.socketMode = mode_t(mode)
        },
        Setting(
            "socket-group", "NAME",
            "group of the socket foliod creates, whose members may write (default: foliod's group)"
        ) { c, v throws(SettingError) in
            guard getgrnam(v) != nil else { throw SettingError("socket-group: no group named '\(v)'") }
            c.socketGroup = v
        },
        Setting(
            "durability", "full|relaxed|none",
            "full: a write is acknowledged once on disk (default); relaxed: an OS crash may undo the last acknowledged writes; none: an OS crash may lose about the last second, and may leave a store that does not open. A cluster node (log postgres:) leaves durability to PostgreSQL and commits its copy of the log without flushing it"
        ) { c, v throws(SettingError) in
            guard let mode = ServerConfiguration.Durability(rawValue: v) else {
                throw SettingError("durability takes full, relaxed or none, not '\(v)'")
            }
            c.durability = mode
        },
        Setting(
            "journal", "on|off",
            "with durability full: on acknowledges a write after one sync of a journal of foliod's own, with LMDB synced at checkpoints (docs/DURABILITY.md); off syncs LMDB at every commit (default on with durability full, off with relaxed, none or log postgres:)"
        ) { c, v throws(SettingError) in
            switch v {
            case "on": c.journal = true
            case "off": c.journal = false
            default: throw SettingError("journal takes on or off, not '\(v)'")
            }
        },
        Setting(
            "journal-size", "BYTES",
            "size of the journal ring file when foliod creates it (default 8388608, rounded up to a multiple of 4096); a checkpoint runs whenever a quarter of it is in use, and a write larger than half of it is made durable by a checkpoint instead"
        ) { c, v throws(SettingError) in
            c.journalSize = try integer(v, "journal-size", at: 1 << 20)
        },
        Setting("threads", "N", "event loop threads (default 2)") { c, v throws(SettingError) in
            c.eventLoops = try integer(v, "threads", at: 1)
            guard c.eventLoops <= 64 else { throw SettingError("threads takes 1 to 64") }
        },
        Setting(
            "idle-poll", "MICROSECONDS",
            "how long an event loop with nothing to do keeps looking for work before it sleeps, at most (default 100, at most 1000; 0: sleep at once). It polls only while no write is in flight and no thread waits for a CPU, and learns from each wait how long is worth it: a read from one client at a time then skips the wake-up of a sleeping thread. After a write that came alone, the writer's thread looks for the next the same way, for up to four times as long (docs/BENCHMARKS.md)"
        ) { c, v throws(SettingError) in
            c.idlePollMicroseconds = try integer(v, "idle-poll")
            guard c.idlePollMicroseconds <= IdlePoll.maximumLimit else {
                throw SettingError(
                    "idle-poll takes 0 to \(IdlePoll.maximumLimit) microseconds, not \(c.idlePollMicroseconds)")
            }
        },
        Setting("workers", "N", "threads for reads that grow with the data: scans, verify, backup, stats (default 2)") {
            c, v throws(SettingError) in
            c.workerThreads = try integer(v, "workers", at: 1)
            guard c.workerThreads <= 64 else { throw SettingError("workers takes 1 to 64") }
        },
        Setting("map-size", "BYTES", "initial LMDB map size (default 1 GiB); it doubles whenever it fills") {
            c, v throws(SettingError) in
            c.mapSize = max(try integer(v, "map-size", at: 1), 1 << 20)
        },
        Setting("max-line", "BYTES", "longest request line accepted (default 1048576)") { c, v throws(SettingError) in
            c.maxLineBytes = try integer(v, "max-line", at: 1024)
        },
        Setting(
            "request-key-ttl", "SECONDS",
            "how long a write's requestKey is remembered, in event time (default 86400); give offline rebuild and verify the same"
        ) { c, v throws(SettingError) in
            c.requestKeyRetentionSeconds = Int64(try integer(v, "request-key-ttl"))
        },
        Setting(
            "file-grace", "SECONDS",
            "how long a file's content no name refers to is kept before it is removed from DATA/blobs (default 3600)"
        ) { c, v throws(SettingError) in
            c.fileGraceSeconds = try integer(v, "file-grace")
        },
        Setting(
            "file-max-size", "BYTES", live: true,
            "the largest file an upload in pieces may make (default 1073741824, 1 GiB)"
        ) { c, v throws(SettingError) in
            c.fileMaxBytes = UInt64(try integer(v, "file-max-size", at: 1))
        },
        Setting(
            "upload-timeout", "SECONDS",
            "an upload in pieces that gets no piece for this long is aborted and its bytes removed (default 900)"
        ) { c, v throws(SettingError) in
            c.uploadTimeoutSeconds = try integer(v, "upload-timeout", at: 1)
        },
        Setting(
            "max-connections", "N", live: true,
            "clients served at once (default 4096, at most the descriptor limit less 64); others get one unavailable line"
        ) { c, v throws(SettingError) in
            c.maxConnections = try integer(v, "max-connections", at: 1)
        },
        Setting(
            "max-requests", "N", live: true,
            "requests received and not yet answered, per connection (default 8192); beyond, foliod stops reading from it"
        ) { c, v throws(SettingError) in
            c.maxPendingRequests = try integer(v, "max-requests", at: 1)
        },
        Setting(
            "max-requests-total", "N", live: true,
            "requests received and not yet answered on all connections together (default 65536); beyond, foliod stops reading until some are answered"
        ) { c, v throws(SettingError) in
            c.maxTotalRequests = try integer(v, "max-requests-total", at: 1)
        },
        Setting(
            "max-output", "BYTES", live: true,
            "answers a connection may leave unread (default 64 MiB, at least 16 MiB: twice the largest page); beyond, it is closed"
        ) { c, v throws(SettingError) in
            c.maxOutputBytes = try integer(v, "max-output", at: 16 << 20)
        },
        Setting(
            "client-memory", "BYTES", live: true,
            "memory for all clients' incomplete lines, queued answers and unanswered requests (default 256 MiB); over it, the largest holders are closed first"
        ) { c, v throws(SettingError) in
            c.clientMemoryBytes = try integer(v, "client-memory", at: 1 << 20)
        },
        Setting(
            "partial-line-timeout", "SECONDS", live: true,
            "a request line must arrive whole within this time of its first byte (default 10; 0: no limit)"
        ) { c, v throws(SettingError) in
            c.lineTimeoutSeconds = try integer(v, "partial-line-timeout")
        },
        Setting(
            "idle-timeout", "SECONDS", live: true,
            "close a connection idle this long with nothing in flight and no watch (default 0: never)"
        ) { c, v throws(SettingError) in
            c.idleTimeoutSeconds = try integer(v, "idle-timeout")
        },
        Setting(
            "watch-buffer", "BYTES", live: true,
            "bytes of events a watcher may fall behind by before its watch is ended (default 8 MiB)"
        ) { c, v throws(SettingError) in
            c.watchBufferBytes = try integer(v, "watch-buffer", at: 1024)
        },
        Setting(
            "live-resume-events", "N",
            "how many events back a live query resumes from with its changes; further back it gets a fresh page (default 100000)"
        ) { c, v throws(SettingError) in
            c.liveResumeEvents = try integer(v, "live-resume-events")
        },
        Setting(
            "log", "lmdb|postgres:CONNINFO",
            "where the log is: lmdb, this node's own (default), or postgres: followed by a libpq connection string, e.g. postgres:'host=/run/postgresql dbname=folio', a log shared by several nodes (docs/CLUSTER.md)"
        ) { c, v throws(SettingError) in
            if v == "lmdb" {
                c.clusterLog = nil
            } else if v.hasPrefix("postgres:") {
                let conninfo = String(v.dropFirst("postgres:".count))
                guard !conninfo.trimmingCharacters(in: .whitespaces).isEmpty else {
                    throw SettingError(
                        "log postgres: needs a libpq connection string after the colon, e.g. postgres:'host=/run/postgresql dbname=folio'"
                    )
                }
                c.clusterLog = conninfo
            } else {
                throw SettingError("log takes lmdb or postgres:CONNINFO, not '\(v)'")
            }
        },
        Setting(
            "log-timeout", "SECONDS",
            "with log postgres: how long connecting to PostgreSQL or one of its statements may take before a write is answered unavailable; it counts the wait for the log's lock behind other nodes' calls (default 5)"
        ) { c, v throws(SettingError) in
            c.clusterTimeoutSeconds = try seconds(v, "log-timeout")
        },
        Setting(
            "min-seq-timeout", "SECONDS",
            "how long a read with minSeq waits for this node to have applied that event before it is answered unavailable (default 5)"
        ) { c, v throws(SettingError) in
            c.minSeqTimeoutSeconds = try seconds(v, "min-seq-timeout")
        },
        Setting(
            "log-level", "error|notice|info", live: true,
            "what goes to the log (default notice; info adds slow requests)"
        ) { c, v throws(SettingError) in
            guard let level = Log.Level(name: v) else {
                throw SettingError("log-level takes error, notice or info, not '\(v)'")
            }
            c.logLevel = level
        },
        Setting("slow-request", "MS", live: true, "log requests that take longer, at level info (default 1000)") {
            c, v throws(SettingError) in
            c.slowRequestMilliseconds = try integer(v, "slow-request")
        },
        Setting(
            "backup-dir", "DIR", live: true,
            "the only directory backups may be written below (default: backups in the data directory)"
        ) { c, v throws(SettingError) in
            guard v.hasPrefix("/") else { throw SettingError("backup-dir takes an absolute path, not '\(v)'") }
            c.backupDirectory = v
        },
        Setting("metrics-socket", "PATH", "also serve GET /metrics (Prometheus text) over HTTP/1.0 on this Unix socket")
        { c, v in
            c.metricsSocket = v
        },
    ]

    public static let byName: [String: Setting] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// Applies `name = value`, from the file or a flag; `access.*` keys are the access policy.
    public static func apply(_ name: String, _ value: String, to configuration: inout ServerConfiguration)
        throws(SettingError)
    {
        if name.hasPrefix("access.") {
            try configuration.access.add(key: name, value: value)
            return
        }
        guard let setting = byName[name] else {
            throw SettingError(
                "unknown setting '\(name)' (known: \(all.map(\.name).joined(separator: ", ")), access.*)")
        }
        try setting.apply(&configuration, value)
    }

    /// `key = value` lines; `#` starts a comment line. Errors name the file and line.
    public static func parseFile(_ text: String, path: String) throws(SettingError) -> [(
        name: String, value: String, line: Int
    )] {
        var entries: [(String, String, Int)] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw SettingError("\(path):\(index + 1): expected 'key = value', found '\(line)'")
            }
            let name = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty else { throw SettingError("\(path):\(index + 1): a setting without a name") }
            guard name != "config" else {
                throw SettingError("\(path):\(index + 1): config cannot be set in the configuration file")
            }
            entries.append((name, value, index + 1))
        }
        return entries
    }

    /// The configuration from the file (if any), then the flags, which win.
    public static func configuration(
        defaults: ServerConfiguration, file: (path: String, text: String)?, flags: [(name: String, value: String)]
    ) throws(SettingError) -> ServerConfiguration {
        var configuration = defaults
        if let file {
            configuration.configPath = file.path
            for entry in try parseFile(file.text, path: file.path) {
                do { try apply(entry.name, entry.value, to: &configuration) } catch {
                    throw SettingError("\(file.path):\(entry.line): \(error.message)")
                }
            }
        }
        for flag in flags {
            do { try apply(flag.name, flag.value, to: &configuration) } catch {
                throw SettingError("--\(flag.name): \(error.message)")
            }
        }
        if configuration.journal == true && configuration.durability != .full {
            throw SettingError(
                "journal on makes full durability cheaper; it does not go with durability \(configuration.durability.rawValue)"
            )
        }
        if configuration.journal == true && configuration.clusterLog != nil {
            throw SettingError(
                "journal on is for a single node's log; with log postgres: the log's durability is PostgreSQL's")
        }
        if configuration.backupDirectory == nil {
            configuration.backupDirectory = configuration.dataDirectory + "/backups"
        }
        return configuration
    }

    /// `--help` text of the settings, one entry each.
    public static var help: String {
        all.map { setting in
            let head = "  --\(setting.name) \(setting.value)"
            let wrapped = wrap(setting.help + (setting.live ? " [reloadable]" : ""), width: 72)
            return head + "\n" + wrapped.map { "        " + $0 }.joined(separator: "\n")
        }.joined(separator: "\n")
    }

    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ") {
            if !current.isEmpty && current.count + word.count + 1 > width {
                lines.append(current)
                current = ""
            }
            current += (current.isEmpty ? "" : " ") + word
        }
        if !current.isEmpty { lines.append(current) }
        return lines
    }
}
