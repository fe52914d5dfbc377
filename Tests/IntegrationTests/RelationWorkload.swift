import FolioHarness
import FolioJSON

/// Random writes over six collections that refer to each other with every delete rule: categories
/// owning items, items that go with their category or lose it, tags, invoices that deny deleting
/// their customer and lines, and nodes in parent/next/children cycles. Most writes make sense;
/// some are meant to fail (taken ids, missing objects, stale versions, data the schema refuses,
/// malformed operations), and some repeat an earlier request key, with the same body or not.
struct RelationWorkload {
    typealias Key = ModelData.Key
    typealias FieldOp = ModelData.FieldOp

    static let collections = ["Category", "Item", "Tag", "Customer", "Invoice", "Node"]

    /// Small id pools, so that ids are taken, deleted and created again; their byte order differs
    /// from their numeric order ("i1" < "i10" < "i2"), and some hold `-`, `.`, `:` or `_`.
    static let pools: [String: [String]] = [
        "Category": ["c0", "c1", "c2", "c3", "c4", "c10", "c:5", "C6"],
        "Item": (0..<16).map { "i\($0)" } + ["i1x", "i-1", "i.2", "I3", "i_4", "i:5"],
        "Tag": (0..<7).map { "t\($0)" },
        "Customer": ["u0", "u1", "u2", "u3"],
        "Invoice": (0..<7).map { "v\($0)" },
        "Node": (0..<12).map { "n\($0)" } + ["n1a", "n-2"],
    ]

    /// The referring fields of each target collection, as `backlinks` names them in `from`.
    static let referrers: [String: [(collection: String, path: String)]] = [
        "Item": [("Category", "items"), ("Invoice", "lines"), ("Tag", "meta.item")],
        "Category": [("Item", "category")],
        "Tag": [("Item", "tags")],
        "Customer": [("Invoice", "customer")],
        "Node": [("Node", "children"), ("Node", "next"), ("Node", "parent")],
        "Invoice": [],
    ]

    /// The reference fields of each collection, for `links`.
    static let linkFields: [String: [String]] = [
        "Category": ["items"], "Item": ["category", "tags"], "Tag": ["meta.item"], "Customer": [],
        "Invoice": ["customer", "lines"],
        "Node": ["children", "next", "parent"],
    ]

    /// The schema of a collection in one of its variants (nil: none); variant 0 is the first.
    static func schema(_ collection: String, variant: Int) -> ModelSchema? {
        typealias Field = ModelSchema.Field
        switch collection {
        case "Category":
            let rules: [(ModelSchema.Rule, Bool)] = [(.nullify, true), (.keep, true), (.nullify, false)]
            let (rule, owns) = rules[variant % rules.count]
            return ModelSchema(
                collection: collection,
                fields: [
                    Field(name: "title", type: .string),
                    Field(name: "items", type: .refArray("Item"), rule: rule, owns: owns),
                ])
        case "Item":
            let rules: [ModelSchema.Rule] = [.cascade, .nullify, .keep, .deny, .cascade]
            return ModelSchema(
                collection: collection,
                fields: [
                    Field(name: "title", type: .string), Field(name: "rank", type: .integer, required: variant == 4),
                    Field(name: "category", type: .ref("Category"), rule: rules[variant % rules.count]),
                    Field(name: "tags", type: .refArray("Tag")),
                ])
        case "Invoice":
            let rules: [(ModelSchema.Rule, ModelSchema.Rule)] = [
                (.deny, .deny), (.deny, .nullify), (.keep, .keep), (.cascade, .deny),
            ]
            let (customer, lines) = rules[variant % rules.count]
            return ModelSchema(
                collection: collection,
                fields: [
                    Field(name: "customer", type: .ref("Customer"), required: true, rule: customer),
                    Field(name: "lines", type: .refArray("Item"), rule: lines), Field(name: "total", type: .integer),
                ])
        case "Node":
            let rules: [(ModelSchema.Rule, ModelSchema.Rule, Bool)] = [
                (.cascade, .nullify, true), (.nullify, .deny, true), (.cascade, .keep, false),
            ]
            let (parent, next, owns) = rules[variant % rules.count]
            return ModelSchema(
                collection: collection,
                fields: [
                    Field(name: "rank", type: .integer), Field(name: "parent", type: .ref("Node"), rule: parent),
                    Field(name: "next", type: .ref("Node"), rule: next),
                    Field(name: "children", type: .refArray("Node"), owns: owns),
                ])
        case "Customer":
            return ModelSchema(collection: collection, fields: [Field(name: "name", type: .string)])
        default:
            return nil
        }
    }

