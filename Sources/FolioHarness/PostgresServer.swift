import Foundation
import Glibc

/// A real PostgreSQL server for a test or a benchmark: a fresh cluster in a temporary directory of its
/// own, listening only on a Unix socket there, removed by `remove()` or when the value goes.
///
/// PostgreSQL refuses to run as root, so as root the directory belongs to the `postgres` user and the
/// server's programs run through `runuser -u postgres --`. Each server's socket is in its own directory,
/// so the port only names the socket: several servers run at once whatever ports they draw.
public final class PostgresServer: @unchecked Sendable {
    /// The temporary directory: the cluster in `data/`, the socket, the server's log in `server.log`.
    public let directory: String
    private let port: Int
    private let binaries: String
    /// What runs a server program as the cluster's owner: `runuser -u postgres --` as root, else nothing.
    private let asOwner: [String]
    private let lock = NSLock()
    private var removed = false

    private var dataDirectory: String { directory + "/data" }
    private var logFile: String { directory + "/server.log" }

    /// A libpq connection string for the database `folio`.
    public var conninfo: String { "host=\(directory) port=\(port) user=postgres dbname=folio" }

    /// Creates the cluster (`initdb`: trust authentication, superuser `postgres`, UTF8, locale C, no
    /// fsync of its files), appends `settings` to postgresql.conf (e.g. `["fsync": "off"]`), starts it and
    /// creates the database `folio`.
    public init(settings: [String: String] = [:]) throws {
        guard let binaries = Self.binaryDirectory else {
            throw HarnessError(
                "PostgreSQL not found: install postgresql, or set FOLIO_PG_BIN to the directory of initdb")
        }
        Self.removeAbandoned()
        var template = Array("/tmp/folio-pg-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw HarnessError("mkdtemp /tmp/folio-pg-XXXXXX: \(String(cString: strerror(errno)))")
        }
        directory = String(cString: made)
        self.binaries = binaries
        port = Int.random(in: 20_000..<60_000)
        do {
            asOwner = try Self.ownerCommand(for: directory)
            try "\(getpid())\n".write(toFile: directory + "/" + Self.creatorFile, atomically: false, encoding: .utf8)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        do {
            try runAsOwner(
                "initdb",
                ["-D", dataDirectory, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"],
                timeout: 120)
            try appendToConfiguration(
                ["listen_addresses": "", "unix_socket_directories": directory, "port": String(port)].merging(settings) {
                    $1
                })
            try start()
            try runPsql("CREATE DATABASE folio", database: "postgres")
        } catch {
            remove()
            throw error
        }
    }

    deinit { remove() }

    /// Starts the server (`pg_ctl start -w`), returning once it accepts connections; the error holds the
    /// server's log if it does not start.
    public func start() throws {
        do {
            try runAsOwner(
                "pg_ctl", ["start", "-w", "-t", "60", "-s", "-D", dataDirectory, "-l", logFile], timeout: 90)
        } catch {
            let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "(no log)"
            throw HarnessError(
                "PostgreSQL in \(directory) did not start: \(error)\nserver log (\(logFile)):\n\(log.suffix(8_000))")
        }
    }

    /// Stops the server and waits for its end (`pg_ctl stop -m fast`, or `-m immediate`: no checkpoint,
    /// as in a crash).
    public func stop(immediate: Bool = false) throws {
        try runAsOwner(
            "pg_ctl", ["stop", "-w", "-t", "60", "-s", "-D", dataDirectory, "-m", immediate ? "immediate" : "fast"],
            timeout: 90)
    }

    /// Whether the server's process (postmaster.pid) is alive.
    public var isRunning: Bool { serverProcess != nil }

    /// Runs `sql` in the database `folio` through `psql -At -c`: its output, one row a line, fields
    /// separated by `|`, without the last newline.
    @discardableResult
    public func psql(_ sql: String) throws -> String {
        try runPsql(sql, database: "folio")
    }

    /// Creates database `name` (a plain identifier) and returns a libpq connection string for it.
    public func createDatabase(_ name: String) throws -> String {
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
            throw HarnessError("not a plain database name: \(name)")
        }
        try runPsql("CREATE DATABASE \(name)", database: "postgres")
        return "host=\(directory) port=\(port) user=postgres dbname=\(name)"
    }

    /// Runs `sql` through `psql -At -c` in database `database`, as `psql(_:)` does in `folio`.
    @discardableResult
    public func psql(_ sql: String, database: String) throws -> String {
        try runPsql(sql, database: database)
    }

    /// Stops the server (immediate) and removes the directory; idempotent, and what deinit does.
    public func remove() {
        let first = lock.withLock {
            defer { removed = true }
            return !removed
        }
        guard first else { return }
        if isRunning { try? stop(immediate: true) }
        if let pid = serverProcess { kill(pid, SIGKILL) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Where PostgreSQL's programs are: $FOLIO_PG_BIN, else the newest /usr/lib/postgresql/*/bin (Debian's
    /// layout), else the directory on PATH with initdb. nil if none.
    public static var binaryDirectory: String? {
        let environment = ProcessInfo.processInfo.environment
        if let configured = environment["FOLIO_PG_BIN"], !configured.isEmpty { return configured }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let installed = versions.filter { access("/usr/lib/postgresql/\($0)/bin/initdb", X_OK) == 0 }
        if let newest = installed.max(by: { (Double($0) ?? 0) < (Double($1) ?? 0) }) {
            return "/usr/lib/postgresql/\(newest)/bin"
        }
        return (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init).first {
            access("\($0)/initdb", X_OK) == 0
        }
    }

    private var serverProcess: pid_t? { Self.serverProcess(of: dataDirectory) }

    /// The postmaster's pid, from postmaster.pid in `dataDirectory`, if that process is alive.
    private static func serverProcess(of dataDirectory: String) -> pid_t? {
        guard let contents = try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8),
            let pid = contents.split(separator: "\n").first.flatMap({ pid_t($0) }), pid > 0, isAlive(pid)
        else { return nil }
        return pid
    }

    /// Whether process `pid` has not ended. A zombie has: it ended and waits for its parent to reap it
    /// (init, for the postmaster pg_ctl leaves behind, or for a killed test run).
    private static func isAlive(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let name = stat.lastIndex(of: ")")
        else {
            return true
        }
        return stat[name...].dropFirst(2).first != "Z"
    }

    @discardableResult
    private func runPsql(_ sql: String, database: String) throws -> String {
        // psql is a client: it runs as whoever we are. Debian keeps it on PATH and not always beside initdb.
        let psql = access(binaries + "/psql", X_OK) == 0 ? binaries + "/psql" : "/usr/bin/psql"
        let run = try CommandRun.run(
            psql,
            [
                "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", directory, "-p", String(port), "-U", "postgres", "-d",
                database, "-c", sql,
            ],
            timeout: 60)
        guard run.status == 0 else { throw HarnessError("psql failed: \(run)") }
        return run.stdout.hasSuffix("\n") ? String(run.stdout.dropLast()) : run.stdout
    }

    /// Runs one of the server's programs as the cluster's owner; throws with its output if it fails.
    @discardableResult
    private func runAsOwner(_ program: String, _ arguments: [String], timeout: Double) throws -> CommandRun {
        let command = asOwner + [binaries + "/" + program] + arguments
        let run = try CommandRun.run(command[0], Array(command.dropFirst()), timeout: timeout)
        guard run.status == 0 else { throw HarnessError("\(program) failed: \(run)") }
        return run
    }

    private func appendToConfiguration(_ settings: [String: String]) throws {
        let lines = settings.sorted { $0.key < $1.key }.map {
            "\($0.key) = '\($0.value.replacingOccurrences(of: "'", with: "''"))'\n"
        }
        guard let file = FileHandle(forWritingAtPath: dataDirectory + "/postgresql.conf") else {
            throw HarnessError("cannot open \(dataDirectory)/postgresql.conf")
        }
        defer { try? file.close() }
        try file.seekToEnd()
        try file.write(contentsOf: Data(("\n# PostgresServer\n" + lines.joined()).utf8))
    }

    /// As root: hands `directory` to the `postgres` user and returns the runuser prefix; otherwise nothing.
    private static func ownerCommand(for directory: String) throws -> [String] {
        guard getuid() == 0 else { return [] }
        guard let owner = getpwnam("postgres") else {
            throw HarnessError("PostgreSQL does not run as root, and there is no postgres user")
        }
        guard chown(directory, owner.pointee.pw_uid, owner.pointee.pw_gid) == 0 else {
            throw HarnessError("chown \(directory) to postgres: \(String(cString: strerror(errno)))")
        }
        let candidates: [String] = ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"]
        guard let runuser = candidates.first(where: { access($0, X_OK) == 0 }) else {
            throw HarnessError("runuser not found (util-linux): needed to run PostgreSQL as the postgres user")
        }
        return [runuser, "-u", "postgres", "--"]
    }

    /// Holds the pid of the process that made the directory.
    private static let creatorFile = "creator.pid"

    /// Stops the servers and removes the directories left by processes that ended without `remove()`
    /// (a crashed test run), so they do not outlive it by more than the next run. A server is stopped
    /// only if its process's command line names its own data directory, in case its pid was reused.
    private static func removeAbandoned() {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        for entry in entries where entry.hasPrefix("folio-pg-") {
            let directory = "/tmp/" + entry
            guard
                let creator = (try? String(contentsOfFile: directory + "/" + creatorFile, encoding: .utf8))
                    .flatMap({ pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }),
                !isAlive(creator)
            else { continue }
            if let server = serverProcess(of: directory + "/data"),
                let commandLine = try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(server)/cmdline")),
                String(decoding: commandLine, as: UTF8.self).contains(directory + "/data")
            {
                kill(server, SIGQUIT)  // immediate shutdown; its files go only once it ended
                let deadline = Date().addingTimeInterval(10)
                while serverProcess(of: directory + "/data") != nil && Date() < deadline { usleep(10_000) }
            }
            try? FileManager.default.removeItem(atPath: directory)
        }
    }
}
