import FolioJSON
import FolioModel
import FolioProtocol

/// One client. Touched only by the event loop that owns it; other threads hold it only to hand it
/// back to that loop with an answer.
final class Connection: @unchecked Sendable {
    /// A request received and not yet started, with when and how it arrived.
    enum Item {
        case write(Writer.Job)
        /// A `file.put` or a piece of an upload: run on a worker, in turn; `file.put` and
        /// `file.commit` then go to the writer as a write.
        case upload(Request, UploadOperation, Arrival)
        case read(Request, Request.ReadOperation, Arrival)
        case stream(Request, Request.StreamOperation, Arrival)
        case failure(RequestDecoder.TaggedError, Arrival)
        /// A long line being decoded on a decoder thread; replaced by what it decodes to.
        case decoding(id: UInt64, Arrival)

        var arrival: Arrival {
            switch self {
            case .write(let job): job.arrival
            case .upload(_, _, let arrival), .read(_, _, let arrival), .stream(_, _, let arrival),
                .failure(_, let arrival), .decoding(_, let arrival):
                arrival
            }
        }
    }

    /// A request's line: its bytes, its op (for metrics), when it arrived (monotonic µs).
    struct Arrival: Sendable {
        let size: Int
        let at: UInt64
        /// The op's position in `Metrics.ops`.
        let opIndex: Int
        /// The line's number on the connection, from 0 (`linesTaken` when it came).
        var line = 0

        /// A line that names no op (`invalid`).
        init(size: Int, at: UInt64) {
            self.size = size
            self.at = at
            opIndex = Metrics.invalidOp
        }

        init(size: Int, spec: OperationSpec, at: UInt64) {
            self.size = size
            self.at = at
            opIndex = spec.index
        }

        var op: String { Metrics.ops[opIndex] }
    }

    let fd: Int32
    unowned let loop: EventLoop
    let origin: Origin
    /// Who the peer is to the access policy.
    let access: AccessView
    /// When something last happened on it (monotonic ms), for the idle timeout.
    var lastActivity: UInt64

    var framer: LineFramer
    /// Bytes the loop took from the socket with MSG_PEEK and has handled, still in the socket until
    /// the loop consumes them after writing the answers it could give (`EventLoop.consumePeeked`).
    var peekedBytes = 0
    /// Whether the requests of its last read were all answered when read (gets, pages, counts):
    /// only then does the loop peek at its next ones, since a write's answer comes later anyway.
    var answeredAtOnce = true
    /// When the line the framer holds began to arrive (monotonic ms); 0 while it holds none.
    var partialSince: UInt64 = 0
    /// Requests received and not yet started, in order.
    var pending: [Item] = []
    var pendingHead = 0
    var writesInFlight = 0
    /// When the read at the head of `pending` that waits for `minSeq` gives up (monotonic ms).
    var minSeqDeadline: UInt64?
    /// Of `writesInFlight`, upload ops a worker is running: the writes after them wait, so that
    /// they reach the writer in request order, and so do the next upload ops, so that an upload's
    /// pieces are written before its commit.
    var uploadsStoring = 0
    var readsInFlight = 0
    /// Bytes of the request lines received and not yet answered, and how many.
    var requestBytes = 0
    var requestCount = 0
    /// Names the next long line sent to a decoder.
    var nextDecodingID: UInt64 = 0

    var output: [UInt8] = []
    var outputSent = 0

    /// The peer will send no more (EOF), or the daemon is shutting down: read nothing more.
    var inputFinished = false
    /// Close as soon as every answer is out.
    var closeWhenIdle = false
    var isClosed = false
    /// Listed among the loop's connections to flush at the end of this iteration.
    var needsFlush = false
    /// In the loop's list of connections whose watches catch up in the next iteration.
    var catchUpDeferred = false
    /// The epoll events the loop registered for this connection.
    var registered: Epoll.Events = []
    /// The bytes this connection was last counted for in its loop's memory total.
    var accountedBytes = 0
    /// Listed in the loop's `pausedForLoad`.
    var pausedForLoad = false

    /// Descriptors the peer passed (SCM_RIGHTS) that no `file.put {fd: true}` has taken yet, oldest
    /// first, each with the number of the line it came with: the last line with bytes in the read
    /// that brought it (a read ends with the message that carries descriptors). A put takes only
    /// its own line's, so that one refused, or sent without a descriptor, shifts nothing onto the
    /// wrong line. At most `maxHeldDescriptors`; more are closed as they arrive, as are those
    /// whose line has passed.
    var receivedDescriptors: [(fd: Int32, line: Int)] = []
    /// Lines taken from the input so far.
    var linesTaken = 0
    static let maxHeldDescriptors = 16
    /// Descriptors to pass with answers (`file.read {fd: true}`): each goes with the byte of
    /// `output` at `offset`, the start of its answer's line.
    var outgoingDescriptors: [(offset: Int, fd: Int32)] = []
    /// Descriptors waiting to be passed at most: past them the connection's next reads wait for it
    /// to take its answers, so that a client that does not read holds a few of foliod's
    /// descriptors, not thousands.
    static let maxOutgoingDescriptors = 16

    var watches: [Watch] = []
    /// Live queries by the id `LiveQueries` gave them.
    var liveQueries: [UInt64: LiveSubscription] = [:]
    /// Commit times of live watch events waiting in `output`, and how many: recorded as delivered
    /// when the output is written out.
    var undeliveredCommits: [(committedAt: UInt64, events: Int)] = []
    /// The same for live query change lines, one entry each.
    var undeliveredChanges: [UInt64] = []

    init(fd: Int32, loop: EventLoop, origin: Origin, access: AccessView, maxLineBytes: Int, lineBuffers: LineBuffers) {
        self.fd = fd
        self.loop = loop
        self.origin = origin
        self.access = access
        lastActivity = monotonicMilliseconds()
        framer = LineFramer(maxLineBytes: maxLineBytes, buffers: lineBuffers)
    }

    var unsentBytes: Int { output.count - outputSent }
    var pendingCount: Int { pending.count - pendingHead }
    var isIdle: Bool { writesInFlight == 0 && readsInFlight == 0 && pendingCount == 0 }

    /// Memory held for this client: its incomplete line, its queued output and the lines of its
    /// requests not yet answered.
    var heldBytes: Int {
        framer.heldBytes + output.capacity + requestBytes + liveQueries.values.reduce(0) { $0 + $1.heldBytes }
    }

    /// Whether a tag names one of the connection's watches, of events or live.
    func hasWatch(tagged tag: JSON) -> Bool {
        watches.contains { $0.tag.matches(tag) } || liveQueries.values.contains { $0.tag.matches(tag) }
    }

    func popPending() {
        // The slot lets go of what the request holds at once (a file piece's line: 700 KB), not
        // when the queue next empties or compacts: with pieces pipelined it seldom empties, and
        // 8 uploading clients had 350 MiB of answered pieces waiting there for the compaction.
        pending[pendingHead] = .decoding(id: .max, Arrival(size: 0, at: 0))
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
