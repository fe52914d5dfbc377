import CFolioSystem
import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore
import Glibc
import Synchronization

/// One thread serving many connections with epoll (level-triggered). It reads requests, answers
/// the reads whose cost is bounded (`OperationSpec.Cost.inline`) from its own snapshot reader, hands
/// the others to the worker pool and writes to the writer, and writes answers back, in request
/// order per connection. Other threads talk to it only through `post`.
///
/// Accepting lives in `EventLoop+Accepting.swift`, watches in `EventLoop+Watches.swift`, the bounds
/// on what clients may hold in `EventLoop+Limits.swift`.
final class EventLoop: @unchecked Sendable {
    enum Message {
        case writeOutcomes([Writer.Outcome])
        /// A read that ran on a worker thread finished with this response line.
        case answered(Connection, [UInt8], Connection.Arrival, ErrorCode?)
        /// An upload op a worker ran: the write to submit, its answer, or why it failed.
        case stored(Connection, Result<UploadStep, ProtocolError>, tag: Tag?, Connection.Arrival)
        /// A long line decoded on a decoder thread.
        case decoded(Connection, id: UInt64, Connection.Item)
        case committed([CommittedEvent])
        /// First pages, changes and ends of live queries.
        case live([LiveQueries.Delivery])
        /// A connection accepted by another loop, to serve here.
        case adopt(fd: Int32, origin: Origin)
        /// Shut down: accept nothing, read nothing new, close each connection once it is answered.
        case drain
        /// SIGHUP: the settings that may change live (limits, timeouts, the access policy).
        case reconfigure(ServerConfiguration)
        /// The node applied more events: reads waiting for `minSeq` may go on.
        case sequenceApplied
    }

    /// What an upload op's worker leaves to do.
    enum UploadStep {
        /// Bind the stored content's name (`file.put`, `file.commit`).
        case write(Writer.Job)
        /// The op is done: its response line.
        case answer([UInt8])
    }

    static let wakeToken = UInt64.max
    static let listenerToken = UInt64.max - 1
    static let readChunk = 64 << 10
    /// Stop reading from a connection while this much output waits for it, or this many requests.
    static let outputHighWater = 16 << 20
    /// Output kept allocated for a connection once everything was sent.
    static let keptOutputCapacity = 64 << 10
    /// Lines at least this long are decoded on a decoder thread: parsing is linear, but a megabyte
    /// of JSON would still hold up every other connection of the loop for milliseconds.
    static let offloadedLineBytes = 32 << 10

    let index: Int
    let epoll: Epoll
    /// How long the loop looks for work before it sleeps (`--idle-poll`).
    private var idlePoll: IdlePoll
    private let wake: WakeSignal
    let listener: UnixListener
    private let writer: Writer
    private var reads: ReadHandler
    let reader: Store.Reader
    private(set) var configuration: ServerConfiguration
    let statistics: ServerStatistics
    let log: Log
    private let workers: WorkerPool
    private let decoders: ThreadPool<Void>
    /// Whole-line buffers, shared by the loops.
    let lineBuffers: LineBuffers
    /// Decodings of long lines the framer has just handed over (`takeLine`), for `submitDecodes`.
    private var decodesToSubmit: [ThreadPool<Void>.Job] = []
    private let watchdog: Watchdog?
    /// The uploads in pieces open on every loop's connections.
    let uploads: Uploads
    /// The socket file's group, whose members the default policy lets write.
    private let socketGroupID: UInt32
    /// Users and their groups as the policy sees them, by uid and gid, with when they were looked
    /// up (monotonic ms): a connection reuses a lookup younger than `peerLookupMilliseconds`, so a
    /// user taken out of a group loses its role on new connections within a minute, not only at
    /// the next SIGHUP.
    private var peerCache: [UInt64: (peer: Peer, at: UInt64)] = [:]
    static let peerLookupMilliseconds: UInt64 = 60_000
    let watchers: WatchRegistry
    let liveQueries: LiveQueries
    /// Set on the loop that accepts: every loop, served in turn.
    var peers: [EventLoop] = []
    var nextPeer = 0
    /// Accepting: the connection limit, the descriptor kept to refuse clients when none is left,
    /// and what was refused since it was last logged.
    var accepting = AcceptState()

    private let mailbox = Mutex<[Message]>([])
    var connections: [Int32: Connection] = [:]
    private var toFlush: [Connection] = []
    /// Connections with watches catching up from the log, flushed again in the next iteration:
    /// one chunk a watch an iteration, so that a catch-up that sends nothing (a collection no
    /// event names) does not read the whole log while every other connection waits.
    private var catchingUp: [Connection] = []
    private var toSubmit: [Writer.Job] = []
    /// Connections whose next read waits for `minSeq`, by descriptor.
    var waitingForSequence: [Int32: Connection] = [:]
    private var readBuffer: [UInt8]
    /// Whether this iteration reads requests with `peekRequests`: only when several connections
    /// were ready at once. With one, the machine is idle, and the wake-up the read gives its client
    /// is not wasted: it brings the client's CPU out of idle before its answer comes (one client's
    /// gets took 4–8 µs longer at p50 when every read peeked).
    private var peeking = false
    var draining = false
    private var thread: pthread_t?
    /// Memory held for this loop's clients (the sum of their `accountedBytes`), and its share of
    /// the budget.
    var heldBytes = 0
    /// Of `heldBytes`, what closed connections still hold: requests of theirs that a decoder, a
    /// worker or the writer still has, counted (with `requestsPending`) until they finish.
    var orphanedBytes = 0
    /// Connections that stopped reading only because the daemon or this loop was over a shared
    /// bound (`max-requests-total`, this loop's share of `client-memory`): read again once it is not.
    var pausedForLoad: [Connection] = []
    /// This loop's requests received less those answered (or dropped) since `requestsPending` was
    /// last brought up to date: it is, once an iteration, so that the loops do not contend for it
    /// at every request.
    var pendingDelta = 0
    /// This loop's share of `--client-memory`.
    var memoryBudget: Int { max(1 << 20, configuration.clientMemoryBytes / max(1, loopCount)) }
    private let loopCount: Int
    var shedding = ThrottledNote()
    var nextSweep: UInt64 = 0

