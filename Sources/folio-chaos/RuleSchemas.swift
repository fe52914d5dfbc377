import FolioJSON

/// The collections with schemas and delete rules, defined at the start of every store, and what
/// their rules mean for the model:
///
/// - `Folder.docs`: an array of refs to `Doc` that owns them (a doc whose last owning folder is
///   deleted, or drops it from `docs`, is deleted) and is nullified (a deleted doc is pulled from it);
/// - `Note.folder`: a required ref to a `Folder` that cascades (deleting the folder deletes the note);
///   `Note.doc`: a ref to a `Doc`, set to null when the doc is deleted;
/// - `Pin.folder`, `Pin.doc`: refs that deny deleting their target;
/// - `Doc.title` is a required string, `Counter.count` an integer.
enum RuleSchemas {
    static let folder = "Folder"
    static let doc = "Doc"
    static let note = "Note"
    static let pin = "Pin"
    static let counter = "Counter"
    static let collections = [folder, doc, note, pin, counter]

    /// Each schema as foliod answers and logs it (defaults left out, fields in its order).
    static let definitions: [JSONObject] = [
        [
            "collection": .string(folder),
            "fields": [
                "docs": [
                    "type": "array", "items": ["type": "ref", "ref": .string(doc)], "onTargetDelete": "nullify",
                    "owns": true,
                ]
            ],
            "additionalFields": true,
        ],
        [
            "collection": .string(doc), "fields": ["title": ["type": "string", "required": true]],
            "additionalFields": true,
        ],
        [
            "collection": .string(note),
            "fields": [
                "folder": ["type": "ref", "ref": .string(folder), "required": true, "onTargetDelete": "cascade"],
                "doc": ["type": "ref", "ref": .string(doc), "onTargetDelete": "nullify"],
            ],
            "additionalFields": true,
        ],
        [
            "collection": .string(pin),
            "fields": [
                "folder": ["type": "ref", "ref": .string(folder), "onTargetDelete": "deny"],
                "doc": ["type": "ref", "ref": .string(doc), "onTargetDelete": "deny"],
            ],
            "additionalFields": true,
        ],
        ["collection": .string(counter), "fields": ["count": ["type": "integer"]], "additionalFields": true],
    ]

    /// `{"$ref": "Coll/id"}`.
    static func reference(_ key: ObjectKey) -> JSON { ["$ref": .string(key.description)] }

    /// The object a `{"$ref"}` value names.
    static func target(of value: JSON?) -> ObjectKey? {
        guard case .object(let object)? = value, object.count == 1, let text = object["$ref"]?.stringValue,
            let slash = text.firstIndex(of: "/")
        else { return nil }
        return ObjectKey(collection: String(text[..<slash]), id: String(text[text.index(after: slash)...]))
    }

    /// The docs a folder's data owns.
    static func ownedDocs(_ data: JSONObject) -> [ObjectKey] {
        guard case .array(let elements)? = data["docs"] else { return [] }
        var seen = Set<ObjectKey>()
        return elements.compactMap(target).filter { seen.insert($0).inserted }
    }
}
