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
        // The scan goes down into `result` and cuts its `events` into elements on the way: each
        // event's bytes are walked once.
        guard let top = scanner.members(of: 0..<line.count, path: ["result", "events"]), let ok = top["ok"],
            line[ok].elementsEqual("true".utf8),
            top["result"] != nil, let fields = scanner.inner, fields["events"] != nil, let next = fields["next"],
            let lastSeq = fields["lastSeq"], let elements = scanner.cut
        else { return nil }
        guard case .int(let nextValue)? = try? JSONParser.parse(UnsafeRawBufferPointer(rebasing: line[next])),
            case .int(let lastValue)? = try? JSONParser.parse(UnsafeRawBufferPointer(rebasing: line[lastSeq]))
        else { return nil }
        self.events = elements
        self.next = nextValue
        self.lastSeq = lastValue
        if let last = elements.last {
            guard case .object(let object)? = try? JSONParser.parse(UnsafeRawBufferPointer(rebasing: line[last])) else {
                return nil
            }
            lastEvent = object
        }
    }

    /// Finds where values start and end in JSON text without building them: strings (with their
    /// escapes), nesting, and scalars up to the next `,`, `}` or `]`. Checks no more than that; the
    /// events it finds are checked by `foliod import` (format, sequence, hash chain).
    private struct Scanner {
        let bytes: UnsafeRawBufferPointer
        /// The members of the object that `members(of:path:)` went down into (the path's first key).
        var inner: [String: Range<Int>]?
        /// The elements of the array the path's last key named.
        var cut: [Range<Int>]?

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
                    while quote - backslashes - 1 >= index, bytes[quote - backslashes - 1] == UInt8(ascii: "\\") {
                        backslashes += 1
                    }
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
                while index < end, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]")].contains(bytes[index]) {
                    index += 1
                }
                return index > start ? index : nil
            }
        }

        /// The members of the object at `range`: each key (unescaped keys only) and its value's range.
        /// On the way, the value of `path`'s first key is read the same way with the rest of the path
        /// if it is an object (its members in `inner`), or cut into its elements if it is an array and
        /// the key is the path's last (`cut`), so that no byte is walked twice.
        mutating func members(of range: Range<Int>, path: ArraySlice<String> = []) -> [String: Range<Int>]? {
            object(from: range.lowerBound, range.upperBound, path: path)?.members
        }

        private mutating func object(from start: Int, _ limit: Int, path: ArraySlice<String>) -> (
            members: [String: Range<Int>], end: Int
        )? {
            var index = start
            skipSpace(&index, limit)
            guard index < limit, bytes[index] == UInt8(ascii: "{") else { return nil }
            index += 1
            var members: [String: Range<Int>] = [:]
            while true {
                skipSpace(&index, limit)
                guard index < limit else { return nil }
                if bytes[index] == UInt8(ascii: "}") { return (members, index + 1) }
                guard bytes[index] == UInt8(ascii: "\""), let keyEnd = valueEnd(index, limit) else { return nil }
                let key = String(
                    decoding: UnsafeRawBufferPointer(rebasing: bytes[index + 1..<keyEnd - 1]), as: UTF8.self)
                index = keyEnd
                skipSpace(&index, limit)
                guard index < limit, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
                skipSpace(&index, limit)
                guard index < limit else { return nil }
                let end: Int
                if key == path.first, path.count > 1, bytes[index] == UInt8(ascii: "{") {
                    guard let (inner, objectEnd) = object(from: index, limit, path: path.dropFirst()) else {
                        return nil
                    }
                    self.inner = inner
                    end = objectEnd
                } else if key == path.first, path.count == 1, bytes[index] == UInt8(ascii: "[") {
                    guard let (elements, arrayEnd) = elements(from: index, limit) else { return nil }
                    cut = elements
                    end = arrayEnd
                } else {
                    guard let valueEnd = valueEnd(index, limit) else { return nil }
                    end = valueEnd
                }
                members[key] = index..<end
                index = end
                skipSpace(&index, limit)
                guard index < limit else { return nil }
                if bytes[index] == UInt8(ascii: ",") { index += 1 }
            }
        }

        /// The ranges of the elements of the array starting at `start`, and where it ends.
        func elements(from start: Int, _ limit: Int) -> (elements: [Range<Int>], end: Int)? {
            var index = start
            guard index < limit, bytes[index] == UInt8(ascii: "[") else { return nil }
            index += 1
            var elements: [Range<Int>] = []
            while true {
                skipSpace(&index, limit)
                guard index < limit else { return nil }
                if bytes[index] == UInt8(ascii: "]") { return (elements, index + 1) }
                guard let end = valueEnd(index, limit) else { return nil }
                elements.append(index..<end)
                index = end
                skipSpace(&index, limit)
                guard index < limit else { return nil }
                if bytes[index] == UInt8(ascii: ",") { index += 1 }
            }
        }
    }
}
