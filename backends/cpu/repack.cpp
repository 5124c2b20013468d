// Conversion between the GGUF block layout and the x8 layouts of repack.h, and the choice of
// layout per weight matrix. Plain C++: runs once per tensor at load (and per row for get_rows).
#include "backends/cpu/repack.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "backends/cpu/dot_kernels.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace deskside::backends::cpu {

namespace {

constexpr size_t kQ40GroupBlock = kRepackRows * sizeof(quant::BlockQ4_0);  // 144
constexpr size_t kQ80GroupBlock = kRepackRows * sizeof(quant::BlockQ8_0);  // 272
constexpr size_t kQ4KGroupBlock = kRepackRows * sizeof(quant::BlockQ4_K);  // 1152
constexpr size_t kQ6KGroupBlock = kRepackRows * sizeof(quant::BlockQ6_K);  // 1680
static_assert(kQ40GroupBlock == 144 && kQ80GroupBlock == 272 && kQ4KGroupBlock == 1152 && kQ6KGroupBlock == 1680);

// Byte offsets inside a Q4_Kx8 group block (repack.h).
constexpr size_t kQ4KDmin = 16;
constexpr size_t kQ4KScales = 32;
constexpr size_t kQ4KMins = 80;
constexpr size_t kQ4KQuants = 128;
// Byte offsets inside a Q6_Kx8 group block (repack.h): part j's 4 high-bit chunks start at
// kQ6KParts + j * kQ6KPart, its 8 low-nibble chunks 128 bytes later.
constexpr size_t kQ6KScales = 16;
constexpr size_t kQ6KParts = 144;
constexpr size_t kQ6KPart = 384;

// DESKSIDE_CPU_REPACK: unset or "1" repacks, "0" keeps the GGUF layout.
bool repack_enabled() {
    static const bool enabled = [] {
        const char* env = std::getenv("DESKSIDE_CPU_REPACK");
        if (env == nullptr || *env == '\0') return true;
        const std::string_view v(env);
        if (v == "1") return true;
        if (v == "0") return false;
        throw std::runtime_error("DESKSIDE_CPU_REPACK=" + std::string(v) + ": expected 0 or 1");
    }();
    return enabled;
}

// 64 6-bit values (index 8 s + r) <-> the 48-byte encoding of repack.h.
void encode_six_bit(const uint8_t* values, uint8_t* out) {
    for (int i = 0; i < 32; ++i) out[i] = static_cast<uint8_t>((values[i] & 0xF) | ((values[i + 32] & 0xF) << 4));
    for (int j = 0; j < 16; ++j) {
        uint8_t b = 0;
        for (int q = 0; q < 4; ++q) b |= static_cast<uint8_t>(((values[j + 16 * q] >> 4) & 3) << (2 * q));
        out[32 + j] = b;
    }
}

uint8_t decode_six_bit(const uint8_t* in, int i) {
    const int low = i < 32 ? in[i] & 0xF : in[i - 32] >> 4;
    const int high = (in[32 + i % 16] >> (2 * (i / 16))) & 3;
    return static_cast<uint8_t>(low | (high << 4));
}

// Q4_K's own 12-byte packing of 8 scales and 8 mins (the inverse of quant::k4_scale_min).
void pack_k4_scales(const uint8_t* sc, const uint8_t* m, uint8_t* packed) {
    for (int j = 0; j < 4; ++j) {
        packed[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        packed[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        packed[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
}

void repack_q4_k_group(const uint8_t* src, size_t row_bytes, int64_t n_blocks, uint8_t* dst) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        uint8_t* out = dst + b * kQ4KGroupBlock;
        uint8_t scales[64], mins[64];
        for (int r = 0; r < kRepackRows; ++r) {
            const auto* blk = reinterpret_cast<const quant::BlockQ4_K*>(src + r * row_bytes) + b;
            std::memcpy(out + 2 * r, &blk->d, 2);
            std::memcpy(out + kQ4KDmin + 2 * r, &blk->dmin, 2);
            for (int s = 0; s < 8; ++s) quant::k4_scale_min(s, blk->scales, &scales[8 * s + r], &mins[8 * s + r]);
            for (int c = 0; c < 32; ++c) std::memcpy(out + kQ4KQuants + 32 * c + 4 * r, blk->qs + 4 * c, 4);
        }
        encode_six_bit(scales, out + kQ4KScales);
        encode_six_bit(mins, out + kQ4KMins);
    }
}

void unpack_q4_k_row(const uint8_t* group, int r, int64_t n_blocks, uint8_t* out) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* in = group + b * kQ4KGroupBlock;
        auto* blk = reinterpret_cast<quant::BlockQ4_K*>(out) + b;
        std::memcpy(&blk->d, in + 2 * r, 2);
        std::memcpy(&blk->dmin, in + kQ4KDmin + 2 * r, 2);
        uint8_t sc[8], m[8];
        for (int s = 0; s < 8; ++s) {
            sc[s] = decode_six_bit(in + kQ4KScales, 8 * s + r);
            m[s] = decode_six_bit(in + kQ4KMins, 8 * s + r);
        }
        pack_k4_scales(sc, m, blk->scales);
        for (int c = 0; c < 32; ++c) std::memcpy(blk->qs + 4 * c, in + kQ4KQuants + 32 * c + 4 * r, 4);
    }
}

// Q4_0x8 and Q8_0x8 (repack.h): per block, the 8 rows' fp16 d, then chunks of 32 bytes holding 4
// quant bytes of each row (4 chunks for Q4_0's 16 quant bytes, 8 for Q8_0's 32).
template <typename Block>
constexpr int kLegacyChunks = sizeof(Block::qs) / 4;

template <typename Block>
void repack_legacy_group(const uint8_t* src, size_t row_bytes, int64_t n_blocks, uint8_t* dst) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        uint8_t* out = dst + b * kRepackRows * sizeof(Block);
        for (int r = 0; r < kRepackRows; ++r) {
            const auto* blk = reinterpret_cast<const Block*>(src + r * row_bytes) + b;
            std::memcpy(out + 2 * r, &blk->d, 2);
            for (int t = 0; t < kLegacyChunks<Block>; ++t) std::memcpy(out + 16 + 32 * t + 4 * r, blk->qs + 4 * t, 4);
        }
    }
}

