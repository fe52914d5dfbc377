import FolioJSON
import Testing

/// Long strings take the block-at-a-time paths (CFolioKernels' AVX2 scans, then 16 bytes at a time,
/// then a byte at a time): a byte that needs a look is found wherever it stands in a block.
@Suite struct LongStringTests {
    /// Every length around the block sizes, every position of each kind of byte that needs a look.
    @Test func aByteThatNeedsALookIsFoundAtEveryPosition() throws {
        let specials: [[UInt8]] = [
            [0x22], [0x5C], [0x0A], [0x01], [0x1F], [0xC3, 0xA9], [0xF0, 0x9F, 0x98, 0x80], [0x7F],
        ]
        for length in [63, 64, 65, 96, 130, 200] {
            for position in 0..<length {
                for special in specials {
                    var text = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    text.replaceSubrange(position..<position + 1, with: special)
                    let string = String(decoding: text, as: UTF8.self)
                    // Written, every byte that must be escaped is; read back, the string is the same.
                    let written = JSON.string(string).serialized()
                    #expect(
                        try JSONParser.parse(written) == .string(string), "length \(length), \(special) at \(position)")
                    // Raw in a JSON text: a quote ends the string early, a control character is refused
                    // where it stands, a backslash starts an escape, UTF-8 and DEL are content.
                    let raw = [0x22] + text + [0x22]
                    switch special {
                    case [0x22]:
                        #expect(throws: JSONError.self) { try JSONParser.parse(raw) }
                    case [0x0A], [0x01], [0x1F]:
                        do {
                            _ = try JSONParser.parse(raw)
                            Issue.record("a raw control character at \(position) of \(length) was taken")
                        } catch {
                            #expect(error.offset == position + 1, "length \(length), \(special) at \(position)")
                        }
                    case [0x5C]:
                        #expect(throws: JSONError.self) { try JSONParser.parse(raw) }  // "\a" is no escape
                    default:
                        #expect(try JSONParser.parse(raw) == .string(string))
                    }
                }
            }
        }
    }

    @Test func aLongPlainStringParsesAndWritesAsItIs() throws {
        let text = String((0..<100_000).map { Character(Unicode.Scalar(UInt8(0x20 + $0 % 95))) }).replacing(
            "\"", with: "'"
        ).replacing("\\", with: "/")
        let written = JSON.string(text).serialized()
        #expect(written == Array(("\"" + text + "\"").utf8))
        #expect(try JSONParser.parse(written) == .string(text))
    }
}
