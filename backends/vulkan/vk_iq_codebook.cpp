// The codebooks of the low-bit i-quants on the device: shaders/iq_lowbit.glsl reads a type's grid
// and the sign table from one storage buffer, laid out as the words it indexes (a 64-bit grid
// entry i as words 2i and 2i + 1, low half first; a 32-bit entry as one word; then kIqSigns
// packed four bytes per word). The numbers are quant/iq_grids.h's, so the shaders cannot drift
// from the CPU's tables.
#include <array>
#include <cstring>
#include <vector>

#include "backends/vulkan/vk_backend.h"
#include "quant/iq_grids.h"

namespace deskside::backends::vulkan {
namespace {

template <typename Entry, size_t N>
void append(std::vector<uint32_t>& words, const std::array<Entry, N>& table) {
    const size_t at = words.size();
    words.resize(at + (N * sizeof(Entry) + 3) / 4);
    std::memcpy(words.data() + at, table.data(), N * sizeof(Entry));  // little-endian, as the shader reads
}

// The grid of `type` then the sign table; empty for a type without a codebook.
std::vector<uint32_t> codebook_words(quant::TypeId type) {
    using quant::TypeId;
    std::vector<uint32_t> words;
    switch (type) {
        case TypeId::IQ2_XXS: append(words, quant::kIq2xxsGrid); break;
        case TypeId::IQ2_XS: append(words, quant::kIq2xsGrid); break;
        case TypeId::IQ2_S: append(words, quant::kIq2sGrid); break;
        case TypeId::IQ3_XXS: append(words, quant::kIq3xxsGrid); break;
        case TypeId::IQ3_S: append(words, quant::kIq3sGrid); break;
        case TypeId::IQ1_S:
        case TypeId::IQ1_M: append(words, quant::kIq1sGrid); break;
        default: return words;
    }
    append(words, quant::kIqSigns);
    return words;
}

}  // namespace

std::optional<Binding> VulkanBackend::iq_codebook(quant::TypeId type) {
    Buffer* buffer = nullptr;
    for (const auto& [t, b] : iq_codebooks_) {
        if (t == type) buffer = b.get();
    }
    if (buffer == nullptr) {
        const std::vector<uint32_t> words = codebook_words(type);
        if (words.empty()) return std::nullopt;
        iq_codebooks_.emplace_back(type, alloc(words.size() * 4));
        buffer = iq_codebooks_.back().second.get();
        upload(*buffer, 0, words.data(), words.size() * 4);
    }
    // Bound whole (at most 16.5 KiB, far below the 128 MiB maxStorageBufferRange every Vulkan
    // device offers), so not held to a lower test limit meant for splitting tensors.
    const VulkanBuffer& vb = own(*buffer, "i-quant codebook");
    return Binding{vb.handle(), 0, vb.word_size(), 0, Access::Read};
}

}  // namespace deskside::backends::vulkan
