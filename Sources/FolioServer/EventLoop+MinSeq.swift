import FolioProtocol

/// Reads with `minSeq`: a read waits, in its turn on its connection, until this node has applied
/// that event (`AppliedSequence`), up to `--min-seq-timeout`, then is answered `unavailable`.
/// Nothing blocks the loop: the read stays at the head of the connection's pending requests and is
/// looked at again when the node applies more events, and at least every 50 ms for its deadline.
extension EventLoop {
    enum SequenceWait {
        case ready
        case waiting
        case timedOut(ProtocolError)
    }

    func awaitSequence(_ minSeq: UInt64, _ connection: Connection) -> SequenceWait {
        let applied = statistics.applied.current
        if applied >= minSeq {
            stopWaitingForSequence(connection)
            return .ready
        }
        let now = monotonicMilliseconds()
        guard let deadline = connection.minSeqDeadline else {
            connection.minSeqDeadline = now + UInt64(configuration.minSeqTimeoutSeconds * 1000)
            waitingForSequence[connection.fd] = connection
            statistics.applied.hold(on: self)
            return .waiting
        }
        guard now >= deadline else { return .waiting }
        stopWaitingForSequence(connection)
        return .timedOut(
            ProtocolError(
                .unavailable,
                "minSeq \(minSeq): this node has applied the log up to event \(applied) and did not reach \(minSeq) within "
                    + "\(configuration.minSeqTimeoutSeconds) s; it is behind the log (see cluster in stats) or no such event exists yet"
            ))
    }

    func stopWaitingForSequence(_ connection: Connection) {
        guard connection.minSeqDeadline != nil else { return }
        connection.minSeqDeadline = nil
        waitingForSequence[connection.fd] = nil
        statistics.applied.release(on: self)
    }

    /// Gives every waiting read its turn again: those whose sequence was applied or whose time is up are answered.
    func resumeWaitingReads() {
        for connection in Array(waitingForSequence.values) {
            dispatchPending(connection)
            markForFlush(connection)
        }
    }
}
