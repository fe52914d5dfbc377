import FolioJSON

extension FileRecord {
    /// `{name, size, sha256, contentType, createdAt}`, and `uploader` (the uid that put it) when
    /// asked: the result of `file.put` and an `include` of a `{"$file"}`; with the uploader, of
    /// `file.get`, `file.list` and `file.orphans`.
    public func json(withUploader: Bool) -> JSON {
        var object: JSONObject = [
            "name": .string(name), "size": .int(Int64(size)), "sha256": .string(sha256),
            "contentType": .string(contentType),
            "createdAt": .string(createdAt.rfc3339),
        ]
        if withUploader { object["uploader"] = .int(Int64(uploader)) }
        return .object(object)
    }
}

extension FileTotals {
    /// `stats.files`: names, distinct contents, their bytes, what deduplication saves, and orphans.
    public var json: JSON {
        [
            "count": .int(Int64(files)), "blobs": .int(Int64(blobs)), "bytesStored": .int(Int64(storedBytes)),
            "bytesSaved": .int(Int64(savedBytes)), "orphans": .int(Int64(orphans)),
        ]
    }
}
