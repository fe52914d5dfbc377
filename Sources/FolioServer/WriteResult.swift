import FolioJSON
import FolioModel
import FolioStore

/// The `result` of an accepted command.
enum WriteResult {
    static func write(_ applied: StoreWriter.Applied, to writer: inout JSONWriter) throws {
        switch applied.event.change {
        case .created, .updated:
            // Copied from the stored record: a large object costs the event loop a copy, not a serialization.
            if try !applied.writeObject(to: &writer) { applied.object?.write(to: &writer) }
        case .deleted(_, let id):
            writer.writeRaw("{\"id\":")
            writer.write(id)
            writer.writeRaw(",\"version\":")
            writer.write(applied.event.version)
            writer.bytes.append(UInt8(ascii: "}"))
        case .viewDefined(let definition):
            guard case .object(var object) = definition.json else { return }
            object["count"] = .int(Int64(applied.viewCount ?? 0))
            writer.write(object)
        case .viewDropped(let name):
            writer.writeRaw("{\"name\":")
            writer.write(name)
            writer.writeRaw(",\"dropped\":true}")
        }
    }
}
