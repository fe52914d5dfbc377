import FolioJSON
import Testing

@testable import FolioModel

/// `Reference.all`: what a record refers to, with the path of each reference.
@Suite struct ReferenceTests {
    private func references(_ json: String) throws -> [Reference] {
        guard case .object(let data) = try JSONParser.parse(json) else { throw ValidationError("not an object") }
        return Reference.all(in: data)
    }

    @Test func datesAndPlainValuesHoldNoReference() throws {
        #expect(try references(#"{"title":"t","n":1,"tags":["a","b"],"due":{"$date":"2026-12-01T09:00:00Z"}}"#) == [])
        #expect(try references(#"{"dates":[{"$date":"2026-12-01T09:00:00Z"},{"$date":"2026-12-02T09:00:00Z"}]}"#) == [])
        #expect(try references(#"{}"#) == [])
    }

    @Test func referencesBesideDatesAreFoundWithTheirPaths() throws {
        let found = try references(
            #"{"due":{"$date":"2026-12-01T09:00:00Z"},"owner":{"$ref":"User/u1"},"#
                + #""items":[{"$ref":"Item/i1"},{"$date":"2026-12-01T09:00:00Z"},{"$ref":"Item/i2"}],"#
                + #""meta":{"when":{"$date":"2026-12-01T09:00:00Z"},"photo":{"$file":"photos/a.jpg"}},"#
                + #""again":{"$ref":"User/u1"}}"#)
        #expect(
            found == [
                Reference(path: "owner", collection: "User", id: "u1"),
                Reference(path: "items", collection: "Item", id: "i1"),
                Reference(path: "items", collection: "Item", id: "i2"),
                Reference(path: "meta.photo", collection: FileName.collection, id: "photos/a.jpg"),
                Reference(path: "again", collection: "User", id: "u1"),
            ])
    }

    @Test func onlyADateAloneIsPassedOver() throws {
        // A reference inside an object that also holds a date is still found.
        #expect(
            try references(#"{"slot":{"at":{"$date":"2026-12-01T09:00:00Z"},"room":{"$ref":"Room/r1"}}}"#)
                == [Reference(path: "slot.room", collection: "Room", id: "r1")])
    }
}
