import FolioJSON

/// The typed values a record may hold besides plain JSON: `{"$date": "<RFC 3339>"}`,
/// `{"$ref": "<collection>/<id>"}` and `{"$file": "<file name>"}`. They are stored exactly as given;
/// dates and references compare by their meaning.
public enum TypedValue: Equatable, Sendable {
    case date(Instant)
    case reference(collection: String, id: String)
    /// A name of the file store (`FileName` rules), bound or not.
    case file(name: String)

    /// The typed value an object spells, nil if it is a plain object. Throws if it uses `$date` or
    /// `$ref` or `$file` wrongly, or any other `$` key.
    public static func parse(_ object: JSONObject) throws(ValidationError) -> TypedValue? {
        guard object.fields.contains(where: { $0.key.hasPrefix("$") }) else { return nil }
        guard object.count == 1, let first = object.fields.first else {
            throw ValidationError(
                "an object with a '$' key must be exactly {\"$date\": ...}, {\"$ref\": ...} or {\"$file\": ...}")
        }
        switch first.key {
        case "$date":
            // The written year is 0000-9999 by the syntax; its UTC instant may lie a day outside.
            guard case .string(let text) = first.value, let instant = Instant(rfc3339: text) else {
                throw ValidationError("$date must be an RFC 3339 date-time string, e.g. \"2026-11-29T10:00:00Z\"")
            }
            return .date(instant)
        case "$ref":
            guard case .string(let text) = first.value, let slash = text.firstIndex(ofASCII: "/") else {
                throw ValidationError("$ref must be a string \"<collection>/<id>\"")
            }
            let collection = String(text[..<slash])
            let id = String(text[text.index(after: slash)...])
            do {
                try Names.validateCollection(collection)
                try Names.validateID(id)
            } catch {
                throw ValidationError("$ref \(Names.quoted(text)): \(error.message)")
            }
            return .reference(collection: collection, id: id)
        case "$file":
            guard case .string(let name) = first.value else {
                throw ValidationError("$file must be a string, the name of a stored file")
            }
            do {
                try FileName.validate(name)
            } catch {
                throw ValidationError("$file: \(error.message)")
            }
            return .file(name: name)
        default:
            throw ValidationError(
                "unknown typed value \(Names.quoted(first.key)): only $date, $ref and $file are defined")
        }
    }

    /// Like `parse`, for values already validated (stored data): malformed ones count as plain objects.
    public static func recognize(_ object: JSONObject) -> TypedValue? {
        guard object.count == 1, object.fields[0].key.hasPrefix("$") else { return nil }
        return try? parse(object)
    }
}
