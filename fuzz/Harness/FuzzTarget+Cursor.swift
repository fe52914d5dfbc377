import FolioModel

extension FuzzTarget {
    /// Base64url is strict: what decodes is what encoding the result writes. A cursor is accepted only as
    /// `token` wrote it, and every cursor that `token` writes is accepted as itself.
    static func pageCursor(_ bytes: UnsafeRawBufferPointer) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        if let decoded = Base64URL.decode(text), Base64URL.encode(decoded) != text {
            return "\(text) decodes to \(decoded), which encodes as \(Base64URL.encode(decoded))"
        }
        if let cursor = try? PageCursor(token: text), cursor.token != text {
            return "cursor \(text) was accepted, but its token is \(cursor.token)"
        }
        // The bytes as a cursor's fingerprint (8 bytes) and key (at least one byte: a key always holds an id).
        guard bytes.count > 8 else { return nil }
        let made = PageCursor(fingerprint: Array(bytes[0..<8]), key: Array(bytes[8...]))
        guard let read = try? PageCursor(token: made.token) else {
            return "the token \(made.token) of a cursor is refused"
        }
        if read != made { return "the token \(made.token) reads back as another cursor" }
        return nil
    }
}
