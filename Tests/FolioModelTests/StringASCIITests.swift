import Testing

@testable import FolioModel

/// The byte-level splits and searches give what the Character-level ones give, for ASCII text and
/// for text where a separator combines with what is beside it.
@Suite struct StringASCIITests {
    static let samples = [
        "", ".", "..", "a", "a.b", "a..b", ".a", "a.", "author.team.name", "ünï.cödé", "a.\u{301}b", "\u{301}.b",
        "x/y", "Category/c1", "/", "a/\u{301}b/c", "\u{600}/x/y", "e\u{301}/b", "日本/語.x", "a\r\n.b",
    ]

    @Test func segmentsAreSplitsOnCharacters() {
        for text in Self.samples {
            #expect(
                text.asciiSegments(separatedBy: ".")
                    == text.split(separator: ".", omittingEmptySubsequences: false).map(String.init),
                "\(text.debugDescription)")
            #expect(
                text.asciiSegments(separatedBy: "/")
                    == text.split(separator: "/", omittingEmptySubsequences: false).map(String.init),
                "\(text.debugDescription)")
        }
    }

    @Test func firstIndexIsTheFirstSuchCharacter() {
        for text in Self.samples {
            for separator: Unicode.Scalar in [".", "/"] {
                let found = text.firstIndex(ofASCII: separator)
                let expected = text.firstIndex(of: Character(separator))
                #expect(found == expected, "\(text.debugDescription), \(separator)")
                if let found, let expected {
                    #expect(String(text[..<found]) == String(text[..<expected]), "\(text.debugDescription)")
                }
            }
        }
    }
}
