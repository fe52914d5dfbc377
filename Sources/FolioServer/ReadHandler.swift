import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore
import Foundation
import Glibc

/// Answers requests that only read: each in a snapshot holding every commit made before it arrived
/// (an event loop's reader keeps one through an iteration while nothing commits, and never while the
/// loop waits; see `Environment.makeReader(keepingSnapshot:)`). The
/// same code runs on an event loop or a worker; which one is the op's cost class (`OperationTable`).
/// A class, not a struct: an event loop calls it for every read, and a struct held in the loop's
/// `var` was copied (its configuration's every reference retained and released) at each call.
final class ReadHandler: Sendable {
    let store: Store
    let configuration: ServerConfiguration
    let statistics: ServerStatistics
    let digests: DigestCache

    init(store: Store, configuration: ServerConfiguration, statistics: ServerStatistics, digests: DigestCache) {
        self.store = store
        self.configuration = configuration
        self.statistics = statistics
        self.digests = digests
    }

    /// What an event loop did with a read: answered it (with the error's code, nil for a success),
    /// or left it, untouched, for a worker.
    enum LoopAnswer {
        case answered(ErrorCode?)
        case forWorker
    }

    /// Answers the read on the event loop if its cost allows: its op's cost class, and for `byPlan`
    /// the query's plan (made once, in the snapshot that answers); otherwise writes nothing.
    func respondOnLoop(
        _ request: Request, _ operation: Request.ReadOperation, reader: Store.Reader, access: AccessView,
        into output: inout [UInt8]
    )
        -> LoopAnswer
    {
        // A page of events for a peer who may not see every collection is read and filtered.
        if case .events = operation, !access.isAdmin { return .forWorker }
        switch request.spec.cost {
        case .inline?: break
        case .byPlan?:
            switch operation {
            case .list, .count: break
            case .get(_, _, _, let include) where include.isEmpty: break
            default: return .forWorker
            }
        case .worker?, nil: return .forWorker
        }
        do {
            try answer(
                operation, tag: request.tag, reader: reader, access: access.snapshot, indexedOnly: true, into: &output)
            return .answered(nil)
        } catch is NeedsScan {
            return .forWorker
        } catch {
            return .answered(fail(error, tag: request.tag, into: &output))
        }
    }

    /// Answers a plain `get` on the event loop, as `respondOnLoop` answers the same `get` as a
    /// `Request`, with the same bytes.
    func respondToPlainGet(_ get: PlainGet, reader: Store.Reader, into output: inout [UInt8]) -> ErrorCode? {
        do {
            try reader.read { snapshot in
                try Response.appendSuccess(tag: get.tag, to: &output) { writer in
                    guard try snapshot.writeObject(plainCollection: get.collection, plainID: get.id, to: &writer) else {
                        throw StoreError.notFound(
                            collection: String(decoding: get.collection, as: UTF8.self),
                            id: String(decoding: get.id, as: UTF8.self))
                    }
                }
            }
            return nil
        } catch {
            return fail(error, tag: get.tag, into: &output)
        }
    }

    /// Thrown, before anything is written, by a read on the loop that would scan.
    private struct NeedsScan: Error {}

    /// Appends the response line for a read, answered from snapshots of `reader`.
    /// Returns the error's code, nil when the answer is a success.
    @discardableResult
    func respond(
        to operation: Request.ReadOperation, tag: Tag?, reader: Store.Reader, access: AccessSnapshot,
        into output: inout [UInt8]
    )
        -> ErrorCode?
    {
        do {
            try answer(operation, tag: tag, reader: reader, access: access, indexedOnly: false, into: &output)
            return nil
        } catch {
            return fail(error, tag: tag, into: &output)
        }
    }

    private func fail(_ error: any Error, tag: Tag?, into output: inout [UInt8]) -> ErrorCode {
        let failure = ProtocolError(error)
        Response.appendFailure(tag: tag, error: failure, to: &output)
        return failure.code
    }

    private static func run(_ query: Query, in snapshot: Snapshot, countOnly: Bool, indexedOnly: Bool) throws
        -> QueryResult
    {
        guard indexedOnly else { return try snapshot.run(query, countOnly: countOnly) }
        guard let result = try snapshot.runIndexed(query, countOnly: countOnly) else { throw NeedsScan() }
        return result
    }

