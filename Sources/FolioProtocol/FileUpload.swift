import FolioModel

/// A file op whose work runs on a worker thread, in request order on its connection: an inline
/// `file.put` (decoded, hashed and stored, then bound by the writer), the pieces of an upload
/// (`file.begin`, `file.write`, `file.abort`: answered by the worker), and `file.commit` (hashed
/// and stored, then bound by the writer).
public enum UploadOperation: Sendable {
    case put(FileUpload)
    /// `file.put {fd: true}`: the content is the regular file whose descriptor came with the line
    /// (SCM_RIGHTS), read from its start; the server sets `descriptor` when the op's turn comes.
    case putDescriptor(UploadPlan, descriptor: Int32)
    case begin(UploadPlan)
    case write(upload: String, offset: UInt64, base64: String)
    case commit(upload: String)
    case abort(upload: String)
}

/// What `file.begin` declares: where the content will go once committed, and what it must be.
public struct UploadPlan: Sendable {
    public var name: String?
    public var contentType: String
    public var replace: Bool
    /// The content's size, checked by every piece and by the commit; nil: whatever the pieces
    /// cover, without a hole, up to the maximum.
    public var size: UInt64?
    /// The content's SHA-256 in lowercase hex, checked by the commit.
    public var sha256: String?

    public init(name: String?, contentType: String, replace: Bool, size: UInt64?, sha256: String?) {
        self.name = name
        self.contentType = contentType
        self.replace = replace
        self.size = size
        self.sha256 = sha256
    }

    /// The command that binds the name to the content once it is stored.
    public func command(sha256: String, size: UInt64) -> Command {
        .putFile(name: name, sha256: sha256, size: size, contentType: contentType, replace: replace)
    }
}

/// An inline `file.put` as decoded: the content still in base64, decoded (and hashed, and stored)
/// off the event loop before the writer binds the name.
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
        try Self.decode(base64)
    }

    /// The content of a `data` field (of `file.put` or `file.write`): `bad_request` naming the
    /// offset of the first character that is not base64 where it stands.
    public static func decode(_ base64: String) throws(ProtocolError) -> [UInt8] {
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
