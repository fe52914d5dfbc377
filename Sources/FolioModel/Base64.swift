/// Base64 (RFC 4648 §4: `A-Z a-z 0-9 + /`, `=` padding to a multiple of 4 characters).
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }()

    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var text: [UInt8] = []
        text.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            text.append(alphabet[Int(group >> 18 & 63)])
            text.append(alphabet[Int(group >> 12 & 63)])
            text.append(second == nil ? UInt8(ascii: "=") : alphabet[Int(group >> 6 & 63)])
            text.append(third == nil ? UInt8(ascii: "=") : alphabet[Int(group & 63)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Throws naming the offset (in characters of the field's text) of the first character that is
    /// not base64 where it stands.
    public static func decode(_ text: String.UTF8View, field: String) throws(ValidationError) -> [UInt8] {
        let characters = Array(text)
        guard characters.count % 4 == 0 else {
            throw ValidationError(
                "field \"\(field)\": base64 of \(characters.count) characters, not a multiple of 4 (pad with '=')")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(characters.count / 4 * 3)
        var index = 0
        while index < characters.count {
            var group: UInt32 = 0
            var padding = 0
            for position in 0..<4 {
                let character = characters[index + position]
                let isLast = index + 4 == characters.count
                if character == UInt8(ascii: "=") && isLast && position >= 2 && (position == 3 || characters[index + 3] == UInt8(ascii: "=")) {
                    padding += 1
                    group <<= 6
                    continue
                }
                let value = values[Int(character)]
                guard value != 0xFF, padding == 0 else {
                    throw ValidationError("field \"\(field)\": invalid base64 at offset \(index + position)")
                }
                group = group << 6 | UInt32(value)
            }
            bytes.append(UInt8(group >> 16 & 0xFF))
            if padding < 2 { bytes.append(UInt8(group >> 8 & 0xFF)) }
            if padding < 1 { bytes.append(UInt8(group & 0xFF)) }
            index += 4
        }
        return bytes
    }
}
