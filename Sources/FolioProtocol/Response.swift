import FolioJSON

/// Writes response lines: `{"tag":...,"ok":true,"result":...}\n` or
/// `{"tag":...,"ok":false,"error":{"code":...,"message":...}}\n`; `tag` only when the request had one.
public enum Response {
    /// `seq`: a write's last event, answered beside its result.
    public static func appendSuccess(
        tag: Tag?, seq: UInt64? = nil, to bytes: inout [UInt8], result: (inout JSONWriter) throws -> Void
    ) rethrows {
        var writer = JSONWriter(capacity: 0)
        swap(&writer.bytes, &bytes)
        defer { swap(&writer.bytes, &bytes) }
        let start = writer.bytes.count
        writeSuccessHead(tag: tag, seq: seq, to: &writer)
        do {
            try result(&writer)
        } catch {
            writer.bytes.removeSubrange(start...)
            throw error
        }
        writer.bytes.append(UInt8(ascii: "}"))
        writer.bytes.append(0x0A)
    }

    /// `{"tag":…,"ok":true,"seq":N,"result":` as one append when the tag is short, as tags are: an
    /// append of a few bytes costs about a hundred instructions, a get a few thousand.
    private static func writeSuccessHead(tag: Tag?, seq: UInt64?, to writer: inout JSONWriter) {
        let tagBytes = tag?.text.count ?? 0
        guard tagBytes <= 64 else {
            writeTag(tag, to: &writer)
            if let seq {
                writer.writeRaw("\"ok\":true,\"seq\":")
                writer.write(seq)
                writer.writeRaw(",\"result\":")
            } else {
                writer.writeRaw("\"ok\":true,\"result\":")
            }
            return
        }
        writer.appendChunk(capacity: 128) { chunk in
            chunk.put(UInt8(ascii: "{"))
            if let tag {
                chunk.put("\"tag\":")
                tag.text.withUnsafeBytes { chunk.put($0) }
                chunk.put(UInt8(ascii: ","))
            }
            if let seq {
                chunk.put("\"ok\":true,\"seq\":")
                chunk.put(decimal: seq)
                chunk.put(",\"result\":")
            } else {
                chunk.put("\"ok\":true,\"result\":")
            }
        }
    }

    public static func appendFailure(tag: Tag?, error: ProtocolError, to bytes: inout [UInt8]) {
        var writer = JSONWriter(capacity: 0)
        swap(&writer.bytes, &bytes)
        defer { swap(&writer.bytes, &bytes) }
        writeTag(tag, to: &writer)
        writer.writeRaw("\"ok\":false,\"error\":")
        writeError(error, to: &writer)
        writer.writeRaw("}\n")
    }

    /// `{"code":…,"message":…, …details}`
    public static func writeError(_ error: ProtocolError, to writer: inout JSONWriter) {
        writer.writeRaw("{\"code\":")
        writer.write(error.code.rawValue)
        writer.writeRaw(",\"message\":")
        writer.write(error.message)
        for detail in error.details {
            writer.bytes.append(UInt8(ascii: ","))
            writer.write(detail.key)
            writer.bytes.append(UInt8(ascii: ":"))
            writer.writeRaw(detail.value.utf8)
        }
        writer.bytes.append(UInt8(ascii: "}"))
    }

    /// A line of a running watch: `{"tag":...,"event":<event>}\n`.
    public static func appendWatchEvent(tag: Tag?, event: some Collection<UInt8>, to bytes: inout [UInt8]) {
        var writer = JSONWriter(capacity: 0)
        swap(&writer.bytes, &bytes)
        defer { swap(&writer.bytes, &bytes) }
        writeTag(tag, to: &writer)
        writer.writeRaw("\"event\":")
        writer.writeRaw(event)
        writer.writeRaw("}\n")
    }

    private static func writeTag(_ tag: Tag?, to writer: inout JSONWriter) {
        writer.bytes.append(UInt8(ascii: "{"))
        if let tag {
            writer.writeRaw("\"tag\":")
            writer.writeRaw(tag.text)
            writer.bytes.append(UInt8(ascii: ","))
        }
    }
}
