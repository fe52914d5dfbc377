/// The rules for the names of stored files: 1 to 256 bytes of UTF-8, segments separated by `/`,
/// none of them empty or `..`, no `/` at either end, no NUL.
public enum FileName {
    public static let maxBytes = 256

    /// The pseudo-collection of the file store: what access rules name (`read $files`), and the
    /// target collection under which the reference index keeps `{"$file"}` values. No collection can
    /// be named so (collection names start with a letter).
    public static let collection = "$files"

    public static func validate(_ name: String) throws(ValidationError) {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= maxBytes else {
            throw ValidationError("file name must be 1 to \(maxBytes) bytes, found \(bytes.count)")
        }
        if let offset = bytes.firstIndex(of: 0) {
            throw ValidationError("file name holds a NUL byte at byte \(offset)")
        }
        if bytes.first == UInt8(ascii: "/") || bytes.last == UInt8(ascii: "/") {
            throw ValidationError("file name \(Names.quoted(name)) may not start or end with '/'")
        }
        for segment in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if segment.isEmpty { throw ValidationError("file name \(Names.quoted(name)) has an empty segment ('//')") }
            if segment.elementsEqual("..".utf8) {
                throw ValidationError("file name \(Names.quoted(name)) has a '..' segment")
            }
        }
    }
}

/// A name bound to stored content, as the `file.put` event records it.
public struct FileBinding: Sendable, Equatable {
    public var name: String
    /// SHA-256 of the content, 64 lowercase hex digits: the blob's name in the blob store.
    public var sha256: String
    /// Bytes of content.
    public var size: UInt64
    public var contentType: String
    /// Whether the command allowed replacing a name already bound.
    public var replace: Bool

    public static let defaultContentType = "application/octet-stream"
    /// Longest `contentType` accepted, in bytes.
    public static let maxContentTypeBytes = 256

    public init(name: String, sha256: String, size: UInt64, contentType: String, replace: Bool) {
        self.name = name
        self.sha256 = sha256
        self.size = size
        self.contentType = contentType
        self.replace = replace
    }

    /// Checks what a decoded event or command holds besides the name.
    public static func validate(sha256: String, contentType: String) throws(ValidationError) {
        let digits = sha256.utf8
        guard digits.count == 64, digits.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
            throw ValidationError("sha256 must be 64 lowercase hex digits")
        }
        try validate(contentType: contentType)
    }

    public static func validate(contentType: String) throws(ValidationError) {
        let bytes = contentType.utf8
        guard !bytes.isEmpty, bytes.count <= maxContentTypeBytes, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            throw ValidationError("contentType must be 1 to \(maxContentTypeBytes) printable ASCII characters")
        }
    }
}
