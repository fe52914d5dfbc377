// The ParseSwift seed's to-do flow against a running foliod: save, find all, find by title, update,
// delete. Run it with `swift run TodoList [SOCKET]` (default: FOLIO_SOCKET, or foliod's default socket).
import FolioKit
import Foundation

struct TodoListItem: FolioRecord {
    static let collection = "TodoListItem"
    var id: String?
    var version: Int?
    var title: String?
    var description: String?
}

let folio = try await Folio.connect(CommandLine.arguments.dropFirst().first)
let server = try await folio.hello()
print("connected to \(server.server) \(server.version) at \(folio.socketPath)")

// Save: create two items.
let milk = try await TodoListItem(title: "Buy milk", description: "2 litres").save(on: folio)
let dog = try await TodoListItem(title: "Walk the dog", description: "around the block").save(on: folio)
print("saved \(milk.id!) and \(dog.id!)")

// Find all.
for item in try await TodoListItem.query().findAll(on: folio) {
    print("- \(item.title ?? "") (\(item.description ?? "")), version \(item.version!)")
}

// Find by title.
guard var found = try await TodoListItem.query(\.title == "Buy milk").first(on: folio) else {
    fatalError("the item saved above was not found by its title")
}
print("found by title: \(found.id!)")

// Update: a save with the value's version; a stale version would be a conflict.
found.description = "3 litres"
let updated = try await found.save(on: folio)
print("updated to version \(updated.version!): \(updated.description ?? "")")
do {
    try await found.save(on: folio)
} catch FolioError.conflict(let current) {
    print("saving the stale copy again: conflict, the item is at version \(current ?? 0)")
}

// Delete.
try await updated.delete(on: folio)
try await dog.delete(on: folio)
do {
    _ = try await TodoListItem.get(updated.id!, on: folio)
} catch FolioError.notFound {
    print("deleted: \(updated.id!) is not found any more")
}
print("\(try await TodoListItem.query().count(on: folio)) items left")
