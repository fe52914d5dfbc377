import Testing

@testable import FolioModel

/// Ids are 1 to 128 characters from `A-Z a-z 0-9 _ - . :`; `Names.isIDByte` looks a byte up in a
/// table of 256 bytes, checked here against the rule spelled out byte by byte.
@Suite struct IDTests {
    @Test func idBytesAreExactlyThoseOfTheRule() {
        for value in 0...255 {
            let byte = UInt8(value)
            let rule =
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || [UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: ":")].contains(byte)
            #expect(Names.isIDByte(byte) == rule, "byte \(value)")
            let one = [byte]
            #expect(one.withUnsafeBytes { Names.areIDBytes($0) } == rule, "byte \(value)")
        }
    }

    @Test func idsAreCheckedWhole() throws {
        for good in ["a", "k0", "Task-1.2:x_Y", String(repeating: "z", count: Names.maxIDLength), "01HZX3"] {
            try Names.validateID(good)
        }
        for bad in [
            "", "a b", "é", "a/b", "x\u{0}", "tab\t", String(repeating: "z", count: Names.maxIDLength + 1), "a@b",
            "[x]", "~",
        ] {
            #expect(throws: ValidationError.self, "\(bad)") { try Names.validateID(bad) }
        }
        // A bad byte anywhere, not only first or last.
        #expect(Array("abc def".utf8).withUnsafeBytes { Names.areIDBytes($0) } == false)
        #expect(Array("abcdef".utf8).withUnsafeBytes { Names.areIDBytes($0) } == true)
        #expect([UInt8]().withUnsafeBytes { Names.areIDBytes($0) } == true)
    }
}
