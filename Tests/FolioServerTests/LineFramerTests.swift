import Testing

@testable import FolioServer

@Suite struct LineFramerTests {
    /// Feeds `chunks` and returns the lines and the outcome of the last chunk.
    private func frame(_ chunks: [String], limit: Int = 10) -> (
        lines: [String], outcome: LineFramer.Outcome, held: Bool
    ) {
        var framer = LineFramer(maxLineBytes: limit)
        var lines: [String] = []
        var outcome = LineFramer.Outcome.taken
        for chunk in chunks {
            outcome = Array(chunk.utf8).withUnsafeBytes { bytes in
                framer.take(bytes) { line in
                    lines.append(String(decoding: line, as: UTF8.self))
                    return true
                }
            }
            if outcome == .tooLong { break }
        }
        return (lines, outcome, framer.hasPartialLine)
    }

    @Test func splitsLinesAcrossChunksAndDropsCarriageReturns() {
        let result = frame(["ab", "c\nde\r", "\n\nf", "g\r\n"])
        #expect(result.lines == ["abc", "de", "", "fg"])
        #expect(result.outcome == .taken && !result.held)
    }

    @Test func aLineOfExactlyTheLimitFitsEvenWithItsReturnArrivingFirst() {
        let result = frame(["0123456789\r", "\n"])
        #expect(result.lines == ["0123456789"] && result.outcome == .taken)
    }

    @Test func aLongerLineIsRefusedWithoutBeingHeldWhole() {
        #expect(frame(["01234567890\n"]).outcome == .tooLong)
        #expect(frame(["0123456", "78901"]).outcome == .tooLong)
        let refused = frame(["ok\n0123456789012"])
        #expect(refused.lines == ["ok"] && refused.outcome == .tooLong && !refused.held)
    }

    @Test func theLastLineCountsAtTheEndOfInput() {
        var framer = LineFramer(maxLineBytes: 10)
        _ = Array("a\nlast".utf8).withUnsafeBytes { framer.take($0) { _ in true } }
        var last: [String] = []
        #expect(framer.finish { last.append(String(decoding: $0, as: UTF8.self)) } == .taken)
        #expect(last == ["last"] && !framer.hasPartialLine)
    }

    @Test func theCallerCanStopTakingLines() {
        var framer = LineFramer(maxLineBytes: 10)
        var lines: [String] = []
        _ = Array("a\nb\nc\n".utf8).withUnsafeBytes { bytes in
            framer.take(bytes) { line in
                lines.append(String(decoding: line, as: UTF8.self))
                return lines.count < 2
            }
        }
        #expect(lines == ["a", "b"])
    }
}

@Suite struct ThrottledNoteTests {
    @Test func logsTheFirstAtOnceThenOncePerIntervalWithTheCount() {
        var note = ThrottledNote(intervalMilliseconds: 1000)
        #expect(note.note(now: 5000) == 1)
        #expect(note.note(now: 5100) == nil)
        #expect(note.note(3, now: 5900) == nil)
        #expect(note.flush(now: 5950) == nil)
        #expect(note.flush(now: 6000) == 4)
        #expect(note.flush(now: 9000) == nil)
        #expect(note.note(now: 9001) == 1)
    }
}

@Suite struct LineBuffersTests {
    /// A long line gathered across chunks comes in a whole-line buffer from the pool; once its
    /// request lets go of it, the next long line reuses it (no fresh block); at most `kept` are kept.
    @Test func longLinesReuseTheirBuffers() {
        let buffers = LineBuffers()
        let limit = 1 << 20
        var framer = LineFramer(maxLineBytes: limit, buffers: buffers)
        let half = [UInt8](repeating: UInt8(ascii: "a"), count: 300_000)
        var addresses: [UnsafeRawPointer] = []
        for round in 0..<3 {
            var taken: [UInt8]?
            for chunk in [half, half + [0x0A]] {
                _ = chunk.withUnsafeBytes { bytes in
                    framer.take(
                        bytes,
                        lines: { line, owned in
                            taken = owned
                            #expect(line.count == 600_000)
                            return true
                        })
                }
            }
            guard let line = taken.take() else {
                Issue.record("round \(round): the line did not come whole")
                return
            }
            #expect(line.count == 600_000 && line.capacity > limit)
            line.withUnsafeBytes { addresses.append(UnsafeRawPointer($0.baseAddress!)) }
            buffers.give(line)
            #expect(buffers.keptBuffers.count == 1)
        }
        #expect(addresses[1] == addresses[0] && addresses[2] == addresses[0])
        for _ in 0..<(LineBuffers.kept + 5) { buffers.give([UInt8](repeating: 0, count: 10)) }
        #expect(buffers.keptBuffers.count == LineBuffers.kept)
        // No more bytes than `keptBytes` either: a buffer for lines of 8 MiB is kept alone, not 32 of them.
        buffers.releaseIdle()
        buffers.releaseIdle()
        for _ in 0..<8 {
            var large: [UInt8] = []
            large.reserveCapacity(8 << 20)
            buffers.give(large)
        }
        #expect(buffers.keptBuffers.bytes <= LineBuffers.keptBytes && buffers.keptBuffers.count < 8)
        // A kept buffer too small for the line asked is dropped, not handed out.
        let fresh = buffers.take(capacity: 16 << 20)
        #expect(fresh.capacity >= 16 << 20 && fresh.isEmpty)
        #expect(buffers.keptBuffers.count == 0)
        // Kept buffers go once a second passed without a take (the trimmer's call), not before.
        for _ in 0..<3 { buffers.give([UInt8](repeating: 0, count: 10)) }
        _ = buffers.take(capacity: 5)
        buffers.releaseIdle()
        #expect(buffers.keptBuffers.count == 2)
        buffers.releaseIdle()
        #expect(buffers.keptBuffers.count == 0)
    }
}