    static let schemaVariants: [String: Int] = ["Category": 3, "Item": 5, "Invoice": 4, "Node": 3, "Customer": 1]

    var random: SplitMix64
    let model: RelationModel
    /// Every write sent with a request key, for retries.
    private(set) var keyed: [ModelWrite] = []
    private var keyCount = 0

    init(seed: UInt64, model: RelationModel) {
        random = SplitMix64(seed: seed)
        self.model = model
    }

    // MARK: Choices

    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &random) < probability }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func int(_ range: Range<Int>) -> Int { Int.random(in: range, using: &random) }
    mutating func pick<T>(_ elements: [T]) -> T { elements.randomElement(using: &random)! }

    /// A collection, by weight.
    mutating func collection() -> String {
        pick([
            "Item", "Item", "Item", "Node", "Node", "Category", "Category", "Tag", "Tag", "Invoice", "Invoice",
            "Customer",
        ])
    }

    /// An existing object's key (mostly) or one of the pool's.
    mutating func key(in collection: String, existing probability: Double = 0.8) -> Key {
        let existing = model.keys(in: collection)
        if !existing.isEmpty && chance(probability) { return pick(existing) }
        return Key(collection, pick(Self.pools[collection]!))
    }

    mutating func ref(_ collection: String) -> JSON { key(in: collection).refJSON }

    mutating func refs(_ collection: String, _ count: ClosedRange<Int>) -> JSON {
        .array((0..<int(count)).map { _ in ref(collection) })
    }

    // MARK: Steps

    /// The next write, and whether to send it spelled differently (a retry of an earlier one).
    mutating func next() -> (write: ModelWrite, respell: Bool) {
        if !keyed.isEmpty && chance(0.08) {
            let earlier = pick(keyed)
            if chance(0.75) { return (earlier, true) }
            var other = fresh()
            while other.ops.isEmpty { other = fresh() }
            other.requestKey = earlier.requestKey
            return (other, false)
        }
        var write = fresh()
        if case .defineSchema = write.command {
        } else if case .dropSchema = write.command {
        } else if chance(0.25) {
            keyCount += 1
            write.requestKey = pick(["k\(keyCount)", "order \(keyCount)/retry", "~\(keyCount)!\"x\""])
            keyed.append(write)
        }
        return (write, false)
    }

    private mutating func fresh() -> ModelWrite {
        let roll = int(0..<100)
        if roll < 3 { return schemaChange() }
        if roll < 22 { return ModelWrite(command: batch()) }
        return ModelWrite(command: .object(op(index: 0, earlier: [])))
    }

    private mutating func schemaChange() -> ModelWrite {
        let collection = pick(Array(Self.schemaVariants.keys).sorted())
        if model.schemas[collection] != nil && chance(0.15) { return ModelWrite(command: .dropSchema(collection)) }
        if model.schemas[collection] == nil && chance(0.1) { return ModelWrite(command: .dropSchema(collection)) }
        return ModelWrite(
            command: .defineSchema(Self.schema(collection, variant: int(0...(Self.schemaVariants[collection]! - 1)))!))
    }

    private mutating func batch() -> ModelWrite.Command {
        var ops: [ModelWrite.Op] = []
        for index in 0..<int(2...6) { ops.append(op(index: index, earlier: ops)) }
        if chance(0.03) {
            // A $result naming the op itself: refused when decoded.
            let index = int(0...(ops.count - 1))
            ops[index] = ModelWrite.Op(
                collection: ops[index].collection, kind: .delete(id: .result(index), ifVersion: nil))
        }
        return .batch(ops, atomic: pick([nil, true, false, false]))
    }

    /// A create, update or delete; in a batch, `earlier` are the ops before it, whose objects
    /// `{"$result": n}` may name.
    private mutating func op(index: Int, earlier: [ModelWrite.Op]) -> ModelWrite.Op {
        let roll = int(0..<100)
        let collection = collection()
        if roll < 40 {
            var data = self.data(collection)
            if !earlier.isEmpty && chance(0.5) {
                substituteResults(in: &data, collection: collection, earlier: earlier)
            }
            let id: String? = chance(0.8) ? freshID(in: collection) : nil
            return ModelWrite.Op(collection: collection, kind: .create(id: id, data: data))
        }
        var id = ModelWrite.ObjectID.given(key(in: collection, existing: 0.9).id)
        if roll >= 75 && chance(0.6), let referred = referredKey(in: collection) {
            // Deletes of objects something refers to, where the delete rules act.
            id = .given(referred.id)
        }
        var opCollection = collection
        if !earlier.isEmpty && chance(0.35) {
            let n = int(0...(earlier.count - 1))
            id = .result(n)
            // Mostly of the same collection: an id of another is refused.
            if chance(0.9) { opCollection = earlier[n].collection }
        }
        let ifVersion = self.ifVersion(id: id, collection: opCollection)
        if roll < 75 {
            var (patch, ops) = update(opCollection)
            if !earlier.isEmpty && chance(0.3), var givenOps = ops {
                substituteResults(in: &givenOps, collection: opCollection, earlier: earlier)
                ops = givenOps
            }
            if !earlier.isEmpty && chance(0.2), var givenPatch = patch {
                substituteResults(in: &givenPatch, collection: opCollection, earlier: earlier)
                patch = givenPatch
            }
            return ModelWrite.Op(
                collection: opCollection, kind: .update(id: id, patch: patch, ops: ops, ifVersion: ifVersion))
        }
        return ModelWrite.Op(collection: opCollection, kind: .delete(id: id, ifVersion: ifVersion))
    }

    /// Mostly an id of the pool that no object has now (perhaps one had: a new one continues its
    /// versions); sometimes one taken.
    private mutating func freshID(in collection: String) -> String {
        let free = Self.pools[collection]!.filter { model.objects[Key(collection, $0)] == nil }
        if free.isEmpty || chance(0.12) { return key(in: collection, existing: 0.5).id }
        return pick(free)
    }

    /// An existing object of `collection` that another one refers to.
    private mutating func referredKey(in collection: String) -> Key? {
        var targets = Set<String>()
        for object in model.objects.values {
            for reference in ModelData.references(in: object.data) { targets.insert(reference.target) }
        }
        let referred = model.keys(in: collection).filter { targets.contains($0.ref) }
        return referred.isEmpty ? nil : pick(referred)
    }

    /// Mostly none; else the current version or a wrong one.
    private mutating func ifVersion(id: ModelWrite.ObjectID, collection: String) -> Int64? {
        guard chance(0.25) else { return nil }
        var current: Int64 = 1
        if case .given(let id) = id, let object = model.objects[Key(collection, id)] { current = object.version }
        return chance(0.7) ? current : current + Int64(pick([-1, 1, 2]))
    }

    /// An earlier op of `collection`, whose object `{"$result": n}` names.
    private mutating func result(of collection: String, earlier: [ModelWrite.Op]) -> Int? {
        let candidates = earlier.indices.filter { earlier[$0].collection == collection }
        return candidates.isEmpty ? nil : pick(candidates)
    }

    /// Replaces some references of the data with `{"$result": n}` of an earlier op.
    private mutating func substituteResults(in data: inout JSONObject, collection: String, earlier: [ModelWrite.Op]) {
        let fields: [(String, String, Bool)] = [
            ("Item", "category", false), ("Category", "items", true), ("Invoice", "lines", true),
            ("Invoice", "customer", false),
            ("Node", "parent", false), ("Node", "children", true), ("Item", "tags", true),
        ]
        for (owner, field, isArray) in fields where owner == collection && data[field] != nil {
            // Now and then an op of another collection: the schema refuses the reference.
            let target = chance(0.9) ? ModelSchema.referencedCollection(owner, field) : pick(Self.collections)
            guard let n = result(of: target, earlier: earlier) else { continue }
            let value: JSON = ["$result": .int(Int64(n))]
            data[field] = isArray ? .array([value]) : value
        }
    }

    private mutating func substituteResults(in ops: inout [FieldOp], collection: String, earlier: [ModelWrite.Op]) {
        for index in ops.indices where ["$push", "$addToSet", "$set"].contains(ops[index].name) {
            let path = ops[index].pathText
            let target = path == "meta.item" ? "Item" : ModelSchema.referencedCollection(collection, path)
            guard !target.isEmpty, let n = result(of: target, earlier: earlier) else { continue }
            let value: JSON = ["$result": .int(Int64(n))]
            ops[index].operand = ops[index].name == "$set" ? value : [value]
        }
    }

    // MARK: Data

    mutating func data(_ collection: String) -> JSONObject {
        var data = JSONObject()
        switch collection {
        case "Category":
            data["title"] = .string("category \(int(0...99))")
            data["items"] = chance(0.03) ? ["not a reference"] : refs("Item", 0...4)
        case "Item":
            data["title"] = .string("item \(int(0...99))")
            let rank = int(0..<10)
            if rank < 7 { data["rank"] = .int(Int64(int(-3...9))) } else if rank < 8 { data["rank"] = .null }
            if chance(0.75) { data["category"] = ref("Category") }
            if chance(0.4) { data["tags"] = refs("Tag", 1...2) }
            if chance(0.04) {
                if chance(0.5) { data["rank"] = "high" } else { data["category"] = ref("Tag") }
            }
        case "Tag":
            data["label"] = .string(pick(["red", "green", "blue"]))
            data["n"] = .int(Int64(int(0...5)))
            if chance(0.5) { data["meta"] = ["item": ref("Item")] }
            if chance(0.3) { data["stats"] = ["views": .int(Int64(int(0...9)))] }
        case "Customer":
            data["name"] = .string("customer \(int(0...99))")
        case "Invoice":
            if chance(0.95) { data["customer"] = ref("Customer") }
            data["lines"] = refs("Item", 0...3)
            data["total"] = .int(Int64(int(0...500)))
        default:
            data["rank"] = .int(Int64(int(0...5)))
            if chance(0.7) { data["parent"] = ref("Node") }
            if chance(0.4) { data["next"] = ref("Node") }
            if chance(0.5) { data["children"] = refs("Node", 1...2) }
        }
        return data
    }

    /// A patch, field operations or both, on fields apart (now and then, on purpose, not).
    private mutating func update(_ collection: String) -> (JSONObject?, [FieldOp]?) {
        var patch = JSONObject()
        var ops: [FieldOp] = []
        let kind = int(0..<10)
        if kind < 5 || kind >= 8 {
            for _ in 0..<int(1...2) {
                let (field, value) = patchField(collection)
                patch[field] = value
            }
        }
        if kind >= 5 {
            var taken = Set(patch.keys)
            for _ in 0..<int(1...2) {
                let op = fieldOp(collection)
                guard !taken.contains(op.path[0]) else { continue }
                taken.insert(op.path[0])
                ops.append(op)
            }
            if ops.isEmpty { ops.append(FieldOp(path: ["extra"], name: "$set", operand: .int(Int64(int(0...9))))) }
        }
        if chance(0.02) {
            // Refused when decoded: an empty $push, overlapping paths, a path in both patch and ops.
            switch int(0...2) {
            case 0: ops.append(FieldOp(path: ["empty"], name: "$push", operand: []))
            case 1:
                ops += [
                    FieldOp(path: ["deep"], name: "$unset", operand: true),
                    FieldOp(path: ["deep", "er"], name: "$inc", operand: 1),
                ]
            default:
                patch["both"] = 1
                ops.append(FieldOp(path: ["both"], name: "$inc", operand: 1))
            }
        }
        return (patch.isEmpty && !ops.isEmpty ? nil : patch, ops.isEmpty ? nil : ops)
    }

    private mutating func patchField(_ collection: String) -> (String, JSON) {
        switch collection {
        case "Category":
            return chance(0.5) ? ("title", .string("renamed \(int(0...99))")) : ("items", refs("Item", 0...3))
        case "Item":
            switch int(0...3) {
            case 0: return ("title", .string("item \(int(0...99))"))
            case 1: return ("rank", chance(0.8) ? .int(Int64(int(-3...9))) : .null)
            case 2: return ("category", chance(0.8) ? ref("Category") : .null)
            default: return ("tags", refs("Tag", 0...2))
            }
        case "Tag":
            switch int(0...3) {
            case 0: return ("label", .string(pick(["red", "green", "blue"])))
            case 1: return ("meta", chance(0.7) ? ["item": chance(0.8) ? ref("Item") : .null] : "flat")
            case 2: return ("stats", ["views": .int(Int64(int(0...9))), "likes": chance(0.5) ? .int(1) : .null])
            default: return ("n", .int(Int64(int(0...5))))
            }
        case "Customer":
            return ("name", .string("customer \(int(0...99))"))
        case "Invoice":
            switch int(0...2) {
            case 0: return ("total", .int(Int64(int(0...500))))
            case 1: return ("lines", refs("Item", 0...3))
            default: return ("customer", chance(0.9) ? ref("Customer") : .null)
            }
        default:
            switch int(0...3) {
            case 0: return ("rank", .int(Int64(int(0...5))))
            case 1: return ("parent", chance(0.8) ? ref("Node") : .null)
            case 2: return ("next", chance(0.8) ? ref("Node") : .null)
            default: return ("children", refs("Node", 0...2))
            }
        }
    }

    /// Values to `$pull` from an array field: mostly some it holds.
    private mutating func pulled(_ collection: String, _ field: String, fallback: JSON) -> JSON {
        let holders = model.objects.filter { $0.key.collection == collection }.compactMap { object -> [JSON]? in
            if case .array(let elements)? = object.value.data[field], !elements.isEmpty { return elements }
            return nil
        }
        if !holders.isEmpty && chance(0.7) { return [pick(pick(holders))] }
        return [fallback]
    }

    /// `$push`, `$addToSet` or `$pull` on an array of references to `target` (strings if nil).
    private mutating func arrayOp(_ collection: String, _ field: String, of target: String?) -> FieldOp {
        func value() -> JSON { target.map { ref($0) } ?? .string(pick(["a", "b", "c"])) }
        switch int(0...2) {
        case 0: return FieldOp(path: [field], name: "$push", operand: .array((0..<int(1...2)).map { _ in value() }))
        case 1: return FieldOp(path: [field], name: "$addToSet", operand: .array((0..<int(1...2)).map { _ in value() }))
        default: return FieldOp(path: [field], name: "$pull", operand: pulled(collection, field, fallback: value()))
        }
    }

    private mutating func fieldOp(_ collection: String) -> FieldOp {
        switch collection {
        case "Category":
            if chance(0.1) { return FieldOp(path: ["title"], name: chance(0.5) ? "$push" : "$set", operand: ["x"]) }
            return arrayOp("Category", "items", of: "Item")
        case "Item":
            switch int(0...6) {
            case 0: return FieldOp(path: ["rank"], name: "$inc", operand: .int(Int64(int(-2...3))))
            case 1:
                return chance(0.5)
                    ? FieldOp(path: ["rank"], name: "$set", operand: .int(Int64(int(0...9))))
                    : FieldOp(path: ["rank"], name: "$unset", operand: true)
            case 2: return FieldOp(path: ["category"], name: "$set", operand: chance(0.8) ? ref("Category") : .null)
            case 3: return FieldOp(path: ["category"], name: "$unset", operand: true)
            case 4: return FieldOp(path: ["title"], name: "$inc", operand: 1)
            default: return arrayOp("Item", "tags", of: "Tag")
            }
        case "Tag":
            switch int(0...5) {
            case 0:
                return FieldOp(
                    path: ["n"], name: "$inc", operand: chance(0.8) ? .int(Int64(int(-2...3))) : .double(0.5))
            case 1: return FieldOp(path: ["stats", "views"], name: "$inc", operand: .int(Int64(int(1...3))))
            case 2:
                return FieldOp(
                    path: ["meta", "item"], name: chance(0.7) ? "$set" : "$unset",
                    operand: chance(0.5) ? ref("Item") : true)
            case 3: return FieldOp(path: ["n"], name: "$inc", operand: .int(Int64.max))
            default:
                return arrayOp("Tag", "labels", of: nil)
            }
        case "Customer":
            return FieldOp(path: ["name"], name: "$set", operand: .string("customer \(int(0...99))"))
        case "Invoice":
            switch int(0...3) {
            case 0: return FieldOp(path: ["total"], name: "$inc", operand: .int(Int64(int(1...50))))
            case 1:
                return chance(0.8)
                    ? FieldOp(path: ["customer"], name: "$set", operand: ref("Customer"))
                    : FieldOp(path: ["customer"], name: "$unset", operand: true)
            default: return arrayOp("Invoice", "lines", of: "Item")
            }
        default:
            switch int(0...4) {
            case 0: return FieldOp(path: ["rank"], name: "$inc", operand: .int(Int64(int(-1...2))))
            case 1:
                return chance(0.8)
                    ? FieldOp(path: ["parent"], name: "$set", operand: ref("Node"))
                    : FieldOp(path: ["parent"], name: "$unset", operand: true)
            case 2: return FieldOp(path: ["next"], name: "$set", operand: chance(0.8) ? ref("Node") : .null)
            default: return arrayOp("Node", "children", of: "Node")
            }
        }
    }
}

extension ModelSchema {
    /// The collection a workload field refers to ("" if none): by the schema's first variant.
    static func referencedCollection(_ collection: String, _ field: String) -> String {
        RelationWorkload.schema(collection, variant: 0)?.fields.first { $0.name == field }?.type.referencedCollection
            ?? ""
    }
}
