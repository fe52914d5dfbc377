import FolioModel

/// A `file.put` as decoded: the content still in base64, decoded (and hashed, and stored) off the
/// event loop before the writer binds the name.
public struct FileUpload: Sendable {
    /// nil: the writer makes one.
    public var name: String?
    public var contentType: String
    /// The `data` field's text.
    public var base64: String
    public var replace: Bool

    public init(name: String?, contentType: String, base64: String, replace: Bool) {
        self.name = name
        self.contentType = contentType
        self.base64 = base64
        self.replace = replace
    }

    /// The content: `base64` decoded (RFC 4648, standard alphabet, padded). Linear in its length.
    public func content() throws(ProtocolError) -> [UInt8] {
        do {
            return try Base64.decode(base64.utf8, field: "data")
        } catch {
            throw ProtocolError(.badRequest, error.message)
        }
    }

    /// The command that binds the name to stored content.
    public func command(sha256: String, size: UInt64) -> Command {
        .putFile(name: name, sha256: sha256, size: size, contentType: contentType, replace: replace)
    }
}
