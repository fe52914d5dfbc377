/// Rules for the names clients choose: collections, object ids, fields, views.
public enum Names {
    /// Field names a record's data may not use at its top level: they are the object's own.
    public static let systemFields: Set<String> = ["collection", "id", "version", "createdAt", "updatedAt"]

    /// `systemFields.contains(key)`, without hashing the key.
    static func isSystemField(_ key: String) -> Bool {
        switch key {
        case "collection", "id", "version", "createdAt", "updatedAt": return true
        default: return false
        }
    }

    public static let maxCollectionLength = 64
    public static let maxIDLength = 128

    /// A letter, then letters, digits or `_`, at most 64 characters.
    public static func validateCollection(_ name: String, role: String = "collection") throws(ValidationError) {
        guard isIdentifier(name, maxLength: maxCollectionLength) else {
            throw ValidationError(
                "\(role) \(quoted(name)) is not a valid name: a letter, then letters, digits or '_', at most \(maxCollectionLength)"
            )
        }
    }

    /// View names follow the same rule as collection names.
    public static func validateView(_ name: String) throws(ValidationError) {
        try validateCollection(name, role: "view")
    }

    /// 1 to 128 characters from `A-Z a-z 0-9 _ - . :`; ids appear in keys and in `$ref` values.
    public static func validateID(_ id: String) throws(ValidationError) {
        var text = id
        guard text.withUTF8({ isID(UnsafeRawBufferPointer($0)) }) else {
            throw ValidationError(
                "id \(quoted(id)) is not valid: 1 to \(maxIDLength) characters from A-Z a-z 0-9 _ - . :")
        }
    }

    /// A top-level field of user data: not empty, not a system field, not starting with `$` or `_`.
    public static func validateTopLevelField(_ key: String) throws(ValidationError) {
        // By the first byte and the length first: every field of every write comes here, and
        // `hasPrefix` and string comparisons cost a hundred instructions or more each.
        let utf8 = key.utf8
        guard let first = utf8.first else { throw ValidationError("a field name may not be empty") }
        switch utf8.count {
        case 2, 7, 9, 10:  // the lengths of the system fields' names
            if isSystemField(key) {
                throw ValidationError(
                    "field \(quoted(key)) is reserved (collection, id, version, createdAt, updatedAt)")
            }
        default: break
        }
        if first == UInt8(ascii: "$") || first == UInt8(ascii: "_") {
            throw ValidationError("field \(quoted(key)) is reserved: names starting with '$' or '_' belong to Folio")
        }
    }

    static func isIdentifier(_ name: String, maxLength: Int) -> Bool {
        var name = name
        return name.withUTF8 { isIdentifier(UnsafeRawBufferPointer($0), maxLength: maxLength) }
    }

    static func isIdentifier(_ utf8: UnsafeRawBufferPointer, maxLength: Int) -> Bool {
        guard let first = utf8.first, utf8.count <= maxLength, isLetter(first) else { return false }
        return utf8.allSatisfy { isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") }
    }

    /// Whether `utf8` is a valid collection name (`validateCollection`), read from its bytes.
    public static func isCollectionName(_ utf8: UnsafeRawBufferPointer) -> Bool {
        isIdentifier(utf8, maxLength: maxCollectionLength)
    }

    /// Whether `utf8` is a valid id (`validateID`), read from its bytes.
    public static func isID(_ utf8: UnsafeRawBufferPointer) -> Bool {
        !utf8.isEmpty && utf8.count <= maxIDLength && areIDBytes(utf8)
    }

    /// Whether every byte of `utf8` may appear in an id (`isIDByte`): a page of objects asks it
    /// of each object's id, to write the id's bytes as its JSON string. Every byte is looked up,
    /// with no branch a byte (about 3.5 instructions a byte, where a test a byte that stops at the
    /// first bad one took 12).
    @inlinable
    public static func areIDBytes(_ utf8: UnsafeRawBufferPointer) -> Bool {
        idByteTable.withUnsafeBufferPointer { table in
            var all: UInt8 = 1
            for byte in utf8 { all &= table[Int(byte)] }
            return all != 0
        }
    }

    /// `A-Z a-z 0-9 _ - . :`.
    @inlinable
    public static func isIDByte(_ byte: UInt8) -> Bool {
        idByteTable.withUnsafeBufferPointer { $0[Int(byte)] != 0 }
    }

    /// 1 for each byte that may appear in an id (`-` 45, `.` 46, `0-9` 48–57, `:` 58, `A-Z`
    /// 65–90, `_` 95, `a-z` 97–122), 0 for every other: literals, so the array is laid out when
    /// the program is built, not on its first use.
    @usableFromInline
    static let idByteTable: [UInt8] = [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
        0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1,
        0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]

    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// A name in quotes for a message, cut short if long.
    public static func quoted(_ name: String) -> String {
        let shown = name.count > 80 ? String(name.prefix(80)) + "…" : name
        return "\"" + shown + "\""
    }
}
