import CCrypto
import FolioClient
import FolioJSON

/// Reads the events foliod appended since the last read, 1,000 at a time, checks that sequences
/// follow one another and recomputes the hash chain (PROTOCOL.md §7) over each event's bytes as
/// received, then replays them into the logged state.
struct LogReader {
    let connection: FolioConnection

    /// The new events, in order, already applied to `state`.
    func readNewEvents(into state: LoggedState) throws(Violation) -> [LoggedEvent] {
        var events: [LoggedEvent] = []
        while true {
            let request: JSON = ["op": "events", "after": .int(state.lastSeq), "limit": 1000]
            let line = try connection.rawCall(request)
            let result = try FolioConnection.result(of: line, request)
            guard case .array(let parsed)? = result["events"], let lastSeq = result["lastSeq"]?.integerValue else {
                throw Violation("events: malformed result")
            }
            let raw = try Self.elements(ofEventsIn: line)
            guard raw.count == parsed.count else {
                throw Violation("events: \(parsed.count) events parsed, \(raw.count) found in the line")
            }
            for (object, bytes) in zip(parsed, raw) {
                guard case .object(let fields) = object else {
                    throw Violation("events: an event that is not an object")
                }
                let event = try LoggedEvent(fields, text: String(decoding: bytes, as: UTF8.self))
                let hash = try Self.chainHash(after: state.chainHead, event: Array(bytes), seq: event.seq)
                guard fields["hash"]?.stringValue == hex(hash) else {
                    throw Violation("log: the parsed hash of event \(event.seq) differs from its text")
                }
                try state.apply(event, hash: hash)
                events.append(event)
            }
            if parsed.isEmpty || state.lastSeq >= lastSeq {
                guard state.lastSeq == lastSeq else {
                    throw Violation("events: the log ends at \(state.lastSeq) but lastSeq is \(lastSeq)")
                }
                return events
            }
        }
    }

    /// SHA-256 of the previous hash and the event's canonical bytes (its text without the final
    /// `,"hash":"…"`); throws unless the event's own `hash` is that.
    static func chainHash(after previous: [UInt8], event: [UInt8], seq: Int64) throws(Violation) -> [UInt8] {
        let prefix = Array(#","hash":""#.utf8)
        let suffixLength = prefix.count + 64 + 2
        guard event.count > suffixLength,
            Array(event[(event.count - suffixLength)..<(event.count - suffixLength + prefix.count)]) == prefix,
            event[event.count - 2] == UInt8(ascii: "\""), event[event.count - 1] == UInt8(ascii: "}")
        else {
            throw Violation(
                "log: event \(seq) does not end with its hash: \(String(decoding: event.suffix(120), as: UTF8.self))")
        }
        let stated = String(decoding: event[(event.count - 66)..<(event.count - 2)], as: UTF8.self)
        var input = previous
        input += event[..<(event.count - suffixLength)]
        input.append(UInt8(ascii: "}"))
        var digest = [UInt8](repeating: 0, count: 32)
        input.withUnsafeBufferPointer { bytes in
            _ = digest.withUnsafeMutableBufferPointer { SHA256(bytes.baseAddress, bytes.count, $0.baseAddress) }
        }
        guard hex(digest) == stated else {
            throw Violation(
                "log: the chain breaks at event \(seq): it states hash \(stated), the chain gives \(hex(digest))")
        }
        return digest
    }

    /// The byte ranges of the elements of the `"events":[…]` array of an `events` answer (no tag
    /// precedes it), each an event's text exactly as sent.
    static func elements(ofEventsIn line: [UInt8]) throws(Violation) -> [ArraySlice<UInt8>] {
        let marker = Array(#""events":["#.utf8)
        guard var index = firstIndex(of: marker, in: line) else {
            throw Violation("events: no events array in the answer")
        }
        index += marker.count
        var elements: [ArraySlice<UInt8>] = []
        while index < line.count {
            let byte = line[index]
            if byte == UInt8(ascii: "]") { return elements }
            if byte == UInt8(ascii: ",") || byte == UInt8(ascii: " ") {
                index += 1
                continue
            }
            let start = index
            var depth = 0
            var inString = false
            while index < line.count {
                let byte = line[index]
                index += 1
                if inString {
                    if byte == UInt8(ascii: "\\") { index += 1 } else if byte == UInt8(ascii: "\"") { inString = false }
                } else if byte == UInt8(ascii: "\"") {
                    inString = true
                } else if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") {
                    depth += 1
                } else if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") {
                    depth -= 1
                    if depth == 0 { break }
                }
            }
            elements.append(line[start..<index])
        }
        throw Violation("events: the events array does not end")
    }

    private static func firstIndex(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return start }
        }
        return nil
    }
}

/// Lower-case hex digits of `bytes`.
func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
}
