import FolioJSON
import FolioStore

extension VerificationReport {
    /// `{"ok", "lastSeq", "chainHead", "chainBrokenAt", "chainProblem", "replayedEvents", "digest", "mismatches": [{"kind", "description"}],
    /// "blobs": {"checked", "bytes", "bad": [{"sha256", "problem", "description", "names"}]}}`
    public var json: JSON {
        var object: JSONObject = [
            "ok": .bool(isConsistent), "lastSeq": .int(Int64(lastSequence)), "chainHead": .string(chainHead.hex),
            "replayedEvents": .int(Int64(replayedEvents)), "digest": .string(digest.hex),
        ]
        object["chainBrokenAt"] = chainBrokenAt.map { .int(Int64($0)) } ?? .null
        object["chainProblem"] = chainProblem.map(JSON.string) ?? .null
        object["mismatches"] = .array(
            mismatches.map { ["kind": .string($0.kind), "description": .string($0.description)] })
        if omittedMismatches > 0 { object["omittedMismatches"] = .int(Int64(omittedMismatches)) }
        var blobs: JSONObject = [
            "checked": .int(Int64(blobsChecked)), "bytes": .int(Int64(blobBytes)),
            "bad": .array(
                badBlobs.map { blob in
                    var entry: JSONObject = [
                        "sha256": .string(blob.sha256), "problem": .string(blob.problem),
                        "description": .string(blob.description),
                        "names": .array(blob.names.map(JSON.string)),
                    ]
                    if blob.omittedNames > 0 { entry["omittedNames"] = .int(Int64(blob.omittedNames)) }
                    return .object(entry)
                }),
        ]
        if omittedBadBlobs > 0 { blobs["omittedBad"] = .int(Int64(omittedBadBlobs)) }
        object["blobs"] = .object(blobs)
        return .object(object)
    }
}
