import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore

/// A live query on one connection, as its loop sees it: the `LiveQueries` thread keeps the window;
/// the loop sends its lines, holds them while the client does not read, and cuts it off (`lagging`)
/// once more than the watch buffer waits.
final class LiveSubscription {
    let id: UInt64
    let tag: Tag
    /// The `watch` request, answered when the first page comes.
    let arrival: Connection.Arrival
    /// Known once started: the collection whose objects it shows.
    var collection: String?
    var started = false
    /// The sequence of the last line put in the connection's output: where the client resumes.
    var lastSequence: UInt64 = 0
    /// Change lines waiting for the client to take its output (with when their commit was
    /// confirmed), and their bytes.
    var held: [(sequence: UInt64, line: [UInt8], committedAt: UInt64)] = []
    var heldBytes = 0

    init(id: UInt64, tag: Tag, arrival: Connection.Arrival) {
        self.id = id
        self.tag = tag
        self.arrival = arrival
    }
}

extension EventLoop {
    /// Starts a live query: the connection's later requests wait, as behind a read, until its
    /// first page (or its error) comes back from the live query thread.
    func startLiveQuery(
        _ query: Query, resumeAfter: UInt64?, tag: Tag, arrival: Connection.Arrival, _ connection: Connection
    ) {
        let id = liveQueries.subscribe(connection: connection, tag: tag, query: query, resumeAfter: resumeAfter)
        connection.liveQueries[id] = LiveSubscription(id: id, tag: tag, arrival: arrival)
        connection.readsInFlight += 1
    }

    func deliverLive(_ deliveries: [LiveQueries.Delivery]) {
        for delivery in deliveries {
            switch delivery {
            case .started(let connection, let id, let response, let collection, let sequence, let failure):
                guard !connection.isClosed, let subscription = connection.liveQueries[id] else { continue }
                connection.readsInFlight -= 1
                if let collection, !connection.access.canRead(collection) {
                    // Access was checked before the query's view was found: one dropped and defined
                    // again on another collection in between must not show that collection.
                    let error = ProtocolError(
                        .forbidden,
                        "the view of this live query lists collection \(collection), which this peer may not read",
                        details: [("collection", String(decoding: JSONWriterBox.string(collection), as: UTF8.self))])
                    Response.appendFailure(tag: subscription.tag, error: error, to: &connection.output)
                    connection.liveQueries[id] = nil
                    liveQueries.unsubscribe(id)
                    answered(subscription.arrival, error.code, connection)
                    dispatchPending(connection)
                    markForFlush(connection)
                    continue
                }
                connection.output.append(contentsOf: response)
                if let collection {
                    subscription.collection = collection
                    subscription.started = true
                    subscription.lastSequence = sequence
                    statistics.liveQueries.add(1, ordering: .relaxed)
                    answered(subscription.arrival, nil, connection)
                } else {
                    connection.liveQueries[id] = nil
                    answered(subscription.arrival, failure, connection)
                }
                dispatchPending(connection)
                markForFlush(connection)
            case .changed(let connection, let id, let sequence, let payload, let committedAt):
                guard !connection.isClosed, let subscription = connection.liveQueries[id], subscription.started
                else { continue }
                var line: [UInt8] = []
                line.reserveCapacity(payload.count + subscription.tag.text.count + 20)
                line.append(contentsOf: "{\"tag\":".utf8)
                line.append(contentsOf: subscription.tag.text)
                line.append(contentsOf: ",\"change\":".utf8)
                line.append(contentsOf: payload)
                line.append(contentsOf: "}\n".utf8)
                subscription.held.append((sequence, line, committedAt))
                subscription.heldBytes += line.count
                if subscription.heldBytes > configuration.watchBufferBytes && connection.unsentBytes >= watchOutputBytes
                {
                    statistics.metrics.refused(.lagging)
                    let error = ProtocolError(
                        .lagging,
                        "the live query fell behind by more than \(configuration.watchBufferBytes) bytes; resume with resumeAfter = lastSeq",
                        details: [("lastSeq", String(subscription.lastSequence))])
                    subscription.held = []
                    subscription.heldBytes = 0
                    endLiveQuery(subscription, error, connection, tellThread: true)
                } else {
                    releaseHeldLines(connection)
                }
                markForFlush(connection)
            case .ended(let connection, let id, let error):
                guard !connection.isClosed, let subscription = connection.liveQueries[id] else { continue }
                releaseHeldLines(connection, all: true)
                endLiveQuery(subscription, error, connection, tellThread: false)
                markForFlush(connection)
            }
        }
    }

    /// Moves held change lines into the output while the client takes it (all of them at the end
    /// of a live query, so that its last line comes after them).
    func releaseHeldLines(_ connection: Connection, all: Bool = false) {
        for subscription in connection.liveQueries.values where !subscription.held.isEmpty {
            var released = 0
            for (sequence, line, committedAt) in subscription.held {
                guard all || connection.unsentBytes < watchOutputBytes else { break }
                connection.output.append(contentsOf: line)
                if committedAt > 0 { connection.undeliveredChanges.append(committedAt) }
                subscription.lastSequence = sequence
                subscription.heldBytes -= line.count
                released += 1
            }
            subscription.held.removeFirst(released)
        }
    }

    /// Sends `error` with the live query's `lastSeq` and forgets it; `tellThread` when the thread
    /// still keeps it.
    func endLiveQuery(
        _ subscription: LiveSubscription, _ error: ProtocolError, _ connection: Connection, tellThread: Bool
    ) {
        var error = error
        error.details.removeAll { $0.key == "lastSeq" }
        error.details.append(("lastSeq", String(subscription.lastSequence)))
        Response.appendFailure(tag: subscription.tag, error: error, to: &connection.output)
        removeLiveQuery(subscription, connection, tellThread: tellThread)
    }

    func removeLiveQuery(_ subscription: LiveSubscription, _ connection: Connection, tellThread: Bool) {
        connection.liveQueries[subscription.id] = nil
        if subscription.started { statistics.liveQueries.subtract(1, ordering: .relaxed) }
        if tellThread { liveQueries.unsubscribe(subscription.id) }
    }

    /// After SIGHUP: a live query on a collection the peer may no longer read ends.
    func recheckLiveQueries(_ connection: Connection) {
        for subscription in connection.liveQueries.values where subscription.started {
            guard let collection = subscription.collection, !connection.access.canRead(collection) else { continue }
            releaseHeldLines(connection, all: true)
            endLiveQuery(
                subscription,
                ProtocolError(.forbidden, "the access policy no longer lets this peer read collection \(collection)"),
                connection,
                tellThread: true)
            markForFlush(connection)
        }
    }
}
