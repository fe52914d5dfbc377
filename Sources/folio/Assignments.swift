import FolioCommandLine
import FolioJSON

/// `FIELD=TEXT` and `FIELD:=JSON` arguments, as an object.
enum Assignments {
    static func object(_ arguments: [String]) throws(UsageError) -> JSONObject {
        var object = JSONObject()
        for argument in arguments {
            let (key, value) = try parse(argument)
            if object[key] != nil { throw UsageError("field \(key) is given twice") }
            object[key] = value
        }
        return object
    }

    /// One `FIELD=TEXT` or `FIELD:=JSON`.
    static func pair(_ argument: String) throws(UsageError) -> (String, JSON) { try parse(argument) }

    private static func parse(_ argument: String) throws(UsageError) -> (String, JSON) {
        guard let equals = argument.firstIndex(of: "=") else {
            throw UsageError("'\(argument)' is not FIELD=TEXT or FIELD:=JSON")
        }
        let before = argument[..<equals]
        let value = String(argument[argument.index(after: equals)...])
        if before.hasSuffix(":") {
            let key = String(before.dropLast())
            guard !key.isEmpty else { throw UsageError("'\(argument)' has no field name") }
            do {
                return (key, try JSONParser.parse(value))
            } catch {
                throw UsageError("the value of \(key):= is not valid JSON (\(error)); use \(key)=TEXT for a string")
            }
        }
        guard !before.isEmpty else { throw UsageError("'\(argument)' has no field name") }
        return (String(before), .string(value))
    }
}

/// The `-w` shorthand: `done=false`, `n>5`, `n>=5`, `n<5`, `n<=5`, `title!=x`, `title^=Buy`.
enum FilterShorthand {
    private static let operators: [(symbol: String, name: String?)] = [
        (">=", "$gte"), ("<=", "$lte"), ("!=", "$ne"), ("^=", "$prefix"), (">", "$gt"), ("<", "$lt"), ("=", nil),
    ]

    static func condition(_ text: String) throws(UsageError) -> (field: String, condition: JSON) {
        var best: (range: Range<String.Index>, name: String?)?
        for (symbol, name) in operators {
            guard let range = text.range(of: symbol) else { continue }
            if best == nil || range.lowerBound < best!.range.lowerBound { best = (range, name) }
        }
        guard let (range, name) = best, range.lowerBound > text.startIndex else {
            throw UsageError(
                "-w '\(text)': expected FIELD=VALUE, FIELD>VALUE, FIELD>=VALUE, FIELD<VALUE, FIELD<=VALUE, FIELD!=VALUE or FIELD^=PREFIX"
            )
        }
        let field = String(text[..<range.lowerBound])
        let rawValue = String(text[range.upperBound...])
        let value: JSON =
            name == "$prefix" ? .string(rawValue) : ((try? JSONParser.parse(rawValue)) ?? .string(rawValue))
        guard let name else { return (field, value) }
        return (field, .object([name: value]))
    }

    /// The `where` from `--where JSON` and any number of `-w` filters, all combined with and.
    static func whereClause(json: String?, shorthands: [String]) throws(UsageError) -> JSON? {
        var parts: [JSON] = []
        if let json {
            do {
                parts.append(try JSONParser.parse(json))
            } catch {
                throw UsageError("--where is not valid JSON: \(error)")
            }
        }
        for text in shorthands {
            let (field, condition) = try condition(text)
            parts.append(.object([field: condition]))
        }
        switch parts.count {
        case 0: return nil
        case 1: return parts[0]
        default: return .object(["$and": .array(parts)])
        }
    }
}
