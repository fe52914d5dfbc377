import Testing

@testable import FolioServer

@Suite struct LineFramerTests {
    /// Feeds `chunks` and returns the lines and the outcome of the last chunk.
    private func frame(_ chunks: [String], limit: Int = 10) -> (lines: [String], outcome: LineFramer.Outcome, held: Bool) {
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
