import FolioClient
import FolioCommandLine
import FolioJSON
import Foundation

/// `batch`, `schema`, `links` and `backlinks`.
extension CLI {
    /// `folio batch [--no-atomic] [--request-key K] < ops.jsonl`: one op per line.
    func batch() throws {
        let atomic = !(try arguments.flag("--no-atomic"))
        let key = arguments.value("--request-key")
        try finishArguments()
        var operations: [JSON] = []
        var lineNumber = 0
        while let line = readLine(strippingNewline: true) {
            lineNumber += 1
            if line.trimmingCharacters(in: .whitespaces).isEmpty { continue }
            do {
                operations.append(try JSONParser.parse(line))
            } catch {
                throw UsageError("line \(lineNumber) of the batch is not JSON: \(error)")
            }
        }
        guard !operations.isEmpty else { throw UsageError("no ops on standard input: give one JSON op per line") }
        let result = try callWrite(
            ["op": "batch", "ops": .array(operations), "atomic": .bool(atomic)], requestKey: key)
        if output.json { return output.jsonLine(result) }
        guard case .array(let results)? = result.objectValue?["results"] else { return output.object(result) }
        for (index, item) in results.enumerated() {
            if item.objectValue?["ok"] == .bool(true) {
                output.line("\(index): \(Output.cell(item.objectValue?["result"]))")
            } else {
                let error = item.objectValue?["error"]?.objectValue
                output.line(
                    "\(index): \(error?["code"]?.stringValue ?? "error"): \(error?["message"]?.stringValue ?? "")")
            }
        }
    }

    /// `folio schema define COLLECTION --fields JSON [--no-additional-fields]`, `get`, `list`, `drop`.
    func schema() throws {
        switch try positional("define, get, list or drop") {
        case "define":
            let collection = try positional("COLLECTION")
            guard let text = arguments.value("--fields") else {
                throw UsageError("schema define needs --fields '{\"name\": {\"type\": \"string\"}, ...}'")
            }
            let closed = try arguments.flag("--no-additional-fields")
            try finishArguments()
            let fields: JSON
            do { fields = try JSONParser.parse(text) } catch { throw UsageError("--fields is not JSON: \(error)") }
            output.object(
                try call([
                    "op": "schema.define", "collection": .string(collection), "fields": fields,
                    "additionalFields": .bool(!closed),
                ]))
        case "get":
            let collection = try positional("COLLECTION")
            try finishArguments()
            output.object(try call(["op": "schema.get", "collection": .string(collection)]))
        case "list":
            try finishArguments()
            let result = try call(["op": "schema.list"])
            if output.json { return output.jsonLine(result) }
            guard case .array(let schemas)? = result.objectValue?["schemas"] else { return }
            output.table(schemas, leading: ["collection", "fields", "additionalFields"])
        case "drop":
            let collection = try positional("COLLECTION")
            try finishArguments()
            output.object(try call(["op": "schema.drop", "collection": .string(collection)]))
        case let other:
            throw UsageError("unknown schema command '\(other)': define, get, list or drop")
        }
    }

    /// `folio links COLLECTION ID FIELD [query and paging options] [--include PATHS]`
    func links() throws {
        let collection = try positional("COLLECTION")
        let id = try positional("ID")
        let field = try positional("FIELD")
        var request: JSONObject = ["op": "links", "ref": .string(collection + "/" + id), "field": .string(field)]
        try queryFields(into: &request, allowView: false, source: false)
        try pagingFields(into: &request)
        if let include = includePaths() { request["include"] = include }
        try finishArguments()
        printPage(try call(.object(request)))
    }

    /// `folio backlinks COLLECTION ID --from Collection.field [query and paging options]`; with
    /// `--count`, only how many.
    func backlinks() throws {
        let collection = try positional("COLLECTION")
        let id = try positional("ID")
        guard let from = arguments.value("--from") else { throw UsageError("backlinks needs --from Collection.field") }
        let counting = try arguments.flag("--count")
        var request: JSONObject = [
            "op": counting ? "count" : "backlinks", "ref": .string(collection + "/" + id), "from": .string(from),
        ]
        try queryFields(into: &request, allowView: false, source: false)
        if counting {
            if try arguments.flag("--explain") { request["explain"] = true }
            try finishArguments()
            let result = try call(.object(request))
            if output.json { return output.jsonLine(result) }
            return output.line(Output.cell(result.objectValue?["count"]))
        }
        try pagingFields(into: &request)
        if let include = includePaths() { request["include"] = include }
        try finishArguments()
        printPage(try call(.object(request)))
    }
}
