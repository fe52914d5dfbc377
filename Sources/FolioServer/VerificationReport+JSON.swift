import FolioJSON
import FolioStore

extension VerificationReport {
    /// `{"ok", "lastSeq", "chainHead", "chainBrokenAt", "chainProblem", "replayedEvents", "digest", "mismatches": [{"kind", "description"}]}`
    public var json: JSON {
        var object: JSONObject = [
            "ok": .bool(isConsistent), "lastSeq": .int(Int64(lastSequence)), "chainHead": .string(chainHead.hex),
            "replayedEvents": .int(Int64(replayedEvents)), "digest": .string(digest.hex),
        ]
        object["chainBrokenAt"] = chainBrokenAt.map { .int(Int64($0)) } ?? .null
        object["chainProblem"] = chainProblem.map(JSON.string) ?? .null
        object["mismatches"] = .array(mismatches.map { ["kind": .string($0.kind), "description": .string($0.description)] })
        if omittedMismatches > 0 { object["omittedMismatches"] = .int(Int64(omittedMismatches)) }
        return .object(object)
    }
}
