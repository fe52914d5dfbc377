import CFolioSystem
import FolioModel
import FolioProtocol
import Glibc

/// What the accepting loop keeps: the connection limit, a descriptor held in reserve so that a
/// client can be told it was refused even when the process has no descriptor left, and the
/// refusals not yet logged.
struct AcceptState {
    var maxConnections = Int.max
    /// The most connections the descriptor limit allows (less those kept for the store).
    var descriptorLimit = Int.max
    /// `/dev/null`, opened at start; closed for a moment to accept and refuse one client at EMFILE.
    var spareDescriptor: Int32 = -1
    /// Accepting is paused until then (monotonic ms), when not even the spare descriptor helped.
    var pausedUntil: UInt64 = 0
    var refusedOverLimit = ThrottledNote()
    var refusedNoDescriptor = ThrottledNote()

    var isPaused: Bool { pausedUntil > 0 }
}

extension EventLoop {
    /// Makes this loop the one that accepts connections, handing them to `loops` in turn, so that
    /// clients connecting in a burst still spread over every loop (and core).
    func acceptConnections(for loops: [EventLoop], maxConnections: Int, descriptorLimit: Int) throws {
        peers = loops
        accepting.maxConnections = maxConnections
        accepting.descriptorLimit = descriptorLimit
        accepting.spareDescriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        try epoll.add(listener.fd, .readable, token: Self.listenerToken)
    }

    private static func refusalLine(_ limit: Int) -> [UInt8] {
        var line: [UInt8] = []
        Response.appendFailure(
            tag: nil,
            error: ProtocolError(.unavailable, "foliod serves at most \(limit) connections at once; try again later"),
            to: &line)
        return line
    }

    func acceptConnections() {
        for _ in 0..<64 {
            let fd = folio_accept(listener.fd)
            if fd < 0 {
                switch errno {
                case EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED: return
                case EMFILE, ENFILE:
                    refuseWithoutDescriptor()
                    continue
                default:
                    // ENOBUFS, ENOMEM and the like: the kernel cannot take it now either.
                    log.error("cannot accept connections: \(SystemError("accept4")); pausing accepts for 100 ms")
                    pauseAccepting()
                    return
                }
            }
            if statistics.connections.load(ordering: .relaxed) >= accepting.maxConnections {
                refuse(fd)
                statistics.connectionsRefused.add(1, ordering: .relaxed)
                statistics.metrics.refused(.maxConnections)
                let now = monotonicMilliseconds()
                if let count = accepting.refusedOverLimit.note(now: now) {
                    log.error(
                        "refused \(count) connection(s): \(accepting.maxConnections) are open, the limit (--max-connections)"
                    )
                }
                continue
            }
            var uid: UInt32 = 0
            var gid: UInt32 = 0
            var pid: Int32 = 0
            if folio_peer_credentials(fd, &uid, &gid, &pid) != 0 {
                uid = .max
                gid = .max
                pid = 0
            }
            statistics.connections.add(1, ordering: .relaxed)
            let origin = Origin(uid: uid, gid: gid, pid: pid)
            let target = peers[nextPeer % peers.count]
            nextPeer &+= 1
            if target === self { adopt(fd, origin) } else { target.post(.adopt(fd: fd, origin: origin)) }
        }
    }

    /// Tells the client it is refused (best effort: the line fits any socket buffer) and closes it.
    private func refuse(_ fd: Int32) {
        refuse(fd, with: Self.refusalLine(accepting.maxConnections))
    }

    func refuse(_ fd: Int32, with line: [UInt8]) {
        _ = line.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        Glibc.close(fd)
    }

    /// The process has no descriptor left: give the spare one up for a moment to accept the client
    /// and refuse it, rather than leave it waiting in the backlog unanswered.
    private func refuseWithoutDescriptor() {
        let now = monotonicMilliseconds()
        if let count = accepting.refusedNoDescriptor.note(now: now) {
            log.error("refused \(count) connection(s): no file descriptor left (\(SystemError("accept4")))")
        }
        guard accepting.spareDescriptor >= 0 else {
            pauseAccepting()
            return
        }
        Glibc.close(accepting.spareDescriptor)
        let fd = folio_accept(listener.fd)
        if fd >= 0 {
            refuse(fd)
            statistics.connectionsRefused.add(1, ordering: .relaxed)
            statistics.metrics.refused(.noDescriptor)
        }
        accepting.spareDescriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        if accepting.spareDescriptor < 0 || fd < 0 { pauseAccepting() }
    }

    private func pauseAccepting() {
        guard !accepting.isPaused else { return }
        epoll.remove(listener.fd)
        accepting.pausedUntil = monotonicMilliseconds() + 100
    }

    func resumeAcceptingIfDue(_ now: UInt64) {
        if let count = accepting.refusedOverLimit.flush(now: now) {
            log.error(
                "refused \(count) connection(s): \(accepting.maxConnections) are open, the limit (--max-connections)")
        }
        if let count = accepting.refusedNoDescriptor.flush(now: now) {
            log.error("refused \(count) connection(s): no file descriptor left")
        }
        guard accepting.isPaused, now >= accepting.pausedUntil, !draining else { return }
        if accepting.spareDescriptor < 0 { accepting.spareDescriptor = open("/dev/null", O_RDONLY | O_CLOEXEC) }
        do {
            try epoll.add(listener.fd, .readable, token: Self.listenerToken)
        } catch {
            // Unwatched, the socket would never be accepted from again: stay paused and try anew.
            // (EEXIST: it is watched already.)
            if error.errno != EEXIST {
                log.error("cannot watch the listening socket again: \(error); pausing accepts for another 100 ms")
                accepting.pausedUntil = now + 100
                return
            }
        }
        accepting.pausedUntil = 0
    }
}