    /// `indexedOnly`: a `list` or `count` that would scan throws `NeedsScan` instead.
    private func answer(
        _ operation: Request.ReadOperation, tag: Tag?, reader: Store.Reader, access: AccessSnapshot, indexedOnly: Bool,
        into output: inout [UInt8]
    ) throws {
        // Objects of collections the peer may not read stay references in links and includes.
        // Made only for the ops that follow references: a closure is an allocation per request.
        var readable: (@Sendable (String) -> Bool)? {
            access.isAdmin ? nil : { @Sendable (collection: String) in access.canRead(collection) }
        }
        switch operation {
        case .hello:
            let head = try reader.read { try $0.head() }
            Response.appendSuccess(tag: tag, to: &output) { writer in
                writer.bytes.append(UInt8(ascii: "{"))
                writer.writeKey("server", first: true)
                writer.write("foliod")
                writer.writeKey("version")
                writer.write(ServerVersion.current)
                writer.writeKey("protocol")
                writer.write(1)
                writer.writeKey("maxLine")
                writer.write(configuration.maxLineBytes)
                writer.writeKey("durability")
                writer.write(configuration.durability.rawValue)
                writer.writeKey("log")
                writer.write(configuration.clusterLog == nil ? "lmdb" : "postgres")
                writer.writeKey("lastSeq")
                writer.write(head.sequence)
                writer.writeKey("chainHead")
                writer.write(head.hash.hex)
                writer.writeKey("uid")
                writer.write(UInt64(access.peer.uid))
                writer.writeKey("role")
                writer.write(access.isAdmin ? "admin" : access.policy.bestRole(of: access.peer).description)
                writer.bytes.append(UInt8(ascii: "}"))
            }
        case .get(let collection, let id, nil, let include) where !include.isEmpty:
            guard
                let (object, truncated) = try reader.read({
                    try $0.objectIncluding(collection, id, include, readable: readable)
                })
            else {
                throw StoreError.notFound(collection: collection, id: id)
            }
            Response.appendSuccess(tag: tag, to: &output) { writer in
                guard truncated, case .object(var fields) = object else { return writer.write(object) }
                fields["$includeTruncated"] = true
                writer.write(fields)
            }
        case .get(let collection, let id, nil, _):
            try reader.read { snapshot in
                try Response.appendSuccess(tag: tag, to: &output) { writer in
                    guard try snapshot.writeObject(collection, id, to: &writer) else {
                        throw StoreError.notFound(collection: collection, id: id)
                    }
                }
            }
        case .get(let collection, let id, let point?, _):
            guard let object = try reader.read({ try $0.object(collection, id, at: point) }) else {
                throw StoreError.notFound(collection: collection, id: id)
            }
            Response.appendSuccess(tag: tag, to: &output) { object.write(to: &$0) }
        case .list(var query):
            query.readable = readable
            let started = monotonicMicroseconds()
            let result = try reader.read { try Self.run(query, in: $0, countOnly: false, indexedOnly: indexedOnly) }
            let micros = monotonicMicroseconds() - started
            Response.appendSuccess(tag: tag, to: &output) { writer in
                writer.writeRaw("{\"items\":[")
                writer.writeRaw(result.items)
                writer.writeRaw("],\"next\":")
                if let next = result.next {
                    // base64url: nothing to escape.
                    writer.bytes.append(UInt8(ascii: "\""))
                    next.appendToken(to: &writer.bytes)
                    writer.bytes.append(UInt8(ascii: "\""))
                } else {
                    writer.writeRaw("null")
                }
                writer.writeKey("total")
                writer.write(result.total)
                if result.includeTruncated {
                    writer.writeKey("includeTruncated")
                    writer.write(true)
                }
                if query.explain { writePlan(result.plan, micros: micros, to: &writer) }
                writer.bytes.append(UInt8(ascii: "}"))
            }
        case .count(var query):
            query.readable = readable
            let started = monotonicMicroseconds()
            let result = try reader.read { try Self.run(query, in: $0, countOnly: true, indexedOnly: indexedOnly) }
            let micros = monotonicMicroseconds() - started
            Response.appendSuccess(tag: tag, to: &output) { writer in
                writer.writeRaw("{\"count\":")
                writer.write(result.total)
                if query.explain { writePlan(result.plan, micros: micros, to: &writer) }
                writer.bytes.append(UInt8(ascii: "}"))
            }
        case .history(let collection, let id, let after, let limit):
            try reader.read { snapshot in
                try Response.appendSuccess(tag: tag, to: &output) { writer in
                    writer.writeRaw("{\"events\":")
                    let page = try snapshot.writeHistory(collection, id, after: after, limit: limit, to: &writer)
                    guard page.found else { throw StoreError.notFound(collection: collection, id: id) }
                    writer.writeKey("next")
                    if let next = page.next { writer.write(next) } else { writer.writeRaw("null") }
                    writer.bytes.append(UInt8(ascii: "}"))
                }
            }
        case .events(let after, let limit):
            try reader.read { snapshot in
                let last = try snapshot.head().sequence
                try Response.appendSuccess(tag: tag, to: &output) { writer in
                    writer.writeRaw("{\"events\":")
                    let next = try snapshot.writeEvents(
                        after: after, limit: limit, readable: access.isAdmin ? nil : { access.canRead($0) }, to: &writer
                    )
                    writer.writeKey("lastSeq")
                    writer.write(last)
                    writer.writeKey("next")
                    writer.write(next)
                    writer.bytes.append(UInt8(ascii: "}"))
                }
            }
        case .stats:
            let (stats, files, digest) = try reader.read { snapshot in
                let stats = try snapshot.statistics()
                return (
                    stats, try snapshot.fileTotals(),
                    try digests.digest(at: stats.lastSequence) { try snapshot.digest() }
                )
            }
            Response.appendSuccess(tag: tag, to: &output) { writer in
                if access.isAdmin {
                    writeStatistics(stats, files: files, digest: digest, to: &writer)
                } else {
                    // The details of the daemon are an admin's; a reader sees the log's head and its collections.
                    let shown = stats.objectsPerCollection.filter { access.canRead($0.collection) }
                    var summary: JSONObject = [
                        "events": .int(Int64(stats.lastSequence)), "lastSeq": .int(Int64(stats.lastSequence)),
                        "chainHead": .string(stats.chainHead.hex),
                        "collections": .object(
                            JSONObject(shown.map { JSONObject.Field(key: $0.collection, value: .int(Int64($0.count))) })
                        ),
                        "objects": .int(Int64(shown.reduce(0) { $0 + $1.count })),
                    ]
                    if access.canRead(AccessControl.filesCollection) { summary["files"] = files.json }
                    writer.write(summary)
                }
            }
        case .fileGet(let name, let limit):
            let (file, referrers) = try reader.read { snapshot in
                (try snapshot.file(name), try limit.map { try snapshot.fileReferrers(name, limit: $0) })
            }
            guard let file, case .object(var object) = file.json(withUploader: true) else {
                throw StoreError.fileNotFound(name)
            }
            if let referrers {
                // A peer that may not read a collection is not told its ids; the count is of every referrer.
                let shown = referrers.referrers.filter { access.canRead($0.collection) }
                object["referrers"] = .array(shown.map(\.json))
                object["referrerCount"] = .int(Int64(referrers.total))
            }
            Response.appendSuccess(tag: tag, to: &output) { $0.write(object) }
        case .fileRead(let source, let offset, let length):
            let (sha256, size, what): (String, UInt64, String)
            switch source {
            case .name(let name):
                guard let file = try reader.read({ try $0.file(name) }) else { throw StoreError.fileNotFound(name) }
                (sha256, size, what) = (file.sha256, file.size, "file \(name) (\(file.sha256))")
            case .content(let hash):
                guard let stored = store.blobs.size(of: hash) else { throw StoreError.blobNotFound(hash) }
                (sha256, size, what) = (hash, stored, "content \(hash)")
            }
            let start = min(offset, size)
            let bytes: [UInt8]
            do {
                bytes = try store.blobs.read(sha256, offset: start, length: Int(min(UInt64(length), size - start)))
            } catch {
                // Content read by its hash may have been swept since it was found: gone, not damaged.
                if case .content(let hash) = source, store.blobs.size(of: hash) == nil {
                    throw StoreError.blobNotFound(hash)
                }
                throw error
            }
            guard bytes.count == Int(min(UInt64(length), size - start)) else {
                throw StoreError.corrupted("the content of \(what) is shorter than its \(size) bytes")
            }
            Response.appendSuccess(tag: tag, to: &output) { writer in
                // Base64 needs no escaping: written straight into the line.
                writer.writeRaw("{\"data\":\"")
                bytes.withUnsafeBytes { Base64.encode($0, appendingTo: &writer.bytes) }
                writer.writeRaw("\"")
                writer.writeKey("offset")
                writer.write(start)
                writer.writeKey("length")
                writer.write(bytes.count)
                writer.writeKey("size")
                writer.write(size)
                writer.bytes.append(UInt8(ascii: "}"))
            }
        case .fileOpen:
            // Answered by the connection's loop, which passes the descriptor (EventLoop.passContent).
            throw StoreError.invalid("file.read with \"fd\" is answered only on the protocol socket")
        case .fileList(let prefix, let after, let limit):
            let page = try reader.read { try $0.files(prefix: prefix, after: after, limit: limit) }
            Response.appendSuccess(tag: tag, to: &output) { Self.writeFilePage(page, to: &$0) }
        case .fileOrphans(let prefix, let after, let olderThan, let limit):
            let cutoff = Timestamp(milliseconds: Timestamp.now.milliseconds - Int64(olderThan) * 1000)
            let page = try reader.read {
                try $0.fileOrphans(prefix: prefix, after: after, createdBy: cutoff, limit: limit)
            }
            Response.appendSuccess(tag: tag, to: &output) { Self.writeFilePage(page, to: &$0) }
        case .viewList:
            let views = try reader.read { try $0.views() }.filter { access.canRead($0.definition.collection) }
            Response.appendSuccess(tag: tag, to: &output) { writer in
                writer.writeRaw("{\"views\":[")
                for (index, view) in views.enumerated() {
                    if index > 0 { writer.bytes.append(UInt8(ascii: ",")) }
                    guard case .object(var object) = view.definition.json else { continue }
                    object["count"] = .int(Int64(view.count))
                    writer.write(object)
                }
                writer.writeRaw("]}")
            }
        case .schema(let collection):
            guard let schema = try reader.read({ try $0.schema(collection) }) else {
                throw StoreError.schemaNotFound(collection)
            }
            Response.appendSuccess(tag: tag, to: &output) { $0.write(schema.json) }
        case .schemaList:
            let schemas = try reader.read { try $0.schemas() }.filter { access.canRead($0.collection) }
            Response.appendSuccess(tag: tag, to: &output) { $0.write(["schemas": .array(schemas.map(\.json))] as JSON) }
        case .metrics:
            let text = try reader.read { snapshot in try metricsText(snapshot) }
            Response.appendSuccess(tag: tag, to: &output) { writer in
                writer.write(["format": "prometheus-text-0.0.4", "text": .string(text)] as JSON)
            }
        case .verify:
            let scratch = store.directory + "/verify-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
            let report = try store.verify(scratchDirectory: scratch)
            Response.appendSuccess(tag: tag, to: &output) { $0.write(report.json) }
        case .backup(let directory):
            try checkBackupDirectory(directory)
            let copy = try store.backup(to: directory)
            Response.appendSuccess(tag: tag, to: &output) { writer in
                writer.write(
                    [
                        "directory": .string(copy.directory), "lastSeq": .int(Int64(copy.lastSequence)),
                        "chainHead": .string(copy.chainHead.hex),
                        "digest": .string(copy.digest.hex), "bytes": .int(Int64(copy.bytes)),
                        "blobs": .int(Int64(copy.blobs)),
                        "blobBytes": .int(Int64(copy.blobBytes)), "linkedBlobs": .int(Int64(copy.linkedBlobs)),
                    ] as JSON)
            }
        }
    }

