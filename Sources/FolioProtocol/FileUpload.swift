import FolioModel

/// A file op whose work runs on a worker thread, in request order on its connection: an inline
/// `file.put` (decoded, hashed and stored, then bound by the writer), the pieces of an upload
/// (`file.begin`, `file.write`, `file.abort`: answered by the worker), and `file.commit` (hashed
/// and stored, then bound by the writer).
public enum UploadOperation: Sendable {
    case put(FileUpload)
    /// `file.put {fd: true}`: the content is the regular file whose descriptor came with the line
    /// (SCM_RIGHTS), read from its start; the server sets `descriptor` as it takes the line.
    case putDescriptor(UploadPlan, descriptor: Int32)
    case begin(UploadPlan)
    case write(upload: String, offset: UInt64, base64: String)
    case commit(upload: String)
    case abort(upload: String)
}

extension UploadOperation {
    /// The descriptor a `file.put {fd: true}` holds, for whoever drops the op unrun to close.
    public var descriptor: Int32? {
        if case .putDescriptor(_, let descriptor) = self, descriptor >= 0 { return descriptor }
        return nil
    }
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
        try Base64.decode(base64.utf8, field: "data")
    }

    /// The command that binds the name to stored content.
    public func command(sha256: String, size: UInt64) -> Command {
        .putFile(name: name, sha256: sha256, size: size, contentType: contentType, replace: replace)
    }
}

/// Base64 (RFC 4648 §4: `A-Z a-z 0-9 + /`, `=` padding to a multiple of 4 characters).
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }()

    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var text: [UInt8] = []
        text.reserveCapacity((bytes.count + 2) / 3 * 4)
        var iterator = bytes.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let group = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            text.append(alphabet[Int(group >> 18 & 63)])
            text.append(alphabet[Int(group >> 12 & 63)])
            text.append(second == nil ? UInt8(ascii: "=") : alphabet[Int(group >> 6 & 63)])
            text.append(third == nil ? UInt8(ascii: "=") : alphabet[Int(group & 63)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Throws `bad_request` naming the offset (in characters of the field's text) of the first
    /// character that is not base64 where it stands.
    public static func decode(_ text: String.UTF8View, field: String) throws(ProtocolError) -> [UInt8] {
        let characters = Array(text)
        guard characters.count % 4 == 0 else {
            throw ProtocolError(
                .badRequest, "field \"\(field)\": base64 of \(characters.count) characters, not a multiple of 4 (pad with '=')")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(characters.count / 4 * 3)
        var index = 0
        while index < characters.count {
            var group: UInt32 = 0
            var padding = 0
            for position in 0..<4 {
                let character = characters[index + position]
                let isLast = index + 4 == characters.count
                if character == UInt8(ascii: "=") && isLast && position >= 2 && (position == 3 || characters[index + 3] == UInt8(ascii: "=")) {
                    padding += 1
                    group <<= 6
                    continue
                }
                let value = values[Int(character)]
                guard value != 0xFF, padding == 0 else {
                    throw ProtocolError(.badRequest, "field \"\(field)\": invalid base64 at offset \(index + position)")
                }
                group = group << 6 | UInt32(value)
            }
            bytes.append(UInt8(group >> 16 & 0xFF))
            if padding < 2 { bytes.append(UInt8(group >> 8 & 0xFF)) }
            if padding < 1 { bytes.append(UInt8(group & 0xFF)) }
            index += 4
        }
        return bytes
    }
}
