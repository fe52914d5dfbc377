import FolioClient
import FolioCommandLine
import FolioJSON
import FolioProtocol
import Foundation
import Glibc

/// An error answer from foliod: printed to stderr, exit status 1.
struct ServerError: Error {
    let code: String
    let message: String
}

let valuedOptions: Set<String> = [
    "--socket", "--id", "--if-version", "--limit", "--offset", "--page", "--after", "--where", "-w", "--sort", "--view",
    "--at-seq", "--as-of", "--collection", "--request-key", "--inc", "--push", "--add-to-set", "--pull", "--set",
    "--unset",
    "--include", "--from", "--fields", "--interval", "--iterations", "--name", "--type", "--prefix",
    "--older-than", "--min-seq",
]

final class CLI {
    var arguments: Arguments
    let output: Output
    let socketCandidates: [String]
    /// `--min-seq N`: every read waits until the server has applied event N.
    let minSeq: Int?

    init(_ argv: [String]) throws {
        arguments = try Arguments(argv, valued: valuedOptions)
        minSeq = try arguments.integer("--min-seq")
        let asked = try arguments.flag("--json")
        output = Output(json: asked || !Output.isTerminal, askedForJSON: asked)
        let defaults = DefaultPaths(environment: ProcessInfo.processInfo.environment, uid: getuid())
        if let socket = arguments.value("--socket") {
            socketCandidates = [socket]
        } else {
            socketCandidates = defaults.clientSocketCandidates
        }
    }

    /// The socket the first connection was made to: every later one of the command goes there
    /// too, so that a retried write, a page of history or a resumed watch never reaches another
    /// daemon (the system's, when the user's own has just stopped).
    private var connectedSocket: String?

    func connect() throws -> FolioConnection {
        if let connectedSocket { return try FolioConnection(path: connectedSocket) }
        var firstError: ClientError?
        for path in socketCandidates {
            do {
                let connection = try FolioConnection(path: path)
                connectedSocket = path
                return connection
            } catch {
                firstError = firstError ?? error
            }
        }
        throw firstError ?? ClientError.notRunning(socketCandidates.first ?? "")
    }

    /// Sends one request and returns its result, or throws the server's error. A read carries
    /// `--min-seq` when given: it waits until the server has applied that event (another node of
    /// a cluster, reading a write made elsewhere).
    func call(_ request: JSON) throws -> JSON {
        let request = waitingForMinSeq(request)
        let connection = try connect()
        defer { connection.close() }
        let response = try connection.request(request)
        let answer = try result(of: response)
        // On a terminal, a write's event is shown when the node is one of a cluster (`hello`'s `log`).
        if !output.json, nodeIsInCluster == nil, response.objectValue?["seq"] != nil {
            nodeIsInCluster =
                (try? result(of: try connection.request(["op": "hello"])))?.objectValue?["log"]?.stringValue
                == "postgres"
        }
        return answer
    }

    /// `request` with `--min-seq` when it is a read: every read a command sends on its own
    /// connection (export, file get, ls) takes it too, not only those sent by `call`.
    func waitingForMinSeq(_ request: JSON) -> JSON {
        guard let minSeq, case .object(var fields) = request, let op = fields["op"]?.stringValue,
            OperationTable.spec(named: op)?.kind == .read
        else { return request }
        fields["minSeq"] = .int(Int64(minSeq))
        return .object(fields)
    }

    /// The last event of the last write answered (its `seq`), to show with its result.
    var lastWriteSequence: Int64?
    /// Whether the server is a node of a cluster (`hello` says `"log":"postgres"`); asked after a
    /// write on a terminal only.
    var nodeIsInCluster: Bool?

    /// For people on a node of a cluster: the event a write was stored as, to read it on another node.
    func showWriteSequence() {
        guard !output.json, nodeIsInCluster == true, let lastWriteSequence else { return }
        output.line(
            "(event \(lastWriteSequence); on another node of a cluster read it with --min-seq \(lastWriteSequence))")
    }

    func result(of response: JSON) throws -> JSON {
        guard case .object(let object) = response else { throw ClientError.malformedResponse("not an object") }
        if object["ok"] == .bool(true) {
            lastWriteSequence = object["seq"]?.integerValue ?? lastWriteSequence
            return object["result"] ?? .null
        }
        let error = object["error"]?.objectValue
        throw ServerError(
            code: error?["code"]?.stringValue ?? "internal", message: error?["message"]?.stringValue ?? "\(response)")
    }

    func positional(_ name: String) throws -> String {
        guard let value = arguments.takePositional() else { throw UsageError("missing \(name)") }
        return value
    }

    func finishArguments() throws {
        try arguments.rejectUnused()
        if let extra = arguments.positionals.first { throw UsageError("unexpected argument '\(extra)'") }
    }

