import FolioJSON
import Foundation

/// A file of foliod's file store (PROTOCOL.md §5.25), stored in a record as `{"$file": name}`.
///
/// `putFile` returns one with its metadata; a record's field has the metadata only when the read
/// included the field (`include`), otherwise just the name.
public struct FolioFile: Codable, Hashable, Sendable {
    public let name: String
    public private(set) var size: Int?
    public private(set) var sha256: String?
    public private(set) var contentType: String?
    public private(set) var createdAt: Date?

    public init(_ name: String) {
        self.name = name
    }

    private enum CodingKeys: String, CodingKey {
        case file = "$file"
        case name, size, sha256, contentType, createdAt
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .file)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let name = try container.decodeIfPresent(String.self, forKey: .file) {
            self.name = name
            return
        }
        name = try container.decode(String.self, forKey: .name)
        size = try container.decodeIfPresent(Int.self, forKey: .size)
        sha256 = try container.decodeIfPresent(String.self, forKey: .sha256)
        contentType = try container.decodeIfPresent(String.self, forKey: .contentType)
        createdAt = try container.decodeIfPresent(Date.self, forKey: .createdAt)
    }
}

extension FolioFile: ProbeValue {
    static func probe(_ sentinel: String) -> FolioFile { FolioFile(sentinel) }
    var probeSentinel: String { name }
}

extension Folio {
    /// Stores `data` under `name` (or a name the server makes) with `file.put`: the content must fit
    /// in one request line (about 750 KiB by default). `replace` binds an existing name to the new
    /// content; without it an existing name is `conflict`. Not sent again after a lost connection:
    /// `file.put` takes no request key yet.
    public func putFile(
        _ data: Data, name: String? = nil, contentType: String? = nil, replace: Bool = false,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> FolioFile {
        var request: JSONObject = ["op": "file.put", "data": .string(data.base64EncodedString())]
        if let name { request["name"] = .string(name) }
        if let contentType { request["contentType"] = .string(contentType) }
        if replace { request["replace"] = .bool(true) }
        return try RecordDecoder.decode(FolioFile.self, from: try await self.request(request, retry: false))
    }

    /// The file's metadata (`file.get`).
    public func file(named name: String, isolation: isolated (any Actor)? = #isolation) async throws -> FolioFile {
        try RecordDecoder.decode(FolioFile.self, from: try await request(["op": "file.get", "name": .string(name)]))
    }

    /// The file's whole content, read in pieces of at most 512 KiB (`file.read`).
    public func readFile(_ file: FolioFile, isolation: isolated (any Actor)? = #isolation) async throws -> Data {
        var content = Data()
        while true {
            let piece = try await request([
                "op": "file.read", "name": .string(file.name), "offset": .int(Int64(content.count)),
            ])
            guard case .object(let result) = piece, let text = result["data"]?.stringValue,
                let bytes = Data(base64Encoded: text),
                let size = result["size"]?.integerValue
            else { throw FolioError.decoding("file.read answered \(piece)") }
            content.append(bytes)
            if bytes.isEmpty || content.count >= size { return content }
        }
    }

    /// Unbinds the file's name (`file.delete`); `force` deletes it even while records refer to it.
    public func deleteFile(_ file: FolioFile, force: Bool = false, isolation: isolated (any Actor)? = #isolation)
        async throws
    {
        var request: JSONObject = ["op": "file.delete", "name": .string(file.name)]
        if force { request["force"] = .bool(true) }
        _ = try await self.request(request, retry: false)
    }
}
