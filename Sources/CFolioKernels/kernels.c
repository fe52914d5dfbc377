// The AVX2 kernels declared in CFolioKernels.h. The base64 ones follow Wojciech Muła and Daniel
// Lemire's vectorized algorithm as aklomp/base64 implements it for AVX2 (lib/arch/avx2): a range
// check and a translation by nibble lookups, then multiply-adds that pack 4 × 6 bits into 3 bytes
// (decoding), or shuffles and multiplies that spread 3 bytes over 4 × 6 bits (encoding).

#include "CFolioKernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

static int has_avx2(void) {
    static int known = -1;
    int value = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (value < 0) {
        value = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&known, value, __ATOMIC_RELAXED);
    }
    return value;
}

// The bytes before the first block of 32 holding `"`, `\`, a control character, or (when `high` is
// set) a byte >= 0x80.
__attribute__((target("avx2"))) static size_t json_prefix(const uint8_t *bytes, size_t count, int high) {
    const __m256i quote = _mm256_set1_epi8('"');
    const __m256i backslash = _mm256_set1_epi8('\\');
    const __m256i space = _mm256_set1_epi8(0x20);
    const __m256i control = _mm256_set1_epi8(0x1F);
    size_t index = 0;
    while (index + 32 <= count) {
        __m256i chunk = _mm256_loadu_si256((const __m256i *)(bytes + index));
        __m256i special = _mm256_or_si256(_mm256_cmpeq_epi8(chunk, quote), _mm256_cmpeq_epi8(chunk, backslash));
        // Signed, 0x80...0xFF are negative, so below 0x20 too; unsigned, only control characters are.
        __m256i low = high ? _mm256_cmpgt_epi8(space, chunk) : _mm256_cmpeq_epi8(_mm256_min_epu8(chunk, control), chunk);
        if (!_mm256_testz_si256(_mm256_or_si256(special, low), _mm256_set1_epi8((char)0xFF))) break;
        index += 32;
    }
    return index;
}

__attribute__((target("avx2"))) static size_t decode_avx2(const uint8_t *text, size_t count, uint8_t *out) {
    const __m256i lut_lo = _mm256_setr_epi8(
        0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A,
        0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A);
    const __m256i lut_hi = _mm256_setr_epi8(
        0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
        0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10);
    const __m256i lut_roll = _mm256_setr_epi8(
        0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i mask_2F = _mm256_set1_epi8(0x2F);
    const __m256i pack_bytes = _mm256_setr_epi8(
        2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1,
        2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1);
    const __m256i pack_lanes = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, -1, -1);
    size_t index = 0;
    size_t written = 0;
    // Each block stores 32 bytes of which 24 count: the 16 or more characters left after it keep
    // the store inside `out` (they decode to 12 bytes or more), and hold the last group.
    while (count - index >= 32 + 16) {
        __m256i str = _mm256_loadu_si256((const __m256i *)(text + index));
        const __m256i hi_nibbles = _mm256_and_si256(_mm256_srli_epi32(str, 4), mask_2F);
        const __m256i lo_nibbles = _mm256_and_si256(str, mask_2F);
        const __m256i hi = _mm256_shuffle_epi8(lut_hi, hi_nibbles);
        const __m256i lo = _mm256_shuffle_epi8(lut_lo, lo_nibbles);
        if (!_mm256_testz_si256(lo, hi)) break;
        const __m256i eq_2F = _mm256_cmpeq_epi8(str, mask_2F);
        const __m256i roll = _mm256_shuffle_epi8(lut_roll, _mm256_add_epi8(eq_2F, hi_nibbles));
        str = _mm256_add_epi8(str, roll);
        const __m256i merged = _mm256_maddubs_epi16(str, _mm256_set1_epi32(0x01400140));
        __m256i packed = _mm256_madd_epi16(merged, _mm256_set1_epi32(0x00011000));
        packed = _mm256_shuffle_epi8(packed, pack_bytes);
        packed = _mm256_permutevar8x32_epi32(packed, pack_lanes);
        _mm256_storeu_si256((__m256i *)(out + written), packed);
        index += 32;
        written += 24;
    }
    return index;
}

