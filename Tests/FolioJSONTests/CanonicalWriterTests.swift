import FolioJSON
import Foundation
import Testing

/// `writeCanonical` writes exactly `canonical.serialized()`: cursors' fingerprints hash it, and a
/// cursor made before must still be accepted.
@Suite struct CanonicalWriterTests {
    @Test func writesWhatTheCanonicalValueSerializesTo() throws {
        let texts = [
            #"{"category":{"$ref":"Category/c1"}}"#,
            #"{"b":1,"a":[{"z":true,"y":null},"x"],"c":{"$gte":2.5,"$lt":"é\n"}}"#,
            #"[]"#, #"{}"#, #"{"é":1,"e":2,"E":3,"ee":{"b":[1,{"d":4,"c":3}],"a":"\u0001"}}"#, #""plain""#, #"-0.125"#,
        ]
        for text in texts {
            let value = try Array(text.utf8).withUnsafeBytes { try JSONParser.parse($0) }
            var writer = JSONWriter()
            value.writeCanonical(to: &writer)
            #expect(writer.bytes == value.canonical.serialized(), "\(text)")
        }
    }
}
