// The per-step index arguments of a forward pass (backends/backend.h): token ids, positions,
// KV-cache rows, the rows that want logits and the attention arguments, built on the host once
// per step (StepWords) and uploaded to each device in one upload (StepArgs), where the ops read
// them as I32 tensors. Each field starts on a 256-byte boundary, which every Vulkan device's
// storage-buffer offset alignment divides, so a device binds each one directly.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "engine/kv_cache.h"

namespace deskside::engine {

struct BatchToken;

// Word offsets of the fields in StepWords::words.
struct StepLayout {
    int64_t n = 0;  // tokens in the step
    int64_t m = 0;  // tokens that want logits
    int64_t tokens = 0, positions = 0, rows = 0;  // n words each
    int64_t wanted = 0, wanted_positions = 0;     // m words each: batch index, position
    // Attention arguments of the wanted rows, then of all rows; both reach the end of the words,
    // where the block tables (one per sequence, shared by both) are.
    int64_t wanted_queries = 0, queries = 0;
    int64_t total = 0;
};

// The host side: built once per step, the same for every device of a split model.
struct StepWords {
    // Fills the words for `batch`, whose sequences have their positions reserved in `cache`.
    void build(std::span<const BatchToken> batch, const KvCache& cache);

    StepLayout layout;
    std::vector<int32_t> words;
};

// The device side: one I32 buffer on one backend, grown when a step needs more (which happens
// before the step's ops, so the buffer never changes while a step runs).
class StepArgs {
   public:
    explicit StepArgs(backends::Backend& backend) : backend_(backend) {}
    void upload(const StepWords& host);

    // Views of the last upload (StepLayout's fields).
    backends::Tensor tokens, positions, rows, wanted, wanted_positions, queries, wanted_queries;

   private:
    backends::Backend& backend_;
    std::unique_ptr<backends::Buffer> buffer_;
};

}  // namespace deskside::engine
