import FolioClient
import FolioCommandLine
import FolioJSON
import Foundation
import Glibc

extension CLI {
    /// Sends a write with a request key (`--request-key`, or a fresh random one), and sends it again,
    /// with the same key, when the connection failed before an answer or foliod answered
    /// `unavailable`: foliod applies it once, and a retry of one it already applied gets the first
    /// result (`"replayed": true`).
    func callWrite(_ request: JSONObject, requestKey: String?) throws -> JSON {
        var request = request
        request["requestKey"] = .string(requestKey ?? Self.freshRequestKey())
        var delay: UInt32 = 200_000
        for attempt in 1...Self.writeAttempts {
            do {
                return try call(.object(request))
            } catch let error as ClientError where attempt < Self.writeAttempts && Self.isRetryable(error) {
                FileHandle.standardError.write("folio: \(error); sending the write again with its request key\n")
            } catch let error as ServerError where attempt < Self.writeAttempts && error.code == "unavailable" {
                FileHandle.standardError.write(
                    "folio: unavailable: \(error.message); sending the write again with its request key\n")
            }
            usleep(delay)
            delay *= 2
        }
        return try call(.object(request))
    }

    static let writeAttempts = 4

    private static func isRetryable(_ error: ClientError) -> Bool {
        switch error {
        case .notRunning, .closed, .timedOut, .system: return true
        case .malformedResponse: return false
        }
    }

    /// `folio-` and 24 random hex digits.
    static func freshRequestKey() -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef")
        return "folio-" + String((0..<24).map { _ in digits[Int(generator.next() % 16)] })
    }

    /// The field operations of `update`: `--inc n=2`, `--push tags=home` (or `tags:=JSON`),
    /// `--add-to-set`, `--pull`, `--set f:=JSON`, `--unset f`.
    func fieldOperations() throws -> JSONObject? {
        var ops = JSONObject()
        func add(_ path: String, _ name: String, _ operand: JSON) throws {
            var spec = ops[path]?.objectValue ?? JSONObject()
            if spec[name] != nil {
                throw UsageError("field \(path) has two \(name) operations; give the values to one")
            }
            spec[name] = operand
            ops[path] = .object(spec)
        }
        // Applied in this order on a field: $inc, $push, $addToSet, $pull, $set, $unset.
        for assignment in arguments.values("--inc") {
            var (path, value) = try Assignments.pair(assignment)
            if case .string(let text) = value, let number = try? JSONParser.parse(text) { value = number }
            switch value {
            case .int, .double: try add(path, "$inc", value)
            default: throw UsageError("--inc \(assignment): give FIELD=NUMBER")
            }
        }
        for (option, name) in [("--push", "$push"), ("--add-to-set", "$addToSet"), ("--pull", "$pull")] {
            var grouped: [(String, [JSON])] = []
            for assignment in arguments.values(option) {
                let (path, value) = try Assignments.pair(assignment)
                if let index = grouped.firstIndex(where: { $0.0 == path }) {
                    grouped[index].1.append(value)
                } else {
                    grouped.append((path, [value]))
                }
            }
            for (path, values) in grouped { try add(path, name, .array(values)) }
        }
        for assignment in arguments.values("--set") {
            let (path, value) = try Assignments.pair(assignment)
            try add(path, "$set", value)
        }
        for path in arguments.values("--unset") { try add(path, "$unset", true) }
        return ops.isEmpty ? nil : ops
    }
}

extension FileHandle {
    fileprivate func write(_ text: String) { write(Data(text.utf8)) }
}
