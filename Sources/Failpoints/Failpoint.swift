// Debug builds only: SwiftPM passes -DDEBUG to `swift build` and `swift test`, never to
// `swift build -c release`, so a release binary holds none of this code and none of its names.
#if DEBUG
    import Glibc
    import Synchronization

    /// A named place in the write path where a test can make the process crash, or the operation fail,
    /// on purpose, to check what survives.
    ///
    /// Armed by the environment variable `FOLIO_FAILPOINTS`, read once: a comma-separated list of
    /// `point=action` or `point=action@N`, e.g. `writer.beforeCommit=crash@20,backup.afterCopy=error`.
    /// `crash` ends the process at once with `_exit(Failpoint.crashStatus)`, after one line on stderr:
    /// no handler runs, nothing is flushed, as when the process is killed. `error` makes `hit()` return
    /// true (and `check()` throw `Failpoint.Injected`), and the caller fails as it would on a real error
    /// there. Without `@N` every pass through the point acts; with it, only the N-th (counted from 1 per
    /// process). Points without an error path take `crash` only.
    ///
    /// Call sites are wrapped in `#if DEBUG` as this type is. Thread-safe.
    public enum Failpoint: String, CaseIterable, Sendable {
        /// `Writer`: every command of the batch applied, the transaction not yet committed.
        case writerBeforeCommit = "writer.beforeCommit"
        /// `Writer` (full durability with the journal): the batch's record handed to the journal, the
        /// transaction not yet committed. `error` makes the commit fail.
        case writerAfterJournal = "writer.afterJournal"
        /// `Writer`: after each command of a batch, inside the batch's transaction.
        case writerMidBatch = "writer.midBatch"
        /// `StoreWriter`: an event appended to the log, not yet applied to state and views.
        case storeAfterLogAppend = "store.afterLogAppend"
        /// `Writer`: the batch committed, nothing answered yet. Crash only.
        case writerAfterCommit = "writer.afterCommit"
        /// `SyncConfirmer` (full durability): data pages flushed by the commit, the meta page written
        /// but not flushed. `error` stands for a failed flush.
        case confirmBeforeSync = "confirm.beforeSync"
        /// `SyncConfirmer`: the meta page flushed, the batches not yet answered. Crash only.
        case confirmAfterSync = "confirm.afterSync"
        /// `Environment.grow`: the map is full and about to be resized.
        case lmdbGrowMap = "lmdb.growMap"
        /// `Store.backup`: the copy written and synced, not yet opened and read back.
        case backupAfterCopy = "backup.afterCopy"
        /// `Store.rebuild`: after each chunk of replayed events is committed.
        case rebuildAfterChunk = "rebuild.afterChunk"
        /// `BlobStore`: a put's content written to `DATA/blobs/tmp/` and flushed, not yet renamed into
        /// place.
        case blobBeforeRename = "blob.beforeRename"

        /// The exit status of a process ended by a `crash` failpoint.
        public static let crashStatus: Int32 = 86

        /// Whether the code at this point has an error path, so that `error` is meaningful.
        public var canFail: Bool {
            switch self {
            case .writerAfterCommit, .confirmAfterSync: return false
            default: return true
            }
        }

        /// The error `check()` throws.
        public struct Injected: Error, CustomStringConvertible {
            public let point: Failpoint
            public var description: String { "failpoint \(point.rawValue) injected an error" }
        }

        /// A configuration that could not be read, with what is wrong.
        public struct ConfigurationError: Error, CustomStringConvertible {
            public let description: String
        }

        /// Counts a pass; crashes the process if armed to; returns whether the caller must fail here.
        public func hit() -> Bool {
            guard let rule = Self.rules[self] else { return false }
            let count = Self.hits.withLock { hits in
                hits[self, default: 0] += 1
                return hits[self]!
            }
            if let nth = rule.nth, nth != count { return false }
            switch rule.action {
            case .error:
                return true
            case .crash:
                let line = "failpoint \(rawValue): crashing (pass \(count))\n"
                _ = line.withCString { Glibc.write(2, $0, strlen($0)) }
                _exit(Self.crashStatus)
            }
        }

        /// `hit()`, throwing `Injected` where the caller must fail.
        public func check() throws(Injected) {
            if hit() { throw Injected(point: self) }
        }

        /// Throws if `FOLIO_FAILPOINTS` names an unknown point or action: call at start-up, so that a
        /// mistyped configuration stops the process before it serves rather than never firing.
        public static func checkConfiguration() throws(ConfigurationError) {
            if let problem = parsed.problem { throw ConfigurationError(description: "FOLIO_FAILPOINTS: \(problem)") }
        }

        private enum Action: Sendable { case crash, error }

        private struct Rule: Sendable {
            let action: Action
            let nth: Int?
        }

        private static let parsed = parse(getenv("FOLIO_FAILPOINTS").map { String(cString: $0) } ?? "")
        private static var rules: [Failpoint: Rule] { parsed.rules }
        private static let hits = Mutex<[Failpoint: Int]>([:])

        private static func parse(_ text: String) -> (rules: [Failpoint: Rule], problem: String?) {
            var rules: [Failpoint: Rule] = [:]
            for entry in text.split(separator: ",").map({ $0.trimmingWhitespace() }) where !entry.isEmpty {
                let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, let point = Failpoint(rawValue: parts[0]) else {
                    let known = allCases.map(\.rawValue).joined(separator: ", ")
                    return ([:], "unknown failpoint in \"\(entry)\"; known: \(known)")
                }
                let actionParts = parts[1].split(separator: "@", maxSplits: 1).map(String.init)
                var nth: Int?
                if actionParts.count == 2 {
                    guard let value = Int(actionParts[1]), value >= 1 else {
                        return ([:], "\"\(entry)\": the count after @ must be a number from 1")
                    }
                    nth = value
                }
                switch actionParts[0] {
                case "crash": rules[point] = Rule(action: .crash, nth: nth)
                case "error" where point.canFail: rules[point] = Rule(action: .error, nth: nth)
                case "error": return ([:], "\"\(entry)\": \(point.rawValue) has no error path; use crash")
                default: return ([:], "\"\(entry)\": the action must be crash or error")
                }
            }
            return (rules, nil)
        }
    }

    extension Substring {
        fileprivate func trimmingWhitespace() -> String {
            String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
        }
    }
#endif
