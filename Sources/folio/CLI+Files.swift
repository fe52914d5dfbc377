import FolioClient
import FolioCommandLine
import FolioJSON
import FolioProtocol
import Foundation

extension CLI {
    /// `folio file put|get|info|ls|rm|orphans|prune`.
    func file() throws {
        let commands = "put, get, info, ls, rm, orphans or prune"
        switch try positional(commands) {
        case "put": try filePut()
        case "get": try fileGet()
        case "info":
            let name = try positional("NAME")
            var request: JSONObject = ["op": "file.get", "name": .string(name), "referrers": true]
            if let limit = try arguments.integer("--limit") { request["limit"] = .int(Int64(limit)) }
            try finishArguments()
            output.object(try call(.object(request)))
        case "ls": try fileList(["op": "file.list"])
        case "rm":
            let name = try positional("NAME")
            var request: JSONObject = ["op": "file.delete", "name": .string(name)]
            if try arguments.flag("--force") { request["force"] = true }
            try finishArguments()
            let result = try call(.object(request))
            if output.json { output.jsonLine(result) } else { output.line("removed file \(name)") }
        case "orphans":
            try fileList(["op": "file.orphans", "olderThan": .int(try Self.seconds(inAge: arguments.value("--older-than") ?? "0s"))])
        case "prune": try filePrune()
        case let other:
            throw UsageError("unknown file command '\(other)': \(commands)")
        }
    }

    /// Seconds in an age: a count with an optional unit, s (the default), m, h, d or w.
    static func seconds(inAge text: String) throws -> Int64 {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400]
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = text.last, let multiplier = units[last] {
            digits = digits.dropLast()
            unit = multiplier
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let count = Int64(digits), count >= 0, count <= Int64.max / (7 * 86400) else {
            throw UsageError("--older-than \(text): expected an age such as 90s, 30m, 12h, 7d or 2w")
        }
        return count * unit
    }

    /// Deletes the orphans older than `--older-than` (default 1d), each by a `file.delete` that is
    /// not forced: one that a record has come to refer to since it was listed is kept.
    private func filePrune() throws {
        let age = arguments.value("--older-than") ?? "1d"
        let olderThan = try Self.seconds(inAge: age)
        try finishArguments()
        let connection = try connect()
        defer { connection.close() }
        let orphans = try pages(["op": "file.orphans", "olderThan": .int(olderThan)], connection)
        var removed = 0
        var kept: [String] = []
        for name in orphans.compactMap({ $0.objectValue?["name"]?.stringValue }) {
            do {
                let deleted = try result(of: try connection.request(["op": "file.delete", "name": .string(name)]))
                removed += 1
                if output.json { output.jsonLine(deleted) }
            } catch let error as ServerError where error.code == "conflict" {
                kept.append(name)
                if output.json { output.jsonLine(["name": .string(name), "kept": true, "reason": .string(error.message)]) }
            } catch let error as ServerError where error.code == "not_found" {
                continue  // deleted by someone else since it was listed
            }
        }
        guard !output.json else { return }
        output.line("removed \(removed) orphan file(s) older than \(age)")
        for name in kept { output.line("kept \(name): a record refers to it now") }
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

    /// Every page of `file.list` or `file.orphans`, as one list.
    private func fileList(_ request: JSONObject) throws {
        var request = request
        if let prefix = arguments.value("--prefix") { request["prefix"] = .string(prefix) }
        try finishArguments()
        let connection = try connect()
        defer { connection.close() }
        let files = try pages(request, connection)
        if output.json {
            for file in files { output.jsonLine(file) }
        } else {
            output.table(files, leading: ["name", "size", "contentType", "createdAt", "sha256"], skipping: ["uploader"])
        }
    }

    /// The items of every page, following `next` (pages of `file.orphans` may be short or empty).
    private func pages(_ request: JSONObject, _ connection: FolioConnection) throws -> [JSON] {
        var request = request
        request["limit"] = 1000
        var items: [JSON] = []
        while true {
            let page = try result(of: try connection.request(.object(request))).objectValue
            if case .array(let more)? = page?["items"] { items += more }
            guard let next = page?["next"]?.stringValue else { return items }
            request["after"] = .string(next)
        }
    }
}

/// A file command that cannot proceed on this side of the socket: printed, exit status 1.
struct FileCommandError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}
