import FolioJSON
import FolioModel
import Foundation
import Testing

@testable import FolioProtocol

@Suite struct RequestDecoderTests {
    private func decode(_ line: String) -> Result<Request, RequestDecoder.TaggedError> {
        var bytes = Array(line.utf8)
        return bytes.withUnsafeMutableBytes { RequestDecoder.decode(UnsafeRawBufferPointer($0)) }
    }

    private func error(_ line: String) -> ProtocolError? {
        if case .failure(let failure) = decode(line) { return failure.error }
        return nil
    }

    @Test func nullFieldsCountAsAbsent() throws {
        guard
            case .success(let request) = decode(
                #"{"op":"list","collection":"Task","after":null,"where":null,"limit":null,"tag":null}"#),
            case .read(.list(let query)) = request.operation
        else {
            Issue.record("not decoded")
            return
        }
        #expect(request.tag == nil)
        #expect(query.start == .offset(0))
        #expect(query.limit == Query.defaultLimit)
        #expect(query.filter == nil)
    }

    @Test func tagsKeepTheirTextAndMatchByValue() throws {
        guard case .success(let request) = decode(#"{"op":"hello","tag":1.50}"#), let tag = request.tag else {
            Issue.record("not decoded")
            return
        }
        #expect(tag.description == "1.50")
        #expect(tag.matches(1.5))
        #expect(tag.matches(.double(1.5)))
        var line: [UInt8] = []
        Response.appendSuccess(tag: tag, to: &line) { $0.write(true) }
        #expect(String(decoding: line, as: UTF8.self) == "{\"tag\":1.50,\"ok\":true,\"result\":true}\n")
    }

    /// A success line's head is written in one piece for short tags and piece by piece for long ones:
    /// the same line either way, with and without `seq`, after what the output already held, and
    /// nothing of it left when the result throws.
    @Test func successLinesAreTheSameForTagsOfEveryLength() throws {
        struct Failed: Error {}
        for length in [0, 1, 2, 30, 61, 62, 63, 64, 65, 66, 200] {
            let tags: [FolioProtocol.Tag?] =
                length == 0
                ? [nil, FolioProtocol.Tag(.int(7)), FolioProtocol.Tag(.int(Int64.max))]
                : [FolioProtocol.Tag(.string(String(repeating: "t", count: length)))]
            for tag in tags {
                let tagText = tag.map { "\"tag\":" + String(decoding: $0.text, as: UTF8.self) + "," } ?? ""
                for seq: UInt64? in [nil, 0, 42, UInt64.max] {
                    var line = Array("before\n".utf8)
                    Response.appendSuccess(tag: tag, seq: seq, to: &line) { $0.write(true) }
                    let seqText = seq.map { "\"seq\":\($0)," } ?? ""
                    #expect(
                        String(decoding: line, as: UTF8.self)
                            == "before\n{\(tagText)\"ok\":true,\(seqText)\"result\":true}\n")
                    var kept = Array("before\n".utf8)
                    #expect(throws: Failed.self) {
                        try Response.appendSuccess(tag: tag, seq: seq, to: &kept) { _ in throw Failed() }
                    }
                    #expect(kept == Array("before\n".utf8))
                }
            }
        }
    }

    @Test(arguments: [
        (#"{"op":"get","collection":"Task","id":"a","extra":1}"#, ErrorCode.badRequest, "extra"),
        (#"{"op":"get","collection":"Task"}"#, .badRequest, "\"id\""),
        (#"{"op":"get","collection":7,"id":"a"}"#, .badRequest, "collection"),
        (#"{"op":"teleport"}"#, .unknownOp, "teleport"),
        (#"{"tag":"x"}"#, .badRequest, "op"),
        (#"[1]"#, .badRequest, "object"),
        (#"{"op":"list","collection":"T","limit":1001}"#, .badRequest, "limit"),
        (#"{"op":"list","collection":"T","offset":1,"after":"AQ"}"#, .badRequest, "offset"),
        (#"{"op":"list","view":"v","sort":["a"]}"#, .badRequest, "view"),
        (#"{"op":"backlinks","ref":"Item","from":"Category.items"}"#, .badRequest, "ref"),
        (#"{"op":"backlinks","ref":"Item/i1","from":"Category"}"#, .badRequest, "from"),
        (#"{"op":"get","collection":"T","id":"a","include":["x"],"atSeq":3}"#, .badRequest, "include"),
        (#"{"op":"list","collection":"T","after":"%%%"}"#, .badRequest, "cursor"),
        (#"{"op":"create","collection":"T","data":{"id":1}}"#, .badRequest, "reserved"),
        (#"{"op":"update","collection":"T","id":"a","patch":{},"ifVersion":-1}"#, .badRequest, "ifVersion"),
        (#"{"op":"get","collection":"T","id":"a","atSeq":1,"asOf":"2026-01-01T00:00:00Z"}"#, .badRequest, "atSeq"),
        (#"{"op":"backup","directory":"relative/path"}"#, .badRequest, "absolute"),
    ])
    func badRequestsNameTheProblem(line: String, code: ErrorCode, named: String) {
        let error = error(line)
        #expect(error?.code == code, "\(line)")
        #expect(error?.message.contains(named) == true, "\(error?.message ?? "decoded") should name \(named)")
    }

    @Test func commandsAndReadsDecodeToTheirOperations() {
        guard case .success(let create) = decode(#"{"op":"create","collection":"Task","id":"t1","data":{"n":1}}"#),
            case .write(let write) = create.operation, case .create(let collection, let id, let data) = write.command
        else {
            Issue.record("create not decoded")
            return
        }
        #expect(collection == "Task" && id == "t1" && data == ["n": 1])
        #expect(create.spec.kind == .write && create.spec.cost == nil)
        guard
            case .success(let get) = decode(
                #"{"op":"get","collection":"Task","id":"t1","asOf":{"$date":"2026-01-01T00:00:00Z"}}"#),
            case .read(.get(_, _, let point?, _)) = get.operation
        else {
            Issue.record("get not decoded")
            return
        }
        #expect(point == .instant(Instant(rfc3339: "2026-01-01T00:00:00Z")!))
        #expect(get.spec.kind == .read && get.spec.cost == .byPlan)
    }

    @Test func fileReferenceFieldsDecodeOrAreRefused() {
        guard case .success(let get) = decode(#"{"op":"file.get","name":"a.jpg","referrers":true,"limit":5}"#),
            case .read(.fileGet("a.jpg", 5?)) = get.operation
        else {
            Issue.record("file.get with referrers not decoded")
            return
        }
        guard case .success(let delete) = decode(#"{"op":"file.delete","name":"a.jpg","force":true}"#),
            case .write(let write) = delete.operation,
            case .deleteFile("a.jpg", true) = write.command
        else {
            Issue.record("file.delete with force not decoded")
            return
        }
        guard case .success(let orphans) = decode(#"{"op":"file.orphans"}"#),
            case .read(.fileOrphans("", nil, 0, 100)) = orphans.operation
        else {
            Issue.record("file.orphans not decoded with its defaults")
            return
        }
        for line in [
            #"{"op":"file.get","name":"a.jpg","limit":5}"#,
            #"{"op":"file.delete","name":"a.jpg","ifUnreferenced":false}"#,
            #"{"op":"file.delete","name":"a.jpg","ifUnreferenced":true,"force":true}"#,
            #"{"op":"file.orphans","olderThan":-1}"#,
            #"{"op":"file.orphans","olderThan":99999999999}"#,
        ] {
            guard case .failure(let failure) = decode(line) else {
                Issue.record("\(line) decoded")
                return
            }
            #expect(failure.error.code == .badRequest, "\(line)")
        }
    }

    @Test func theTableNamesEachOpOnceAndDecodesEachToItsKind() {
        #expect(Set(OperationTable.names).count == OperationTable.all.count)
        let samples: [String: String] = [
            "hello": #"{"op":"hello"}"#, "create": #"{"op":"create","collection":"T","data":{}}"#,
            "get": #"{"op":"get","collection":"T","id":"a"}"#,
            "update": #"{"op":"update","collection":"T","id":"a","patch":{}}"#,
            "delete": #"{"op":"delete","collection":"T","id":"a"}"#, "list": #"{"op":"list","collection":"T"}"#,
            "count": #"{"op":"count","collection":"T"}"#,
            "history": #"{"op":"history","collection":"T","id":"a","after":3,"limit":2}"#,
            "events": #"{"op":"events"}"#, "stats": #"{"op":"stats"}"#,
            "view.define": #"{"op":"view.define","name":"v","collection":"T"}"#,
            "view.drop": #"{"op":"view.drop","name":"v"}"#,
            "view.list": #"{"op":"view.list"}"#, "watch": #"{"op":"watch","tag":1}"#,
            "unwatch": #"{"op":"unwatch","watch":1}"#,
            "verify": #"{"op":"verify"}"#, "backup": #"{"op":"backup","directory":"/tmp/b"}"#,
            "batch":
                #"{"op":"batch","ops":[{"op":"create","collection":"T","data":{}},{"op":"delete","collection":"T","id":{"$result":0}}]}"#,
            "schema.define": #"{"op":"schema.define","collection":"T","fields":{"n":{"type":"integer"}}}"#,
            "schema.drop": #"{"op":"schema.drop","collection":"T"}"#,
            "schema.get": #"{"op":"schema.get","collection":"T"}"#,
            "schema.list": #"{"op":"schema.list"}"#,
            "links": #"{"op":"links","ref":"Category/c1","field":"items","include":["owner"]}"#,
            "backlinks": #"{"op":"backlinks","ref":"Item/i1","from":"Category.items"}"#,
            "metrics": #"{"op":"metrics"}"#,
            "file.put": #"{"op":"file.put","name":"a/b.jpg","data":"aGk="}"#,
            "file.get": #"{"op":"file.get","name":"a/b.jpg"}"#,
            "file.read": #"{"op":"file.read","name":"a/b.jpg","offset":2}"#,
            "file.list": #"{"op":"file.list","prefix":"a/"}"#,
            "file.delete": #"{"op":"file.delete","name":"a/b.jpg"}"#,
            "file.orphans": #"{"op":"file.orphans","olderThan":86400,"prefix":"a/","limit":10}"#,
            "file.begin": #"{"op":"file.begin","size":3}"#,
            "file.write": #"{"op":"file.write","upload":"u1","offset":0,"data":"aGk="}"#,
            "file.commit": #"{"op":"file.commit","upload":"u1"}"#, "file.abort": #"{"op":"file.abort","upload":"u1"}"#,
        ]
        #expect(Set(samples.keys) == Set(OperationTable.names))
        for (name, line) in samples {
            guard case .success(let request) = decode(line) else {
                Issue.record("\(name) not decoded")
                continue
            }
            #expect(request.spec.name == name)
            switch (request.operation, request.spec.kind) {
            case (.write, .write), (.upload, .write), (.read, .read), (.stream, .stream): break
            default: Issue.record("\(name) decodes to another kind than its table entry says")
            }
            #expect((request.spec.kind == .read) == (request.spec.cost != nil))
        }
        // What grows with the data never runs inline.
        for name in ["stats", "verify", "backup", "view.list", "schema.list", "file.read"] {
            #expect(OperationTable.spec(named: name)?.cost == .worker, "\(name)")
        }
        #expect(OperationTable.spec(named: "list")?.cost == .byPlan)
        #expect(OperationTable.spec(named: "get")?.cost == .byPlan)
    }

    @Test func historyPagesLikeEvents() {
        guard case .success(let request) = decode(#"{"op":"history","collection":"T","id":"a","after":3,"limit":2}"#),
            case .read(.history(_, _, let after, let limit)) = request.operation
        else {
            Issue.record("not decoded")
            return
        }
        #expect(after == 3 && limit == 2)
        #expect(error(#"{"op":"history","collection":"T","id":"a","limit":1001}"#)?.message.contains("limit") == true)
    }

    @Test func offsetsAreAnyNonNegativeInteger() {
        guard case .success(let request) = decode(#"{"op":"list","collection":"T","offset":9223372036854775807}"#),
            case .read(.list(let query)) = request.operation
        else {
            Issue.record("not decoded")
            return
        }
        #expect(query.start == .offset(Int.max))
    }
}

@Suite struct FileRequestTests {
    @Test func base64RoundTripsEveryLengthAndNamesTheOffsetOfABadCharacter() throws {
        for length in 0..<300 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let text = Base64.encode(bytes)
            #expect(text == Data(bytes).base64EncodedString())
            #expect(try Base64.decode(text.utf8, field: "data") == bytes)
        }
        // Long texts, as file pieces are: the same bytes as Foundation's, and a bad character found
        // where it stands in any group.
        var random = SystemRandomNumberGenerator()
        for length in [1000, 4095, 65537] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let text = Base64.encode(bytes)
            #expect(text == Data(bytes).base64EncodedString())
            #expect(try Base64.decode(text.utf8, field: "data") == bytes)
            for bad in ["-", "=", "*"] {
                let offset = Int.random(in: 0..<(text.utf8.count - 4), using: &random)
                var characters = Array(text.utf8)
                characters[offset] = bad.utf8.first!
                #expect(throws: ValidationError.self) {
                    try Base64.decode(String(decoding: characters, as: UTF8.self).utf8, field: "data")
                }
                do {
                    _ = try Base64.decode(String(decoding: characters, as: UTF8.self).utf8, field: "data")
                } catch {
                    #expect(error.message == "field \"data\": invalid base64 at offset \(offset)")
                }
            }
        }
        // A bad character at every offset of a text long enough for several 32-character blocks
        // (CFolioKernels) and the group-at-a-time tail: found, and named, where it stands.
        let text = Base64.encode((0..<240).map { UInt8(truncatingIfNeeded: $0 &* 91 &+ 7) })
        for offset in 0..<(text.utf8.count - 4) {
            for bad: UInt8 in [0x2D, 0x3D, 0x0A, 0x80, 0xFF, 0x00] {
                var characters = Array(text.utf8)
                characters[offset] = bad
                switch characters.withUnsafeBytes({ Base64.decode($0, field: "data") }) {
                case .success: Issue.record("decoded a bad character at \(offset)")
                case .failure(let error): #expect(error.message == "field \"data\": invalid base64 at offset \(offset)")
                }
            }
        }
        for (text, offset) in [("ab-d", 2), ("abc=abcd", 3), ("a===", 1), ("ab=c", 2), ("abcd\nabc", 4)] {
            #expect(throws: ValidationError.self) { try Base64.decode(text.utf8, field: "data") }
            do {
                _ = try Base64.decode(text.utf8, field: "data")
            } catch {
                #expect(error.message == "field \"data\": invalid base64 at offset \(offset)", "\(text)")
            }
        }
    }

    @Test func filePutDecodesItsFieldsAndChecksTheName() throws {
        let line = #"{"op":"file.put","name":"photos/a.jpg","contentType":"image/jpeg","data":"aGk=","replace":true}"#
        let request = try Array(line.utf8).withUnsafeBytes { try RequestDecoder.decode($0).get() }
        guard case .upload(.put(let upload)) = request.operation else {
            Issue.record("not an upload: \(request.operation)")
            return
        }
        #expect(upload.name == "photos/a.jpg" && upload.contentType == "image/jpeg" && upload.replace)
        #expect(upload.content.bytes == Array("hi".utf8))
        for name in ["", "/x", "x/", "a//b", "a/../b", String(repeating: "x", count: 257)] {
            let bad = #"{"op":"file.get","name":"\#(name)"}"#
            let decoded = Array(bad.utf8).withUnsafeBytes { RequestDecoder.decode($0) }
            guard case .failure(let failure) = decoded else {
                Issue.record("accepted \(name)")
                continue
            }
            #expect(
                failure.error.code == .badRequest && failure.error.message.contains("file name"),
                "\(failure.error.message)")
        }
    }

    @Test func uploadPiecesDecodeTheirFieldsAndRefuseBadOnes() throws {
        func decode(_ line: String) -> Result<Request, RequestDecoder.TaggedError> {
            Array(line.utf8).withUnsafeBytes { RequestDecoder.decode($0) }
        }
        let sha = String(repeating: "ab", count: 32)
        guard
            case .success(let begin) = decode(
                #"{"op":"file.begin","name":"v/a.mp4","size":10,"sha256":"\#(sha)","replace":true}"#),
            case .upload(.begin(let plan)) = begin.operation
        else {
            Issue.record("file.begin did not decode")
            return
        }
        #expect(
            plan.name == "v/a.mp4" && plan.size == 10 && plan.sha256 == sha && plan.replace
                && plan.contentType == "application/octet-stream")
        guard case .success(let write) = decode(#"{"op":"file.write","upload":"u1","offset":4,"data":"aGk="}"#),
            case .upload(.write(let upload, let offset, let content)) = write.operation
        else {
            Issue.record("file.write did not decode")
            return
        }
        #expect(upload == "u1" && offset == 4 && content.bytes == Array("hi".utf8))
        guard case .success(let commit) = decode(#"{"op":"file.commit","upload":"u1"}"#),
            case .upload(.commit("u1")) = commit.operation
        else {
            Issue.record("file.commit did not decode")
            return
        }
        for (line, words) in [
            (#"{"op":"file.begin","sha256":"AB"}"#, "sha256"),
            (#"{"op":"file.begin","size":-1}"#, "size"),
            (#"{"op":"file.write","upload":"u1","data":"aGk="}"#, "offset"),
            (#"{"op":"file.write","offset":0,"data":"aGk="}"#, "upload"),
            (#"{"op":"file.abort","upload":""}"#, "upload"),
            (#"{"op":"file.commit","upload":"u1","extra":1}"#, "extra"),
        ] {
            guard case .failure(let failure) = decode(line) else {
                Issue.record("accepted \(line)")
                continue
            }
            #expect(
                failure.error.code == .badRequest && failure.error.message.contains(words),
                "\(line): \(failure.error.message)")
        }
    }

    /// A long line the decoder owns has its piece decoded where it stands in the line; a line it
    /// borrows, or a `data` written with escapes, decodes the same; so do errors.
    @Test func aPieceDecodesTheSameInItsOwnLineOrNot() throws {
        var random = SystemRandomNumberGenerator()
        let bytes = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &random) }
        let text = Base64.encode(bytes)
        let escaped = text.replacing("/", with: #"\/"#)
        for data in [text, escaped] {
            for order in [
                #""data":"\#(data)","offset":9,"upload":"u1""#, #""offset":9,"upload":"u1","data":"\#(data)""#,
            ] {
                let line = Array(("{\"op\":\"file.write\"," + order + ",\"tag\":7}").utf8)
                for result in [RequestDecoder.decode(owning: line), line.withUnsafeBytes { RequestDecoder.decode($0) }]
                {
                    guard case .success(let request) = result,
                        case .upload(.write("u1", 9, let content)) = request.operation
                    else {
                        Issue.record("did not decode: \(result)")
                        continue
                    }
                    #expect(content.count == bytes.count && content.bytes == bytes)
                    #expect(request.tag?.text == Array("7".utf8))
                }
            }
        }
        let put = Array(#"{"op":"file.put","name":"a","data":"\#(text)"}"#.utf8)
        guard case .success(let request) = RequestDecoder.decode(owning: put),
            case .upload(.put(let upload)) = request.operation
        else {
            Issue.record("file.put did not decode")
            return
        }
        #expect(upload.content.bytes == bytes && upload.name == "a")
        // A bad character: named at its offset in the field, owned or not.
        var bad = Array(#"{"op":"file.write","upload":"u1","offset":0,"data":"\#(text)"}"#.utf8)
        let at = 100_001
        bad[bad.count - 2 - text.utf8.count + at] = UInt8(ascii: "-")
        for result in [RequestDecoder.decode(owning: bad), bad.withUnsafeBytes { RequestDecoder.decode($0) }] {
            guard case .failure(let failure) = result else {
                Issue.record("accepted a bad character")
                continue
            }
            #expect(failure.error.message == "field \"data\": invalid base64 at offset \(at)")
        }
        // Another op's top-level string "data" is what it was: a string, where an object belongs.
        for line in [
            #"{"op":"create","collection":"Task","data":"plain"}"#, #"{"op":"file.put","data":"x","fd":true}"#,
        ] {
            guard case .failure(let failure) = RequestDecoder.decode(owning: Array(line.utf8)) else {
                Issue.record("accepted \(line)")
                continue
            }
            #expect(failure.error.code == .badRequest, "\(line)")
            #expect(
                failure.error.message.contains("found a string") || failure.error.message.contains("give one of them"),
                "\(failure.error.message)")
        }
    }
}

/// `RequestDecoder.plainRequest`, the shortcut for plain gets and pages, against the general decoder
/// it stands in for.
@Suite struct PlainRequestTests {
    /// A cursor as `list` answers it in `next`.
    private let cursor = PageCursor(fingerprint: Array(1...8), key: Array("Task\u{0}k1".utf8)).token

    private func outcome(_ result: Result<Request, RequestDecoder.TaggedError>) -> String {
        switch result {
        case .success(let request):
            let tag = request.tag.map { "\($0.value) \(String(decoding: $0.text, as: UTF8.self))" } ?? "none"
            if case .read(let operation) = request.operation, let (name, query) = Self.query(of: operation) {
                return
                    "\(name) \(query.source) where \(String(describing: query.whereJSON)) sort \(String(describing: query.sort)) "
                    + "descending \(query.descending) limit \(query.limit) start \(query.start) explain \(query.explain) "
                    + "include \(query.include.count), tag \(tag), spec \(request.spec.name) \(request.spec.index), minSeq \(String(describing: request.minSeq))"
            }
            guard case .read(.get(let collection, let id, let point, let include)) = request.operation else {
                return "op \(request.spec.name), tag \(tag), minSeq \(String(describing: request.minSeq))"
            }
            return
                "get \(collection)/\(id) at \(String(describing: point)) include \(include.count), tag \(tag), spec \(request.spec.name) \(request.spec.index), minSeq \(String(describing: request.minSeq))"
        case .failure(let failure):
            let tag = failure.tag.map { String(decoding: $0.text, as: UTF8.self) } ?? "none"
            return "error \(failure.error.code.rawValue) \(failure.error.message), tag \(tag)"
        }
    }

    private static func query(of operation: Request.ReadOperation) -> (String, Query)? {
        switch operation {
        case .list(let query): return ("list", query)
        case .count(let query): return ("count", query)
        default: return nil
        }
    }

    private func check(_ line: String) -> (fast: Bool, same: Bool, general: String, decoded: String) {
        let bytes = Array(line.utf8)
        return bytes.withUnsafeBytes { buffer in
            let general = outcome(RequestDecoder.decodeInGeneral(buffer))
            let decoded = outcome(RequestDecoder.decode(buffer))
            return (RequestDecoder.plainRequest(buffer) != nil, general == decoded, general, decoded)
        }
    }

    @Test func theCommonFormsTakeTheShortcutAndDecodeAsInGeneral() {
        for line in [
            #"{"op":"get","collection":"Task","id":"k1"}"#,
            #"{"id":"k1","op":"get","collection":"Task"}"#,
            #"{"op": "get", "collection": "Task", "id": "a-b.c:d_9", "tag": "t 1"}"#,
            #"  { "tag" : 7 , "op" : "get" , "collection" : "T_2" , "id" : "x" }  "#,
            "{\t\"op\":\"get\",\r\"collection\":\"Task\",\"id\":\"k\",\"tag\":0}",
            #"{"op":"get","collection":"Task","id":"k1","tag":""}"#,
            #"{"op":"get","collection":"Task","id":"k1","tag":999999999999999999}"#,
            #"{"op":"list","view":"byRank","offset":500000,"limit":20,"explain":true}"#,
            #"{"limit":20,"op":"list","collection":"Task","tag":"p"}"#,
            #"{"op":"list","view":"byRank"}"#,
            #"{"op":"list","collection":"Task","limit":0,"offset":0,"explain":false}"#,
            #"{"op":"list","view":"v","limit":1000,"offset":999999999999999999,"tag":3}"#,
            #"{ "op" : "list" , "view" : "byRank" , "after" : "\#(cursor)" , "limit" : 20 }"#,
            #"{"op":"count","view":"byRank","explain":true}"#,
            #"{"tag":"c","op":"count","collection":"Task"}"#,
        ] {
            let result = check(line)
            #expect(result.fast, "not taken: \(line)")
            #expect(result.same, "\(line): general \(result.general), shortcut \(result.decoded)")
        }
    }

    @Test func everythingElseIsLeftToTheGeneralDecoder() {
        for line in [
            #"{"op":"get","collection":"Task","id":"k1","tag":1.5}"#,
            #"{"op":"get","collection":"Task","id":"k1","tag":1e3}"#,
            #"{"op":"get","collection":"Task","id":"k1","tag":-1}"#,
            #"{"op":"get","collection":"Task","id":"k1","tag":01}"#,
            #"{"op":"get","collection":"Task","id":"k1","tag":1234567890123456789}"#,
            #"{"op":"get","collection":"Task","id":"k1","tag":9999999999999999999}"#,
            #"{"op":"get","collection":"Task","id":"k1","tag":99999999999999999999999999999999999}"#,
            #"{"op":"watch","tag":99999999999999999999999999999999999999999999":20}}"#,
            #"{"op":"get","collection":"Task","id":"k1","tag":null}"#,
            #"{"op":"get","collection":"Task","id":"k1","tag":true}"#,
            #"{"op":"get","collection":"Task","id":"k1","tag":"a\"b"}"#,
            #"{"op":"get","collection":"Task","id":"k\u0031"}"#,
            #"{"op":"get","collection":"Task","id":"ké"}"#,
            #"{"op":"get","collection":"Task","id":"k1","id":"k2"}"#,
            #"{"op":"get","op":"get","collection":"Task","id":"k1"}"#,
            #"{"op":"get","collection":"Task","id":"k1","tag":1,"tag":2}"#,
            #"{"op":"get","collection":"Task","id":"k1","minSeq":3}"#,
            #"{"op":"get","collection":"Task","id":"k1","include":["a"]}"#,
            #"{"op":"get","collection":"Task","id":"k1","atSeq":1}"#,
            #"{"op":"get","collection":"Task"}"#,
            #"{"op":"get","id":"k1"}"#,
            #"{"op":"list","collection":"Task","id":"k1"}"#,
            #"{"op":"list","view":"v","collection":"Task"}"#,
            #"{"op":"list"}"#,
            #"{"op":"list","view":"1v"}"#,
            #"{"op":"list","view":"v","limit":1001}"#,
            #"{"op":"list","view":"v","limit":-1}"#,
            #"{"op":"list","view":"v","limit":20.0}"#,
            #"{"op":"list","view":"v","limit":"20"}"#,
            #"{"op":"list","view":"v","limit":1e2}"#,
            #"{"op":"list","view":"v","offset":-1}"#,
            #"{"op":"list","view":"v","offset":01}"#,
            #"{"op":"list","view":"v","offset":1234567890123456789}"#,
            #"{"op":"list","view":"v","offset":0,"after":"\#(cursor)"}"#,
            #"{"op":"list","view":"v","after":"AAAA"}"#,
            #"{"op":"list","view":"v","after":""}"#,
            #"{"op":"list","view":"v","after":7}"#,
            #"{"op":"list","view":"v","explain":1}"#,
            #"{"op":"list","view":"v","explain":tru}"#,
            #"{"op":"list","view":"v","explain":truex}"#,
            #"{"op":"list","view":"v","explain":null}"#,
            #"{"op":"list","view":"v","explain":true,"explain":false}"#,
            #"{"op":"list","view":"v","limit":2,"limit":3}"#,
            #"{"op":"list","view":"v","where":{"a":1}}"#,
            #"{"op":"list","collection":"Task","sort":["a"]}"#,
            #"{"op":"list","view":"v","order":"desc"}"#,
            #"{"op":"list","view":"v","include":["a"]}"#,
            #"{"op":"list","view":"v","minSeq":1}"#,
            #"{"op":"count","view":"v","limit":20}"#,
            #"{"op":"count","view":"v","offset":0}"#,
            #"{"op":"count","view":"v","after":"\#(cursor)"}"#,
            #"{"op":"count","collection":"Task","where":{"a":1}}"#,
            #"{"op":"count","ref":{"$ref":"T/k"},"from":"A.b"}"#,
            #"{"op":"count","view":"v","collection":"T"}"#,
            #"{"op":"count"}"#,
            #"{"op":"count","collection":"Task","id":"k1"}"#,
            #"{"op":"get","collection":"Task","id":"k1","limit":1}"#,
            #"{"op":"get","collection":"Task","id":"k1","explain":true}"#,
            #"{"op":"get","view":"v","id":"k1"}"#,
            #"{"op":"gets","collection":"Task","id":"k1"}"#,
            #"{"op":"get","collection":"1Task","id":"k1"}"#,
            #"{"op":"get","collection":"Task","id":"k 1"}"#,
            #"{"op":"get","collection":"Task","id":""}"#,
            #"{"op":"get","collection":"Task","id":"\#(String(repeating: "k", count: 129))"}"#,
            #"{"op":"get","collection":"Task","id":"k1"} x"#,
            #"{"op":"get","collection":"Task","id":"k1"},"#,
            #"{"op":"get","collection":"Task","id":"k1",}"#,
            #"{"op":"get","collection":"Task","id":"k1""#,
            #"{"op":"get","collection":"Task","id":"k1}"#,
            #"{"op":"get","collection":"Task","id":7}"#,
            #"{"op":"get" "collection":"Task","id":"k1"}"#,
            #"{"op""get","collection":"Task","id":"k1"}"#,
            #"{}"#,
            #"["op","get"]"#,
            "",
            "{\"op\":\"get\",\"collection\":\"Task\",\"id\":\"k\u{7F}\"}",
            "{\"op\":\"get\",\"collection\":\"Task\",\"id\":\"k\u{1}\"}",
            // A tag string cut short by a control character that is also JSON's space: once taken for
            // the number 0 with the text `"g` (found by the request-decoder fuzz target).
            "{\"tag\":\"g\t,\"op\":\"get\",\"collection\":\"Task\",\"id\":\"k1\"}",
            "{\"op\":\"get\",\"collection\":\"Task\",\"id\":\"k1\",\"tag\":\"7\r}",
        ] {
            let result = check(line)
            #expect(!result.fast, "taken: \(line)")
            #expect(result.same, "\(line): general \(result.general), decode \(result.decoded)")
        }
    }

    /// The shortcut scans strings eight bytes at a time while eight remain, then byte by byte: every
    /// kind of byte that ends a string or rules it out, at every place of strings up to 24 bytes, in
    /// a value, a key and a tag, with the line ending anywhere after it, decodes as in general.
    @Test func everyByteThatEndsAStringEndsItAtEveryPlace() {
        // A printable byte, a space, `~`, then what ends a plain string or leaves the line to the
        // general decoder: a backslash (escapes), control bytes, DEL and the bytes of a non-ASCII letter.
        let kinds: [[UInt8]] = [
            [0x61], [0x20], [0x7E], [0x5C, 0x6E], [0x5C, 0x22], [0x01], [0x1F], [0x09], [0x7F], Array("é".utf8), [0xFF],
        ]
        var lines = 0
        var fast = 0
        for length in 0...24 {
            for place in 0...length {
                for kind in kinds {
                    var text = Array(repeating: UInt8(ascii: "k"), count: length)
                    if place < length { text.replaceSubrange(place..<(place + 1), with: kind) }
                    for form in 0..<3 {
                        var line: [UInt8]
                        switch form {
                        case 0:
                            line = Array(#"{"op":"get","collection":"Task","id":""#.utf8) + text + Array(#""}"#.utf8)
                        case 1:
                            line =
                                Array(#"{"op":"get",""#.utf8) + text + Array(#"":1,"collection":"Task","id":"k"}"#.utf8)
                        default:
                            line =
                                Array(#"{"op":"get","collection":"Task","id":"k","tag":""#.utf8) + text
                                + Array(#""}"#.utf8)
                        }
                        // The whole line, then cut after the string's text (no closing quote) and after its quote.
                        let textEnd = line.count - (form == 1 ? #"":1,"collection":"Task","id":"k"}"#.utf8.count : 2)
                        for cut in [line.count, textEnd, textEnd + 1] {
                            let bytes = Array(line[..<cut])
                            let (taken, general, decoded) = bytes.withUnsafeBytes { buffer in
                                (
                                    RequestDecoder.plainRequest(buffer) != nil,
                                    outcome(RequestDecoder.decodeInGeneral(buffer)),
                                    outcome(RequestDecoder.decode(buffer))
                                )
                            }
                            lines += 1
                            if taken { fast += 1 }
                            #expect(general == decoded, "\(bytes): general \(general), decode \(decoded)")
                        }
                    }
                }
            }
        }
        #expect(fast > 300, "the shortcut took \(fast) of \(lines) lines")
    }

    /// The compact get our clients send (tag first, after `op`, last or none) is matched by its fixed
    /// pieces: with every kind of tag, good and bad names, cut at every byte and with bytes after it,
    /// it decodes as in general, and the good ones take the shortcut.
    @Test func compactGetsDecodeAsInGeneralWhereverTheTagIs() {
        // The first five are tags the shortcut reads; the others it leaves to the general decoder.
        let tags = [
            "7", "0", "999999999999999999", #""t 1""#, #""""#, "1.5", "-1", "01", "1e3", #""x\"y""#, "null",
            "1234567890123456789",
        ]
        let plainTags = Set(tags.prefix(5))
        let names = [
            ("Task", "k1", true), ("T_2", "a-b.c:d_9", true), ("1Task", "k1", false), ("Task", "k 1", false),
            ("Task", "", false),
        ]
        var taken = 0
        for (collection, id, valid) in names {
            let body = #""collection":"\#(collection)","id":"\#(id)""#
            // Each line, and whether the shortcut must take it whole.
            var lines = [(#"{"op":"get",\#(body)}"#, valid)]
            for tag in tags {
                for line in [
                    #"{"tag":\#(tag),"op":"get",\#(body)}"#, #"{"op":"get","tag":\#(tag),\#(body)}"#,
                    #"{"op":"get",\#(body),"tag":\#(tag)}"#,
                ] {
                    lines.append((line, valid && plainTags.contains(tag)))
                }
            }
            // Two tags, a space, another key, a byte after the end: the general scan's or the general decoder's.
            for line in [
                #"{"tag":1,"op":"get","tag":2,\#(body)}"#, #"{"op":"get","tag":1,\#(body),"tag":2}"#,
                #"{"op":"get", \#(body)}"#,
                #"{"op":"get",\#(body),"include":["a"]}"#, #"{"op":"get",\#(body)} "#, #"{"op":"get",\#(body)}}"#,
            ] {
                lines.append((line, false))
            }
            for (line, mustTake) in lines {
                let bytes = Array(line.utf8)
                for cut in 0...bytes.count {
                    let (fast, general, decoded) = bytes[..<cut].withUnsafeBytes { buffer in
                        (
                            RequestDecoder.plainRequest(buffer) != nil, outcome(RequestDecoder.decodeInGeneral(buffer)),
                            outcome(RequestDecoder.decode(buffer))
                        )
                    }
                    #expect(
                        general == decoded,
                        "\(String(decoding: bytes[..<cut], as: UTF8.self)): general \(general), decode \(decoded)")
                    if cut == bytes.count, fast { taken += 1 }
                    if cut == bytes.count, mustTake { #expect(fast, "not taken: \(line)") }
                }
            }
        }
        #expect(taken >= 2 * (1 + 3 * 5), "the shortcut took \(taken) lines")
    }

    /// Lines made of the pieces the shortcut looks at, shuffled, spaced and mangled at random: both
    /// decoders give the same request or the same error for each.
    @Test func randomLinesDecodeTheSameEitherWay() {
        var random = SystemRandomNumberGenerator()
        let values = [
            #""get""#, #""list""#, #""Task""#, #""k1""#, #""a:b.c-d_e""#, "7", "0", "07", "1.5", "-3", "null", "true",
            #""""#,
            #""x\"y""#, #""é""#, "[]", "{}", "123456789012345678", "1234567890123456789", "9999999999999999999",
            "999999999999999999", #""1Task""#, #""k 1""#,
            "20", "1000", "1001", "false", "tru", #""byRank""#, "\"\(cursor)\"", #""AAAA""#,
        ]
        let keys = [
            "op", "collection", "id", "tag", "minSeq", "include", "Op", "ïd", "", "view", "limit", "offset", "after",
            "explain", "where", "order",
        ]
        let spaces = ["", " ", "  ", "\t", "\r", "\n"]
        var fast = 0
        var fastPages = 0
        for _ in 0..<20_000 {
            var members: [String] = []
            switch Int.random(in: 0..<3, using: &random) {
            case 0:
                members = [
                    #""op":"get""#, #""collection":"Task""#, #""id":"k\#(Int.random(in: 0..<100, using: &random))""#,
                ]
            case 1:
                members = [
                    Bool.random(using: &random) ? #""op":"list""# : #""op":"count""#,
                    Bool.random(using: &random) ? #""view":"byRank""# : #""collection":"Task""#,
                ]
                if Bool.random(using: &random) {
                    members.append(#""limit":\#(Int.random(in: 0...1001, using: &random))"#)
                }
                switch Int.random(in: 0..<3, using: &random) {
                case 0: members.append(#""offset":\#(Int.random(in: 0...1_000_000, using: &random))"#)
                case 1: members.append(#""after":"\#(cursor)""#)
                default: break
                }
                if Bool.random(using: &random) { members.append(#""explain":\#(Bool.random(using: &random))"#) }
            default: break
            }
            if !members.isEmpty, Bool.random(using: &random) {
                members.append(#""tag":\#(values.randomElement(using: &random)!)"#)
            }
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                members.append("\"\(keys.randomElement(using: &random)!)\":\(values.randomElement(using: &random)!)")
            }
            members.shuffle(using: &random)
            var line = spaces.randomElement(using: &random)! + "{"
            for (index, member) in members.enumerated() {
                if index > 0 { line += spaces.randomElement(using: &random)! + "," }
                line +=
                    spaces.randomElement(using: &random)!
                    + member.replacingOccurrences(of: ":", with: spaces.randomElement(using: &random)! + ":")
            }
            line += spaces.randomElement(using: &random)! + "}" + spaces.randomElement(using: &random)!
            if Int.random(in: 0..<20, using: &random) == 0 { line.removeLast() }
            let result = check(line)
            if result.fast { fast += 1 }
            if result.fast, result.decoded.hasPrefix("list") || result.decoded.hasPrefix("count") { fastPages += 1 }
            #expect(result.same, "\(line): general \(result.general), decode \(result.decoded)")
        }
        #expect(fast > 1_000, "the shortcut took \(fast) of 20,000 lines")
        #expect(fastPages > 500, "the shortcut took \(fastPages) pages and counts of 20,000 lines")
    }
}
