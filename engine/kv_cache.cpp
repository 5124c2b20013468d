#include "engine/kv_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace deskside::engine {

quant::TypeId parse_cache_type(std::string_view name) {
    if (name == "f16") return quant::TypeId::F16;
    if (name == "q8_0") return quant::TypeId::Q8_0;
    if (name == "f32") return quant::TypeId::F32;
    throw std::invalid_argument("unsupported KV cache type '" + std::string(name) + "' (supported: f16, q8_0, f32)");
}

namespace {

int64_t cache_rows(const KvCacheConfig& config) {
    return (config.n_positions + config.block_size - 1) / config.block_size * config.block_size;
}

}  // namespace

uint64_t KvCache::layer_bytes(const models::Hparams& hp, const KvCacheConfig& config) {
    if (config.block_size <= 0) return 0;
    const size_t row = quant::row_bytes(config.type_k, hp.n_head_kv * hp.head_dim) +
                       quant::row_bytes(config.type_v, hp.n_head_kv * hp.head_dim_v);
    return static_cast<uint64_t>(row) * static_cast<uint64_t>(cache_rows(config));
}

KvCache::KvCache(backends::Backend& backend, const models::Hparams& hp, const KvCacheConfig& config)
    : KvCache(std::vector<DeviceLayers>{{&backend, 0, hp.n_layer}}, hp, config) {}

KvCache::KvCache(std::span<const DeviceLayers> devices, const models::Hparams& hp, const KvCacheConfig& config)
    : block_size_(config.block_size) {
    if (block_size_ <= 0) throw std::invalid_argument("KV cache: block size must be positive");
    for (auto [type, dim, which] : {std::tuple{config.type_k, hp.head_dim, "K"}, std::tuple{config.type_v, hp.head_dim_v, "V"}}) {
        const quant::TypeInfo& ti = quant::type_info(type);
        if (dim % ti.block_size != 0)
            throw std::invalid_argument(std::string("KV cache: ") + which + " type " + std::string(ti.name) +
                                        " needs head sizes that are multiples of " + std::to_string(ti.block_size) +
                                        ", this model's is " + std::to_string(dim));
    }
    check_device_layers(devices, hp.n_layer);
    const int64_t n_rows = cache_rows(config);
    const int64_t n_blocks = n_rows / block_size_;
    const int64_t k_ne0 = hp.n_head_kv * hp.head_dim, v_ne0 = hp.n_head_kv * hp.head_dim_v;
    for (const DeviceLayers& d : devices) {
        for (int64_t il = d.layer_begin; il < d.layer_end; ++il) {
            if (d.remote()) {  // another host's layers: an empty view keeps layers_ indexed by layer
                layers_.emplace_back();
                layer_backends_.push_back(nullptr);
                continue;
            }
            backends::KvCacheView view;
            view.block_size = block_size_;
            buffers_.push_back(d.backend->alloc(quant::row_bytes(config.type_k, k_ne0) * n_rows));
            view.k = backends::make_tensor(buffers_.back().get(), 0, config.type_k, k_ne0, n_rows);
            buffers_.push_back(d.backend->alloc(quant::row_bytes(config.type_v, v_ne0) * n_rows));
            view.v = backends::make_tensor(buffers_.back().get(), 0, config.type_v, v_ne0, n_rows);
            layers_.push_back(view);
            layer_backends_.push_back(d.backend);
        }
    }
    ref_count_.assign(n_blocks, 0);
    // Hand out low block numbers first (free_ is used as a stack).
    for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

backends::KvCacheView KvCache::layer(int64_t il) const { return layers_[il]; }

int64_t KvCache::length(int32_t seq) const {
    auto it = seqs_.find(seq);
    return it == seqs_.end() ? 0 : it->second.length;
}

std::span<const int32_t> KvCache::blocks(int32_t seq) const {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) return {};
    return it->second.blocks;
}

int32_t KvCache::row(int32_t seq, int64_t pos) const {
    const Sequence& s = seqs_.at(seq);
    return static_cast<int32_t>(s.blocks[pos / block_size_] * block_size_ + pos % block_size_);
}

