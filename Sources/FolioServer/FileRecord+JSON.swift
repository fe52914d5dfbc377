import FolioJSON
import FolioStore

extension FileRecord {
    /// `{name, size, sha256, contentType, createdAt}`, and `uploader` (the uid that put it) when
    /// asked: the result of `file.put`, and with the uploader, of `file.get` and `file.list`.
    func write(to writer: inout JSONWriter, withUploader: Bool) {
        writer.bytes.append(UInt8(ascii: "{"))
        writer.writeKey("name", first: true)
        writer.write(name)
        writer.writeKey("size")
        writer.write(size)
        writer.writeKey("sha256")
        writer.write(sha256)
        writer.writeKey("contentType")
        writer.write(contentType)
        writer.writeKey("createdAt")
        writer.write(createdAt)
        if withUploader {
            writer.writeKey("uploader")
            writer.write(UInt64(uploader))
        }
        writer.bytes.append(UInt8(ascii: "}"))
    }
}

extension FileTotals {
    /// `stats.files`: names, distinct contents, their bytes, and what deduplication saves.
    var json: JSON {
        [
            "count": .int(Int64(files)), "blobs": .int(Int64(blobs)), "bytesStored": .int(Int64(storedBytes)),
            "bytesSaved": .int(Int64(savedBytes)),
        ]
    }
}
