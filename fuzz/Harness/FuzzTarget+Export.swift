import FolioJSON
import FolioModel
import FolioStore

extension FuzzTarget {
    /// The bytes as the lines of an export, read to the end or to the first error. An odd first byte
    /// first rewrites every event line's `hash`, and the end line's `chainHead`, to the values the chain
    /// needs, so that mutated events get past the hash check to the checks after it.
    static func exportReader(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let mode = bytes.first else { return nil }
        var lines = bytes.dropFirst().split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
            Array($0)
        }
        if lines.last?.isEmpty == true { lines.removeLast() }
        if mode & 1 == 1 { lines = withChainFixed(lines) }
        let source = LineSource(lines)
        let reader = ExportReader(nextLine: { source.next() })
        var events = 0
        do {
            while let batch = try reader.next() {
                for case .event in batch { events += 1 }
            }
        } catch is ImportError {
            return nil
        } catch {
            return "the reader threw \(error), not an ImportError"
        }
        if UInt64(events) != reader.lastSequence {
            return "\(events) events read, but the last sequence is \(reader.lastSequence)"
        }
        return nil
    }

    private static func withChainFixed(_ lines: [[UInt8]]) -> [[UInt8]] {
        var chain = ChainHash.genesis
        return lines.map { line in
            guard case .object(let object)? = try? JSONParser.parse(line) else { return line }
            if object["end"] != nil { return replacing("chainHead", in: object, with: chain.hex) }
            guard let event = try? Event(json: .object(object), allowing: ["hash"]) else { return line }
            chain = chain.next(event.encoded())
            return replacing("hash", in: object, with: chain.hex)
        }
    }

    private static func replacing(_ key: String, in object: JSONObject, with text: String) -> [UInt8] {
        var fields = object.fields.filter { $0.key != key }
        fields.append(.init(key: key, value: .string(text)))
        return JSON.object(JSONObject(fields)).serialized()
    }
}

/// Hands out the lines one by one, as a file reader would.
private final class LineSource: @unchecked Sendable {
    private var lines: [[UInt8]]
    private var index = 0

    init(_ lines: [[UInt8]]) { self.lines = lines }

    func next() -> [UInt8]? {
        guard index < lines.count else { return nil }
        defer { index += 1 }
        return lines[index]
    }
}
