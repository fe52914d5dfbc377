import FolioJSON
import FolioModel
import FolioProtocol

extension FuzzTarget {
    /// Any line decodes to a request or an error. A line that is JSON gets the same answer (the same op,
    /// or the same error code) once its JSON is written back out: the decoder reads values, not spellings.
    /// Lines over 64 KiB are only decoded: the second decoding adds nothing there but time, and their
    /// point is the cost of one.
    static func requestDecoder(_ line: UnsafeRawBufferPointer) -> String? {
        let first = RequestDecoder.decode(line)
        guard line.count <= 65536 else { return nil }
        guard let json = try? JSONParser.parse(line) else {
            if case .success = first { return "a line that is not JSON decoded to a request" }
            return nil
        }
        let rewritten = json.serialized()
        let second = rewritten.withUnsafeBytes { RequestDecoder.decode($0) }
        let before = outcome(first)
        let after = outcome(second)
        if before != after {
            return "decoded as \(before), but as \(after) once written as \(String(decoding: rewritten, as: UTF8.self))"
        }
        return nil
    }

    private static func outcome(_ result: Result<Request, RequestDecoder.TaggedError>) -> String {
        switch result {
        case .success(let request): return "op \(request.spec.name), tag \(request.tag == nil ? "absent" : "present")"
        case .failure(let failure): return "error \(failure.error.code.rawValue), tag \(failure.tag == nil ? "absent" : "present")"
        }
    }
}
