import FolioKit
import Foundation

struct TodoListItem: FolioRecord, Equatable {
    static let collection = "TodoListItem"
    var id: String?
    var version: Int?
    var title: String?
    var description: String?
}

struct Person: FolioRecord, Equatable {
    static let collection = "Person"
    var id: String?
    var version: Int?
    var name: String
}

/// A record with a field of every kind FolioKit maps, and a renamed key.
struct Chore: FolioRecord, Equatable {
    static let collection = "Chore"
    var id: String?
    var version: Int?
    var createdAt: Date?
    var updatedAt: Date?
    var title: String
    var n: Int?
    var done = false
    var urgent: Bool?
    var due: Date?
    var tags: [String]?
    var owner: Ref<Person>?
    var meta: Meta?
    var attachment: FolioFile?

    struct Meta: Codable, Equatable {
        var by: String
        var score: Double?
    }

    enum CodingKeys: String, CodingKey {
        case id, version, createdAt, updatedAt
        case title = "name"
        case n, done, urgent, due, tags, owner, meta, attachment
    }

    init(title: String, n: Int? = nil, done: Bool = false) {
        self.title = title
        self.n = n
        self.done = done
    }
}

/// An enum the probe cannot make a sentinel of: its key paths need `fieldNames`.
enum Mood: String, Codable {
    case calm, busy
}

struct Diary: FolioRecord {
    static let collection = "Diary"
    var id: String?
    var version: Int?
    var mood: Mood
    var text: String?
    static var fieldNames: [PartialKeyPath<Diary>: String] { [\Diary.mood: "mood"] }
}

/// A record whose `nest` holds arrays in arrays, as deep as it is built.
struct Nested: FolioRecord {
    static let collection = "Nested"
    var id: String?
    var version: Int?
    var nest: Level

    indirect enum Level: Codable {
        case leaf(Int)
        case level([Level])

        init(depth: Int) { self = depth == 0 ? .leaf(1) : .level([Level(depth: depth - 1)]) }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .leaf(let value): try container.encode(value)
            case .level(let levels): try container.encode(levels)
            }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(Int.self) {
                self = .leaf(value)
            } else {
                self = .level(try container.decode([Level].self))
            }
        }
    }
}
