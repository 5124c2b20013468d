// safetensors: Hugging Face's tensor file format.
//
// Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON (an object mapping
// tensor names to {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional
// "__metadata__" object of strings), then the data section; offsets are relative to its start.
// SafetensorsFile reads a file through mmap (or parses a buffer the caller owns) and trusts
// nothing in it: the header length, the JSON, every dtype, shape and offset are checked with
// overflow-safe arithmetic before use, and a violation throws SafetensorsError naming the file,
// the tensor or field, and the byte offset. Tensor data is never copied: SafetensorsTensor::data
// points into the mapping, which lives as long as the SafetensorsFile.
// ref: https://github.com/huggingface/safetensors (README, "Format")
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "models/mapped_file.h"

namespace deskside::models {

class SafetensorsError : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
};

// The element types the format defines. Files may hold any of them; which ones a loader accepts
// is the loader's decision (the checkpoint loader takes F32, F16 and BF16).
enum class SafetensorsDtype { BOOL, U8, I8, F8_E4M3, F8_E5M2, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64 };

std::string_view safetensors_dtype_name(SafetensorsDtype d);
size_t safetensors_dtype_bytes(SafetensorsDtype d);

struct SafetensorsTensor {
    std::string name;
    SafetensorsDtype dtype = SafetensorsDtype::F32;
    std::vector<int64_t> shape;  // as stored, row-major: shape.back() is the contiguous dimension
    uint64_t begin = 0;          // data_offsets, relative to the data section
    uint64_t end = 0;
    const uint8_t* data = nullptr;  // view into the file

    size_t n_bytes() const { return static_cast<size_t>(end - begin); }
};

class SafetensorsFile {
   public:
    // The reference implementation refuses larger headers; so do we, before parsing any JSON.
    static constexpr uint64_t kMaxHeaderBytes = 100u << 20;

    // Maps and parses `path`. Throws SafetensorsError.
    static SafetensorsFile open(const std::string& path);
    // Parses a buffer the caller keeps alive; `name` is used in error messages.
    static SafetensorsFile parse(std::span<const uint8_t> bytes, std::string name);

    const std::string& path() const { return path_; }
    size_t file_size() const { return bytes_.size(); }
    size_t data_offset() const { return data_offset_; }  // 8 + header length

    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    // Tensors in header order.
    const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
    const SafetensorsTensor* find(std::string_view name) const;

   private:
    std::string path_;
    std::shared_ptr<MappedFile> mapping_;
    std::span<const uint8_t> bytes_;
    size_t data_offset_ = 0;
    std::map<std::string, std::string> metadata_;
    std::vector<SafetensorsTensor> tensors_;
    std::map<std::string, size_t, std::less<>> index_;

    friend class SafetensorsParser;
};

}  // namespace deskside::models
