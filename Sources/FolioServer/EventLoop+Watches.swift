import FolioJSON
import FolioProtocol
import FolioStore

extension EventLoop {
    /// Live events go straight into a watcher's output only while less than this waits there;
    /// beyond it the watch reads the log again once the client has taken what is queued.
    static let watchOutputBytes = 1 << 20
    /// What a watcher's output may hold before its live events wait in the log: no more than the
    /// watch buffer when that is smaller.
    var watchOutputBytes: Int { min(Self.watchOutputBytes, configuration.watchBufferBytes) }

    /// A catch-up chunk: at most this many events, or this many bytes, per flush.
    static let catchUpEvents = 1000
    static let catchUpBytes = 1 << 20

    /// Starts or ends a watch. Returns whether the request is answered: a live query is answered
    /// later, when its first page comes (`EventLoop+LiveQueries`).
    func handleStream(
        _ request: Request, _ operation: Request.StreamOperation, _ arrival: Connection.Arrival,
        _ connection: Connection
    ) -> Bool {
        switch operation {
        case .watch, .live:
            guard let tag = request.tag else {
                Response.appendFailure(
                    tag: nil,
                    error: ProtocolError(.badRequest, "watch needs a tag: its events carry it, and unwatch names it"),
                    to: &connection.output)
                return true
            }
            guard !connection.hasWatch(tagged: tag.value) else {
                Response.appendFailure(
                    tag: tag,
                    error: ProtocolError(.badRequest, "a watch with tag \(tag) is already running on this connection"),
                    to: &connection.output)
                return true
            }
            switch operation {
            case .live(let query, let resumeAfter):
                startLiveQuery(query, resumeAfter: resumeAfter, tag: tag, arrival: arrival, connection)
                return false
            case .watch(let after, let collection):
                startWatch(tag: tag, after: after, collection: collection, connection)
            case .unwatch:
                break
            }
        case .unwatch(let tag):
            if let subscription = connection.liveQueries.values.first(where: { $0.tag.matches(tag) }) {
                // Its held lines go first: `lastSeq` is the last line the client gets.
                releaseHeldLines(connection, all: true)
                removeLiveQuery(subscription, connection, tellThread: true)
                writeUnwatched(subscription.tag, lastSequence: subscription.lastSequence, request, connection)
                return true
            }
            guard let index = connection.watches.firstIndex(where: { $0.tag.matches(tag) }) else {
                Response.appendFailure(
                    tag: request.tag,
                    error: ProtocolError(.notFound, "no watch with tag \(tag) runs on this connection"),
                    to: &connection.output)
                return true
            }
            let watch = connection.watches[index]
            endWatch(watch, connection)
            writeUnwatched(watch.tag, lastSequence: watch.lastSequence, request, connection)
        }
        return true
    }

    private func writeUnwatched(_ tag: Tag, lastSequence: UInt64, _ request: Request, _ connection: Connection) {
        Response.appendSuccess(tag: request.tag, to: &connection.output) { writer in
            writer.writeRaw("{\"watch\":")
            writer.writeRaw(tag.text)
            writer.writeRaw(",\"lastSeq\":")
            writer.write(lastSequence)
            writer.bytes.append(UInt8(ascii: "}"))
        }
    }

