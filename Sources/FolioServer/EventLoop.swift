import CFolioSystem
import Dispatch
import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore
import Glibc
import Synchronization

/// One thread serving many connections with epoll (level-triggered). It reads requests, answers
/// reads from its own snapshot reader, queues writes for the writer, and writes answers back,
/// in request order per connection. Other threads talk to it only through `post`.
final class EventLoop: @unchecked Sendable {
    enum Message {
        case writeOutcomes([Writer.Outcome])
        /// A read that ran on a worker thread finished with this response line.
        case answered(Connection, [UInt8])
        case committed([CommittedEvent])
        /// A connection accepted by another loop, to serve here.
        case adopt(fd: Int32, origin: Origin)
        /// Shut down: accept nothing, read nothing new, close each connection once it is answered.
        case drain
    }

    private static let wakeToken = UInt64.max
    private static let listenerToken = UInt64.max - 1
    private static let readChunk = 64 << 10
    /// Stop reading from a connection while this much output waits for it, or this many requests.
    private static let outputHighWater = 16 << 20
    private static let pendingHighWater = 8192
    private static let catchUpChunk = 1000

    let index: Int
    private let epoll: Epoll
    private let wake: WakeSignal
    private let listener: UnixListener
    private let writer: Writer
    private let reads: ReadHandler
    private let reader: Store.Reader
    private let configuration: ServerConfiguration
    private let statistics: ServerStatistics
    private let log: Log
    private let workers: DispatchQueue
    private let watchers: WatchRegistry
    /// Set on the loop that accepts: every loop, served in turn.
    private var peers: [EventLoop] = []
    private var nextPeer = 0

    private let mailbox = Mutex<[Message]>([])
    private var connections: [Int32: Connection] = [:]
    private var toFlush: [Connection] = []
    private var toSubmit: [Writer.Job] = []
    private var readBuffer: [UInt8]
    private var draining = false
    private var acceptPausedUntil: UInt64 = 0
    private var thread: pthread_t?

    init(
        index: Int, listener: UnixListener, writer: Writer, store: Store, configuration: ServerConfiguration,
        statistics: ServerStatistics, log: Log, workers: DispatchQueue, watchers: WatchRegistry, digests: DigestCache
    ) throws {
        self.index = index
        self.listener = listener
        self.writer = writer
        self.configuration = configuration
        self.statistics = statistics
        self.log = log
        self.workers = workers
        self.watchers = watchers
        reads = ReadHandler(store: store, configuration: configuration, statistics: statistics, digests: digests)
        reader = try store.makeReader()
        epoll = try Epoll()
        wake = try WakeSignal()
        readBuffer = [UInt8](repeating: 0, count: Self.readChunk)
        try epoll.add(wake.fd, .readable, token: Self.wakeToken)
    }

    /// Makes this loop the one that accepts connections, handing them to `loops` in turn, so that
    /// clients connecting in a burst still spread over every loop (and core).
    func acceptConnections(for loops: [EventLoop]) throws {
        peers = loops
        try epoll.add(listener.fd, .readable, token: Self.listenerToken)
    }

    func start() {
        thread = startThread(name: "folio-loop-\(index)") { [self] in run() }
    }