template <typename Block>
void unpack_legacy_row(const uint8_t* group, int r, int64_t n_blocks, uint8_t* out) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* in = group + b * kRepackRows * sizeof(Block);
        auto* blk = reinterpret_cast<Block*>(out) + b;
        std::memcpy(&blk->d, in + 2 * r, 2);
        for (int t = 0; t < kLegacyChunks<Block>; ++t) std::memcpy(blk->qs + 4 * t, in + 16 + 32 * t + 4 * r, 4);
    }
}

// Q6_K's own packing (quant/ref_q6_q8_k.cpp): in each 128-element half h, for l < 32,
// ql[64h + l] holds elements 128h + l (low nibble) and 128h + 64 + l (high), ql[64h + 32 + l]
// elements 128h + 32 + l and 128h + 96 + l, and bits 2k..2k+1 of qh[32h + l] are bits 4-5 of
// element 128h + 32k + l. These convert the 256 levels (0..63) of a block to and from it.
void q6k_levels(const quant::BlockQ6_K& b, uint8_t* levels) {
    for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t ql0 = b.ql[64 * h + l], ql1 = b.ql[64 * h + 32 + l], qh = b.qh[32 * h + l];
            uint8_t* v = levels + 128 * h + l;
            v[0] = static_cast<uint8_t>((ql0 & 0xF) | ((qh & 3) << 4));
            v[32] = static_cast<uint8_t>((ql1 & 0xF) | (((qh >> 2) & 3) << 4));
            v[64] = static_cast<uint8_t>((ql0 >> 4) | (((qh >> 4) & 3) << 4));
            v[96] = static_cast<uint8_t>((ql1 >> 4) | (((qh >> 6) & 3) << 4));
        }
    }
}