    private func startWatch(tag: Tag, after: UInt64?, collection: String?, _ connection: Connection) {
        let head: UInt64
        do {
            head = try reader.read { try $0.head().sequence }
        } catch {
            Response.appendFailure(tag: tag, error: ProtocolError(error), to: &connection.output)
            return
        }
        let start = after ?? head
        guard start <= head else {
            Response.appendFailure(
                tag: tag, error: ProtocolError(.badRequest, "after \(start) is beyond the last event, \(head)"),
                to: &connection.output)
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
    }

    /// Feeds catching-up watches from the log, one bounded chunk per flush, while output has room.
    func continueCatchUp(_ connection: Connection) {
        for watch in connection.watches where watch.catchingUp {
            guard connection.unsentBytes < watchOutputBytes else { return }
            do {
                var reachedEnd = false
                try reader.read { snapshot in
                    var delivered = 0
                    var bytes = 0
                    try snapshot.forEachEvent(after: watch.next - 1, limit: Self.catchUpEvents) { sequence, record in
                        guard bytes < Self.catchUpBytes else { return false }
                        delivered += 1
                        watch.next = sequence + 1
                        if watch.collection != nil {
                            guard
                                watch.wants(
                                    collection: try Snapshot.collection(ofEventRecord: record, sequence: sequence))
                            else { return true }
                        }
                        if !connection.access.isAdmin {
                            guard connection.access.canRead(Snapshot.collection(ofEventHead: record)) else {
                                return true
                            }
                        }
                        var line = JSONWriter(capacity: record.count + 80)
                        try Snapshot.writeEventRecord(record, to: &line)
                        bytes += line.bytes.count
                        Response.appendWatchEvent(tag: watch.tag, event: line.bytes, to: &connection.output)
                        return true
                    }
                    reachedEnd = delivered == 0 || (delivered < Self.catchUpEvents && bytes < Self.catchUpBytes)
                    if watch.fellBehind { watch.lagBytes = max(0, watch.lagBytes - bytes) }
                }
                if reachedEnd {
                    watch.catchingUp = false
                    watch.fellBehind = false
                    watch.lagBytes = 0
                }
            } catch {
                Response.appendFailure(tag: watch.tag, error: ProtocolError(error), to: &connection.output)
                endWatch(watch, connection)
                return
            }
        }
    }

    /// Live events for every watch on this loop. A watch whose client has not taken its output (more
    /// than `watchOutputBytes` left unsent) goes back to the log instead of queueing more, and is cut
    /// off once it is behind by more than the watch buffer; a gap in sequences also sends it back to
    /// the log.
    func deliverLive(_ events: [CommittedEvent]) {
        for connection in connections.values where !connection.watches.isEmpty {
            // What the client left unread since the last flush decides; a commit's events go out together.
            let congested = connection.unsentBytes >= watchOutputBytes
            for watch in connection.watches {
                if watch.catchingUp {
                    if !watch.fellBehind {
                        // Catching up from an earlier `after` and its client not taking what was
                        // sent: from now on it is behind the live events too, and counted so.
                        guard congested else { continue }
                        watch.fellBehind = true
                        watch.lagBytes = 0
                    }
                    for event in events
                    where event.sequence >= watch.next && watch.wants(collection: event.collection)
                        && connection.access.canRead(event.readableAs)
                    {
                        watch.lagBytes += event.wire.count
                    }
                } else {
                    for event in events where event.sequence >= watch.next {
                        if event.sequence > watch.next {
                            watch.catchingUp = true
                            break
                        }
                        if watch.wants(collection: event.collection) && connection.access.canRead(event.readableAs) {
                            if congested {
                                watch.catchingUp = true
                                watch.fellBehind = true
                                watch.lagBytes = events.lazy.filter {
                                    $0.sequence >= watch.next && watch.wants(collection: $0.collection)
                                }
                                .reduce(0) { $0 + $1.wire.count }
                                break
                            }
                            Response.appendWatchEvent(tag: watch.tag, event: event.wire, to: &connection.output)
                            if connection.undeliveredCommits.last?.committedAt == event.committedAt {
                                connection.undeliveredCommits[connection.undeliveredCommits.count - 1].events += 1
                            } else {
                                connection.undeliveredCommits.append((event.committedAt, 1))
                            }
                        }
                        watch.next = event.sequence + 1
                    }
                }
                if watch.fellBehind { statistics.watchLag.store(watch.lagBytes, ordering: .relaxed) }
                if watch.fellBehind && watch.lagBytes > configuration.watchBufferBytes {
                    statistics.metrics.refused(.lagging)
                    Response.appendFailure(
                        tag: watch.tag,
                        error: ProtocolError(
                            .lagging,
                            "the watch fell behind by more than \(configuration.watchBufferBytes) bytes; resume with after = lastSeq",
                            details: [("lastSeq", String(watch.lastSequence))]),
                        to: &connection.output)
                    endWatch(watch, connection)
                }
            }
            markForFlush(connection)
        }
    }

    /// Records the delivery time of the live events that just left for the socket.
    func recordDelivery(_ connection: Connection) {
        guard !connection.undeliveredCommits.isEmpty || !connection.undeliveredChanges.isEmpty else { return }
        let now = monotonicMicroseconds()
        for (committedAt, events) in connection.undeliveredCommits {
            statistics.watchDelivery.record(now - min(now, committedAt), count: events)
        }
        for committedAt in connection.undeliveredChanges { statistics.liveDelivery.record(now - min(now, committedAt)) }
        connection.undeliveredCommits.removeAll(keepingCapacity: true)
        connection.undeliveredChanges.removeAll(keepingCapacity: true)
    }

    func endWatch(_ watch: Watch, _ connection: Connection) {
        connection.watches.removeAll { $0 === watch }
        statistics.watches.subtract(1, ordering: .relaxed)
        watchers.remove(1, loop: self)
    }
}