__attribute__((target("avx2"))) static size_t encode_avx2(const uint8_t *bytes, size_t count, uint8_t *out) {
    const __m256i spread = _mm256_set_epi8(
        10, 11, 9, 10, 7, 8, 6, 7, 4, 5, 3, 4, 1, 2, 0, 1,
        14, 15, 13, 14, 11, 12, 10, 11, 8, 9, 7, 8, 5, 6, 4, 5);
    const __m256i lut = _mm256_setr_epi8(
        65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0,
        65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0);
    // Blocks of 24 bytes, each loaded as 32 from 4 bytes before it (the first from its start, moved
    // up 4 bytes), so that each 128-bit lane holds its 12 bytes at offset 4: at least 4 bytes stay
    // after the last block, so that its load ends inside `bytes`.
    if (count < 32) return 0;
    size_t rounds = (count - 4) / 24;
    size_t index = 0;
    size_t written = 0;
    for (size_t round = 0; round < rounds; round++) {
        __m256i source;
        if (round == 0) {
            source = _mm256_loadu_si256((const __m256i *)bytes);
            source = _mm256_permutevar8x32_epi32(source, _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6));
        } else {
            source = _mm256_loadu_si256((const __m256i *)(bytes + index - 4));
        }
        const __m256i in = _mm256_shuffle_epi8(source, spread);
        const __m256i t0 = _mm256_and_si256(in, _mm256_set1_epi32(0x0FC0FC00));
        const __m256i t1 = _mm256_mulhi_epu16(t0, _mm256_set1_epi32(0x04000040));
        const __m256i t2 = _mm256_and_si256(in, _mm256_set1_epi32(0x003F03F0));
        const __m256i t3 = _mm256_mullo_epi16(t2, _mm256_set1_epi32(0x01000010));
        const __m256i sextets = _mm256_or_si256(t1, t3);
        // 0...25 'A'..., 26...51 'a'..., 52...61 '0'..., 62 '+', 63 '/': an offset per range.
        __m256i indices = _mm256_subs_epu8(sextets, _mm256_set1_epi8(51));
        indices = _mm256_sub_epi8(indices, _mm256_cmpgt_epi8(sextets, _mm256_set1_epi8(25)));
        const __m256i text = _mm256_add_epi8(sextets, _mm256_shuffle_epi8(lut, indices));
        _mm256_storeu_si256((__m256i *)(out + written), text);
        index += 24;
        written += 32;
    }
    return index;
}

size_t folio_json_plain_prefix(const uint8_t *bytes, size_t count) {
    return has_avx2() ? json_prefix(bytes, count, 1) : 0;
}

size_t folio_json_clean_prefix(const uint8_t *bytes, size_t count) {
    return has_avx2() ? json_prefix(bytes, count, 0) : 0;
}

size_t folio_base64_decode_prefix(const uint8_t *text, size_t count, uint8_t *out) {
    return has_avx2() ? decode_avx2(text, count, out) : 0;
}

size_t folio_base64_encode_prefix(const uint8_t *bytes, size_t count, uint8_t *out) {
    return has_avx2() ? encode_avx2(bytes, count, out) : 0;
}

#else

size_t folio_json_plain_prefix(const uint8_t *bytes, size_t count) { (void)bytes; (void)count; return 0; }
size_t folio_json_clean_prefix(const uint8_t *bytes, size_t count) { (void)bytes; (void)count; return 0; }
size_t folio_base64_decode_prefix(const uint8_t *text, size_t count, uint8_t *out) { (void)text; (void)count; (void)out; return 0; }
size_t folio_base64_encode_prefix(const uint8_t *bytes, size_t count, uint8_t *out) { (void)bytes; (void)count; (void)out; return 0; }

#endif
