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
    /// The start of a line whose newline has not arrived (never holds a newline).
    private(set) var partial: [UInt8] = []

    init(maxLineBytes: Int) { self.maxLineBytes = maxLineBytes }

    var hasPartialLine: Bool { !partial.isEmpty }

    /// Bytes of memory the framer holds.
    var heldBytes: Int { partial.capacity }

    /// Calls `line` with each complete line in `chunk`, in order; `line` returns false to stop (the
    /// rest of the chunk is dropped). Lines are only valid during the call.
    mutating func take(_ chunk: UnsafeRawBufferPointer, _ line: (UnsafeRawBufferPointer) -> Bool) -> Outcome {
        var start = 0
        while start < chunk.count {
            guard let newline = memchr(chunk.baseAddress! + start, 0x0A, chunk.count - start) else {
                // One byte of grace: a line of exactly the limit may end in "\r" before its "\n" arrives.
                if partial.count + chunk.count - start > maxLineBytes + 1 { return refuse() }
                partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[start...]))
                return .taken
            }
            let end = UnsafeRawPointer(newline) - chunk.baseAddress!
            let goOn: Bool
            if partial.isEmpty {
                guard let piece = checked(UnsafeRawBufferPointer(rebasing: chunk[start..<end])) else { return refuse() }
                goOn = line(piece)
            } else {
                if partial.count + end - start > maxLineBytes + 1 { return refuse() }
                partial.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[start..<end]))
                let whole = partial
                partial = []
                guard let result = whole.withUnsafeBytes({ bytes in checked(bytes).map { line($0) } }) else { return refuse() }
                goOn = result
            }
            if !goOn { return .taken }
            start = end + 1
        }
        return .taken
    }

    /// At the end of input: a last line without `\n` still counts.
    mutating func finish(_ line: (UnsafeRawBufferPointer) -> Void) -> Outcome {
        guard !partial.isEmpty else { return .taken }
        let whole = partial
        partial = []
        let fits = whole.withUnsafeBytes { bytes in
            guard let piece = checked(bytes) else { return false }
            line(piece)
            return true
        }
        return fits ? .taken : .tooLong
    }

    /// The line without a trailing `\r`; nil if it is still too long.
    private func checked(_ line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        var line = line
        if let last = line.last, last == 0x0D { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
        return line.count > maxLineBytes ? nil : line
    }

    private mutating func refuse() -> Outcome {
        partial = []
        return .tooLong
    }
}
