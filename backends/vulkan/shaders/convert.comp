#version 450
// Type conversion of rows: copy (dst row r = src row r) and set_rows (dst row ids[r] = src row r,
// the KV cache writes). SRC_<T> / DST_<T> pick the types (convert.variants): F32, F16, Q8_0.
//
// A workgroup converts a chunk of up to 256 elements of one row. Rows of F16 and Q8_0 need not
// start on a 4-byte boundary (a Q8_0 block is 34 bytes), and 8/16-bit storage is optional, so
// the chunk's bytes are assembled as words in shared memory and stored whole; the (at most two)
// words shared with a neighbouring chunk are merged with atomics touching only our bytes.
//
// Q8_0 follows quant/ref_legacy.cpp (from_float_q8_0): d = amax / 127 stored as F16, q =
// round-half-away(x / d). ref: ggml-common.h block_q8_0.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
const uint kChunk = 256;  // elements per workgroup (8 Q8_0 blocks)

layout(binding = 0, std430) readonly buffer Src { uint src[]; };
layout(binding = 1, std430) buffer Dst { uint dst[]; };
layout(binding = 2, std430) readonly buffer Ids { int ids[]; };

// Byte offsets relative to the bound ranges.
layout(push_constant) uniform Params {
    uint ne0;
    uint n_rows;
    uint src_offset;
    uint src_stride;
    uint dst_offset;
    uint dst_stride;
    uint has_ids;  // set_rows: destination row = ids[ids_offset + r]
    uint chunks_per_row;
    uint ids_offset;  // elements
} p;

shared float vals[kChunk];
shared uint words[kChunk + 2];  // the chunk's output bytes (<= 1024) plus two edge words
shared float block_d[kChunk / 32];

uint read_u16(uint byte_offset) {
    uint w = src[byte_offset >> 2];
    return (byte_offset & 2u) != 0 ? (w >> 16) : (w & 0xffffu);
}

uint read_u8(uint byte_offset) { return (src[byte_offset >> 2] >> ((byte_offset & 3u) * 8u)) & 0xffu; }

float load(uint row_byte, uint i) {
#if defined(SRC_F32)
    return uintBitsToFloat(src[(row_byte >> 2) + i]);
#elif defined(SRC_F16)
    return unpackHalf2x16(read_u16(row_byte + 2u * i)).x;
#elif defined(SRC_Q8_0)
    uint block = row_byte + (i / 32u) * 34u;
    float d = unpackHalf2x16(read_u16(block)).x;
    int q = int(read_u8(block + 2u + i % 32u) << 24) >> 24;  // sign-extend
    return float(q) * d;
#else
#error "convert.comp: define SRC_F32, SRC_F16 or SRC_Q8_0"
#endif
}

// Puts `nbytes` bytes of `value` (little-endian) at chunk byte `b` (relative to word 0's start).
void put_bytes(uint b, uint value, uint nbytes) {
    for (uint k = 0; k < nbytes; ++k) {
        uint bb = b + k;
        atomicOr(words[bb >> 2], ((value >> (8u * k)) & 0xffu) << (8u * (bb & 3u)));
    }
}

// std::round: halves away from zero.
float round_half_away(float v) {
    float t = trunc(v);
    if (abs(v - t) >= 0.5) t += sign(v);
    return t;
}

void main() {
    uint g = group_index();
    if (g >= p.n_rows * p.chunks_per_row) return;
    uint r = g / p.chunks_per_row;
    uint chunk = g - r * p.chunks_per_row;
    uint first = chunk * kChunk;
    uint n = min(kChunk, p.ne0 - first);
    uint t = gl_LocalInvocationID.x;

    uint dst_row = p.has_ids != 0 ? uint(ids[p.ids_offset + r]) : r;
    uint src_row_byte = p.src_offset + r * p.src_stride;
#if defined(DST_F32)
    uint out_begin = first * 4u;
    uint out_end = (first + n) * 4u;
#elif defined(DST_F16)
    uint out_begin = first * 2u;
    uint out_end = (first + n) * 2u;
#elif defined(DST_Q8_0)
    uint out_begin = (first / 32u) * 34u;
    uint out_end = ((first + n) / 32u) * 34u;
#else
#error "convert.comp: define DST_F32, DST_F16 or DST_Q8_0"
#endif
    uint b0 = p.dst_offset + dst_row * p.dst_stride + out_begin;  // first byte we write
    uint b1 = b0 + (out_end - out_begin);                            // one past the last
    uint w0 = b0 >> 2;
    uint shift = b0 & 3u;  // our byte b0 sits at byte `shift` of words[0]

    if (t < kChunk + 2) words[t] = 0u;
    if (t < kChunk + 2 - gl_WorkGroupSize.x) words[gl_WorkGroupSize.x + t] = 0u;
    if (t < n) vals[t] = load(src_row_byte, first + t);
    barrier();

#if defined(DST_F32)
    if (t < n) put_bytes(shift + 4u * t, floatBitsToUint(vals[t]), 4u);
#elif defined(DST_F16)
    if (t < n) put_bytes(shift + 2u * t, packHalf2x16(vec2(round_to_f16(vals[t]), 0.0)) & 0xffffu, 2u);
#else
    if (t < n / 32u) {
        float amax = 0.0;
        for (uint j = 0; j < 32u; ++j) amax = max(amax, abs(vals[t * 32u + j]));
        float d = round_to_f16(amax / 127.0);  // stored as F16
        block_d[t] = amax / 127.0;
        put_bytes(shift + 34u * t, packHalf2x16(vec2(d, 0.0)) & 0xffffu, 2u);
    }
    barrier();
    if (t < n) {
        float d = block_d[t / 32u];
        float id = d != 0.0 ? 1.0 / d : 0.0;
        int q = int(round_half_away(vals[t] * id));
        put_bytes(shift + 34u * (t / 32u) + 2u + t % 32u, uint(q) & 0xffu, 1u);
    }
#endif
    barrier();

    uint n_words = (shift + (b1 - b0) + 3u) >> 2;
    for (uint k = t; k < n_words; k += gl_WorkGroupSize.x) {
        // Bytes of word k that are ours: [lo, hi) in byte positions of the word.
        uint lo = k == 0u ? shift : 0u;
        uint end_in_word = shift + (b1 - b0) - 4u * k;
        uint hi = min(4u, end_in_word);
        if (lo == 0u && hi == 4u) {
            dst[w0 + k] = words[k];
        } else {
            uint mask = (hi == 4u ? 0xffffffffu : ((1u << (8u * hi)) - 1u)) & ~((1u << (8u * lo)) - 1u);
            atomicAnd(dst[w0 + k], ~mask);
            atomicOr(dst[w0 + k], words[k] & mask);
        }
    }
}
