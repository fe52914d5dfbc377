import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore

/// The `result` of an accepted write.
enum WriteResultEncoder {
    /// `replayed`: the request key was used before; the result is marked so.
    static func write(_ result: WriteResult, replayed: Bool, to writer: inout JSONWriter) {
        let start = writer.bytes.count
        write(result, to: &writer)
        guard replayed, writer.bytes.last == UInt8(ascii: "}"), writer.bytes.count > start + 1 else { return }
        writer.bytes.removeLast()
        writer.writeRaw(writer.bytes.last == UInt8(ascii: "{") ? "\"replayed\":true}" : ",\"replayed\":true}")
    }

    static func write(_ result: WriteResult, to writer: inout JSONWriter) {
        switch result {
        case .object(let wire):
            writer.writeRaw(wire)
        case .deleted(let id, let version):
            writer.writeRaw("{\"id\":")
            writer.write(id)
            writer.writeRaw(",\"version\":")
            writer.write(version)
            writer.bytes.append(UInt8(ascii: "}"))
        case .view(let definition, let count):
            guard case .object(var object) = definition.json else { return }
            object["count"] = .int(Int64(count))
            writer.write(object)
        case .viewDropped(let name):
            writer.writeRaw("{\"name\":")
            writer.write(name)
            writer.writeRaw(",\"dropped\":true}")
        case .schema(let schema):
            writer.write(schema.json)
        case .schemaDropped(let collection):
            writer.writeRaw("{\"collection\":")
            writer.write(collection)
            writer.writeRaw(",\"dropped\":true}")
        case .file(let file):
            writer.write(file.json(withUploader: false))
        case .fileDeleted(let name):
            writer.writeRaw("{\"name\":")
            writer.write(name)
            writer.writeRaw(",\"deleted\":true}")
        case .batch(let items):
            writer.writeRaw("{\"results\":[")
            for (index, item) in items.enumerated() {
                if index > 0 { writer.bytes.append(UInt8(ascii: ",")) }
                switch item {
                case .success(let result):
                    writer.writeRaw("{\"ok\":true,\"result\":")
                    write(result, to: &writer)
                    writer.bytes.append(UInt8(ascii: "}"))
                case .failure(let error):
                    writer.writeRaw("{\"ok\":false,\"error\":")
                    Response.writeError(ProtocolError(storeError: error), to: &writer)
                    writer.bytes.append(UInt8(ascii: "}"))
                }
            }
            writer.writeRaw("]}")
        }
    }
}
