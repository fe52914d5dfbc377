import CCrypto
import Glibc

/// The head of the tamper-evident chain: SHA-256 over the previous event's chain hash and this
/// event's canonical bytes. The first event chains from 32 zero bytes.
public struct ChainHash: Equatable, Sendable, CustomStringConvertible {
    public static let size = 32
    public static let genesis = ChainHash(bytes: [UInt8](repeating: 0, count: size))

    public let bytes: [UInt8]

    public init(bytes: [UInt8]) {
        precondition(bytes.count == Self.size)
        self.bytes = bytes
    }

    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == Self.size * 2 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        self.bytes = bytes
    }

    /// The hash of the event with `canonicalBytes` that follows this one.
    public func next(_ canonicalBytes: UnsafeRawBufferPointer) -> ChainHash {
        // The thread's own context, initialized again: a hasher made and freed per event cost four
        // allocations (the object, the context, the provider's state, the digest's copy).
        let context = chainHashContext()
        EVP_DigestInit_ex(context, sha256Algorithm ?? EVP_sha256(), nil)
        bytes.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        if canonicalBytes.count > 0 { EVP_DigestUpdate(context, canonicalBytes.baseAddress, canonicalBytes.count) }
        return ChainHash(
            bytes: [UInt8](unsafeUninitializedCapacity: Self.size) { digest, initialized in
                var length: UInt32 = 0
                _ = EVP_DigestFinal_ex(context, digest.baseAddress, &length)
                initialized = Self.size
            })
    }

    public func next(_ canonicalBytes: [UInt8]) -> ChainHash {
        canonicalBytes.withUnsafeBytes { next($0) }
    }

    public var hex: String { hexString(bytes) }
    public var description: String { hex }
}

/// Whether `a` and `b` hold the same bytes, compared as one block (`==` on two arrays of bytes
/// compares them one at a time: a few instructions a byte of every event a cluster node checks).
public func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    a.count == b.count && a.withUnsafeBytes { a in b.withUnsafeBytes { b in sameBytes(a, b) } }
}

/// The same, for bytes where LMDB or a key buffer holds them.
public func sameBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    guard let first = a.baseAddress, let second = b.baseAddress else { return true }
    return memcmp(first, second, a.count) == 0
}

public func hexString(_ bytes: some Sequence<UInt8>) -> String {
    var text: [UInt8] = []
    Array(bytes).withUnsafeBytes { appendHexDigits(of: $0, to: &text) }
    return String(decoding: text, as: UTF8.self)
}

private let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

/// Appends the lowercase hex of `bytes` to `text`, written in place (an event's hash in every
/// exported event: no `String` per event).
func appendHexDigits(of bytes: UnsafeRawBufferPointer, to text: inout [UInt8]) {
    let start = text.count
    text.append(contentsOf: repeatElement(0, count: bytes.count * 2))
    hexDigits.withUnsafeBufferPointer { digits in
        text.withUnsafeMutableBufferPointer { out in
            for (index, byte) in bytes.enumerated() {
                out[start + 2 * index] = digits[Int(byte >> 4)]
                out[start + 2 * index + 1] = digits[Int(byte & 15)]
            }
        }
    }
}

private func hexValue(_ digit: UInt8) -> UInt8? {
    switch digit {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
    default: return nil
    }
}

/// SHA-256 as libcrypto's provider gives it, fetched once: `EVP_sha256()` makes every
/// `EVP_DigestInit_ex` fetch the algorithm again by name (OpenSSL 3), about 3,000 instructions, more
/// than hashing a small event costs. nil only if the provider lacks it; then the legacy path.
/// A fetched `EVP_MD` is immutable and may be shared by threads (OpenSSL 3, "Algorithm fetching").
nonisolated(unsafe) private let sha256Algorithm: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

/// Each thread's EVP context for `ChainHash.next`, made on its first hash and freed when the
/// thread ends (an EVP context may be initialized again after `EVP_DigestFinal_ex`, and OpenSSL 3
/// keeps the provider's state when the digest is the same).
private let chainHashContextKey: pthread_key_t = {
    var key = pthread_key_t()
    let created = pthread_key_create(&key) { context in EVP_MD_CTX_free(context.map(OpaquePointer.init)) }
    precondition(created == 0, "pthread_key_create: \(created)")
    return key
}()

private func chainHashContext() -> OpaquePointer {
    if let context = pthread_getspecific(chainHashContextKey) { return OpaquePointer(context) }
    guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new failed: out of memory") }
    pthread_setspecific(chainHashContextKey, UnsafeRawPointer(context))
    return context
}

/// Streaming SHA-256 from libcrypto's EVP interface.
public final class SHA256Hasher {
    private let context: OpaquePointer

    public init() {
        context = EVP_MD_CTX_new()
        EVP_DigestInit_ex(context, sha256Algorithm ?? EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        if bytes.count > 0 { EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) }
    }

    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of everything passed to `update`; call once.
    public func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: ChainHash.size)
        var length: UInt32 = 0
        digest.withUnsafeMutableBufferPointer { _ = EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
        return digest
    }
}
