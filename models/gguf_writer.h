// Writes GGUF v3 files: metadata in the order given, tensor infos, then tensor data, each tensor
// aligned to general.alignment (32 unless the metadata says otherwise). `deskside quantize` writes
// through this; files it writes load in llama.cpp and round-trip bit-exactly through GgufFile.
// ref: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "models/gguf.h"

namespace deskside::models {

class GgufWriter {
   public:
    // Adds or replaces a metadata entry (replacing keeps its original position).
    void set(const std::string& key, GgufValue value);
    // Adds a tensor; `data` must stay valid until write() and hold exactly the tensor's bytes.
    void add_tensor(const std::string& name, quant::TypeId type, std::vector<int64_t> shape,
                    std::span<const uint8_t> data);

    // Writes the file (to a temporary name, then renamed into place). Throws GgufError.
    void write(const std::string& path) const;
    // The whole file as bytes (for tests and the fuzzer's seeds).
    std::vector<uint8_t> to_bytes() const;

   private:
    struct PendingTensor {
        std::string name;
        quant::TypeId type;
        std::vector<int64_t> shape;
        std::span<const uint8_t> data;
    };
    std::vector<std::pair<std::string, GgufValue>> metadata_;
    std::vector<PendingTensor> tensors_;

    size_t alignment() const;
    size_t padded(size_t n) const;
    std::vector<uint8_t> header_bytes() const;
};

}  // namespace deskside::models
