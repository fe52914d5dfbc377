import FolioClient
import FolioJSON
import Foundation
import Glibc

extension CLI {
    /// `folio watch [--after N] [--collection C]`: events as they commit. `folio watch COLLECTION
    /// [-w ...] [--sort ...] [--desc] [--limit N]` or `folio watch --view V`: a live query, its
    /// window redrawn in place on a terminal, its change lines printed with `--json`.
    func watch() throws {
        if !arguments.contains("--after", "--collection")
            && (arguments.contains("--view") || !arguments.positionals.isEmpty)
        {
            return try watchQuery()
        }
        var request: JSONObject = ["op": "watch", "tag": "watch"]
        if let after = try arguments.integer("--after") { request["after"] = .int(Int64(after)) }
        if let collection = arguments.value("--collection") { request["collection"] = .string(collection) }
        try finishArguments()
        // A lost connection (foliod restarted) resumes after the last event shown, as a live query
        // does; one that cannot be made again ends the command with an error, never exit 0.
        var connection = try connect()
        while true {
            try connection.send(.object(request))
            do {
                try showEvents(from: connection, resumeAt: &request)
                throw ClientError.closed
            } catch ClientError.closed {
                guard request["after"] != nil else { throw ClientError.closed }
                FileHandle.standardError.write(
                    Data(
                        "folio: the connection to foliod ended; watching again after event \(Output.cell(request["after"]))\n"
                            .utf8))
                connection = try reconnect()
            }
        }
    }

    /// A connection made again after one was lost: foliod may be restarting, so it is tried for
    /// up to `reconnectSeconds`, five times a second, before the command ends with the error.
    func reconnect() throws -> FolioConnection {
        let deadline = Date().addingTimeInterval(Self.reconnectSeconds)
        while true {
            usleep(200_000)
            do {
                return try connect()
            } catch let error as ClientError {
                guard Date() < deadline else { throw error }
            }
        }
    }

    static let reconnectSeconds = 30.0

    /// Prints the events of a watch until its connection ends, keeping in `request` the `after`
    /// that resumes it.
    private func showEvents(from connection: FolioConnection, resumeAt request: inout JSONObject) throws {
        while let line = try connection.readJSON() {
            guard case .object(let object) = line else { continue }
            if let event = object["event"] {
                if let sequence = event.objectValue?["seq"] { request["after"] = sequence }
                if output.json {
                    output.jsonLine(event)
                } else {
                    let fields = event.objectValue
                    let target =
                        fields?["collection"].map { "\(Output.cell($0))/\(Output.cell(fields?["id"]))" }
                        ?? Output.cell(fields?["view"] ?? fields?["name"])
                    let body = fields?["data"] ?? fields?["patch"]
                    output.line(
                        "\(Output.cell(fields?["seq"]))  \(Output.cell(fields?["at"]))  \(Output.cell(fields?["type"]))  \(target)  \(body.map { $0.description } ?? "")"
                    )
                }
            } else if object["ok"] == .bool(false) {
                // Cut off for lagging: resumed after the last event shown, as after a lost connection.
                if object["error"]?.objectValue?["code"] == "lagging", request["after"] != nil { return }
                _ = try result(of: line)
            } else {
                // The answer: where the watch starts, should it have to resume before an event.
                if request["after"] == nil, let after = object["result"]?.objectValue?["after"] {
                    request["after"] = after
                }
                if !output.json {
                    output.line(
                        "watching events after \(Output.cell(object["result"]?.objectValue?["after"])) (Ctrl-C to stop)"
                    )
                }
            }
        }
    }

    /// A live query until interrupted. A `lagging` cut-off or a lost connection resumes it from the
    /// last change shown (`resumeAfter`).
    private func watchQuery() throws {
        var query: JSONObject = [:]
        try queryFields(into: &query, allowView: true)
        if let limit = try arguments.integer("--limit") { query["limit"] = .int(Int64(limit)) }
        if try arguments.flag("--desc") { query["order"] = "desc" }
        try finishArguments()
        var window = LiveQueryWindow()
        var resumeAfter: UInt64?
        while true {
            let connection = try resumeAfter == nil ? connect() : reconnect()
            var request: JSONObject = ["op": "watch", "tag": "live", "query": .object(query)]
            if let resumeAfter { request["resumeAfter"] = .int(Int64(resumeAfter)) }
            let answer = try connection.request(.object(request))
            let started = try result(of: answer)
            try window.start(with: started)
            if output.json { output.jsonLine(started) } else { redraw(window) }
            do {
                while let line = try connection.readJSON() {
                    if let change = line.objectValue?["change"] {
                        try window.apply(change)
                        if output.json { output.jsonLine(change) } else { redraw(window) }
                    } else if line.objectValue?["ok"] == .bool(false) {
                        let error = line.objectValue?["error"]?.objectValue
                        guard error?["code"]?.stringValue == "lagging" else {
                            _ = try result(of: line)
                            return
                        }
                        break
                    }
                }
            } catch let error as ClientError {
                if case .malformedResponse = error { throw error }
            }
            // Cut off for lagging, or the connection was lost: resume from the last change applied.
            resumeAfter = window.sequence
        }
    }

    /// The window as a table at the top of the terminal.
    private func redraw(_ window: LiveQueryWindow) {
        FileHandle.standardOutput.write(Data("\u{1B}[H\u{1B}[2J".utf8))
        output.table(window.items, leading: ["id", "version"], skipping: ["collection", "createdAt", "updatedAt"])
        output.line("\(window.items.count) of \(window.total) at event \(window.sequence) (Ctrl-C to stop)")
    }
}
