import Testing

@testable import FolioModel

/// The top-level field names a write may use: not empty, not a system field's, not starting with
/// `$` or `_`; names of the same length as a system field's, or close to one, are the app's.
@Suite struct FieldNameTests {
    @Test func systemFieldsAndReservedPrefixesAreRefused() {
        let refused: [(String, String)] = [
            ("", "may not be empty"),
            ("id", "is reserved (collection"), ("version", "is reserved (collection"),
            ("createdAt", "is reserved (collection"),
            ("updatedAt", "is reserved (collection"), ("collection", "is reserved (collection"),
            ("$x", "names starting with '$' or '_'"), ("_", "names starting with '$' or '_'"),
            ("_createdAt", "names starting with '$' or '_'"), ("$id", "names starting with '$' or '_'"),
        ]
        for (name, message) in refused {
            #expect(throws: ValidationError.self, "\(name)") { try Names.validateTopLevelField(name) }
            do {
                try Names.validateTopLevelField(name)
            } catch {
                #expect(error.message.contains(message), "\(name): \(error.message)")
            }
        }
    }

    @Test func namesLikeThemAreTheApps() throws {
        for name in [
            "ID", "Id", "ids", "i", "versions", "Version", "createdat", "createdAtX", "updated_t", "collectio",
            "collections",
            "x$", "a_", "é", "ab", "abcdefghi", "abcdefghij",
        ] {
            try Names.validateTopLevelField(name)
        }
    }
}
