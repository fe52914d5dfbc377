import FolioJSON

extension FuzzTarget {
    /// Whatever parses, written out, parses back to the same value and is written the same way again;
    /// likewise its canonical form.
    static func jsonParser(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let json = try? JSONParser.parse(bytes) else { return nil }
        if let failure = roundTrip(json, "value") { return failure }
        return roundTrip(json.canonical, "canonical form")
    }

    private static func roundTrip(_ json: JSON, _ what: String) -> String? {
        let written = json.serialized()
        let text = String(decoding: written, as: UTF8.self)
        let again: JSON
        do { again = try JSONParser.parse(written) } catch {
            return "the \(what) written as \(text) does not parse: \(error)"
        }
        if again != json { return "the \(what) written as \(text) parses to another value: \(again)" }
        if again.serialized() != written {
            return "the \(what) written as \(text) is written as \(again) the second time"
        }
        return nil
    }
}