    func run() throws -> Int32 {
        guard let command = arguments.takePositional() else {
            if try arguments.flag("--version") {
                print("folio \(Release.version)")
                return 0
            }
            if try arguments.flag("--help", "-h") {
                print(Usage.main)
                return 0
            }
            throw UsageError("no command given")
        }
        if try arguments.flag("--help", "-h") {
            guard let text = Usage.commands[command] else { throw UsageError("unknown command '\(command)'") }
            print(text)
            return 0
        }
        switch command {
        case "hello", "stats":
            try finishArguments()
            output.object(try call(["op": .string(command)]))
        case "create": try create()
        case "get": try get()
        case "update": try update()
        case "delete": try delete()
        case "history": try history()
        case "list": try list()
        case "count": try count()
        case "view": try view()
        case "batch": try batch()
        case "schema": try schema()
        case "links": try links()
        case "metrics": try metrics()
        case "top": try top()
        case "file": try file()
        case "backlinks": try backlinks()
        case "events": try events()
        case "watch": try watch()
        case "export": try export()
        case "verify": return try verify()
        case "backup":
            let directory = try positional("DIR")
            try finishArguments()
            let absolute =
                directory.hasPrefix("/") ? directory : FileManager.default.currentDirectoryPath + "/" + directory
            output.object(try call(["op": "backup", "directory": .string(absolute)]))
        case "help":
            print(Usage.main)
        default:
            throw UsageError("unknown command '\(command)'")
        }
        return 0
    }

    private func ifVersion() throws -> JSON? {
        try arguments.integer("--if-version").map { .int(Int64($0)) }
    }

    private func create() throws {
        let collection = try positional("COLLECTION")
        var request: JSONObject = ["op": "create", "collection": .string(collection)]
        if let id = arguments.value("--id") { request["id"] = .string(id) }
        let key = arguments.value("--request-key")
        try arguments.rejectUnused()
        request["data"] = .object(try Assignments.object(arguments.positionals))
        output.object(try callWrite(request, requestKey: key))
        showWriteSequence()
    }

    private func get() throws {
        let collection = try positional("COLLECTION")
        let id = try positional("ID")
        var request: JSONObject = ["op": "get", "collection": .string(collection), "id": .string(id)]
        if let sequence = try arguments.integer("--at-seq") { request["atSeq"] = .int(Int64(sequence)) }
        if let instant = arguments.value("--as-of") { request["asOf"] = .string(instant) }
        if let include = includePaths() { request["include"] = include }
        try finishArguments()
        output.object(try call(.object(request)))
    }

    /// `--include a,b.c` (or repeated): the reference paths to include.
    func includePaths() -> JSON? {
        let paths = arguments.values("--include").flatMap {
            $0.split(separator: ",").map { JSON.string(String($0).trimmingCharacters(in: .whitespaces)) }
        }
        return paths.isEmpty ? nil : .array(paths)
    }

    private func update() throws {
        let collection = try positional("COLLECTION")
        let id = try positional("ID")
        var request: JSONObject = ["op": "update", "collection": .string(collection), "id": .string(id)]
        request["ifVersion"] = try ifVersion()
        let key = arguments.value("--request-key")
        let ops = try fieldOperations()
        try arguments.rejectUnused()
        let patch = try Assignments.object(arguments.positionals)
        if patch.isEmpty && ops == nil {
            throw UsageError(
                "nothing to update: give FIELD=TEXT, FIELD:=JSON or a field operation (--inc, --push, ...)")
        }
        if !patch.isEmpty || ops == nil { request["patch"] = .object(patch) }
        if let ops { request["ops"] = .object(ops) }
        output.object(try callWrite(request, requestKey: key))
        showWriteSequence()
    }

    private func delete() throws {
        let collection = try positional("COLLECTION")
        let id = try positional("ID")
        var request: JSONObject = ["op": "delete", "collection": .string(collection), "id": .string(id)]
        request["ifVersion"] = try ifVersion()
        let key = arguments.value("--request-key")
        try finishArguments()
        let result = try callWrite(request, requestKey: key)
        if output.json {
            output.jsonLine(result)
        } else {
            output.line("deleted \(collection)/\(id) (version \(Output.cell(result.objectValue?["version"])))")
        }
        showWriteSequence()
    }

    /// One page with --limit; otherwise every page, as one list.
    private func history() throws {
        let collection = try positional("COLLECTION")
        let id = try positional("ID")
        var request: JSONObject = ["op": "history", "collection": .string(collection), "id": .string(id)]
        if let after = try arguments.integer("--after") { request["after"] = .int(Int64(after)) }
        let limit = try arguments.integer("--limit")
        if let limit { request["limit"] = .int(Int64(limit)) }
        try finishArguments()
        if limit != nil { return printEvents(try call(.object(request))) }
        request["limit"] = 1000
        var events: [JSON] = []
        while true {
            let page = try call(.object(request))
            if case .array(let more)? = page.objectValue?["events"] { events += more }
            guard let next = page.objectValue?["next"], let after = next.integerValue else { break }
            request["after"] = .int(after)
        }
        printEvents(["events": .array(events), "next": .null])
    }

