import FolioClient
import FolioCommandLine
import FolioJSON
import FolioModel
import FolioProtocol
import Foundation
import Glibc

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
            try fileList([
                "op": "file.orphans",
                "olderThan": .int(try Self.seconds(inAge: arguments.value("--older-than") ?? "0s")),
            ])
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
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let count = Int64(digits), count >= 0,
            count <= Int64.max / (7 * 86400)
        else {
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
                if output.json {
                    output.jsonLine(["name": .string(name), "kept": true, "reason": .string(error.message)])
                }
            } catch let error as ServerError where error.code == "not_found" {
                continue  // deleted by someone else since it was listed
            }
        }
        guard !output.json else { return }
        output.line("removed \(removed) orphan file(s) older than \(age)")
        for name in kept { output.line("kept \(name): a record refers to it now") }
    }

    /// Stores PATH (or stdin, `-`): a regular file by passing its descriptor (foliod reads it
    /// directly), anything else, or with `--pieces`, in pieces of base64 lines.
    private func filePut() throws {
        let path = try positional("PATH")
        var target: JSONObject = [:]
        if let name = arguments.value("--name") { target["name"] = .string(name) }
        if let type = arguments.value("--type") { target["contentType"] = .string(type) }
        if try arguments.flag("--replace") { target["replace"] = true }
        let inPieces = try arguments.flag("--pieces")
        try finishArguments()
        let fd = path == "-" ? dup(0) : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CommandError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var status = stat()
        let isRegular = fstat(fd, &status) == 0 && status.st_mode & S_IFMT == S_IFREG
        let connection = try connect()
        defer { connection.close() }
        // Standard input goes in pieces from where it stands (foliod would read a passed file from
        // its start, whatever the shell had read of it).
        if isRegular && !inPieces && path != "-" {
            var request = target
            request["op"] = "file.put"
            request["fd"] = true
            try connection.send(.object(request), passing: fd)
            guard let response = try connection.readJSON() else { throw ClientError.closed }
            return output.object(try result(of: response))
        }
        // What is left from where the file stands (standard input may have been read from).
        let position = isRegular ? max(0, lseek(fd, 0, SEEK_CUR)) : 0
        output.object(
            try putInPieces(
                fd, size: isRegular ? UInt64(max(0, status.st_size - position)) : nil, target: target, connection,
                label: path))
    }

    /// `file.begin`, `file.write` for each piece (up to 8 in flight), `file.commit`; `file.abort`
    /// if a piece fails. Shows progress on stderr when it is a terminal.
    private func putInPieces(
        _ fd: Int32, size: UInt64?, target: JSONObject, _ connection: FolioConnection, label: String
    ) throws -> JSON {
        let maxLine =
            try result(of: try connection.request(["op": "hello"])).objectValue?["maxLine"]?.integerValue ?? 1 << 20
        // Base64 makes 4 characters of 3 bytes; leave room for the rest of the line.
        let pieceSize = max(3, min(512 << 10, (Int(maxLine) - 256) / 4 * 3))
        var begin = target
        begin["op"] = "file.begin"
        if let size { begin["size"] = .int(Int64(size)) }
        guard let upload = try result(of: try connection.request(.object(begin))).objectValue?["upload"]?.stringValue
        else {
            throw ClientError.malformedResponse("file.begin without upload")
        }
        var progress = Progress(label: label, total: size)
        var offset: UInt64 = 0
        var inFlight = 0
        var buffer = [UInt8](repeating: 0, count: pieceSize)
        var line: [UInt8] = []
        line.reserveCapacity(pieceSize / 3 * 4 + 256)
        func settle() throws {
            guard let response = try connection.readJSON() else { throw ClientError.closed }
            inFlight -= 1
            let written = try result(of: response).objectValue
            progress.show(UInt64(written?["received"]?.integerValue ?? 0))
        }
        do {
            while true {
                var filled = 0
                while filled < pieceSize {
                    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, pieceSize - filled) }
                    if count < 0 && errno == EINTR { continue }
                    guard count >= 0 else {
                        throw CommandError("cannot read \(label): \(String(cString: strerror(errno)))")
                    }
                    if count == 0 { break }
                    filled += count
                }
                if filled == 0 { break }
                // The line written into one buffer kept from piece to piece: a fresh 700 KB string,
                // object and line per piece cost more in page faults than the encoding.
                line.removeAll(keepingCapacity: true)
                line.append(contentsOf: #"{"op":"file.write","upload":"#.utf8)
                var writer = JSONWriter(capacity: 0)
                swap(&writer.bytes, &line)
                writer.write(upload)
                swap(&writer.bytes, &line)
                line.append(contentsOf: #","offset":\#(offset),"data":""#.utf8)
                buffer.withUnsafeBytes {
                    Base64.encode(UnsafeRawBufferPointer(rebasing: $0[..<filled]), appendingTo: &line)
                }
                line.append(contentsOf: "\"}\n".utf8)
                try connection.send(bytes: line)
                offset += UInt64(filled)
                inFlight += 1
                if inFlight >= 8 { try settle() }
            }
            while inFlight > 0 { try settle() }
        } catch {
            _ = try? connection.request(["op": "file.abort", "upload": .string(upload)])
            progress.finish()
            throw error
        }
        progress.finish()
        return try result(of: try connection.request(["op": "file.commit", "upload": .string(upload)]))
    }

    /// Writes the content to stdout: from the descriptor foliod passes, or read in pieces of
    /// 512 KiB with `--pieces`.
    private func fileGet() throws {
        let name = try positional("NAME")
        let inPieces = try arguments.flag("--pieces")
        try finishArguments()
        let connection = try connect()
        defer { connection.close() }
        if !inPieces {
            _ = try result(
                of: try connection.request(
                    waitingForMinSeq(["op": "file.read", "name": .string(name), "fd": true])))
            guard let content = connection.takePassedDescriptor() else {
                throw ClientError.malformedResponse("file.read with fd passed no descriptor")
            }
            defer { close(content) }
            return try copyToStandardOutput(content, label: name)
        }
        // Every piece of the content the name has now, by its hash: a put replacing the name
        // meanwhile must not splice two files together.
        let file = try result(of: try connection.request(waitingForMinSeq(["op": "file.get", "name": .string(name)])))
            .objectValue
        guard let sha256 = file?["sha256"] else { throw ClientError.malformedResponse("file.get without sha256") }
        var offset: Int64 = 0
        while true {
            let piece = try result(
                of: try connection.request(["op": "file.read", "sha256": sha256, "offset": .int(offset)])
            ).objectValue
            guard let text = piece?["data"]?.stringValue, let length = piece?["length"]?.integerValue,
                let size = piece?["size"]?.integerValue
            else {
                throw ClientError.malformedResponse("file.read without data, length or size")
            }
            FileHandle.standardOutput.write(Data(try Base64.decode(text.utf8, field: "data")))
            offset += length
            if offset >= size || length == 0 { break }
        }
    }

    /// Copies all of `source` to stdout in the kernel where it can (`sendfile`), else by reading.
    private func copyToStandardOutput(_ source: Int32, label: String) throws {
        var offset: off_t = 0
        while true {
            let count = sendfile(1, source, &offset, 1 << 30)
            if count > 0 { continue }
            if count == 0 { return }
            if errno == EINTR { continue }
            if errno == EINVAL || errno == ENOSYS { break }
            throw CommandError("cannot write \(label) to stdout: \(String(cString: strerror(errno)))")
        }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { pread(source, $0.baseAddress!, $0.count, offset) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw CommandError("cannot read \(label): \(String(cString: strerror(errno)))") }
            if count == 0 { return }
            try buffer.withUnsafeBytes {
                try writeToStandardOutput(UnsafeRawBufferPointer(rebasing: $0[..<count]), what: label)
            }
            offset += off_t(count)
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
            output.table(
                files, leading: ["name", "size", "contentType", "createdAt", "sha256"], skipping: ["uploader"])
        }
    }

    /// The items of every page, following `next` (pages of `file.orphans` may be short or empty).
    private func pages(_ request: JSONObject, _ connection: FolioConnection) throws -> [JSON] {
        var request = request
        request["limit"] = 1000
        var items: [JSON] = []
        while true {
            let page = try result(of: try connection.request(waitingForMinSeq(.object(request)))).objectValue
            if case .array(let more)? = page?["items"] { items += more }
            guard let next = page?["next"]?.stringValue else { return items }
            request["after"] = .string(next)
        }
    }
}

/// A command (a file command, an export) that cannot proceed on this side of the socket: printed,
/// exit status 1.
struct CommandError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}

/// A progress line on stderr while an upload runs, if stderr is a terminal: at most ten a second.
struct Progress {
    let label: String
    let total: UInt64?
    let shown = isatty(2) == 1
    let started = Date()
    var last = Date.distantPast

    init(label: String, total: UInt64?) {
        self.label = label
        self.total = total
    }

    mutating func show(_ done: UInt64) {
        guard shown, Date().timeIntervalSince(last) >= 0.1 else { return }
        last = Date()
        let mib = Double(done) / 1_048_576
        let rate = mib / max(0.001, last.timeIntervalSince(started))
        var line = "\r\(label): \(String(format: "%.1f", mib)) MiB"
        if let total, total > 0 {
            line += " of \(String(format: "%.1f", Double(total) / 1_048_576)) MiB (\(done * 100 / total)%)"
        }
        line += ", \(String(format: "%.1f", rate)) MiB/s  "
        FileHandle.standardError.write(Data(line.utf8))
    }

    func finish() {
        if shown && last != .distantPast { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}
