extension String {
    /// The parts between the ASCII character `separator`s, empty ones included: what
    /// `split(separator:omittingEmptySubsequences: false)` gives, found in the UTF-8 bytes when the
    /// whole text is ASCII (then a byte is a Character), Character by Character otherwise (where a
    /// separator may combine with the characters beside it into another Character). Names and
    /// paths are nearly always ASCII, and a grapheme walk cost several times the rest of a parse.
    public func asciiSegments(separatedBy separator: Unicode.Scalar) -> [String] {
        precondition(separator.isASCII)
        let byte = UInt8(separator.value)
        var text = self
        let fast = text.withUTF8 { bytes -> [String]? in
            guard bytes.allSatisfy({ $0 < 0x80 }) else { return nil }
            var parts: [String] = []
            var start = 0
            for index in 0..<bytes.count where bytes[index] == byte {
                parts.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
                start = index + 1
            }
            parts.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start...]), as: UTF8.self))
            return parts
        }
        return fast ?? split(separator: Character(separator), omittingEmptySubsequences: false).map(String.init)
    }

    /// `firstIndex(of:)` for an ASCII character: the first such byte when the bytes on either side
    /// of it are ASCII too (so it is a Character of its own), else the Character search.
    public func firstIndex(ofASCII separator: Unicode.Scalar) -> String.Index? {
        precondition(separator.isASCII)
        let utf8 = self.utf8
        // No such byte: no such Character either (a Character holding it would contain the byte).
        guard let index = utf8.firstIndex(of: UInt8(separator.value)) else { return nil }
        let next = utf8.index(after: index)
        let nextIsASCII = next == utf8.endIndex || utf8[next] < 0x80
        let previousIsASCII = index == utf8.startIndex || utf8[utf8.index(before: index)] < 0x80
        if nextIsASCII && previousIsASCII { return index }
        return firstIndex(of: Character(separator))
    }
}