    /// `{"items": [file, ...], "next": name or null}`: a page of `file.list` or `file.orphans`.
    private static func writeFilePage(_ page: (files: [FileRecord], next: String?), to writer: inout JSONWriter) {
        writer.writeRaw("{\"items\":[")
        for (index, file) in page.files.enumerated() {
            if index > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            writer.write(file.json(withUploader: true))
        }
        writer.writeRaw("],\"next\":")
        if let next = page.next { writer.write(next) } else { writer.writeRaw("null") }
        writer.bytes.append(UInt8(ascii: "}"))
    }

    /// Backups go below `backup-dir` only: nowhere else may a client make foliod write.
    private func checkBackupDirectory(_ directory: String) throws {
        let root = URL(fileURLWithPath: configuration.backupDirectory ?? store.directory + "/backups")
            .standardizedFileURL.path
        let target = URL(fileURLWithPath: directory).standardizedFileURL.path
        guard target.hasPrefix(root + "/") else {
            throw ProtocolError(
                .forbidden, "backup writes only below the backup directory \(root) (backup-dir), not to \(target)")
        }
        // A link on the way could lead out of it: the nearest part of the path that exists (the
        // target itself, or the directory below which foliod would create the rest) must resolve
        // to a place inside it.
        let resolvedRoot = (root as NSString).resolvingSymlinksInPath
        var existing = target
        while existing.count > root.count, !FileManager.default.fileExists(atPath: existing) {
            existing = (existing as NSString).deletingLastPathComponent
        }
        if existing.count > root.count {
            let resolved = (existing as NSString).resolvingSymlinksInPath
            guard resolved.hasPrefix(resolvedRoot + "/") else {
                throw ProtocolError(
                    .forbidden, "backup: \(target) leads out of the backup directory \(root) through a symbolic link")
            }
        }
        if !FileManager.default.fileExists(atPath: root) {
            try? FileManager.default.createDirectory(
                atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
    }

    /// `{"source", "view" | "collection", "examined", "micros"}`: micros is the time the server spent
    /// answering, page included.
    private func writePlan(_ plan: QueryPlan, micros: UInt64, to writer: inout JSONWriter) {
        writer.writeKey("plan")
        writer.bytes.append(UInt8(ascii: "{"))
        writer.writeKey("source", first: true)
        switch plan.source {
        case .view(let name):
            writer.write("view")
            writer.writeKey("view")
            writer.write(name)
        case .viewRange(let name, let fixed):
            writer.write("viewRange")
            writer.writeKey("view")
            writer.write(name)
            writer.writeKey("fixed")
            writer.write(.array(fixed.map(JSON.string)))
        case .creationOrder(let collection):
            writer.write("creationOrder")
            writer.writeKey("collection")
            writer.write(collection)
        case .scan(let collection):
            writer.write("scan")
            writer.writeKey("collection")
            writer.write(collection)
        case .references(let from), .referenceScan(let from):
            if case .references = plan.source { writer.write("references") } else { writer.write("referenceScan") }
            writer.writeKey("from")
            writer.write(from)
        case .links(let field), .linkScan(let field):
            if case .links = plan.source { writer.write("links") } else { writer.write("linkScan") }
            writer.writeKey("field")
            writer.write(field)
        }
        writer.writeKey("examined")
        writer.write(plan.examined)
        writer.writeKey("micros")
        writer.write(micros)
        writer.bytes.append(UInt8(ascii: "}"))
    }

    private func writeStatistics(
        _ stats: Snapshot.Statistics, files: FileTotals, digest: ChainHash, to writer: inout JSONWriter
    ) {
        writer.bytes.append(UInt8(ascii: "{"))
        writer.writeKey("events", first: true)
        writer.write(stats.lastSequence)
        writer.writeKey("lastSeq")
        writer.write(stats.lastSequence)
        writer.writeKey("chainHead")
        writer.write(stats.chainHead.hex)
        writer.writeKey("digest")
        writer.write(digest.hex)
        writer.writeKey("collections")
        writer.bytes.append(UInt8(ascii: "{"))
        for (index, entry) in stats.objectsPerCollection.enumerated() {
            if index > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            writer.write(entry.collection)
            writer.bytes.append(UInt8(ascii: ":"))
            writer.write(entry.count)
        }
        writer.bytes.append(UInt8(ascii: "}"))
        writer.writeKey("objects")
        writer.write(stats.objectsPerCollection.reduce(0) { $0 + $1.count })
        writer.writeKey("views")
        writer.write(stats.views)
        writer.writeKey("files")
        writer.write(files.json)
        writer.writeKey("connections")
        writer.write(statistics.connections.load(ordering: .relaxed))
        writer.writeKey("connectionsRefused")
        writer.write(statistics.connectionsRefused.load(ordering: .relaxed))
        writer.writeKey("connectionsShed")
        writer.write(statistics.connectionsShed.load(ordering: .relaxed))
        writer.writeKey("slowLinesClosed")
        writer.write(statistics.slowLinesClosed.load(ordering: .relaxed))
        writer.writeKey("clientMemory")
        writer.write(statistics.clientMemory.load(ordering: .relaxed))
        writer.writeKey("watches")
        writer.write(statistics.watches.load(ordering: .relaxed))
        writer.writeKey("liveQueries")
        writer.write(statistics.liveQueries.load(ordering: .relaxed))
        writer.writeKey("uploads")
        writer.write(statistics.uploads.load(ordering: .relaxed))
        let deliveries: [(key: StaticString, unit: StaticString, LatencyRecorder)] = [
            ("watchDelivery", "{\"events\":", statistics.watchDelivery),
            ("liveDelivery", "{\"changes\":", statistics.liveDelivery),
        ]
        for (key, unit, recorder) in deliveries {
            let delivery = recorder.summary
            writer.writeKey(key)
            writer.writeRaw(unit)
            writer.write(delivery.count)
            writer.writeRaw(",\"p50Micros\":")
            writer.write(delivery.p50)
            writer.writeRaw(",\"p99Micros\":")
            writer.write(delivery.p99)
            writer.writeRaw(",\"maxMicros\":")
            writer.write(delivery.maximum)
            writer.bytes.append(UInt8(ascii: "}"))
        }
        writer.writeKey("uptimeSeconds")
        writer.write((statistics.uptime * 1000).rounded() / 1000)
        writer.writeKey("commits")
        writer.write(statistics.commits.load(ordering: .relaxed))
        writer.writeKey("committedWrites")
        writer.write(statistics.committedWrites.load(ordering: .relaxed))
        writer.writeKey("failedCommits")
        writer.write(statistics.failedCommits.load(ordering: .relaxed))
        writer.writeKey("durability")
        writer.write(configuration.durability.rawValue)
        writer.writeKey("journal")
        if let journal = store.journal {
            writer.writeRaw("{\"size\":")
            writer.write(journal.size)
            writer.writeKey("liveBytes")
            writer.write(journal.liveBytes)
            writer.writeKey("checkpointSeq")
            writer.write(journal.checkpointedSequence)
            writer.writeKey("checkpoints")
            writer.write(journal.checkpointCount)
            writer.writeKey("direct")
            writer.writeRaw(journal.writesDirectly ? "true" : "false")
            // How this run's start went: resumed at LMDB's last commit, back to the checkpoint
            // with the journal applied, or on a store with no checkpoint yet.
            writer.writeKey("start")
            let recovery = store.recovery
            writer.write(recovery.map { $0.resumed ? "resumed" : "recovered" } ?? "fresh")
            writer.writeKey("startRecords")
            writer.write(recovery?.records ?? 0)
            writer.bytes.append(UInt8(ascii: "}"))
        } else {
            writer.writeRaw("null")
        }
        writer.writeKey("cluster")
        if let cluster = statistics.cluster.withLock({ $0 }) {
            writer.write(cluster.json(applied: statistics.applied.current, now: monotonicMilliseconds()))
        } else {
            writer.writeRaw("null")
        }
        writer.writeKey("lmdb")
        writer.writeRaw("{\"mapSize\":")
        writer.write(stats.mapSize)
        writer.writeKey("usedSize")
        writer.write(stats.usedSize)
        writer.writeKey("fileSize")
        writer.write(stats.fileSize)
        writer.writeKey("pageSize")
        writer.write(stats.pageSize)
        writer.writeKey("readerSlotsUsed")
        writer.write(stats.readerSlotsUsed)
        writer.writeKey("maxReaders")
        writer.write(stats.maxReaders)
        writer.writeRaw("}}")
    }
}
