import FolioHarness
import FolioJSON

/// Random data, patches and view definitions for the workload. `n` is always an integer and `done`
/// a boolean (when present), so views' filters can be evaluated client-side; `code` is what unique
/// views of `Item` sort on, from a small range so that they refuse writes now and then.
enum DataGenerator {
    static let collections = ["Task", "Item"]
    private static let words = ["milk", "dog", "report", "rent", "call", "plan", "fix", "read", "walk", "pay"]

    static func data(nonce: String, collection: String, _ random: inout SplitMix64) -> JSONObject {
        var data: JSONObject = [
            "w": .string(nonce), "title": .string(title(&random)), "n": .int(Int64.random(in: 0...9, using: &random)),
        ]
        if Bool.random(using: &random) { data["done"] = .bool(Bool.random(using: &random)) }
        if Int.random(in: 0..<3, using: &random) == 0 {
            data["tags"] = .array(
                (0..<Int.random(in: 0...3, using: &random)).map { _ in .string(words.randomElement(using: &random)!) })
        }
        if Int.random(in: 0..<3, using: &random) == 0 {
            data["meta"] = [
                "by": .string(words.randomElement(using: &random)!),
                "x": ["y": .int(Int64.random(in: 0...99, using: &random))],
            ]
        }
        if Int.random(in: 0..<4, using: &random) == 0 {
            data["due"] = ["$date": .string("2026-12-0\(Int.random(in: 1...9, using: &random))T09:00:00+01:00")]
        }
        if Int.random(in: 0..<5, using: &random) == 0 {
            data["note"] = .string(String(repeating: "z", count: Int.random(in: 100...3000, using: &random)))
        }
        if collection == "Item" && Int.random(in: 0..<4, using: &random) != 0 {
            data["code"] = .int(Int64.random(in: 0...40, using: &random))
        }
        if Int.random(in: 0..<10, using: &random) == 0 {
            data["ratio"] = .double(Double(Int.random(in: 0...8, using: &random)) / 4)
        }
        return data
    }

    static func patch(nonce: String, collection: String, _ random: inout SplitMix64) -> JSONObject {
        var patch: JSONObject = ["w": .string(nonce)]
        for _ in 0..<Int.random(in: 0...3, using: &random) {
            switch Int.random(in: 0..<9, using: &random) {
            case 0: patch["n"] = .int(Int64.random(in: 0...9, using: &random))
            case 1:
                patch["done"] = Int.random(in: 0..<4, using: &random) == 0 ? .null : .bool(Bool.random(using: &random))
            case 2: patch["title"] = .string(title(&random))
            case 3:
                patch["tags"] =
                    Bool.random(using: &random) ? .null : .array([.string(words.randomElement(using: &random)!)])
            case 4:
                patch["meta"] = [
                    "x": [
                        "y": Bool.random(using: &random) ? .null : .int(Int64.random(in: 0...99, using: &random)),
                        "z": .null,
                    ], "by": .string(words.randomElement(using: &random)!),
                ]
            case 5: patch["due"] = Bool.random(using: &random) ? ["$date": "2026-12-24T18:00:00Z"] : ["later": true]
            case 6:
                patch["note"] =
                    Bool.random(using: &random)
                    ? .null : .string(String(repeating: "y", count: Int.random(in: 100...3000, using: &random)))
            case 7 where collection == "Item":
                patch["code"] =
                    Int.random(in: 0..<5, using: &random) == 0 ? .null : .int(Int64.random(in: 0...40, using: &random))
            default: patch["n"] = .null
            }
        }
        return patch
    }

    /// Field operations on fields `patch` leaves alone, of the kinds the workload's data has there:
    /// `n` an integer, `tags` an array of words, `meta.x` an object.
    static func fieldOps(besides patch: JSONObject, _ random: inout SplitMix64) -> JSONObject? {
        var ops: JSONObject = [:]
        for _ in 0..<Int.random(in: 1...2, using: &random) {
            let word = JSON.string(words.randomElement(using: &random)!)
            switch Int.random(in: 0..<7, using: &random) {
            case 0: ops["n"] = ["$inc": .int(Int64.random(in: -2...5, using: &random))]
            case 1: ops["tags"] = ["$push": [word]]
            case 2: ops["tags"] = ["$addToSet": [word, .string(words.randomElement(using: &random)!)]]
            case 3: ops["tags"] = ["$pull": [word]]
            case 4: ops["meta.x.y"] = ["$inc": 1]
            case 5: ops["done"] = ["$set": .bool(Bool.random(using: &random))]
            default: ops["note"] = ["$unset": true]
            }
        }
        for key in ops.keys where patch[String(key.prefix { $0 != "." })] != nil { ops[key] = nil }
        return ops.isEmpty ? nil : ops
    }

    /// A view on one collection, possibly unique (on `Item`'s `code`).
    static func view(name: String, _ random: inout SplitMix64) -> ViewDefinition {
        let threshold = JSON.int(Int64.random(in: 1...8, using: &random))
        switch Int.random(in: 0..<6, using: &random) {
        case 0:
            return ViewDefinition(
                name: name, collection: "Task", filter: ["done": false], sort: ["title"], unique: false)
        case 1:
            return ViewDefinition(
                name: name, collection: "Task", filter: ["n": ["$gte": threshold]], sort: ["-n", "title"], unique: false
            )
        case 2: return ViewDefinition(name: name, collection: "Task", filter: nil, sort: [], unique: false)
        case 3: return ViewDefinition(name: name, collection: "Item", filter: nil, sort: ["code"], unique: true)
        case 4:
            return ViewDefinition(
                name: name, collection: "Item", filter: ["done": true], sort: ["code", "-n"], unique: true)
        default:
            return ViewDefinition(
                name: name, collection: "Item", filter: ["done": true, "n": ["$lt": threshold]], sort: ["n"],
                unique: false)
        }
    }

    private static func title(_ random: inout SplitMix64) -> String {
        (0..<Int.random(in: 1...3, using: &random)).map { _ in words.randomElement(using: &random)! }.joined(
            separator: " ")
    }
}