    init(
        index: Int, loops: Int, listener: UnixListener, writer: Writer, store: Store,
        configuration: ServerConfiguration,
        statistics: ServerStatistics, log: Log, workers: WorkerPool, decoders: ThreadPool<Void>,
        watchers: WatchRegistry,
        liveQueries: LiveQueries, digests: DigestCache, uploads: Uploads, lineBuffers: LineBuffers, watchdog: Watchdog?,
        socketGroupID: UInt32
    ) throws {
        self.uploads = uploads
        self.lineBuffers = lineBuffers
        self.watchdog = watchdog
        self.socketGroupID = socketGroupID
        self.index = index
        self.listener = listener
        self.writer = writer
        self.configuration = configuration
        idlePoll = IdlePoll(limit: UInt64(configuration.idlePollMicroseconds))
        self.statistics = statistics
        self.log = log
        self.workers = workers
        self.decoders = decoders
        self.watchers = watchers
        self.liveQueries = liveQueries
        loopCount = loops
        reads = ReadHandler(store: store, configuration: configuration, statistics: statistics, digests: digests)
        // Kept open through an iteration while nothing is committed: pipelined reads share it.
        reader = try store.makeReader(keepingSnapshot: true)
        epoll = try Epoll()
        wake = try WakeSignal()
        readBuffer = [UInt8](repeating: 0, count: Self.readChunk)
        try epoll.add(wake.fd, .readable, token: Self.wakeToken)
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
        defer { reader.releaseSnapshot() }
        while true {
            reader.releaseSnapshot()
            // Wake at least once a second for the line timeout, paused accepts and draining, and as
            // often as the watchdog needs a beat.
            var timeout: Int32 =
                draining || accepting.isPaused || configuration.lineTimeoutSeconds > 0 ? (draining ? 100 : 1000) : -1
            // Paused by a shared bound that other loops' answers may lift: look again soon.
            if !pausedForLoad.isEmpty { timeout = 20 }
            // Reads waiting for minSeq time out on their own.
            if !waitingForSequence.isEmpty && (timeout < 0 || timeout > 50) { timeout = 50 }
            // Watches catching up go on at once, after whatever else is ready.
            if !catchingUp.isEmpty { timeout = 0 }
            if let watchdog {
                timeout = Int32(min(UInt64(timeout < 0 ? 1000 : timeout), max(10, watchdog.interval / 2)))
            }
            let count: Int
            do {
                count = try waitForEvents(&events, &tokens, timeout: timeout)
            } catch {
                log.error("event loop \(index): \(error)")
                return
            }
            peeking = count >= 2
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
            let now = monotonicMilliseconds()
            watchdog?.beat(loop: index, now: now)
            resumeAcceptingIfDue(now)
            if now >= nextSweep {
                nextSweep = now + 1000
                sweep(now)
            }
            if !waitingForSequence.isEmpty { resumeWaitingReads() }
            if !catchingUp.isEmpty {
                let due = catchingUp
                catchingUp.removeAll(keepingCapacity: true)
                for connection in due {
                    connection.catchUpDeferred = false
                    markForFlush(connection)
                }
            }
            finishIteration()
            publishPending()
            enforceMemoryBudget()
            resumePausedReading()
            if draining {
                if drainDeadline == 0 { drainDeadline = now + 10_000 }
                if connections.isEmpty { return }
                if now > drainDeadline {
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
            statistics.writesOut.add(toSubmit.count, ordering: .relaxed)
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

    /// `epoll_wait` for up to `timeout` ms, after looking for work without sleeping for as long
    /// as `idlePoll` says is worth it (see `IdlePoll`). A loop about to poll first looks once for
    /// work already there (`epoll_wait` with no timeout, about 0.2 µs), before the poll's
    /// bookkeeping: a read of `/proc/loadavg` (1.2–1.3 µs here) and of the thread's switch count
    /// (0.35 µs). Under load from many clients the next requests are usually there when a loop
    /// comes back to wait, and that bookkeeping was paid at every turn of the loop for nothing
    /// (docs/BENCHMARKS.md, "Work already there found before the poll's bookkeeping"). Work
    /// already there says nothing of polling, so that look teaches `idlePoll` nothing, as before.
    private func waitForEvents(_ events: inout [UInt32], _ tokens: inout [UInt64], timeout: Int32) throws(SystemError)
        -> Int
    {
        var mayPoll = timeout != 0 && idlePoll.limit > 0 && statistics.writesOut.load(ordering: .relaxed) == 0
        if mayPoll && idlePoll.window > 0 {
            let ready = try epoll.wait(events: &events, tokens: &tokens, timeout: 0)
            if ready > 0 { return ready }
            mayPoll = idlePoll.machineHasRoom()
        }
        if mayPoll && idlePoll.window > 0 {
            // Another thread run on this vCPU while the loop yielded it shows as a switch away
            // from the loop (`ru_nivcsw`).
            let switches = IdlePoll.switchesAway()
            let began = monotonicMicroseconds()
            repeat {
                sched_yield()
                if IdlePoll.switchesAway() != switches {
                    idlePoll.preempted()
                    break
                }
                let count = try epoll.wait(events: &events, tokens: &tokens, timeout: 0)
                if count > 0 {
                    idlePoll.found()
                    return count
                }
            } while monotonicMicroseconds() - began < idlePoll.window
        }
        let start = monotonicMicroseconds()
        let count = try epoll.wait(events: &events, tokens: &tokens, timeout: timeout)
        if mayPoll { idlePoll.record(sleptMicroseconds: monotonicMicroseconds() - start) }
        return count
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
                statistics.writesOut.subtract(outcomes.count, ordering: .relaxed)
                for outcome in outcomes { complete(outcome) }
            case .answered(let connection, let response, let arrival, let outcome):
                guard !connection.isClosed else {
                    releaseOrphan(arrival.size)
                    continue
                }
                connection.readsInFlight -= 1
                answered(arrival, outcome, connection)
                connection.output.append(contentsOf: response)
                dispatchPending(connection)
                markForFlush(connection)
            case .decoded(let connection, let id, let item):
                guard !connection.isClosed else {
                    releaseOrphan(item.arrival.size)
                    continue
                }
                if let index = connection.pending[connection.pendingHead...].firstIndex(where: {
                    if case .decoding(id, _) = $0 { return true } else { return false }
                }) {
                    connection.pending[index] = item
                }
                dispatchPending(connection)
                markForFlush(connection)
            case .stored(let connection, let result, let tag, let arrival):
                storedUpload(result, tag: tag, arrival: arrival, connection)
            case .committed(let events):
                deliverLive(events)
            case .live(let deliveries):
                deliverLive(deliveries)
            case .adopt(let fd, let origin):
                if draining {
                    Glibc.close(fd)
                    statistics.connections.subtract(1, ordering: .relaxed)
                } else {
                    adopt(fd, origin)
                }
            case .drain:
                startDraining()
            case .sequenceApplied:
                break
            case .reconfigure(let fresh):
                configuration = fresh
                reads = ReadHandler(
                    store: reads.store, configuration: fresh, statistics: statistics, digests: reads.digests)
                if !peers.isEmpty { accepting.maxConnections = min(fresh.maxConnections, accepting.descriptorLimit) }
                peerCache.removeAll()
                for connection in connections.values {
                    connection.access.update(fresh.access)
                    recheckLiveQueries(connection)
                }
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

    func adopt(_ fd: Int32, _ origin: Origin) {
        let key = UInt64(origin.uid) << 32 | UInt64(origin.gid)
        let now = monotonicMilliseconds()
        let peer: Peer
        if let cached = peerCache[key], now - cached.at < Self.peerLookupMilliseconds {
            peer = cached.peer
        } else {
            peer = Peer(uid: origin.uid, gid: origin.gid, daemonUID: geteuid(), socketGID: socketGroupID)
            if peerCache.count >= 4096 { peerCache.removeAll() }
            peerCache[key] = (peer, now)
        }
        let access = AccessView(peer: peer, policy: configuration.access)
        guard access.bestRole > .none else {
            var line: [UInt8] = []
            let who = peer.userName.map { "\($0) (uid \(peer.uid))" } ?? "uid \(peer.uid)"
            Response.appendFailure(
                tag: nil, error: ProtocolError(.forbidden, "\(who) has no role in foliod's access policy"), to: &line)
            refuse(fd, with: line)
            statistics.connections.subtract(1, ordering: .relaxed)
            statistics.metrics.refused(.forbidden)
            return
        }
        let connection = Connection(
            fd: fd, loop: self, origin: origin, access: access, maxLineBytes: configuration.maxLineBytes,
            lineBuffers: lineBuffers)
        do {
            try epoll.add(fd, .readable, token: UInt64(fd))
        } catch {
            log.error("cannot watch a new connection: \(error)")
            Glibc.close(fd)
            statistics.connections.subtract(1, ordering: .relaxed)
            return
        }
        connection.registered = .readable
        connections[fd] = connection
    }

    // MARK: Reading

    private func readRequests(_ connection: Connection) {
        guard !connection.isClosed, !connection.inputFinished else { return }
        var total = 0
        if peeking && connection.answeredAtOnce && connection.peekedBytes == 0 && !connection.framer.hasPartialLine
            && !isCongested(connection) && !isOverSharedBound
        {
            switch peekRequests(connection) {
            case .handled:
                dispatchPending(connection)
                connection.answeredAtOnce = connection.isIdle
                markForFlush(connection)
                return
            case .more(let count): total = count
            case .readInstead: break
            }
        }
        while total < 4 * Self.readChunk && !connection.inputFinished && !connection.isClosed
            && !isCongested(connection)
            && !isOverSharedBound
        {
            var passed: (Int32, Int32, Int32, Int32) = (-1, -1, -1, -1)
            var passedCount: Int32 = 0
            let count = readBuffer.withUnsafeMutableBytes { buffer in
                withUnsafeMutableBytes(of: &passed) {
                    folio_recv_with_fds(
                        connection.fd, buffer.baseAddress, buffer.count,
                        $0.baseAddress!.assumingMemoryBound(to: Int32.self), 4, &passedCount)
                }
            }
            if count > 0 {
                total += count
                // Every line of the chunk arrived when it was read: one clock read for all of them.
                let received = monotonicMicroseconds()
                connection.lastActivity = received / 1000
                readBuffer.withUnsafeBytes {
                    takeInput(UnsafeRawBufferPointer(rebasing: $0[..<count]), received: received, connection)
                }
            }
            if passedCount > 0 {
                // The last line with bytes in this read: the one it ended last, or the one it began.
                hold(
                    withUnsafeBytes(of: passed) { Array($0.bindMemory(to: Int32.self).prefix(Int(passedCount))) },
                    line: connection.linesTaken - 1 + (connection.framer.hasPartialLine ? 1 : 0), connection)
            }
            if count > 0 {
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
        connection.answeredAtOnce = connection.isIdle
        markForFlush(connection)
    }

    private enum Peeked {
        /// Lines handled; the bytes stay in the socket until `consumePeeked`.
        case handled
        /// A whole chunk handled and consumed: more may wait, read on.
        case more(Int)
        /// Nothing taken: read with `folio_recv_with_fds` (descriptors came, or EINTR).
        case readInstead
    }

    /// Reads what waits with MSG_PEEK and handles its lines, leaving the bytes in the socket until
    /// the answers that can be given at once are written (`flush`, then `consumePeeked`). A client
    /// blocked in `recv` for its answer is otherwise woken twice a request: once when the loop's
    /// read frees its request's buffer (the kernel wakes a sleeper on the client's socket whenever
    /// write space returns, whatever it waits for) and once by the answer. Consumed after the
    /// answer, the request's buffer frees no wake-up: the answer already woke the client.
    private func peekRequests(_ connection: Connection) -> Peeked {
        let count = readBuffer.withUnsafeMutableBytes { folio_peek(connection.fd, $0.baseAddress, $0.count) }
        if count == -2 { return .readInstead }
        if count < 0 {
            switch errno {
            case EINTR: return .readInstead
            case EAGAIN, EWOULDBLOCK: return .handled
            default:
                close(connection)
                return .handled
            }
        }
        if count == 0 {
            finishInput(connection)
            return .handled
        }
        let received = monotonicMicroseconds()
        connection.lastActivity = received / 1000
        readBuffer.withUnsafeBytes {
            takeInput(UnsafeRawBufferPointer(rebasing: $0[..<count]), received: received, connection)
        }
        connection.peekedBytes = count
        guard count == Self.readChunk else { return .handled }
        consumePeeked(connection)
        return .more(count)
    }

    /// Takes the bytes `peekRequests` handled out of the socket. They are there: only this loop reads
    /// the socket, a stream socket keeps what it holds, and no descriptor came with them.
    private func consumePeeked(_ connection: Connection) {
        while connection.peekedBytes > 0 && !connection.isClosed {
            let length = connection.peekedBytes
            let count = readBuffer.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, length, 0) }
            if count > 0 {
                connection.peekedBytes -= count
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                connection.peekedBytes = 0
                close(connection)
            }
        }
    }

    /// Keeps descriptors the peer passed for the `file.put {fd: true}` lines that will take them;
    /// beyond `Connection.maxHeldDescriptors`, closes them (the put that wanted one is refused).
    private func hold(_ descriptors: [Int32], line: Int, _ connection: Connection) {
        for descriptor in descriptors {
            if connection.receivedDescriptors.count < Connection.maxHeldDescriptors && !connection.isClosed {
                connection.receivedDescriptors.append((descriptor, line))
            } else {
                Glibc.close(descriptor)
            }
        }
    }

    /// The peer sent EOF: a last line without a newline still counts; answer everything, then close.
    private func finishInput(_ connection: Connection) {
        let received = monotonicMicroseconds()
        let outcome = connection.framer.finish(lines: { takeLine($0, owned: $1, received: received, connection) })
        submitDecodes()
        if outcome == .tooLong { refuseLongLine(connection) }
        connection.partialSince = 0
        connection.inputFinished = true
        connection.closeWhenIdle = true
    }

    private func takeInput(_ chunk: UnsafeRawBufferPointer, received: UInt64, _ connection: Connection) {
        let outcome = connection.framer.take(chunk) { line, owned in
            takeLine(line, owned: owned, received: received, connection)
            return !connection.inputFinished
        }
        submitDecodes()
        if outcome == .tooLong {
            refuseLongLine(connection)
        } else if connection.framer.hasPartialLine {
            if connection.partialSince == 0 { connection.partialSince = monotonicMilliseconds() }
        } else {
            connection.partialSince = 0
        }
    }

    /// Answers `too_large` and closes the connection once answered: the rest of the line is not read.
    private func refuseLongLine(_ connection: Connection) {
        endInput(
            connection,
            with: ProtocolError(
                .tooLarge, "line longer than \(configuration.maxLineBytes) bytes; closing the connection"))
    }

    /// Answers `error` (without a tag) after every earlier request, reads nothing more and closes the
    /// connection once everything is answered.
    func endInput(_ connection: Connection, with error: ProtocolError) {
        connection.partialSince = 0
        connection.pending.append(
            .failure(
                RequestDecoder.TaggedError(tag: nil, error: error),
                Connection.Arrival(size: 0, at: monotonicMicroseconds())))
        connection.requestCount += 1
        pendingDelta += 1
        connection.inputFinished = true
        connection.closeWhenIdle = true
    }

    /// `owned`: the array holding `line`'s bytes, when the framer gathered it: a long line is
    /// handed to its decoder as it is, not copied. `received`: when its last bytes were read.
    private func takeLine(_ line: UnsafeRawBufferPointer, owned: [UInt8]?, received: UInt64, _ connection: Connection) {
        let size = line.count
        let number = connection.linesTaken
        connection.linesTaken += 1
        connection.requestBytes += size
        connection.requestCount += 1
        pendingDelta += 1
        guard size >= Self.offloadedLineBytes else {
            let decoded: Result<Request, RequestDecoder.TaggedError>
            switch RequestDecoder.decodeLine(line) {
            case .plainGet(let get):
                // The commonest read, answered from the line itself: no `Request`, no `String`.
                if connection.pendingHead == connection.pending.count, connection.readsInFlight == 0,
                    connection.writesInFlight == 0, !connection.isClosed, !isOutputFull(connection)
                {
                    answerPlainGet(get, Connection.Arrival(size: size, spec: PlainGet.spec, at: received), connection)
                    return
                }
                decoded = .success(get.request)
            case .request(let request):
                decoded = request
            }
            // A read with nothing before it on the connection starts at once, without a turn in
            // the queue (pipelined gets: the copies into and out of it were a fifth of their cost).
            if connection.pendingHead == connection.pending.count, connection.readsInFlight == 0,
                connection.writesInFlight == 0, !connection.isClosed, !isOutputFull(connection),
                case .success(let request) = decoded, case .read(let operation) = request.operation,
                request.minSeq == nil
            {
                startRead(
                    request, operation, Connection.Arrival(size: size, spec: request.spec, at: received), connection)
                return
            }
            connection.pending.append(Self.item(for: decoded, size: size, received: received, line: number, connection))
            return
        }
        let id = connection.nextDecodingID
        connection.nextDecodingID += 1
        var decoding = Connection.Arrival(size: size, at: received)
        decoding.line = number
        connection.pending.append(.decoding(id: id, decoding))
        // The job takes the line out of its box, so that the decoder holds the only reference and
        // decodes a file piece's base64 in it without a copy.
        let line = LineBox(owned ?? Array(line))
        // Submitted once the framer is done with the chunk (`submitDecodes`), when it no longer
        // holds the line too: a decoder starting at once would find the array shared and copy it.
        decodesToSubmit.append { [self] _ in
            let item = Self.item(
                for: RequestDecoder.decode(owning: line.take(), recycle: { [lineBuffers] in lineBuffers.give($0) }),
                size: size, received: received, line: number, connection)
            post(.decoded(connection, id: id, item))
        }
    }

    private func submitDecodes() {
        guard !decodesToSubmit.isEmpty else { return }
        for job in decodesToSubmit { decoders.submit(job) }
        decodesToSubmit.removeAll(keepingCapacity: true)
    }

    /// What a decoded line asks for, as it waits its turn on the connection.
    private static func item(
        for decoded: Result<Request, RequestDecoder.TaggedError>, size: Int, received: UInt64, line: Int,
        _ connection: Connection
    ) -> Connection.Item {
        switch decoded {
        case .failure(let error):
            var arrival = Connection.Arrival(size: size, at: received)
            arrival.line = line
            return .failure(error, arrival)
        case .success(let request):
            var arrival = Connection.Arrival(size: size, spec: request.spec, at: received)
            arrival.line = line
            switch request.operation {
            case .write(let write):
                return .write(
                    Writer.Job(
                        request: write, spec: request.spec, origin: connection.origin, tag: request.tag,
                        connection: connection, arrival: arrival))
            case .read(let operation):
                return .read(request, operation, arrival)
            case .stream(let operation):
                return .stream(request, operation, arrival)
            case .upload(let upload):
                return .upload(request, upload, arrival)
            }
        }
    }

    // MARK: Dispatching

    /// Starts every pending request that may start: writes go to the writer in order behind earlier
    /// writes; a read waits until everything before it on the connection is answered, so a client
    /// reads its own writes.
    func dispatchPending(_ connection: Connection) {
        guard connection.pendingHead < connection.pending.count else { return }
        connection.lastActivity = monotonicMilliseconds()
        while connection.pendingHead < connection.pending.count && !connection.isClosed {
            let item = connection.pending[connection.pendingHead]
            switch item {
            case .write(let job):
                guard connection.readsInFlight == 0, connection.uploadsStoring == 0 else { return }
                if let denial = AccessControl.denial(
                    Request(tag: job.tag, operation: .write(job.request), spec: job.spec), connection.access,
                    reader: reader)
                {
                    guard connection.writesInFlight == 0 else { return }
                    refuse(denial, tag: job.tag, arrival: job.arrival, connection)
                    break
                }
                toSubmit.append(job)
                connection.writesInFlight += 1
            case .upload(let request, var operation, let arrival):
                guard connection.readsInFlight == 0, connection.uploadsStoring == 0 else { return }
                if let denial = AccessControl.denial(request, connection.access, reader: reader) {
                    guard connection.writesInFlight == 0 else { return }
                    refuse(denial, tag: request.tag, arrival: arrival, connection)
                    break
                }
                if configuration.clusterLog != nil {
                    guard connection.writesInFlight == 0 else { return }
                    let refusal = ProtocolError(
                        .badRequest,
                        "\(request.spec.name): file contents are kept by the node that receives them and are not shared between the nodes "
                            + "of a cluster, so uploads are refused with --log postgres: (docs/CLUSTER.md)")
                    refuse(refusal, tag: request.tag, arrival: arrival, connection)
                    break
                }
                if case .putDescriptor(let plan, _) = operation {
                    // A line's descriptor came with its bytes (those of lines before it were not
                    // taken by their lines: refused, or not puts).
                    let line = arrival.line
                    dropDescriptors(before: line, connection)
                    guard let taken = connection.receivedDescriptors.firstIndex(where: { $0.line == line }) else {
                        guard connection.writesInFlight == 0 else { return }
                        let error = ProtocolError(
                            .badRequest,
                            "file.put with \"fd\": no descriptor came with this line (pass one open file with SCM_RIGHTS, sent with the line)"
                        )
                        Response.appendFailure(tag: request.tag, error: error, to: &connection.output)
                        answered(arrival, error.code, connection)
                        break
                    }
                    operation = .putDescriptor(plan, descriptor: connection.receivedDescriptors.remove(at: taken).fd)
                }
                connection.writesInFlight += 1
                connection.uploadsStoring += 1
                runUpload(operation, request, arrival, connection)
            case .read(let request, let operation, let arrival):
                // A read's answer waits while the client has not taken what waits for it (`flush`
                // starts it once it has): a chunk of lines each asking for a page of a megabyte
                // must not become gigabytes of output before the reading stops.
                guard connection.readsInFlight == 0 && connection.writesInFlight == 0, !isOutputFull(connection)
                else { return }
                if let minSeq = request.minSeq {
                    switch awaitSequence(minSeq, connection) {
                    case .ready: startRead(request, operation, arrival, connection)
                    case .waiting: return
                    case .timedOut(let error): refuse(error, tag: request.tag, arrival: arrival, connection)
                    }
                } else {
                    startRead(request, operation, arrival, connection)
                }
            case .stream(let request, let operation, let arrival):
                guard connection.readsInFlight == 0 && connection.writesInFlight == 0 else { return }
                if let denial = AccessControl.denial(request, connection.access, reader: reader) {
                    refuse(denial, tag: request.tag, arrival: arrival, connection)
                    break
                }
                if handleStream(request, operation, arrival, connection) { answered(arrival, nil, connection) }
            case .failure(let failure, let arrival):
                guard connection.readsInFlight == 0 && connection.writesInFlight == 0 else { return }
                Response.appendFailure(tag: failure.tag, error: failure.error, to: &connection.output)
                if failure.error.code == .tooLarge { statistics.metrics.refused(.lineTooLong) }
                answered(arrival, failure.error.code, connection)
            case .decoding:
                return
            }
            if !connection.receivedDescriptors.isEmpty { dropDescriptors(before: item.arrival.line, connection) }
            connection.popPending()
        }
    }

    /// Closes the descriptors no line from `line` on can take: each came with lines before it.
    private func dropDescriptors(before line: Int, _ connection: Connection) {
        connection.receivedDescriptors.removeAll { held in
            guard held.line < line else { return false }
            Glibc.close(held.fd)
            return true
        }
    }

    /// Answers a read whose turn has come: refused, answered here (inline cost), or handed to a worker.
    private func startRead(
        _ request: Request, _ operation: Request.ReadOperation, _ arrival: Connection.Arrival, _ connection: Connection
    ) {
        if let denial = AccessControl.denial(request, connection.access, reader: reader) {
            refuse(denial, tag: request.tag, arrival: arrival, connection)
        } else if case .fileOpen(let name) = operation {
            answered(arrival, passContent(of: name, tag: request.tag, connection), connection)
        } else if case .answered(let outcome) = reads.respondOnLoop(
            request, operation, reader: reader, access: connection.access, into: &connection.output)
        {
            answered(arrival, outcome, connection)
        } else {
            connection.readsInFlight += 1
            runOnWorker(operation, tag: request.tag, arrival: arrival, connection)
        }
    }

    /// `startRead` for a plain `get`, from its line.
    private func answerPlainGet(_ get: PlainGet, _ arrival: Connection.Arrival, _ connection: Connection) {
        if let denial = AccessControl.denial(get, connection.access, reader: reader) {
            refuse(denial, tag: get.tag, arrival: arrival, connection)
        } else {
            answered(arrival, reads.respondToPlainGet(get, reader: reader, into: &connection.output), connection)
        }
    }

    /// Answers `file.read {fd: true}`: the file's metadata, with a read-only descriptor to its
    /// content passed along (one `open`; no content is read here).
    private func passContent(of name: String, tag: Tag?, _ connection: Connection) -> ErrorCode? {
        do {
            guard let file = try reader.read({ try $0.file(name) }) else { throw StoreError.fileNotFound(name) }
            let path = reads.store.blobs.path(of: file.sha256)
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                if errno == EMFILE || errno == ENFILE {
                    throw ProtocolError(
                        .unavailable,
                        "file.read: no descriptor is free to pass the content of \(name) (\(String(cString: strerror(errno)))); try again later"
                    )
                }
                let reason = errno == ENOENT ? "is missing" : "cannot be opened: \(String(cString: strerror(errno)))"
                throw StoreError.corrupted("the content of file \(name) (\(file.sha256)) \(reason)")
            }
            connection.outgoingDescriptors.append((connection.output.count, descriptor))
            Response.appendSuccess(tag: tag, to: &connection.output) { $0.write(file.json(withUploader: true)) }
            return nil
        } catch {
            let failure = ProtocolError(error)
            Response.appendFailure(tag: tag, error: failure, to: &connection.output)
            return failure.code
        }
    }

    private func runOnWorker(
        _ operation: Request.ReadOperation, tag: Tag?, arrival: Connection.Arrival, _ connection: Connection
    ) {
        let reads = self.reads
        let access = connection.access.snapshot
        statistics.workerQueue.add(1, ordering: .relaxed)
        workers.submit { [self] reader in
            statistics.workerQueue.subtract(1, ordering: .relaxed)
            var output: [UInt8] = []
            let outcome = reads.respond(to: operation, tag: tag, reader: reader, access: access, into: &output)
            post(.answered(connection, output, arrival, outcome))
        }
    }

    /// Runs an upload op on a worker, never on the loop or the writer: decodes, hashes and stores
    /// the content of a `file.put` or `file.commit` and posts back the write that binds its name, or
    /// posts the answer of the other ops.
    private func runUpload(
        _ operation: UploadOperation, _ request: Request, _ arrival: Connection.Arrival, _ connection: Connection
    ) {
        let blobs = reads.store.blobs
        let uploads = self.uploads
        let origin = connection.origin
        let owner = ObjectIdentifier(connection)
        let maxSize = configuration.fileMaxBytes
        statistics.workerQueue.add(1, ordering: .relaxed)
        workers.submit { [self] _ in
            statistics.workerQueue.subtract(1, ordering: .relaxed)
            let now = monotonicMilliseconds()
            func binding(_ command: Command, pinned sha256: String) -> UploadStep {
                .write(
                    Writer.Job(
                        request: WriteRequest(command: command), spec: request.spec, origin: origin, tag: request.tag,
                        connection: connection,
                        arrival: arrival, pinnedBlob: sha256))
            }
            func answer(_ result: JSON) -> UploadStep {
                var output: [UInt8] = []
                Response.appendSuccess(tag: request.tag, to: &output) { $0.write(result) }
                return .answer(output)
            }
            let result: Result<UploadStep, ProtocolError>
            do {
                switch operation {
                case .put(let upload):
                    let (sha256, size) = try upload.content.withUnsafeBytes { try blobs.store($0) }
                    result = .success(binding(upload.command(sha256: sha256, size: size), pinned: sha256))
                case .putDescriptor(let plan, let descriptor):
                    defer { Glibc.close(descriptor) }
                    let (sha256, size) = try blobs.store(fromDescriptor: descriptor, maxSize: maxSize)
                    result = .success(binding(plan.command(sha256: sha256, size: size), pinned: sha256))
                case .begin(let plan):
                    let id = try uploads.begin(plan, owner: owner, maxSize: maxSize, now: now)
                    result = .success(answer(["upload": .string(id), "maxSize": .int(Int64(plan.size ?? maxSize))]))
                case .write(let id, let offset, let content):
                    let received = try content.withUnsafeBytes {
                        try uploads.write(id, offset: offset, content: $0, owner: owner, now: now)
                    }
                    result = .success(
                        answer([
                            "upload": .string(id), "offset": .int(Int64(offset)), "length": .int(Int64(content.count)),
                            "received": .int(Int64(received)),
                        ]))
                case .commit(let id):
                    let (plan, sha256, size) = try uploads.commit(id, owner: owner, now: now)
                    result = .success(binding(plan.command(sha256: sha256, size: size), pinned: sha256))
                case .abort(let id):
                    try uploads.abort(id, owner: owner, now: now)
                    result = .success(answer(["upload": .string(id), "aborted": true]))
                }
            } catch {
                result = .failure(ProtocolError(error))
            }
            post(.stored(connection, result, tag: request.tag, arrival))
        }
    }

    /// An upload op is done (or failed): a write goes to the writer, even for a connection that
    /// closed meanwhile, as every write it sent does; an answer goes out.
    private func storedUpload(
        _ result: Result<UploadStep, ProtocolError>, tag: Tag?, arrival: Connection.Arrival, _ connection: Connection
    ) {
        if case .success(.write(let job)) = result {
            toSubmit.append(job)
        }
        guard !connection.isClosed else {
            // A file.begin that ran while the connection closed made an upload no one can end.
            uploads.abandon(owner: ObjectIdentifier(connection))
            if case .success(.write) = result {} else { releaseOrphan(arrival.size) }
            return
        }
        connection.uploadsStoring -= 1
        switch result {
        case .success(.write): break
        case .success(.answer(let output)):
            connection.writesInFlight -= 1
            connection.output.append(contentsOf: output)
            answered(arrival, nil, connection)
        case .failure(let error):
            connection.writesInFlight -= 1
            Response.appendFailure(tag: tag, error: error, to: &connection.output)
            answered(arrival, error.code, connection)
        }
        dispatchPending(connection)
        markForFlush(connection)
    }

    /// Counts a request as answered: its bytes, its outcome and latency, and logs it if it was slow.
    func answered(_ arrival: Connection.Arrival, _ outcome: ErrorCode?, _ connection: Connection) {
        connection.requestBytes -= arrival.size
        connection.requestCount -= 1
        pendingDelta -= 1
        let now = monotonicMicroseconds()
        let micros = now - min(arrival.at, now)
        statistics.metrics.request(op: arrival.opIndex, outcome: outcome, micros: Int(micros), shard: index)
        if micros >= UInt64(configuration.slowRequestMilliseconds) * 1000, log.isWritten(.info) {
            log.info(
                "slow request: \(arrival.op) took \(micros / 1000) ms (\(outcome?.rawValue ?? "ok")) for pid \(connection.origin.pid), uid \(connection.origin.uid)"
            )
        }
    }

    /// Answers `refusal` in the request's place (a denial of the access policy is counted as one).
    private func refuse(_ refusal: ProtocolError, tag: Tag?, arrival: Connection.Arrival, _ connection: Connection) {
        Response.appendFailure(tag: tag, error: refusal, to: &connection.output)
        answered(arrival, refusal.code, connection)
        if refusal.code == .forbidden { statistics.metrics.refused(.forbidden) }
    }

    private func complete(_ outcome: Writer.Outcome) {
        // Committed (and durable) or failed: either way no sweep need spare the blob for it now.
        if let blob = outcome.job.pinnedBlob { reads.store.blobs.unpin(blob) }
        let connection = outcome.job.connection
        guard !connection.isClosed else {
            releaseOrphan(outcome.job.arrival.size)
            return
        }
        connection.writesInFlight -= 1
        answered(outcome.job.arrival, (try? outcome.result.get()) == nil ? outcome.result.failureCode : nil, connection)
        switch outcome.result {
        case .success(let write):
            Response.appendSuccess(tag: outcome.job.tag, seq: write.lastSequence, to: &connection.output) { writer in
                WriteResultEncoder.write(write.result, replayed: write.replayed, to: &writer)
            }
        case .failure(let error):
            Response.appendFailure(tag: outcome.job.tag, error: error, to: &connection.output)
        }
        dispatchPending(connection)
        markForFlush(connection)
    }

    // MARK: Writing

    func markForFlush(_ connection: Connection) {
        guard !connection.needsFlush && !connection.isClosed else { return }
        connection.needsFlush = true
        toFlush.append(connection)
    }

    private func flush(_ connection: Connection) {
        guard !connection.isClosed else { return }
        continueCatchUp(connection)
        releaseHeldLines(connection)
        while connection.unsentBytes > 0 {
            // A descriptor goes with the first byte of its answer's line: the bytes before it first.
            let passing = connection.outgoingDescriptors.first
            let sent = connection.output.withUnsafeBytes { buffer in
                let start = buffer.baseAddress! + connection.outputSent
                guard let passing else {
                    return send(connection.fd, start, connection.unsentBytes, Int32(MSG_NOSIGNAL))
                }
                if passing.offset > connection.outputSent {
                    return send(connection.fd, start, passing.offset - connection.outputSent, Int32(MSG_NOSIGNAL))
                }
                // Up to the next descriptor's line at most: that line must start a send of its own,
                // with its own descriptor.
                let end =
                    connection.outgoingDescriptors.count > 1
                    ? connection.outgoingDescriptors[1].offset : connection.output.count
                return folio_send_with_fd(connection.fd, start, end - connection.outputSent, passing.fd, 0)
            }
            if sent > 0 {
                if let passing, passing.offset <= connection.outputSent {
                    Glibc.close(passing.fd)
                    connection.outgoingDescriptors.removeFirst()
                }
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
        if connection.peekedBytes > 0 {
            consumePeeked(connection)
            if connection.isClosed { return }
        }
        if connection.unsentBytes == 0 {
            connection.output.removeAll(keepingCapacity: connection.output.capacity <= Self.keptOutputCapacity)
            connection.outputSent = 0
            recordDelivery(connection)
            if connection.watches.contains(where: \.catchingUp) && !connection.catchUpDeferred {
                connection.catchUpDeferred = true
                catchingUp.append(connection)
            }
        } else if connection.outputSent >= 1 << 20 {
            connection.output.removeFirst(connection.outputSent)
            for index in connection.outgoingDescriptors.indices {
                connection.outgoingDescriptors[index].offset -= connection.outputSent
            }
            connection.outputSent = 0
        }
        // Reads that waited for the client to take its output (`dispatchPending`) go on.
        if connection.pendingHead < connection.pending.count && !isOutputFull(connection) {
            let waiting = connection.unsentBytes
            dispatchPending(connection)
            if connection.isClosed { return }
            if connection.unsentBytes > waiting { markForFlush(connection) }
        }
        if connection.closeWhenIdle && connection.isIdle && connection.unsentBytes == 0 {
            close(connection)
            return
        }
        if connection.unsentBytes > configuration.maxOutputBytes {
            closeStuckReader(connection)
            return
        }
        updateInterest(connection)
        account(connection)
    }

    /// Whether to stop reading requests from the connection until it has taken its answers.
    private func isCongested(_ connection: Connection) -> Bool {
        isOutputFull(connection) || connection.pendingCount > configuration.maxPendingRequests
            || connection.requestBytes > max(Self.outputHighWater, 4 * configuration.maxLineBytes)
    }

    /// Whether so much waits for the client (bytes, or descriptors to pass) that no read of its is
    /// answered until it takes some.
    func isOutputFull(_ connection: Connection) -> Bool {
        connection.unsentBytes > Self.outputHighWater
            || connection.outgoingDescriptors.count >= Connection.maxOutgoingDescriptors
    }

    /// Reads while there is room for more; wants to write while output waits.
    func updateInterest(_ connection: Connection) {
        var wanted: Epoll.Events = []
        if !connection.inputFinished && !isCongested(connection) {
            if isOverSharedBound {
                if !connection.pausedForLoad {
                    connection.pausedForLoad = true
                    pausedForLoad.append(connection)
                }
            } else {
                wanted.insert(.readable)
            }
        }
        if connection.unsentBytes > 0 { wanted.insert(.writable) }
        // Watched for nothing (paused, or its peer done sending while requests of its are in
        // flight): epoll reports a hang-up or an error whatever a descriptor is watched for, and
        // would wake the loop for it at every wait, which spun a loop at a full CPU while a client
        // that had hung up waited for an answer. Edge-triggered, it is reported once.
        if wanted.isEmpty { wanted = .edgeTriggered }
        guard wanted != connection.registered else { return }
        // A line foliod stopped reading in the middle of gets its time again.
        if wanted.contains(.readable) && !connection.registered.contains(.readable) && connection.partialSince > 0 {
            connection.partialSince = monotonicMilliseconds()
        }
        do {
            try epoll.modify(connection.fd, wanted, token: UInt64(connection.fd))
            connection.registered = wanted
        } catch {
            close(connection)
        }
    }

    func close(_ connection: Connection) {
        guard !connection.isClosed else { return }
        stopWaitingForSequence(connection)
        account(connection)
        connection.isClosed = true
        uploads.abandon(owner: ObjectIdentifier(connection))
        epoll.remove(connection.fd)
        Glibc.close(connection.fd)
        connections[connection.fd] = nil
        if !connection.watches.isEmpty {
            statistics.watches.subtract(connection.watches.count, ordering: .relaxed)
            watchers.remove(connection.watches.count, loop: self)
            connection.watches.removeAll()
        }
        let openLiveQueries = Array(connection.liveQueries.values)
        for subscription in openLiveQueries {
            removeLiveQuery(subscription, connection, tellThread: true)
        }
        // Requests a decoder, a worker or the writer has stay counted until they finish: a client
        // that sends and leaves must not get past the bounds by leaving.
        var inFlightBytes = connection.requestBytes
        var inFlightCount = connection.requestCount
        for item in connection.pending[connection.pendingHead...] {
            if case .decoding = item { continue }
            inFlightBytes -= item.arrival.size
            inFlightCount -= 1
        }
        // A live query whose first page has not come: its line is done with here (the page, if it
        // comes, finds no subscription and frees nothing).
        for subscription in openLiveQueries where !subscription.started {
            inFlightBytes -= subscription.arrival.size
            inFlightCount -= 1
        }
        pendingDelta -= connection.requestCount - inFlightCount
        connection.requestCount = 0
        orphanedBytes += inFlightBytes
        heldBytes -= connection.accountedBytes - inFlightBytes
        statistics.clientMemory.subtract(connection.accountedBytes - inFlightBytes, ordering: .relaxed)
        connection.accountedBytes = 0
        for held in connection.receivedDescriptors { Glibc.close(held.fd) }
        for (_, descriptor) in connection.outgoingDescriptors { Glibc.close(descriptor) }
        connection.receivedDescriptors = []
        connection.outgoingDescriptors = []
        connection.output = []
        connection.framer = LineFramer(maxLineBytes: configuration.maxLineBytes, buffers: lineBuffers)
        connection.pending = []
        statistics.connections.subtract(1, ordering: .relaxed)
    }
}

func monotonicMilliseconds() -> UInt64 { monotonicMicroseconds() / 1000 }

func monotonicMicroseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
}

/// A line on its way to a decoder thread.
private final class LineBox: @unchecked Sendable {
    private var line: [UInt8]

    init(_ line: [UInt8]) { self.line = line }

    /// The line, leaving the box empty: called once, by the job the box was made for.
    func take() -> [UInt8] {
        var taken: [UInt8] = []
        swap(&taken, &line)
        return taken
    }
}