void set_q6k_levels(const uint8_t* levels, quant::BlockQ6_K* b) {
    for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t* v = levels + 128 * h + l;
            b->ql[64 * h + l] = static_cast<uint8_t>((v[0] & 0xF) | ((v[64] & 0xF) << 4));
            b->ql[64 * h + 32 + l] = static_cast<uint8_t>((v[32] & 0xF) | ((v[96] & 0xF) << 4));
            b->qh[32 * h + l] = static_cast<uint8_t>((v[0] >> 4) | ((v[32] >> 4) << 2) | ((v[64] >> 4) << 4) | ((v[96] >> 4) << 6));
        }
    }
}

// Row r's 256 levels to and from their places in a Q6_Kx8 group block (repack.h): for part j,
// low chunk t and high chunk u, byte 4r + i.
void put_q6kx8_levels(const uint8_t* levels, int r, uint8_t* group_block) {
    for (int j = 0; j < 4; ++j) {
        const uint8_t* v = levels + 64 * j;
        uint8_t* part = group_block + kQ6KParts + j * kQ6KPart;
        for (int i = 0; i < 4; ++i) {
            for (int t = 0; t < 8; ++t)
                part[128 + 32 * t + 4 * r + i] = static_cast<uint8_t>((v[4 * t + i] & 0xF) | ((v[32 + 4 * t + i] & 0xF) << 4));
            for (int u = 0; u < 4; ++u) {
                uint8_t bits = 0;
                for (int s = 0; s < 4; ++s) bits = static_cast<uint8_t>(bits | ((v[16 * s + 4 * u + i] >> 4) << (2 * s)));
                part[32 * u + 4 * r + i] = bits;
            }
        }
    }
}

void get_q6kx8_levels(const uint8_t* group_block, int r, uint8_t* levels) {
    for (int j = 0; j < 4; ++j) {
        uint8_t* v = levels + 64 * j;
        const uint8_t* part = group_block + kQ6KParts + j * kQ6KPart;
        for (int i = 0; i < 4; ++i) {
            for (int t = 0; t < 8; ++t) {
                const uint8_t low = part[128 + 32 * t + 4 * r + i];
                v[4 * t + i] = low & 0xF;
                v[32 + 4 * t + i] = low >> 4;
            }
            for (int u = 0; u < 4; ++u) {
                const uint8_t bits = part[32 * u + 4 * r + i];
                for (int s = 0; s < 4; ++s) v[16 * s + 4 * u + i] = static_cast<uint8_t>(v[16 * s + 4 * u + i] | (((bits >> (2 * s)) & 3) << 4));
            }
        }
    }
}

void repack_q6_k_group(const uint8_t* src, size_t row_bytes, int64_t n_blocks, uint8_t* dst) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        uint8_t* out = dst + b * kQ6KGroupBlock;
        for (int r = 0; r < kRepackRows; ++r) {
            const auto* blk = reinterpret_cast<const quant::BlockQ6_K*>(src + r * row_bytes) + b;
            std::memcpy(out + 2 * r, &blk->d, 2);
            for (int g = 0; g < 16; ++g) out[kQ6KScales + 8 * g + r] = static_cast<uint8_t>(blk->scales[g]);
            uint8_t levels[quant::kQKK];
            q6k_levels(*blk, levels);
            put_q6kx8_levels(levels, r, out);
        }
    }
}

void unpack_q6_k_row(const uint8_t* group, int r, int64_t n_blocks, uint8_t* out) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* in = group + b * kQ6KGroupBlock;
        auto* blk = reinterpret_cast<quant::BlockQ6_K*>(out) + b;
        std::memcpy(&blk->d, in + 2 * r, 2);
        for (int g = 0; g < 16; ++g) blk->scales[g] = static_cast<int8_t>(in[kQ6KScales + 8 * g + r]);
        uint8_t levels[quant::kQKK];
        get_q6kx8_levels(in, r, levels);
        set_q6k_levels(levels, blk);
    }
}

quant::TypeId type_of(WeightLayout layout) {
    switch (layout) {
        case WeightLayout::Q4_0x8: return quant::TypeId::Q4_0;
        case WeightLayout::Q8_0x8: return quant::TypeId::Q8_0;
        case WeightLayout::Q4_Kx8: return quant::TypeId::Q4_K;
        case WeightLayout::Q6_Kx8: return quant::TypeId::Q6_K;
        case WeightLayout::Plain: break;
    }
    throw std::invalid_argument("cpu repack: the plain layout has no x8 form");
}

}  // namespace

