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
    func enforceMemoryBudget() {
        guard heldBytes > memoryBudget else { return }
        var closed = 0
        var freed = 0
        for connection in connections.values.sorted(by: { $0.accountedBytes > $1.accountedBytes }) {
            guard heldBytes > memoryBudget else { break }
            freed += connection.accountedBytes
            closed += 1
            close(connection)
        }
        statistics.connectionsShed.add(closed, ordering: .relaxed)
        if let count = shedding.note(closed, now: monotonicMilliseconds()) {
            log.error(
                "client memory over this loop's share of --client-memory (\(memoryBudget) bytes): closed \(count) connection(s) "
                    + "holding the most (\(freed) bytes just now)")
        }
    }

    /// Ends connections whose current line began to arrive more than `--line-timeout` seconds ago.
    func closeSlowLines(_ now: UInt64) {
        let timeout = UInt64(configuration.lineTimeoutSeconds) * 1000
        guard timeout > 0 else { return }
        for connection in connections.values where connection.partialSince > 0 && now - connection.partialSince > timeout {
            endInput(
                connection,
                with: ProtocolError(
                    .badRequest, "no end of line within \(configuration.lineTimeoutSeconds) s of the line's first byte; closing the connection"))
            connection.framer = LineFramer(maxLineBytes: configuration.maxLineBytes)
            dispatchPending(connection)
            markForFlush(connection)
            statistics.slowLinesClosed.add(1, ordering: .relaxed)
        }
    }
}