int32_t KvCache::take_block() {
    if (free_.empty())
        throw std::runtime_error("KV cache full: all " + std::to_string(ref_count_.size()) + " blocks of " +
                                 std::to_string(block_size_) + " positions are in use");
    const int32_t b = free_.back();
    free_.pop_back();
    ref_count_[b] = 1;
    return b;
}

void KvCache::release_block(int32_t b) {
    if (--ref_count_[b] == 0) free_.push_back(b);
}

void KvCache::copy_block(int32_t from, int32_t to) {
    for (size_t il = 0; il < layers_.size(); ++il) {
        if (!layer_backends_[il]) continue;  // copied by the host that holds the layer
        const backends::KvCacheView& l = layers_[il];
        backends::Backend& b = *layer_backends_[il];
        b.copy(l.k.rows(from * block_size_, block_size_), l.k.rows(to * block_size_, block_size_));
        b.copy(l.v.rows(from * block_size_, block_size_), l.v.rows(to * block_size_, block_size_));
    }
}

void KvCache::reserve(int32_t seq, int64_t n_pos) {
    Sequence& s = seqs_[seq];
    if (n_pos <= s.length) return;
    // The partly filled last block gets written; copy it first if another sequence shares it.
    const int64_t partial = s.length / block_size_;
    if (s.length % block_size_ != 0 && ref_count_[s.blocks[partial]] > 1) {
        const int32_t fresh = take_block();
        copy_block(s.blocks[partial], fresh);
        release_block(s.blocks[partial]);
        s.blocks[partial] = fresh;
    }
    const int64_t needed = (n_pos + block_size_ - 1) / block_size_;
    while (static_cast<int64_t>(s.blocks.size()) < needed) {
        try {
            s.blocks.push_back(take_block());
        } catch (...) {
            if (s.blocks.empty()) seqs_.erase(seq);
            throw;
        }
    }
    s.length = n_pos;
}

int64_t KvCache::blocks_needed(int32_t seq, int64_t n_pos) const {
    const auto it = seqs_.find(seq);
    if (it == seqs_.end()) return (n_pos + block_size_ - 1) / block_size_;
    const Sequence& s = it->second;
    if (n_pos <= s.length) return 0;
    const int64_t partial = s.length / block_size_;
    const bool copy = s.length % block_size_ != 0 && ref_count_[s.blocks[partial]] > 1;
    const int64_t grow = (n_pos + block_size_ - 1) / block_size_ - static_cast<int64_t>(s.blocks.size());
    return std::max<int64_t>(grow, 0) + (copy ? 1 : 0);
}

void KvCache::truncate(int32_t seq, int64_t n_pos) {
    auto it = seqs_.find(seq);
    if (it == seqs_.end()) return;
    Sequence& s = it->second;
    const int64_t keep = (n_pos + block_size_ - 1) / block_size_;
    while (static_cast<int64_t>(s.blocks.size()) > keep) {
        release_block(s.blocks.back());
        s.blocks.pop_back();
    }
    s.length = std::min(s.length, n_pos);
    if (s.length == 0) seqs_.erase(it);
}

void KvCache::fork(int32_t src, int32_t dst, int64_t n_pos) {
    if (src == dst) throw std::invalid_argument("KV cache fork: source and destination are the same sequence");
    truncate(dst, 0);
    if (n_pos > length(src))
        throw std::invalid_argument("KV cache fork: sequence " + std::to_string(src) + " has only " +
                                    std::to_string(length(src)) + " positions");
    if (n_pos == 0) return;
    const Sequence& s = seqs_.at(src);
    Sequence d;
    d.length = n_pos;
    d.blocks.assign(s.blocks.begin(), s.blocks.begin() + (n_pos + block_size_ - 1) / block_size_);
    for (int32_t b : d.blocks) ++ref_count_[b];
    seqs_[dst] = std::move(d);
}

}  // namespace deskside::engine
