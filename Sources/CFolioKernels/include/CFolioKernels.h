#ifndef CFOLIOKERNELS_H
#define CFOLIOKERNELS_H

// Byte kernels of the pure layers (FolioJSON, FolioModel): pure computation, no I/O. Each does the
// bulk of its job with AVX2 where the CPU has it and answers how far it got; the Swift caller does
// the rest (the tail, the exact error offset) with its own portable loop, so the answers never
// depend on which path ran. Where AVX2 is missing, each answers 0.

#include <stddef.h>
#include <stdint.h>

/// How many leading bytes of `bytes` need no look inside a JSON string: none is `"`, `\`, a control
/// character (< 0x20) or a byte of multi-byte UTF-8 (>= 0x80). A multiple of 32, or 0.
size_t folio_json_plain_prefix(const uint8_t *bytes, size_t count);

/// How many leading bytes of `bytes` need no escape in a JSON string: none is `"`, `\` or a control
/// character (< 0x20); bytes >= 0x80 pass. A multiple of 32, or 0.
size_t folio_json_clean_prefix(const uint8_t *bytes, size_t count);

/// Decodes whole blocks of 32 base64 characters (standard alphabet, no padding inside) from the
/// start of `text`, 24 bytes each, into `out`, stopping before the first block that holds a
/// character outside the alphabet and before the last 16 characters (the caller decodes those, and
/// the padding). `out` has room for the whole decoding of `count` characters (count / 4 * 3); it may
/// be `text` itself (each block is read before its bytes are written, and they never land past it).
/// Answers the characters consumed (a multiple of 32); the bytes written are 3/4 of that.
size_t folio_base64_decode_prefix(const uint8_t *text, size_t count, uint8_t *out);

/// Encodes whole blocks of 24 bytes from the start of `bytes`, 32 characters each, into `out`
/// (room for the whole encoding), leaving at least 4 bytes for the caller. Answers the bytes
/// consumed (a multiple of 24); the characters written are 4/3 of that.
size_t folio_base64_encode_prefix(const uint8_t *bytes, size_t count, uint8_t *out);

#endif