    private func printEvents(_ result: JSON) {
        if output.json { return output.jsonLine(result) }
        guard case .array(let events)? = result.objectValue?["events"] else { return }
        output.table(
            events, leading: ["seq", "type", "at", "collection", "id", "version", "data", "patch", "view", "name"],
            skipping: ["by", "hash"])
    }

    /// The query fields shared by list, count and view define.
    func queryFields(into request: inout JSONObject, allowView: Bool, source: Bool = true) throws {
        if allowView, let view = arguments.value("--view") { request["view"] = .string(view) }
        if let whereClause = try FilterShorthand.whereClause(
            json: arguments.value("--where"), shorthands: arguments.values("-w"))
        {
            request["where"] = whereClause
        }
        if let sort = arguments.value("--sort") {
            request["sort"] = .array(
                sort.split(separator: ",").map { .string(String($0).trimmingCharacters(in: .whitespaces)) })
        }
        if source && request["view"] == nil {
            request["collection"] = .string(try positional("COLLECTION"))
        }
    }

    private func list() throws {
        var request: JSONObject = ["op": "list"]
        try queryFields(into: &request, allowView: true)
        try pagingFields(into: &request)
        if let include = includePaths() { request["include"] = include }
        try finishArguments()
        printPage(try call(.object(request)))
    }

    /// `--limit`, `--offset`, `--page`, `--after`, `--desc`, `--explain`.
    func pagingFields(into request: inout JSONObject) throws {
        let limit = try arguments.integer("--limit")
        if let limit { request["limit"] = .int(Int64(limit)) }
        if let offset = try arguments.integer("--offset") { request["offset"] = .int(Int64(offset)) }
        if let page = try arguments.integer("--page") {
            guard page >= 1 else { throw UsageError("--page counts from 1") }
            if request["offset"] != nil { throw UsageError("--page and --offset cannot be combined") }
            let (offset, overflow) = (page - 1).multipliedReportingOverflow(by: limit ?? 100)
            guard !overflow else { throw UsageError("--page \(page) is past any offset a list can start at") }
            request["offset"] = .int(Int64(offset))
        }
        if let after = arguments.value("--after") { request["after"] = .string(after) }
        if try arguments.flag("--desc") { request["order"] = "desc" }
        if try arguments.flag("--explain") { request["explain"] = true }
    }

    /// A page of `list`, `links` or `backlinks`: a table, its count and where the next page starts.
    func printPage(_ result: JSON) {
        if output.json { return output.jsonLine(result) }
        let object = result.objectValue
        guard case .array(let items)? = object?["items"] else { return output.object(result) }
        output.table(items, leading: ["id", "version"], skipping: ["collection", "createdAt", "updatedAt"])
        var footer = "\(items.count) of \(Output.cell(object?["total"]))"
        if let next = object?["next"]?.stringValue { footer += " — next page: --after \(next)" }
        output.line(footer)
        if let plan = object?["plan"] { output.line("plan: \(plan)") }
    }

    private func count() throws {
        var request: JSONObject = ["op": "count"]
        try queryFields(into: &request, allowView: true)
        if try arguments.flag("--explain") { request["explain"] = true }
        try finishArguments()
        let result = try call(.object(request))
        if output.json { return output.jsonLine(result) }
        output.line(Output.cell(result.objectValue?["count"]))
        if let plan = result.objectValue?["plan"] { output.line("plan: \(plan)") }
    }

    private func view() throws {
        switch try positional("define, list or drop") {
        case "define":
            var request: JSONObject = ["op": "view.define", "name": .string(try positional("NAME"))]
            try queryFields(into: &request, allowView: false)
            if try arguments.flag("--unique") { request["unique"] = true }
            try finishArguments()
            output.object(try call(.object(request)))
        case "list":
            try finishArguments()
            let result = try call(["op": "view.list"])
            if output.json { return output.jsonLine(result) }
            guard case .array(let views)? = result.objectValue?["views"] else { return }
            output.table(views, leading: ["name", "collection", "count", "sort", "where", "unique"])
        case "drop":
            let name = try positional("NAME")
            try finishArguments()
            let result = try call(["op": "view.drop", "name": .string(name)])
            if output.json { output.jsonLine(result) } else { output.line("dropped view \(name)") }
        case let other:
            throw UsageError("unknown view command '\(other)': define, list or drop")
        }
    }

    private func events() throws {
        var request: JSONObject = ["op": "events"]
        if let after = try arguments.integer("--after") { request["after"] = .int(Int64(after)) }
        if let limit = try arguments.integer("--limit") { request["limit"] = .int(Int64(limit)) }
        try finishArguments()
        printEvents(try call(.object(request)))
    }

