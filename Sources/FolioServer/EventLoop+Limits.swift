import FolioProtocol
import Glibc

extension EventLoop {
    /// Counts what the connection holds now in this loop's (and the daemon's) total.
    func account(_ connection: Connection) {
        let held = connection.heldBytes
        let change = held - connection.accountedBytes
        guard change != 0 else { return }
        connection.accountedBytes = held
        heldBytes += change
        statistics.clientMemory.add(change, ordering: .relaxed)
    }

    /// Over its share of `--client-memory`, a loop closes the connections that hold the most until
    /// it is back under it: one client's backlog costs that client its connection, never the others
    /// their answers or the daemon its memory.
    /// What closed connections left in flight is not theirs to pay for again: it only pauses
    /// reading (`isOverSharedBound`) until it finishes.
    func enforceMemoryBudget() {
        guard heldBytes - orphanedBytes > memoryBudget else { return }
        var closed = 0
        var freed = 0
        for connection in connections.values.sorted(by: { $0.accountedBytes > $1.accountedBytes }) {
            guard heldBytes - orphanedBytes > memoryBudget else { break }
            freed += connection.accountedBytes
            closed += 1
            close(connection)
        }
        statistics.connectionsShed.add(closed, ordering: .relaxed)
        statistics.metrics.refused(.clientMemory, count: closed)
        if let count = shedding.note(closed, now: monotonicMilliseconds()) {
            log.error(
                "client memory over this loop's share of --client-memory (\(memoryBudget) bytes): closed \(count) connection(s) "
                    + "holding the most (\(freed) bytes just now)")
        }
    }

    /// Over a bound that every connection shares, no connection reads more: the daemon holds
    /// `max-requests-total` requests not yet answered, or this loop's clients (those gone included)
    /// hold its share of `client-memory`.
    var isOverSharedBound: Bool {
        heldBytes > memoryBudget
            || statistics.requestsPending.load(ordering: .relaxed) + pendingDelta > configuration.maxTotalRequests
    }

    func publishPending() {
        guard pendingDelta != 0 else { return }
        statistics.requestsPending.add(pendingDelta, ordering: .relaxed)
        pendingDelta = 0
    }

    /// A request of a closed connection finished: what it held is free.
    func releaseOrphan(_ size: Int) {
        orphanedBytes -= size
        heldBytes -= size
        statistics.clientMemory.subtract(size, ordering: .relaxed)
        pendingDelta -= 1
    }

    /// Reads again from connections paused by a shared bound, once under it. Checked every loop
    /// iteration (at least once a second, as the loop wakes that often when any limit applies).
    func resumePausedReading() {
        guard !pausedForLoad.isEmpty, !isOverSharedBound else { return }
        let paused = pausedForLoad
        pausedForLoad.removeAll()
        for connection in paused {
            connection.pausedForLoad = false
            if !connection.isClosed { updateInterest(connection) }
        }
    }

    /// Once a second: slow lines, idle connections, and clients that do not take their answers.
    func sweep(_ now: UInt64) {
        closeSlowLines(now)
        closeIdleConnections(now)
        closeStuckReaders()
    }

    /// Ends connections with nothing in flight, no watch and no partial line for `idle-timeout`.
    func closeIdleConnections(_ now: UInt64) {
        let timeout = UInt64(configuration.idleTimeoutSeconds) * 1000
        guard timeout > 0 else { return }
        for connection in connections.values
        where connection.watches.isEmpty && connection.liveQueries.isEmpty && connection.isIdle
            && connection.partialSince == 0 && connection.unsentBytes == 0
            && !connection.inputFinished && now - connection.lastActivity > timeout
        {
            endInput(
                connection,
                with: ProtocolError(
                    .unavailable,
                    "idle for \(configuration.idleTimeoutSeconds) s (idle-timeout); closing the connection"))
            dispatchPending(connection)
            markForFlush(connection)
            statistics.idleClosed.add(1, ordering: .relaxed)
            statistics.metrics.refused(.idleTimeout)
        }
    }

    /// Closes a connection whose client let more than `max-output` of answers pile up: it stopped
    /// reading, and what it asked for is not worth the memory. Checked each time answers are
    /// flushed, so the bound holds between sweeps too.
    func closeStuckReader(_ connection: Connection) {
        log.notice(
            "closing a connection (pid \(connection.origin.pid), uid \(connection.origin.uid)) that left \(connection.unsentBytes) bytes of answers unread (max-output)"
        )
        close(connection)
        statistics.stuckReadersClosed.add(1, ordering: .relaxed)
        statistics.metrics.refused(.maxOutput)
    }

    func closeStuckReaders() {
        for connection in connections.values where connection.unsentBytes > configuration.maxOutputBytes {
            closeStuckReader(connection)
        }
    }

    /// Ends connections whose current line began to arrive more than `--partial-line-timeout` seconds
    /// ago. The time foliod itself did not read from the connection (backpressure) does not count:
    /// the clock starts again when reading resumes (`updateInterest`).
    func closeSlowLines(_ now: UInt64) {
        let timeout = UInt64(configuration.lineTimeoutSeconds) * 1000
        guard timeout > 0 else { return }
        for connection in connections.values
        where connection.partialSince > 0 && connection.registered.contains(.readable)
            && now - connection.partialSince > timeout
        {
            endInput(
                connection,
                with: ProtocolError(
                    .badRequest,
                    "no end of line within \(configuration.lineTimeoutSeconds) s of the line's first byte; closing the connection"
                ))
            connection.framer = LineFramer(maxLineBytes: configuration.maxLineBytes, buffers: lineBuffers)
            dispatchPending(connection)
            markForFlush(connection)
            statistics.slowLinesClosed.add(1, ordering: .relaxed)
            statistics.metrics.refused(.partialLineTimeout)
        }
    }
}
