// Writes GGUF v3 files: metadata in the order given, tensor infos, then tensor data, each tensor
// aligned to general.alignment (32 unless the metadata says otherwise). Files it writes load in
// llama.cpp and round-trip bit-exactly through GgufFile.
//
// Two ways to give the data: with each tensor (add_tensor with a span, then write()), or streamed,
// for files larger than memory (`deskside quantize`): declare every tensor by type and shape first,
// then begin() writes the header and the returned Stream takes each tensor's bytes in turn.
// ref: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "models/gguf.h"

namespace deskside::models {

class GgufWriter {
   public:
    // Adds or replaces a metadata entry (replacing keeps its original position).
    void set(const std::string& key, GgufValue value);
    // Removes an entry if present (remove, then set, moves a key to the end, as gguf_set_val does).
    void remove(const std::string& key);
    // Adds a tensor; `data` must stay valid until write() and hold exactly the tensor's bytes.
    void add_tensor(const std::string& name, quant::TypeId type, std::vector<int64_t> shape,
                    std::span<const uint8_t> data);
    // Declares a tensor whose bytes a Stream will take; write() and to_bytes() refuse such tensors.
    void add_tensor(const std::string& name, quant::TypeId type, std::vector<int64_t> shape);

    // Writes a file to a temporary name beside `path`: the header first, then each tensor's bytes,
    // in the order the tensors were added, through append(); commit() renames it into place. A Stream
    // destroyed before commit() (an exception on the way) removes the temporary file. The writer
    // must outlive it and not change meanwhile.
    class Stream {
       public:
        Stream(Stream&& other) noexcept;
        Stream& operator=(Stream&&) = delete;
        ~Stream();
        // The next tensor's bytes, exactly its size; throws GgufError otherwise or on a write error.
        void append(std::span<const uint8_t> data);
        // After the last tensor. Throws GgufError when a tensor is missing or the rename fails.
        void commit();

       private:
        friend class GgufWriter;
        Stream(const GgufWriter& writer, std::string path);
        void fail(const std::string& what);
        const GgufWriter* writer_;
        std::string path_, tmp_;
        std::FILE* file_ = nullptr;
        size_t next_ = 0;
    };
    // Throws GgufError when the file cannot be created.
    Stream begin(const std::string& path) const;

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
        bool has_data;
    };
    std::vector<std::pair<std::string, GgufValue>> metadata_;
    std::vector<PendingTensor> tensors_;

    size_t alignment() const;
    size_t padded(size_t n) const;
    void check_new_tensor(const std::string& name, quant::TypeId type,
                          const std::vector<int64_t>& shape) const;
    size_t tensor_bytes(const PendingTensor& t) const;
    std::vector<uint8_t> header_bytes() const;
};

}  // namespace deskside::models
