import FolioJSON
import Glibc

/// A page of `events` as foliod answered it, cut into the events' own bytes rather than parsed into
/// values and written out again: `folio export` copies each event's line as it came (canonical JSON
/// plus `hash`, exactly what `foliod import` checks), which made the CLI cost a tenth of what
/// parsing and serializing every event did. Only the numbers around the events, and the last event
/// (for its `seq` and `hash`), are parsed. A line that is not the success shape expected gives nil,
/// and the caller parses it as any answer.
struct EventPage {
    /// Each event's bytes in the line.
    var events: [Range<Int>] = []
    var next: Int64 = 0
    var lastSeq: Int64 = 0
    /// The last event, parsed.
    var lastEvent: JSONObject?

    init?(_ line: UnsafeRawBufferPointer) {
        var scanner = Scanner(bytes: line)
        guard let top = scanner.members(of: 0..<line.count), let ok = top["ok"], line[ok].elementsEqual("true".utf8),
            let result = top["result"], let fields = scanner.members(of: result),
            let events = fields["events"], let next = fields["next"], let lastSeq = fields["lastSeq"],
            let elements = scanner.elements(of: events)
        else { return nil }
        guard case .int(let nextValue)? = try? JSONParser.parse(UnsafeRawBufferPointer(rebasing: line[next])),
            case .int(let lastValue)? = try? JSONParser.parse(UnsafeRawBufferPointer(rebasing: line[lastSeq]))
        else { return nil }
        self.events = elements
        self.next = nextValue
        self.lastSeq = lastValue
        if let last = elements.last {
            guard case .object(let object)? = try? JSONParser.parse(UnsafeRawBufferPointer(rebasing: line[last])) else { return nil }
            lastEvent = object
        }
    }

    /// Finds where values start and end in JSON text without building them: strings (with their
    /// escapes), nesting, and scalars up to the next `,`, `}` or `]`. Checks no more than that; the
    /// events it finds are checked by `foliod import` (format, sequence, hash chain).
    private struct Scanner {
        let bytes: UnsafeRawBufferPointer

        private func skipSpace(_ index: inout Int, _ end: Int) {
            while index < end, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
        }

        /// The end of the value starting at `index`, or nil.
        private func valueEnd(_ start: Int, _ end: Int) -> Int? {
            var index = start
            guard index < end else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "\""):
                // The closing quote is the first one after an even run of backslashes (memchr: most
                // of an event's bytes are in its strings).
                index += 1
                while index < end, let found = memchr(bytes.baseAddress! + index, 0x22, end - index) {
                    let quote = UnsafeRawPointer(found) - bytes.baseAddress!
                    var backslashes = 0
                    while quote - backslashes - 1 >= index, bytes[quote - backslashes - 1] == UInt8(ascii: "\\") { backslashes += 1 }
                    if backslashes % 2 == 0 { return quote + 1 }
                    index = quote + 1
                }
                return nil
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                var depth = 0
                while index < end {
                    switch bytes[index] {
                    case UInt8(ascii: "\""):
                        guard let after = valueEnd(index, end) else { return nil }
                        index = after
                        continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 { return index + 1 }
                    default: break
                    }
                    index += 1
                }
                return nil
            default:
                while index < end, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]")].contains(bytes[index]) { index += 1 }
                return index > start ? index : nil
            }
        }

        /// The members of the object at `range`: each key (unescaped keys only) and its value's range.
        mutating func members(of range: Range<Int>) -> [String: Range<Int>]? {
            var index = range.lowerBound
            skipSpace(&index, range.upperBound)
            guard index < range.upperBound, bytes[index] == UInt8(ascii: "{") else { return nil }
            index += 1
            var members: [String: Range<Int>] = [:]
            while true {
                skipSpace(&index, range.upperBound)
                guard index < range.upperBound else { return nil }
                if bytes[index] == UInt8(ascii: "}") { return members }
                guard bytes[index] == UInt8(ascii: "\""), let keyEnd = valueEnd(index, range.upperBound) else { return nil }
                let key = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[index + 1..<keyEnd - 1]), as: UTF8.self)
                index = keyEnd
                skipSpace(&index, range.upperBound)
                guard index < range.upperBound, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
                skipSpace(&index, range.upperBound)
                guard let end = valueEnd(index, range.upperBound) else { return nil }
                members[key] = index..<end
                index = end
                skipSpace(&index, range.upperBound)
                guard index < range.upperBound else { return nil }
                if bytes[index] == UInt8(ascii: ",") { index += 1 }
            }
        }

        /// The ranges of the elements of the array at `range`.
        mutating func elements(of range: Range<Int>) -> [Range<Int>]? {
            var index = range.lowerBound
            guard index < range.upperBound, bytes[index] == UInt8(ascii: "[") else { return nil }
            index += 1
            var elements: [Range<Int>] = []
            while true {
                skipSpace(&index, range.upperBound)
                guard index < range.upperBound else { return nil }
                if bytes[index] == UInt8(ascii: "]") { return elements }
                guard let end = valueEnd(index, range.upperBound) else { return nil }
                elements.append(index..<end)
                index = end
                skipSpace(&index, range.upperBound)
                guard index < range.upperBound else { return nil }
                if bytes[index] == UInt8(ascii: ",") { index += 1 }
            }
        }
    }
}
