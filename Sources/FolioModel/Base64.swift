import CFolioKernels

/// Base64 (RFC 4648 §4: `A-Z a-z 0-9 + /`, `=` padding to a multiple of 4 characters).
///
/// Both directions work on contiguous bytes, 32 characters to 24 bytes at a time with AVX2 where the
/// CPU has it (CFolioKernels), then four characters to three bytes at a time with a table each way:
/// file content goes through them a megabyte at a time (`file.write`, `file.read`, `export
/// --with-files`), so they must run at memory speed, not at a witness call per byte.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Each character's 6-bit value; 0xFF for a character that is not in the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }()

    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var text: [UInt8] = []
        if bytes.withContiguousStorageIfAvailable({ encode(UnsafeRawBufferPointer($0), appendingTo: &text) }) == nil {
            Array(bytes).withUnsafeBytes { encode($0, appendingTo: &text) }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends the base64 of `bytes` to `text` (a response line being written, say).
    public static func encode(_ bytes: UnsafeRawBufferPointer, appendingTo text: inout [UInt8]) {
        let start = text.count
        let length = (bytes.count + 2) / 3 * 4
        text.append(contentsOf: repeatElement(0, count: length))
        alphabet.withUnsafeBufferPointer { alphabet in
            text.withUnsafeMutableBufferPointer { buffer in
                let out = UnsafeMutableBufferPointer(rebasing: buffer[start...])
                var input =
                    bytes.count < 32
                    ? 0
                    : folio_base64_encode_prefix(
                        bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count, out.baseAddress!)
                var output = input / 3 * 4
                while input + 3 <= bytes.count {
                    let group = UInt32(bytes[input]) << 16 | UInt32(bytes[input + 1]) << 8 | UInt32(bytes[input + 2])
                    out[output] = alphabet[Int(group >> 18)]
                    out[output + 1] = alphabet[Int(group >> 12 & 63)]
                    out[output + 2] = alphabet[Int(group >> 6 & 63)]
                    out[output + 3] = alphabet[Int(group & 63)]
                    input += 3
                    output += 4
                }
                let left = bytes.count - input
                guard left > 0 else { return }
                let group = UInt32(bytes[input]) << 16 | (left == 2 ? UInt32(bytes[input + 1]) << 8 : 0)
                out[output] = alphabet[Int(group >> 18)]
                out[output + 1] = alphabet[Int(group >> 12 & 63)]
                out[output + 2] = left == 2 ? alphabet[Int(group >> 6 & 63)] : UInt8(ascii: "=")
                out[output + 3] = UInt8(ascii: "=")
            }
        }
    }

    /// Throws naming the offset (in characters of the field's text) of the first character that is
    /// not base64 where it stands.
    public static func decode(_ text: String.UTF8View, field: String) throws(ValidationError) -> [UInt8] {
        let result =
            text.withContiguousStorageIfAvailable { decode(UnsafeRawBufferPointer($0), field: field) }
            ?? Array(text).withUnsafeBytes { decode($0, field: field) }
        return try result.get()
    }

    public static func decode(_ characters: UnsafeRawBufferPointer, field: String) -> Result<[UInt8], ValidationError> {
        var failure: ValidationError?
        let bytes = [UInt8](unsafeUninitializedCapacity: characters.count / 4 * 3) { out, initialized in
            switch decode(characters, into: out.baseAddress, field: field) {
            case .success(let count): initialized = count
            case .failure(let error): failure = error
            }
        }
        if let failure { return .failure(failure) }
        return .success(bytes)
    }

    /// Decodes `text` where it lies: the content takes the first bytes of `text` (3 for every 4
    /// characters, fewer for the padding); answers how many. The rest of `text` is left undefined,
    /// also on failure. No allocation: a file piece is decoded in the request line it came in.
    public static func decodeInPlace(_ text: UnsafeMutableRawBufferPointer, field: String) -> Result<
        Int, ValidationError
    > {
        decode(UnsafeRawBufferPointer(text), into: text.baseAddress?.assumingMemoryBound(to: UInt8.self), field: field)
    }

    /// Decodes `characters` into `out` (room for `characters.count / 4 * 3` bytes), which may be
    /// where the characters are: each group is read before its bytes are written, and they never
    /// land past it.
    private static func decode(
        _ characters: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>?, field: String
    ) -> Result<Int, ValidationError> {
        let count = characters.count
        guard count % 4 == 0 else {
            return .failure(
                ValidationError("field \"\(field)\": base64 of \(count) characters, not a multiple of 4 (pad with '=')")
            )
        }
        guard count > 0, let out else { return .success(0) }
        var invalidAt: Int?
        let written = values.withUnsafeBufferPointer { values in
            // Whole blocks with AVX2 while they are valid, then a group at a time: an invalid
            // character is found, and named, by the loop below.
            var index = folio_base64_decode_prefix(
                characters.baseAddress!.assumingMemoryBound(to: UInt8.self), count, out)
            var output = index / 4 * 3
            // Every group but the last has no padding.
            while index + 4 < count {
                let a = values[Int(characters[index])]
                let b = values[Int(characters[index + 1])]
                let c = values[Int(characters[index + 2])]
                let d = values[Int(characters[index + 3])]
                guard (a | b | c | d) & 0xC0 == 0 else {
                    invalidAt = index + [a, b, c, d].firstIndex { $0 == 0xFF }!
                    return output
                }
                let group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                out[output] = UInt8(truncatingIfNeeded: group >> 16)
                out[output + 1] = UInt8(truncatingIfNeeded: group >> 8)
                out[output + 2] = UInt8(truncatingIfNeeded: group)
                index += 4
                output += 3
            }
            // The last group: '=' may stand third (if fourth too) or fourth.
            var group: UInt32 = 0
            var padding = 0
            for position in 0..<4 {
                let character = characters[index + position]
                if character == UInt8(ascii: "=") && position >= 2
                    && (position == 3 || characters[index + 3] == UInt8(ascii: "="))
                {
                    padding += 1
                    group <<= 6
                    continue
                }
                let value = values[Int(character)]
                guard value != 0xFF, padding == 0 else {
                    invalidAt = index + position
                    return output
                }
                group = group << 6 | UInt32(value)
            }
            out[output] = UInt8(truncatingIfNeeded: group >> 16)
            output += 1
            if padding < 2 {
                out[output] = UInt8(truncatingIfNeeded: group >> 8)
                output += 1
            }
            if padding < 1 {
                out[output] = UInt8(truncatingIfNeeded: group)
                output += 1
            }
            return output
        }
        if let invalidAt {
            return .failure(ValidationError("field \"\(field)\": invalid base64 at offset \(invalidAt)"))
        }
        return .success(written)
    }
}
