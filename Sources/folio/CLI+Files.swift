import FolioClient
import FolioCommandLine
import FolioJSON
import FolioModel
import FolioProtocol
import Foundation

extension CLI {
    /// `folio file put|get|ls|rm`.
    func file() throws {
        switch try positional("put, get, ls or rm") {
        case "put": try filePut()
        case "get": try fileGet()
        case "ls": try fileList()
        case "rm":
            let name = try positional("NAME")
            try finishArguments()
            let result = try call(["op": "file.delete", "name": .string(name)])
            if output.json { output.jsonLine(result) } else { output.line("removed file \(name)") }
        case let other:
            throw UsageError("unknown file command '\(other)': put, get, ls or rm")
        }
    }

    /// Sends the file inline, in one `file.put` line: as large as the server's `maxLine` allows.
    private func filePut() throws {
        let path = try positional("PATH")
        var request: JSONObject = ["op": "file.put"]
        if let name = arguments.value("--name") { request["name"] = .string(name) }
        if let type = arguments.value("--type") { request["contentType"] = .string(type) }
        if try arguments.flag("--replace") { request["replace"] = true }
        try finishArguments()
        guard let content = FileManager.default.contents(atPath: path) else { throw FileCommandError("cannot read \(path)") }
        request["data"] = .string(Base64.encode(content))
        let connection = try connect()
        defer { connection.close() }
        let maxLine = try result(of: try connection.request(["op": "hello"])).objectValue?["maxLine"]?.integerValue ?? 0
        let line = JSON.object(request).serialized()
        guard line.count <= maxLine else {
            throw FileCommandError(
                "\(path) is \(content.count) bytes: its file.put line of \(line.count) bytes is longer than foliod's max-line (\(maxLine));"
                    + " files sent in pieces are not supported yet")
        }
        output.object(try result(of: try connection.request(.object(request))))
    }

    /// Writes the content to stdout, read in pieces of 512 KiB.
    private func fileGet() throws {
        let name = try positional("NAME")
        try finishArguments()
        let connection = try connect()
        defer { connection.close() }
        var offset: Int64 = 0
        while true {
            let piece = try result(of: try connection.request(["op": "file.read", "name": .string(name), "offset": .int(offset)])).objectValue
            guard let text = piece?["data"]?.stringValue, let length = piece?["length"]?.integerValue, let size = piece?["size"]?.integerValue else {
                throw ClientError.malformedResponse("file.read without data, length or size")
            }
            FileHandle.standardOutput.write(Data(try Base64.decode(text.utf8, field: "data")))
            offset += length
            if offset >= size || length == 0 { break }
        }
    }

    /// Every page, as one list.
    private func fileList() throws {
        var request: JSONObject = ["op": "file.list", "limit": 1000]
        if let prefix = arguments.value("--prefix") { request["prefix"] = .string(prefix) }
        try finishArguments()
        let connection = try connect()
        defer { connection.close() }
        var files: [JSON] = []
        while true {
            let page = try result(of: try connection.request(.object(request))).objectValue
            if case .array(let items)? = page?["items"] { files += items }
            guard let next = page?["next"]?.stringValue else { break }
            request["after"] = .string(next)
        }
        if output.json {
            for file in files { output.jsonLine(file) }
        } else {
            output.table(files, leading: ["name", "size", "contentType", "createdAt", "sha256"], skipping: ["uploader"])
        }
    }
}

/// A file command that cannot proceed on this side of the socket: printed, exit status 1.
struct FileCommandError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}