WeightLayout x8_layout_of(quant::TypeId type) {
    switch (type) {
        case quant::TypeId::Q4_0: return WeightLayout::Q4_0x8;
        case quant::TypeId::Q8_0: return WeightLayout::Q8_0x8;
        case quant::TypeId::Q4_K: return WeightLayout::Q4_Kx8;
        case quant::TypeId::Q6_K: return WeightLayout::Q6_Kx8;
        default: return WeightLayout::Plain;
    }
}

WeightLayout weight_layout_for(quant::TypeId type, int64_t ne1) {
    if (ne1 < kRepackRows || selected_isa() == CpuIsa::Scalar || !repack_enabled()) return WeightLayout::Plain;
    return x8_layout_of(type);
}

void repack_matrix(WeightLayout layout, const uint8_t* src, int64_t ne0, int64_t ne1, uint8_t* dst) {
    const quant::TypeId type = type_of(layout);
    const int64_t block = quant::type_info(type).block_size;
    if (ne0 % block != 0)
        throw std::invalid_argument("cpu repack: row length " + std::to_string(ne0) + " is not a multiple of " +
                                    std::to_string(block));
    const size_t row_bytes = quant::row_bytes(type, ne0);
    const int64_t n_blocks = ne0 / block;
    const int64_t n_il = interleaved_rows(ne1);
    for (int64_t r0 = 0; r0 < n_il; r0 += kRepackRows) {
        const uint8_t* in = src + r0 * row_bytes;
        uint8_t* out = dst + r0 * row_bytes;
        switch (layout) {
            case WeightLayout::Q4_0x8: repack_legacy_group<quant::BlockQ4_0>(in, row_bytes, n_blocks, out); break;
            case WeightLayout::Q8_0x8: repack_legacy_group<quant::BlockQ8_0>(in, row_bytes, n_blocks, out); break;
            case WeightLayout::Q4_Kx8: repack_q4_k_group(in, row_bytes, n_blocks, out); break;
            case WeightLayout::Q6_Kx8: repack_q6_k_group(in, row_bytes, n_blocks, out); break;
            case WeightLayout::Plain: break;  // type_of refused it
        }
    }
    std::memcpy(dst + n_il * row_bytes, src + n_il * row_bytes, (ne1 - n_il) * row_bytes);
}

void unpack_row(WeightLayout layout, const uint8_t* data, int64_t ne0, int64_t ne1, int64_t row, uint8_t* out) {
    const quant::TypeId type = type_of(layout);
    const size_t row_bytes = quant::row_bytes(type, ne0);
    if (row >= interleaved_rows(ne1)) {
        std::memcpy(out, data + row * row_bytes, row_bytes);
        return;
    }
    const int64_t n_blocks = ne0 / quant::type_info(type).block_size;
    const uint8_t* group = data + (row / kRepackRows) * kRepackRows * row_bytes;
    const int r = static_cast<int>(row % kRepackRows);
    switch (layout) {
        case WeightLayout::Q4_0x8: unpack_legacy_row<quant::BlockQ4_0>(group, r, n_blocks, out); break;
        case WeightLayout::Q8_0x8: unpack_legacy_row<quant::BlockQ8_0>(group, r, n_blocks, out); break;
        case WeightLayout::Q4_Kx8: unpack_q4_k_row(group, r, n_blocks, out); break;
        case WeightLayout::Q6_Kx8: unpack_q6_k_row(group, r, n_blocks, out); break;
        case WeightLayout::Plain: break;  // type_of refused it
    }
}

RepackedGemmFn repacked_gemm(WeightLayout layout) {
    switch (layout) {
        case WeightLayout::Q4_0x8: return gemm_q4_0x8_avx2;
        case WeightLayout::Q8_0x8: return gemm_q8_0x8_avx2;
        case WeightLayout::Q4_Kx8: return gemm_q4_kx8_avx2;
        case WeightLayout::Q6_Kx8: return gemm_q6_kx8_avx2;
        case WeightLayout::Plain: break;
    }
    return nullptr;
}

}  // namespace deskside::backends::cpu
