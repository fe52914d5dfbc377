import FolioJSON
import FolioModel
import FolioProtocol

extension FuzzTarget {
    /// Any line decodes to a request or an error. A line that is JSON gets the same answer (the same op,
    /// or the same error code) once its JSON is written back out: the decoder reads values, not spellings.
    /// Lines over 64 KiB are only decoded: the second decoding adds nothing there but time, and their
    /// point is the cost of one.
    /// A line the decoder owns (and decodes file content in, in place) gets the same answer as the
    /// line it borrows: the same op and content, or the same error message. The shortcut for plain
    /// gets, pages and counts gives what the general decoder gives: the same request, tag text included, or
    /// the same error.
    static func requestDecoder(_ line: UnsafeRawBufferPointer) -> String? {
        let first = RequestDecoder.decode(line)
        let general = RequestDecoder.decodeInGeneral(line)
        if getOutcome(first) != getOutcome(general) {
            return "decoded as \(getOutcome(first)), but as \(getOutcome(general)) without the shortcut for plain reads"
        }
        let owned = RequestDecoder.decode(owning: Array(line))
        if exactOutcome(first) != exactOutcome(owned) {
            return "decoded as \(exactOutcome(first)) from the line, but as \(exactOutcome(owned)) from an owned copy"
        }
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

    /// The outcome with the error's message and the content of a file op.
    private static func exactOutcome(_ result: Result<Request, RequestDecoder.TaggedError>) -> String {
        switch result {
        case .success(let request):
            var content: [UInt8] = []
            if case .upload(.write(_, _, let piece)) = request.operation { content = piece.bytes }
            if case .upload(.put(let upload)) = request.operation { content = upload.content.bytes }
            return outcome(result)
                + ", content \(content.count) bytes \(content.prefix(8))…\(content.reduce(0) { $0 &* 31 &+ Int($1) })"
        case .failure(let failure): return outcome(result) + ": " + failure.error.message
        }
    }

    /// The outcome with the error's message, tag text, and a get's, a page's or a count's fields.
    private static func getOutcome(_ result: Result<Request, RequestDecoder.TaggedError>) -> String {
        let tag: Tag?
        switch result {
        case .success(let request): tag = request.tag
        case .failure(let failure): tag = failure.tag
        }
        var text = exactOutcome(result) + ", tag text " + (tag.map { String(decoding: $0.text, as: UTF8.self) } ?? "-")
        if let tag { text += ", tag value \(tag.value)" }
        if case .success(let request) = result,
            case .read(.get(let collection, let id, let point, let include)) = request.operation
        {
            text +=
                ", get \(collection)/\(id) \(String(describing: point)) \(include.count) \(String(describing: request.minSeq))"
        }
        if case .success(let request) = result, case .read(let operation) = request.operation,
            let query = operation.query
        {
            text +=
                ", \(request.spec.name) \(query.source) \(String(describing: query.whereJSON)) \(String(describing: query.sort)) \(query.descending) "
                + "\(query.limit) \(query.start) \(query.explain) \(query.include.count) \(String(describing: request.minSeq))"
        }
        return text
    }

    private static func outcome(_ result: Result<Request, RequestDecoder.TaggedError>) -> String {
        switch result {
        case .success(let request): return "op \(request.spec.name), tag \(request.tag == nil ? "absent" : "present")"
        case .failure(let failure):
            return "error \(failure.error.code.rawValue), tag \(failure.tag == nil ? "absent" : "present")"
        }
    }
}

extension Request.ReadOperation {
    /// The query of a `list` or a `count`.
    fileprivate var query: Query? {
        switch self {
        case .list(let query), .count(let query): return query
        default: return nil
        }
    }
}