    /// Every event after N, one per line, then the end line `{"end":true,"lastSeq":...,"chainHead":...}`
    /// that lets `foliod import` tell a complete export from a truncated one. With `--with-files`, the
    /// content of each `file.put` comes first, in content lines (`exportContent`), and the end line
    /// says `"files":true`.
    private func export() throws {
        var after = UInt64(try arguments.integer("--after") ?? 0)
        let withFiles = try arguments.flag("--with-files")
        try finishArguments()
        var exportedContent = Set<String>()
        let connection = try connect()
        var chainHead: JSON = .string(String(repeating: "0", count: 64))
        var exported = after
        // Pages end at 1000 events or 8 MiB, and a reader's pages leave out collections it may not
        // read: `next` says where the next page starts, and the log's end is `lastSeq`.
        try connection.send(waitingForMinSeq(["op": "events", "after": .int(Int64(after)), "limit": 1000]))
        while true {
            // Each event's bytes as they came (`EventPage`); the next page is asked for before
            // this one is written out.
            guard let line = try connection.readLine() else { throw ClientError.closed }
            guard let page = line.withUnsafeBytes({ EventPage($0) }) else {
                _ = try result(of: try JSONParser.parse(line))
                throw ClientError.malformedResponse("events without events, next or lastSeq")
            }
            var lines: [UInt8] = []
            lines.reserveCapacity(line.count)
            for event in page.events {
                // A file's content goes before the first event that binds a name to it.
                if withFiles, line[event].firstRange(of: #""type":"file.put""#.utf8) != nil,
                    case .object(let put)? = try? JSONParser.parse(Array(line[event])), put["type"] == "file.put",
                    let sha256 = put["sha256"]?.stringValue, !exportedContent.contains(sha256)
                {
                    try lines.withUnsafeBytes { try writeToStandardOutput($0, what: "the export") }
                    lines = []
                    // Counted as exported only once written: content swept now may be put again
                    // later in the log, and then it must go out before that event.
                    if try exportContent(sha256, connection) { exportedContent.insert(sha256) }
                }
                lines += line[event]
                lines.append(0x0A)
            }
            if let event = page.lastEvent, let sequence = event["seq"]?.integerValue, let hash = event["hash"] {
                exported = UInt64(sequence)
                chainHead = hash
            }
            let more = page.next > after && page.next < page.lastSeq
            if more {
                after = UInt64(page.next)
                try connection.send(["op": "events", "after": .int(Int64(after)), "limit": 1000])
            }
            try lines.withUnsafeBytes { try writeToStandardOutput($0, what: "the export") }
            guard more else { break }
        }
        var end: JSONObject = ["end": true, "lastSeq": .int(Int64(exported)), "chainHead": chainHead]
        if withFiles { end["files"] = true }
        output.jsonLine(.object(end))
    }

    /// The content lines `{"blob","size","offset","data"}` of one blob, 512 KiB of it per line, read
    /// by its hash. Content no longer stored was swept because no name refers to it any more: the
    /// export's later events unbind its names, so it is left out.
    /// Returns whether it wrote the content (false: not stored).
    private func exportContent(_ sha256: String, _ connection: FolioConnection) throws -> Bool {
        var offset: Int64 = 0
        while true {
            let answer = try connection.request(["op": "file.read", "sha256": .string(sha256), "offset": .int(offset)])
            if offset == 0, answer.objectValue?["error"]?.objectValue?["code"] == "not_found" { return false }
            let piece = try result(of: answer).objectValue
            guard let text = piece?["data"]?.stringValue, let length = piece?["length"]?.integerValue,
                let size = piece?["size"]?.integerValue
            else {
                throw ClientError.malformedResponse("file.read without data, length or size")
            }
            output.jsonLine([
                "blob": .string(sha256), "size": .int(size), "offset": .int(offset), "data": .string(text),
            ])
            offset += length
            if offset >= size || length == 0 { return true }
        }
    }

    private func verify() throws -> Int32 {
        try finishArguments()
        let result = try call(["op": "verify"])
        output.object(result)
        return result.objectValue?["ok"] == .bool(true) ? 0 : 1
    }
}

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("folio: \(message)\n".utf8))
    exit(status)
}

do {
    let cli = try CLI(Array(CommandLine.arguments.dropFirst()))
    exit(try cli.run())
} catch let error as UsageError {
    fail("\(error)\nRun `folio --help` for usage.", status: UsageError.exitStatus)
} catch let error as ServerError {
    fail("\(error.code): \(error.message)", status: 1)
} catch let error as ClientError {
    if case .notRunning = error { fail("\(error)", status: 69) }
    fail("\(error)", status: 1)
} catch {
    fail("\(error)", status: 1)
}