    func join() {
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// Hands a message to the loop from any thread.
    func post(_ message: Message) {
        let wasEmpty = mailbox.withLock { box in
            box.append(message)
            return box.count == 1
        }
        if wasEmpty { wake.signal() }
    }

    // MARK: The loop

    private func run() {
        var events = [UInt32](repeating: 0, count: 256)
        var tokens = [UInt64](repeating: 0, count: 256)
        var drainDeadline: UInt64 = 0
        while true {
            let timeout: Int32 = draining || acceptPausedUntil > 0 ? 100 : -1
            let count: Int
            do {
                count = try epoll.wait(events: &events, tokens: &tokens, timeout: timeout)
            } catch {
                log.error("event loop \(index): \(error)")
                return
            }
            for slot in 0..<count {
                switch tokens[slot] {
                case Self.wakeToken:
                    wake.drain()
                    handleMailbox()
                case Self.listenerToken:
                    acceptConnections()
                default:
                    guard let connection = connections[Int32(truncatingIfNeeded: tokens[slot])] else { continue }
                    let ready = Epoll.Events(rawValue: events[slot])
                    if !ready.isDisjoint(with: [.readable, .hangUp, .error]) { readRequests(connection) }
                    if ready.contains(.writable) && !connection.isClosed { markForFlush(connection) }
                }
            }
            if acceptPausedUntil > 0 && monotonicMilliseconds() >= acceptPausedUntil {
                acceptPausedUntil = 0
                try? epoll.add(listener.fd, .readable, token: Self.listenerToken)
            }
            finishIteration()
            if draining {
                if drainDeadline == 0 { drainDeadline = monotonicMilliseconds() + 10_000 }
                if connections.isEmpty { return }
                if monotonicMilliseconds() > drainDeadline {
                    log.notice("closing \(connections.count) connection(s) that did not finish in time")
                    for connection in Array(connections.values) { close(connection) }
                    return
                }
            }
        }
    }

    /// Submits the writes gathered in this iteration in one hand-over, and writes out answers.
    private func finishIteration() {
        if !toSubmit.isEmpty {
            writer.submit(toSubmit)
            toSubmit.removeAll(keepingCapacity: true)
        }
        while !toFlush.isEmpty {
            let batch = toFlush
            toFlush.removeAll(keepingCapacity: true)
            for connection in batch {
                connection.needsFlush = false
                flush(connection)
            }
        }
    }

    private func handleMailbox() {
        let messages = mailbox.withLock { box in
            let messages = box
            box.removeAll(keepingCapacity: true)
            return messages
        }
        for message in messages {
            switch message {
            case .writeOutcomes(let outcomes):
                for outcome in outcomes { complete(outcome) }
            case .answered(let connection, let response):
                guard !connection.isClosed else { continue }
                connection.readsInFlight -= 1
                connection.output.append(contentsOf: response)
                dispatchPending(connection)
                markForFlush(connection)
            case .committed(let events):
                deliverLive(events)
            case .adopt(let fd, let origin):
                if draining { Glibc.close(fd) } else { adopt(fd, origin) }
            case .drain:
                startDraining()
            }
        }
    }

    private func startDraining() {
        draining = true
        if !peers.isEmpty { epoll.remove(listener.fd) }
        for connection in connections.values {
            connection.inputFinished = true
            connection.closeWhenIdle = true
            markForFlush(connection)
        }
    }

    // MARK: Accepting

    private func acceptConnections() {
        for _ in 0..<64 {
            let fd = folio_accept(listener.fd)
            if fd < 0 {
                switch errno {
                case EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED: return
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    log.error("cannot accept connections: \(SystemError("accept4")); pausing accepts for 100 ms")
                    epoll.remove(listener.fd)
                    acceptPausedUntil = monotonicMilliseconds() + 100
                    return
                default:
                    log.error("\(SystemError("accept4"))")
                    return
                }
            }
            var uid: UInt32 = 0
            var gid: UInt32 = 0
            var pid: Int32 = 0
            if folio_peer_credentials(fd, &uid, &gid, &pid) != 0 {
                uid = .max
                gid = .max
                pid = 0
            }
            let origin = Origin(uid: uid, gid: gid, pid: pid)
            let target = peers[nextPeer % peers.count]
            nextPeer &+= 1
            if target === self { adopt(fd, origin) } else { target.post(.adopt(fd: fd, origin: origin)) }
        }
    }

    private func adopt(_ fd: Int32, _ origin: Origin) {
        let connection = Connection(fd: fd, loop: self, origin: origin)
        do {
            try epoll.add(fd, .readable, token: UInt64(fd))
        } catch {
            log.error("cannot watch a new connection: \(error)")
            Glibc.close(fd)
            return
        }
        connection.registered = .readable
        connections[fd] = connection
        statistics.connections.add(1, ordering: .relaxed)
        statistics.acceptedConnections.add(1, ordering: .relaxed)
    }

    // MARK: Reading

    private func readRequests(_ connection: Connection) {
        guard !connection.isClosed, !connection.inputFinished else { return }
        var total = 0
        while total < 4 * Self.readChunk && !connection.inputFinished && !connection.isClosed {
            let count = readBuffer.withUnsafeMutableBytes { Glibc.read(connection.fd, $0.baseAddress, $0.count) }
            if count > 0 {
                total += count
                readBuffer.withUnsafeBytes { takeInput(UnsafeRawBufferPointer(rebasing: $0[..<count]), connection) }
                if count < Self.readChunk { break }
            } else if count == 0 {
                finishInput(connection)
            } else {
                switch errno {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: break
                default:
                    close(connection)
                    return
                }
                break
            }
        }
        dispatchPending(connection)
        markForFlush(connection)
    }

    /// The peer sent EOF: a last line without a newline still counts; answer everything, then close.
    private func finishInput(_ connection: Connection) {
        if !connection.partialLine.isEmpty {
            let line = connection.partialLine
            connection.partialLine = []
            line.withUnsafeBytes { takeLine($0, connection) }
        }
        connection.inputFinished = true
        connection.closeWhenIdle = true
    }

    /// Splits received bytes into lines; a line too long is refused without being buffered whole.
    private func takeInput(_ chunk: UnsafeRawBufferPointer, _ connection: Connection) {
        var start = 0
        while start < chunk.count && !connection.inputFinished {
            guard let newline = memchr(chunk.baseAddress! + start, 0x0A, chunk.count - start) else {
                // One byte of grace: a line of exactly the limit may end in "\r" before its "\n" arrives.
                if connection.partialLine.count + chunk.count - start > configuration.maxLineBytes + 1 {
                    refuseLongLine(connection)
                    return
                }
                connection.partialLine.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[start...]))
                return
            }
            let end = UnsafeRawPointer(newline) - chunk.baseAddress!
            if connection.partialLine.isEmpty {
                takeLine(UnsafeRawBufferPointer(rebasing: chunk[start..<end]), connection)
            } else {
                connection.partialLine.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[start..<end]))
                let line = connection.partialLine
                connection.partialLine = []
                line.withUnsafeBytes { takeLine($0, connection) }
            }
            start = end + 1
        }
    }

    /// Answers `too_large` and closes the connection once answered: the rest of the line is not read.
    private func refuseLongLine(_ connection: Connection) {
        connection.partialLine = []
        connection.pending.append(
            .failure(
                RequestDecoder.TaggedError(
                    tag: nil,
                    error: ProtocolError(.tooLarge, "line longer than \(configuration.maxLineBytes) bytes; closing the connection"))))
        connection.inputFinished = true
        connection.closeWhenIdle = true
    }

    private func takeLine(_ line: UnsafeRawBufferPointer, _ connection: Connection) {
        var line = line
        if let last = line.last, last == 0x0D { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
        if line.count > configuration.maxLineBytes {
            refuseLongLine(connection)
            return
        }
        switch RequestDecoder.decode(line) {
        case .failure(let error):
            connection.pending.append(.failure(error))
        case .success(let request):
            switch request.operation {
            case .command(let command):
                connection.pending.append(
                    .write(Writer.Job(command: command, origin: connection.origin, tag: request.tag, connection: connection, size: line.count)))
            case .watch, .unwatch:
                connection.pending.append(.watch(request))
            default:
                connection.pending.append(.read(request))
            }
        }
    }

    // MARK: Dispatching

    /// Starts every pending request that may start: writes go to the writer in order behind earlier
    /// writes; a read waits until everything before it on the connection is answered, so a client
    /// reads its own writes.
    private func dispatchPending(_ connection: Connection) {
        while connection.pendingHead < connection.pending.count && !connection.isClosed {
            let item = connection.pending[connection.pendingHead]
            switch item {
            case .write(let job):
                guard connection.readsInFlight == 0 else { return }
                toSubmit.append(job)
                connection.writesInFlight += 1
            case .read(let request):
                guard connection.readsInFlight == 0 && connection.writesInFlight == 0 else { return }
                if reads.isHeavy(request.operation, reader) {
                    connection.readsInFlight += 1
                    runOnWorker(request, connection)
                } else {
                    reads.respond(to: request, with: reader, into: &connection.output)
                }
            case .watch(let request):
                guard connection.readsInFlight == 0 && connection.writesInFlight == 0 else { return }
                handleWatch(request, connection)
            case .failure(let failure):
                guard connection.readsInFlight == 0 && connection.writesInFlight == 0 else { return }
                Response.appendFailure(tag: failure.tag, error: failure.error, to: &connection.output)
            }
            connection.popPending()
        }
    }

    private func runOnWorker(_ request: Request, _ connection: Connection) {
        let reads = self.reads
        workers.async { [self] in
            var output: [UInt8] = []
            do {
                try reads.respondHeavy(to: request, into: &output)
            } catch {
                Response.appendFailure(tag: request.tag, error: ProtocolError(error), to: &output)
            }
            post(.answered(connection, output))
        }
    }

    private func complete(_ outcome: Writer.Outcome) {
        let connection = outcome.job.connection
        guard !connection.isClosed else { return }
        connection.writesInFlight -= 1
        switch outcome.result {
        case .success(let applied):
            Response.appendSuccess(tag: outcome.job.tag, to: &connection.output) { writer in
                WriteResult.write(applied, to: &writer)
            }
        case .failure(let error):
            Response.appendFailure(tag: outcome.job.tag, error: error, to: &connection.output)
        }
        dispatchPending(connection)
        markForFlush(connection)
    }

    // MARK: Writing

    private func markForFlush(_ connection: Connection) {
        guard !connection.needsFlush && !connection.isClosed else { return }
        connection.needsFlush = true
        toFlush.append(connection)
    }

    private func flush(_ connection: Connection) {
        guard !connection.isClosed else { return }
        continueCatchUp(connection)
        while connection.unsentBytes > 0 {
            let sent = connection.output.withUnsafeBytes { buffer in
                send(connection.fd, buffer.baseAddress! + connection.outputSent, connection.unsentBytes, Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                connection.outputSent += sent
            } else if sent < 0 && errno == EINTR {
                continue
            } else if sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                break
            } else {
                close(connection)
                return
            }
        }
        if connection.unsentBytes == 0 {
            connection.output.removeAll(keepingCapacity: connection.output.capacity <= 1 << 20)
            connection.outputSent = 0
            if !connection.undeliveredCommits.isEmpty {
                let now = monotonicMicroseconds()
                for (committedAt, events) in connection.undeliveredCommits {
                    statistics.watchDelivery.record(now - min(now, committedAt), count: events)
                }
                connection.undeliveredCommits.removeAll(keepingCapacity: true)
            }
            if !connection.watches.isEmpty && connection.watches.contains(where: \.catchingUp) {
                markForFlush(connection)
            }
        } else if connection.outputSent >= 1 << 20 {
            connection.output.removeFirst(connection.outputSent)
            connection.outputSent = 0
        }
        if connection.closeWhenIdle && connection.isIdle && connection.unsentBytes == 0 {
            close(connection)
            return
        }
        updateInterest(connection)
    }

    /// Reads while there is room for more; wants to write while output waits.
    private func updateInterest(_ connection: Connection) {
        var wanted: Epoll.Events = []
        let congested = connection.unsentBytes > Self.outputHighWater || connection.pendingCount > Self.pendingHighWater
        if !connection.inputFinished && !congested { wanted.insert(.readable) }
        if connection.unsentBytes > 0 { wanted.insert(.writable) }
        guard wanted != connection.registered else { return }
        do {
            try epoll.modify(connection.fd, wanted, token: UInt64(connection.fd))
            connection.registered = wanted
        } catch {
            close(connection)
        }
    }

    private func close(_ connection: Connection) {
        guard !connection.isClosed else { return }
        connection.isClosed = true
        epoll.remove(connection.fd)
        Glibc.close(connection.fd)
        connections[connection.fd] = nil
        if !connection.watches.isEmpty {
            statistics.watches.subtract(connection.watches.count, ordering: .relaxed)
            watchers.remove(connection.watches.count, loop: self)
            connection.watches.removeAll()
        }
        statistics.connections.subtract(1, ordering: .relaxed)
    }

    // MARK: Watches

    private func handleWatch(_ request: Request, _ connection: Connection) {
        switch request.operation {
        case .watch(let after, let collection):
            guard let tag = request.tag else {
                Response.appendFailure(
                    tag: nil, error: ProtocolError(.badRequest, "watch needs a tag: its events carry it, and unwatch names it"),
                    to: &connection.output)
                return
            }
            guard !connection.watches.contains(where: { $0.tag.matches(tag.value) }) else {
                Response.appendFailure(tag: tag, error: ProtocolError(.badRequest, "a watch with tag \(tag) is already running on this connection"), to: &connection.output)
                return
            }
            let head = (try? reader.read { try $0.head().sequence }) ?? 0
            let start = after ?? head
            guard start <= head else {
                Response.appendFailure(
                    tag: tag, error: ProtocolError(.badRequest, "after \(start) is beyond the last event, \(head)"), to: &connection.output)
                return
            }
            let watch = Watch(tag: tag, after: start, collection: collection)
            connection.watches.append(watch)
            statistics.watches.add(1, ordering: .relaxed)
            watchers.add(1, loop: self)
            Response.appendSuccess(tag: tag, to: &connection.output) { writer in
                writer.writeRaw("{\"watching\":true,\"after\":")
                writer.write(start)
                writer.bytes.append(UInt8(ascii: "}"))
            }
        case .unwatch(let tag):
            guard let index = connection.watches.firstIndex(where: { $0.tag.matches(tag) }) else {
                Response.appendFailure(tag: request.tag, error: ProtocolError(.notFound, "no watch with tag \(tag) runs on this connection"), to: &connection.output)
                return
            }
            let watch = connection.watches.remove(at: index)
            statistics.watches.subtract(1, ordering: .relaxed)
            watchers.remove(1, loop: self)
            Response.appendSuccess(tag: request.tag, to: &connection.output) { writer in
                writer.writeRaw("{\"watch\":")
                writer.writeRaw(watch.tag.text)
                writer.writeRaw(",\"lastSeq\":")
                writer.write(watch.lastSequence)
                writer.bytes.append(UInt8(ascii: "}"))
            }
        default:
            break
        }
    }

    /// Feeds catching-up watches from the log, one bounded chunk per flush, while output has room.
    private func continueCatchUp(_ connection: Connection) {
        for watch in connection.watches where watch.catchingUp {
            guard connection.unsentBytes < Self.outputHighWater / 4 else { return }
            do {
                var reachedEnd = false
                try reader.read { snapshot in
                    var delivered = 0
                    try snapshot.forEachEvent(after: watch.next - 1, limit: Self.catchUpChunk) { sequence, record in
                        delivered += 1
                        watch.next = sequence + 1
                        if watch.collection != nil {
                            guard watch.wants(collection: try Snapshot.collection(ofEventRecord: record, sequence: sequence)) else { return }
                        }
                        var line = JSONWriter(capacity: record.count + 80)
                        try Snapshot.writeEventRecord(record, to: &line)
                        Response.appendWatchEvent(tag: watch.tag, event: line.bytes, to: &connection.output)
                    }
                    reachedEnd = delivered < Self.catchUpChunk
                }
                if reachedEnd { watch.catchingUp = false }
            } catch {
                Response.appendFailure(tag: watch.tag, error: ProtocolError(error), to: &connection.output)
                endWatch(watch, connection)
                return
            }
        }
    }

    /// Live events for every watch on this loop; a gap sends a watch back to the log.
    private func deliverLive(_ events: [CommittedEvent]) {
        for connection in connections.values where !connection.watches.isEmpty {
            for watch in connection.watches where !watch.catchingUp {
                for event in events where event.sequence >= watch.next {
                    if event.sequence > watch.next {
                        watch.catchingUp = true
                        break
                    }
                    watch.next = event.sequence + 1
                    if watch.wants(collection: event.collection) {
                        Response.appendWatchEvent(tag: watch.tag, event: event.wire, to: &connection.output)
                        if connection.undeliveredCommits.last?.committedAt == event.committedAt {
                            connection.undeliveredCommits[connection.undeliveredCommits.count - 1].events += 1
                        } else {
                            connection.undeliveredCommits.append((event.committedAt, 1))
                        }
                    }
                }
                if connection.unsentBytes > configuration.watchBufferBytes {
                    Response.appendFailure(
                        tag: watch.tag,
                        error: ProtocolError(
                            .lagging, "the watch fell behind by more than \(configuration.watchBufferBytes) bytes; resume with after = lastSeq",
                            details: [("lastSeq", String(watch.lastSequence))]),
                        to: &connection.output)
                    endWatch(watch, connection)
                }
            }
            markForFlush(connection)
        }
    }

    private func endWatch(_ watch: Watch, _ connection: Connection) {
        connection.watches.removeAll { $0 === watch }
        statistics.watches.subtract(1, ordering: .relaxed)
        watchers.remove(1, loop: self)
    }
}

func monotonicMilliseconds() -> UInt64 { monotonicMicroseconds() / 1000 }

func monotonicMicroseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
}
