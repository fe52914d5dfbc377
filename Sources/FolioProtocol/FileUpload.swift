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
    case write(upload: String, offset: UInt64, content: FileContent)
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

/// An inline `file.put` as decoded: its content, hashed and stored off the event loop before the
/// writer binds the name.
public struct FileUpload: Sendable {
    /// nil: the writer makes one.
    public var name: String?
    public var contentType: String
    public var content: FileContent
    public var replace: Bool

    public init(name: String?, contentType: String, content: FileContent, replace: Bool) {
        self.name = name
        self.contentType = contentType
        self.content = content
        self.replace = replace
    }

    /// The command that binds the name to stored content.
    public func command(sha256: String, size: UInt64) -> Command {
        .putFile(name: name, sha256: sha256, size: size, contentType: contentType, replace: replace)
    }
}

/// The content of a `data` field (of `file.put` or `file.write`), decoded from its base64. From a
/// long line that the decoder owned, the bytes are decoded where their characters stood in that
/// line and stay there: a piece of a file is neither copied into a string nor into an array of its
/// own (at 700 KB a piece, those were a tenth of an upload's cost, and kept glibc's arenas full).
public struct FileContent: Sendable {
    private let buffer: LineBuffer
    private let range: Range<Int>

    init(buffer: LineBuffer, range: Range<Int>) {
        self.buffer = buffer
        self.range = range
    }

    public init(_ bytes: [UInt8]) {
        buffer = LineBuffer(bytes)
        range = 0..<bytes.count
    }

    public var count: Int { range.count }

    public var bytes: [UInt8] { Array(buffer.bytes[range]) }

    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try buffer.bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// Decodes base64 (RFC 4648, standard alphabet, padded): `bad_request` naming the offset of the
    /// first character that is not base64 where it stands. Linear in its length.
    static func decoding(_ text: UnsafeRawBufferPointer) throws(ProtocolError) -> FileContent {
        switch Base64.decode(text, field: "data") {
        case .success(let bytes): return FileContent(bytes)
        case .failure(let error): throw ProtocolError(.badRequest, error.message)
        }
    }

    static func decoding(_ text: String) throws(ProtocolError) -> FileContent {
        do {
            return FileContent(try Base64.decode(text.utf8, field: "data"))
        } catch {
            throw ProtocolError(.badRequest, error.message)
        }
    }

    /// Decodes the base64 at `range` of `text` in place: `text` is the line `buffer` holds, open for
    /// writing by the decoder (`RequestDecoder.decode(owning:)`).
    static func decoding(_ text: UnsafeMutableRawBufferPointer, at range: Range<Int>, in buffer: LineBuffer)
        throws(ProtocolError) -> FileContent
    {
        switch Base64.decodeInPlace(UnsafeMutableRawBufferPointer(rebasing: text[range]), field: "data") {
        case .success(let count): return FileContent(buffer: buffer, range: range.lowerBound..<range.lowerBound + count)
        case .failure(let error): throw ProtocolError(.badRequest, error.message)
        }
    }
}

/// The bytes of a request line, kept by what was decoded from it. Written only while the line is
/// decoded (in place, by `RequestDecoder.decode(owning:)`, before any request holding it exists),
/// read-only ever after: hence Sendable.
final class LineBuffer: @unchecked Sendable {
    var bytes: [UInt8]
    /// Takes the array back once nothing holds the buffer (the server reuses it for a later line).
    private let recycle: (@Sendable ([UInt8]) -> Void)?

    init(_ bytes: consuming [UInt8], recycle: (@Sendable ([UInt8]) -> Void)? = nil) {
        self.bytes = bytes
        self.recycle = recycle
    }

    deinit {
        guard let recycle else { return }
        var gone: [UInt8] = []
        swap(&gone, &bytes)
        recycle(gone)
    }
}
