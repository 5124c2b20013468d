// The KV cache: fixed-size blocks of positions shared by all sequences, with a block table per
// sequence (paged attention, ref: Kwon et al., "vLLM", arXiv:2309.06180).
//
// Position p of a sequence lives in cache row table[p / block_size] * block_size + p % block_size
// of every layer. Blocks are reference-counted so that fork() can share a prompt prefix between
// sequences without copying it; a block is written only by a sequence that holds it alone.
//
// In a model split across devices each layer's K and V live on the device that runs the layer,
// while the block tables are kept once here: a block number means the same rows on every device,
// so fork/truncate/reserve never talk to a device and a copied block is copied on each one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "engine/device_layers.h"
#include "models/model.h"
#include "quant/types.h"

namespace deskside::engine {

struct KvCacheConfig {
    quant::TypeId type_k = quant::TypeId::F16;
    quant::TypeId type_v = quant::TypeId::F16;
    int64_t block_size = 16;
    int64_t n_positions = 4096;  // capacity over all sequences, rounded up to whole blocks
};

// "f16", "q8_0" or "f32" (as llama.cpp's --cache-type-k names them); throws
// std::invalid_argument for anything else.
quant::TypeId parse_cache_type(std::string_view name);

class KvCache {
   public:
    // Throws std::invalid_argument when a cache type cannot hold a head (block size mismatch).
    KvCache(backends::Backend& backend, const models::Hparams& hp, const KvCacheConfig& config);
    // Layers [layer_begin, layer_end) of each entry on its backend (check_device_layers holds).
    KvCache(std::span<const DeviceLayers> devices, const models::Hparams& hp, const KvCacheConfig& config);

    // Bytes the K and V of one layer take for `config` (what the constructor allocates per layer).
    static uint64_t layer_bytes(const models::Hparams& hp, const KvCacheConfig& config);

    backends::KvCacheView layer(int64_t il) const;
    int64_t block_size() const { return block_size_; }
    int64_t n_free_blocks() const { return static_cast<int64_t>(free_.size()); }
    // Positions the cache holds over all sequences; every position of a sequence is below it.
    int64_t n_positions() const { return static_cast<int64_t>(ref_count_.size()) * block_size_; }

    // Positions cached for `seq` so far (0 for an unknown sequence).
    int64_t length(int32_t seq) const;
    // Makes positions [0, n_pos) of `seq` writable; throws std::runtime_error when the cache is
    // full. A block shared with another sequence that would be written is copied first.
    void reserve(int32_t seq, int64_t n_pos);
    // Blocks reserve(seq, n_pos) takes from the free list: new ones past the sequence's table,
    // and a copy of the partly filled last block when another sequence shares it.
    int64_t blocks_needed(int32_t seq, int64_t n_pos) const;
    std::span<const int32_t> blocks(int32_t seq) const;
    // The cache row of position `pos` of `seq` (reserved).
    int32_t row(int32_t seq, int64_t pos) const;

    // Drops positions >= n_pos of `seq` (all of them for n_pos = 0, which forgets the sequence).
    void truncate(int32_t seq, int64_t n_pos);
    // `dst` starts as a copy of the first n_pos positions of `src`, sharing its blocks.
    void fork(int32_t src, int32_t dst, int64_t n_pos);

   private:
    struct Sequence {
        std::vector<int32_t> blocks;
        int64_t length = 0;
    };
    int32_t take_block();
    void release_block(int32_t b);
    void copy_block(int32_t from, int32_t to);

    int64_t block_size_;
    std::vector<backends::Backend*> layer_backends_;  // the device of each layer (nullptr: another host's)
    std::vector<std::unique_ptr<backends::Buffer>> buffers_;  // K and V per layer
    std::vector<backends::KvCacheView> layers_;
    std::vector<int32_t> ref_count_;
    std::vector<int32_t> free_;
    std::map<int32_t, Sequence> seqs_;
};

}  // namespace deskside::engine
