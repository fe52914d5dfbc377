import CFolioKernels

/// Serializes JSON values into UTF-8 bytes: compact, fields in their stored order, so the same value
/// always gives the same bytes. Non-ASCII text is written as is; only `"`, `\` and control characters
/// are escaped.
public struct JSONWriter {
    public var bytes: [UInt8]

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// The bytes written, in an allocation of their size when growing by doubling left more than
    /// 64 KiB and a quarter of them unused: for bytes that are kept (an event held until its
    /// commit is durable and its watchers have it), a 1 MiB event would otherwise hold 2 MiB.
    public var compactBytes: [UInt8] {
        let unused = bytes.capacity - bytes.count
        guard unused > 64 << 10 && unused > bytes.count / 4 else { return bytes }
        return Array(unsafeUninitializedCapacity: bytes.count) { buffer, count in
            count = bytes.withUnsafeBufferPointer { source in
                buffer.baseAddress!.initialize(from: source.baseAddress!, count: source.count)
                return source.count
            }
        }
    }

    public mutating func write(_ value: JSON) {
        switch value {
        case .null: writeRaw("null")
        case .bool(let flag): writeRaw(flag ? "true" : "false")
        case .int(let number): write(number)
        case .double(let number): write(number)
        case .string(let string): write(string)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object): write(object)
        }
    }

    public mutating func write(_ object: JSONObject) {
        bytes.append(UInt8(ascii: "{"))
        for (index, field) in object.fields.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            write(field.key)
            bytes.append(UInt8(ascii: ":"))
            write(field.value)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// Writes `"key":` (with a leading comma unless `first`).
    public mutating func writeKey(_ key: StaticString, first: Bool = false) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func writeRaw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends bytes that already are serialized JSON.
    public mutating func writeRaw<C: Collection>(_ serialized: C) where C.Element == UInt8 {
        bytes.append(contentsOf: serialized)
    }

    public mutating func write(_ number: Int64) {
        if number == 0 {
            bytes.append(UInt8(ascii: "0"))
            return
        }
        var magnitude = number.magnitude
        if number < 0 { bytes.append(UInt8(ascii: "-")) }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // room for 20 digits, no heap allocation
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            }
            for index in stride(from: count - 1, through: 0, by: -1) { bytes.append(buffer[index]) }
        }
    }

    public mutating func write(_ number: UInt64) {
        if number <= UInt64(Int64.max) { write(Int64(number)) } else { bytes.append(contentsOf: String(number).utf8) }
    }

    public mutating func write(_ number: Int) { write(Int64(number)) }

    public mutating func write(_ number: Double) {
        // Swift prints the shortest text that reads back as the same double; it is valid JSON for
        // every finite value ("1.0", "1e-07", "1.5e+300").
        bytes.append(contentsOf: number.description.utf8)
    }

    public mutating func write(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var runStart = 0
            // 32 bytes at a time (AVX2), then 16, while none needs escaping (long strings: base64 of file pieces).
            var clean = 0
            if utf8.count >= 64, let base = utf8.baseAddress {
                clean = folio_json_clean_prefix(base, utf8.count)
                let quote = SIMD16<UInt8>(repeating: UInt8(ascii: "\""))
                let backslash = SIMD16<UInt8>(repeating: UInt8(ascii: "\\"))
                let space = SIMD16<UInt8>(repeating: 0x20)
                while clean + 16 <= utf8.count {
                    let chunk = UnsafeRawPointer(base + clean).loadUnaligned(as: SIMD16<UInt8>.self)
                    if any((chunk .== quote) .| (chunk .== backslash) .| (chunk .< space)) { break }
                    clean += 16
                }
            }
            for index in clean..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                runStart = index + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 15)]])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension JSON {
    public func serialized() -> [UInt8] {
        var writer = JSONWriter()
        writer.write(self)
        return writer.bytes
    }
}

extension JSONObject {
    public func serialized() -> [UInt8] {
        var writer = JSONWriter()
        writer.write(self)
        return writer.bytes
    }
}

extension JSONWriter {
    /// Appends, in one move, what `body` puts into a chunk of at most `capacity` bytes on the stack:
    /// for text made of many small pieces (an object's wire form), each of which would otherwise be
    /// an append of its own (about a hundred instructions each, against a few for a piece of a chunk).
    @inlinable
    public mutating func appendChunk(capacity: Int, _ body: (inout ByteChunk) throws -> Void) rethrows {
        try withUnsafeTemporaryAllocation(byteCount: capacity, alignment: 1) { buffer in
            var chunk = ByteChunk(buffer)
            try body(&chunk)
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[..<chunk.count]))
        }
    }
}

/// Bytes put one piece after another into a buffer of fixed size (`JSONWriter.appendChunk`); putting
/// more than it holds stops the process rather than writing past it. Inlinable: its callers are in
/// other modules, and a call per piece cost more than the piece.
public struct ByteChunk {
    @usableFromInline let buffer: UnsafeMutableRawBufferPointer
    @usableFromInline var used = 0
    /// Bytes put so far.
    @inlinable public var count: Int { used }

    @inlinable init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    @inlinable @inline(__always)
    public mutating func put(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count <= buffer.count - used, "chunk overflow")
        guard let source = bytes.baseAddress, let base = buffer.baseAddress else { return }
        (base + used).copyMemory(from: source, byteCount: bytes.count)
        used += bytes.count
    }

    @inlinable @inline(__always)
    public mutating func put(_ text: StaticString) {
        put(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inlinable @inline(__always)
    public mutating func put(_ byte: UInt8) {
        precondition(used < buffer.count, "chunk overflow")
        buffer[used] = byte
        used += 1
    }

    /// Lets `body` write up to `count` bytes in place, and keeps as many as it says it wrote.
    @inlinable
    public mutating func put(atMost count: Int, _ body: (UnsafeMutableBufferPointer<UInt8>) -> Int) {
        precondition(count <= buffer.count - used, "chunk overflow")
        let start = (buffer.baseAddress! + used).bindMemory(to: UInt8.self, capacity: count)
        let written = body(UnsafeMutableBufferPointer(start: start, count: count))
        precondition(written >= 0 && written <= count, "chunk overflow")
        used += written
    }

    /// `number` in decimal: at most 20 bytes.
    @inlinable
    public mutating func put(decimal number: UInt64) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var value = number
        var length = 0
        withUnsafeMutableBytes(of: &digits) { scratch in
            repeat {
                scratch[19 - length] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
                length += 1
            } while value > 0
            put(UnsafeRawBufferPointer(rebasing: scratch[(20 - length)..<20]))
        }
    }
}
