import Glibc

/// Splits a connection's input into request lines: without their `\n` and a trailing `\r`, and never
/// holding more than `maxLineBytes` (plus a possible `\r`) of a line whose end has not arrived. Pure:
/// no I/O, no clock.
struct LineFramer {
    enum Outcome: Equatable {
        /// Every byte was taken (or the caller stopped).
        case taken
        /// A line longer than `maxLineBytes`: the framer holds nothing and takes nothing more.
        case tooLong
    }

    let maxLineBytes: Int
    /// Where whole-line buffers come from (and go back to, once their line is done with); nil: malloc.
    let buffers: LineBuffers?
    /// The start of a line whose newline has not arrived (never holds a newline).
    private(set) var partial: [UInt8] = []

    init(maxLineBytes: Int, buffers: LineBuffers? = nil) {
        self.maxLineBytes = maxLineBytes
        self.buffers = buffers
    }

    var hasPartialLine: Bool { !partial.isEmpty }

    /// Bytes of memory the framer holds.
    var heldBytes: Int { partial.capacity }

    /// A partial line that grows past this is given room for the longest line at once (a buffer
    /// from `buffers`, see `LineBuffers`) instead of a copy at every doubling.
    static let wholeLineReserveBytes = 64 << 10

    /// Calls `line` with each complete line in `chunk`, in order; `line` returns false to stop (the
    /// rest of the chunk is dropped). Lines are only valid during the call.
    mutating func take(_ chunk: UnsafeRawBufferPointer, _ line: (UnsafeRawBufferPointer) -> Bool) -> Outcome {
        take(chunk, lines: { bytes, _ in line(bytes) })
    }

    /// As `take(_:_:)`; a line that was gathered across chunks also comes as the array that holds
    /// it (the same bytes), which the caller may keep instead of copying them.
    mutating func take(_ chunk: UnsafeRawBufferPointer, lines line: (UnsafeRawBufferPointer, [UInt8]?) -> Bool)
        -> Outcome
    {
        var start = 0
        while start < chunk.count {
            guard let newline = memchr(chunk.baseAddress! + start, 0x0A, chunk.count - start) else {
                // One byte of grace: a line of exactly the limit may end in "\r" before its "\n" arrives.
                if partial.count + chunk.count - start > maxLineBytes + 1 { return refuse() }
                append(UnsafeRawBufferPointer(rebasing: chunk[start...]))
                return .taken
            }
            let end = UnsafeRawPointer(newline) - chunk.baseAddress!
            let goOn: Bool
            if partial.isEmpty {
                guard let piece = checked(UnsafeRawBufferPointer(rebasing: chunk[start..<end])) else { return refuse() }
                goOn = line(piece, nil)
            } else {
                if partial.count + end - start > maxLineBytes + 1 { return refuse() }
                append(UnsafeRawBufferPointer(rebasing: chunk[start..<end]))
                guard let whole = takeWhole() else { return refuse() }
                goOn = whole.withUnsafeBytes { line($0, whole) }
            }
            if !goOn { return .taken }
            start = end + 1
        }
        return .taken
    }

    /// At the end of input: a last line without `\n` still counts.
    mutating func finish(_ line: (UnsafeRawBufferPointer) -> Void) -> Outcome {
        finish(lines: { bytes, _ in line(bytes) })
    }

    mutating func finish(lines line: (UnsafeRawBufferPointer, [UInt8]?) -> Void) -> Outcome {
        guard !partial.isEmpty else { return .taken }
        guard let whole = takeWhole() else { return .tooLong }
        whole.withUnsafeBytes { line($0, whole) }
        return .taken
    }

    private mutating func append(_ bytes: UnsafeRawBufferPointer) {
        let needed = partial.count + bytes.count
        if needed > Self.wholeLineReserveBytes && partial.capacity < needed {
            let capacity = max(needed, maxLineBytes + 1)
            if let buffers {
                var whole = buffers.take(capacity: capacity)
                whole.append(contentsOf: partial)
                partial = whole
            } else {
                partial.reserveCapacity(capacity)
            }
        }
        partial.append(contentsOf: bytes)
    }

    /// The partial line, now whole, without a trailing `\r`; nil if it is too long. The framer
    /// holds nothing afterwards.
    private mutating func takeWhole() -> [UInt8]? {
        var whole = partial
        partial = []
        if whole.last == 0x0D { whole.removeLast() }
        guard whole.count <= maxLineBytes else {
            buffers?.give(whole)
            return nil
        }
        return whole
    }

    /// The line without a trailing `\r`; nil if it is still too long.
    private func checked(_ line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        var line = line
        if let last = line.last, last == 0x0D { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
        return line.count > maxLineBytes ? nil : line
    }

    private mutating func refuse() -> Outcome {
        var gone: [UInt8] = []
        swap(&gone, &partial)
        if gone.capacity > Self.wholeLineReserveBytes { buffers?.give(gone) }
        return .tooLong
    }
}
