import FolioJSON
import FolioModel
import FolioProtocol

/// One client. Touched only by the event loop that owns it; other threads hold it only to hand it
/// back to that loop with an answer.
final class Connection: @unchecked Sendable {
    enum Item {
        case write(Writer.Job)
        case read(Request)
        case watch(Request)
        case failure(RequestDecoder.TaggedError)
    }

    let fd: Int32
    unowned let loop: EventLoop
    let origin: Origin

    /// Bytes of a line not yet complete (never holds a newline).
    var partialLine: [UInt8] = []
    /// Requests received and not yet started, in order.
    var pending: [Item] = []
    var pendingHead = 0
    var writesInFlight = 0
    var readsInFlight = 0

    var output: [UInt8] = []
    var outputSent = 0

    /// The peer will send no more (EOF), or the daemon is shutting down: read nothing more.
    var inputFinished = false
    /// Close as soon as every answer is out.
    var closeWhenIdle = false
    var isClosed = false
    /// Listed among the loop's connections to flush at the end of this iteration.
    var needsFlush = false
    /// The epoll events the loop registered for this connection.
    var registered: Epoll.Events = []

    var watches: [Watch] = []
    /// Commit times of live watch events waiting in `output`, and how many: recorded as delivered
    /// when the output is written out.
    var undeliveredCommits: [(committedAt: UInt64, events: Int)] = []

    init(fd: Int32, loop: EventLoop, origin: Origin) {
        self.fd = fd
        self.loop = loop
        self.origin = origin
    }

    var unsentBytes: Int { output.count - outputSent }
    var pendingCount: Int { pending.count - pendingHead }
    var isIdle: Bool { writesInFlight == 0 && readsInFlight == 0 && pendingCount == 0 }

    func popPending() {
        pendingHead += 1
        if pendingHead == pending.count {
            pending.removeAll(keepingCapacity: pending.capacity <= 1024)
            pendingHead = 0
        } else if pendingHead >= 1024 && pendingHead * 2 >= pending.count {
            pending.removeFirst(pendingHead)
            pendingHead = 0
        }
    }
}
