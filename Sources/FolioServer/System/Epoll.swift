import CFolioSystem
import Glibc

/// An epoll instance (`epoll_create1`) whose registrations carry a 64-bit token.
struct Epoll {
    struct Events: OptionSet {
        let rawValue: UInt32
        static let readable = Events(rawValue: folio_epoll_in)
        static let writable = Events(rawValue: folio_epoll_out)
        static let error = Events(rawValue: folio_epoll_err)
        static let hangUp = Events(rawValue: folio_epoll_hup)
        static let peerClosed = Events(rawValue: folio_epoll_rdhup)
        /// Reported once as the state changes, not at every wait while it holds.
        static let edgeTriggered = Events(rawValue: folio_epoll_et)
    }

    let fd: Int32

    init() throws(SystemError) {
        fd = folio_epoll_create()
        if fd < 0 { throw SystemError("epoll_create1") }
    }

    func add(_ target: Int32, _ events: Events, token: UInt64) throws(SystemError) {
        try syscall("epoll_ctl") { folio_epoll_control(fd, 0, target, events.rawValue, token) }
    }

    func modify(_ target: Int32, _ events: Events, token: UInt64) throws(SystemError) {
        try syscall("epoll_ctl") { folio_epoll_control(fd, 1, target, events.rawValue, token) }
    }

    func remove(_ target: Int32) {
        _ = folio_epoll_control(fd, 2, target, 0, 0)
    }

    /// Waits up to `timeout` ms (-1: forever) and fills `events` / `tokens`; returns how many are ready.
    func wait(events: inout [UInt32], tokens: inout [UInt64], timeout: Int32) throws(SystemError) -> Int {
        let capacity = Int32(events.count)
        let count = events.withUnsafeMutableBufferPointer { eventBuffer in
            tokens.withUnsafeMutableBufferPointer { tokenBuffer in
                folio_epoll_wait(fd, eventBuffer.baseAddress, tokenBuffer.baseAddress, capacity, timeout)
            }
        }
        if count < 0 {
            if errno == EINTR { return 0 }
            throw SystemError("epoll_wait")
        }
        return Int(count)
    }
}

/// An eventfd (`EFD_NONBLOCK`) to wake an event loop from another thread.
struct WakeSignal {
    let fd: Int32

    init() throws(SystemError) {
        fd = folio_eventfd()
        if fd < 0 { throw SystemError("eventfd") }
    }

    func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(fd, &one, 8)
    }

    func drain() {
        var value: UInt64 = 0
        _ = Glibc.read(fd, &value, 8)
    }
}
