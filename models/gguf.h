// GGUF: llama.cpp's model file format, deskside's native one.
//
// GgufFile reads a v2 or v3 file through mmap (or parses a buffer the caller owns, for the
// fuzzer). It trusts nothing in the file: every count, length, type id, dimension and offset is
// checked, with overflow-safe arithmetic, before it is used, and a violation throws GgufError
// naming the file, the field and the byte offset. Tensor data is never copied: TensorInfo::data
// points into the mapping, which lives as long as the GgufFile.
// ref: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "models/mapped_file.h"
#include "quant/types.h"

namespace deskside::models {

class GgufError : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
};

// Thrown by GgufFile::parse_header when the prefix it was given ends inside the header: at least
// `needed` bytes from the start of the file are required to get further.
class GgufNeedMore : public GgufError {
   public:
    GgufNeedMore(const std::string& what, uint64_t needed) : GgufError(what), needed(needed) {}
    uint64_t needed;
};

// Metadata value types, with their on-disk ids.
enum class GgufType : uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};

std::string_view gguf_type_name(GgufType t);

struct GgufValue;

struct GgufArray {
    GgufType elem_type = GgufType::U8;
    std::vector<GgufValue> items;
};

// One metadata value. Integers keep their signedness in the variant; `type` keeps the exact
// on-disk type so a written file reproduces it.
struct GgufValue {
    GgufType type = GgufType::U8;
    std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> value;

    static GgufValue u32(uint32_t v) { return {GgufType::U32, uint64_t{v}}; }
    static GgufValue i32(int32_t v) { return {GgufType::I32, int64_t{v}}; }
    static GgufValue u64(uint64_t v) { return {GgufType::U64, v}; }
    static GgufValue f32(float v) { return {GgufType::F32, double{v}}; }
    static GgufValue boolean(bool v) { return {GgufType::BOOL, v}; }
    static GgufValue string(std::string v) { return {GgufType::STRING, std::move(v)}; }
    static GgufValue array(GgufType elem, std::vector<GgufValue> items) {
        return {GgufType::ARRAY, GgufArray{elem, std::move(items)}};
    }

    bool is_integer() const;
    bool is_number() const { return is_integer() || type == GgufType::F32 || type == GgufType::F64; }
    // Conversions throw GgufError when the value does not hold that kind of thing.
    int64_t as_int() const;
    double as_float() const;
    bool as_bool() const;
    const std::string& as_string() const;
    const GgufArray& as_array() const;

    // A short human rendering: numbers, quoted strings, "[512 strings]" for long arrays.
    std::string summary(size_t max_items = 8) const;
};

struct GgufTensorInfo {
    std::string name;
    quant::TypeId type = quant::TypeId::F32;
    std::vector<int64_t> shape;  // ggml order: shape[0] is the contiguous (row) dimension
    uint64_t offset = 0;         // relative to the data section
    size_t n_bytes = 0;
    const uint8_t* data = nullptr;  // view into the file

    int64_t n_elements() const;
};

class GgufFile {
   public:
    static constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
    static constexpr size_t kDefaultAlignment = 32;
    static constexpr size_t kMaxDims = 4;

    // Maps and parses `path`. Throws GgufError.
    static GgufFile open(const std::string& path);
    // Parses a buffer the caller keeps alive; `name` is used in error messages.
    static GgufFile parse(std::span<const uint8_t> bytes, std::string name);
    // Parses the header and tensor infos of a file of `file_size` bytes from its first bytes
    // `prefix` (a remote file read by ranges), with the same checks as parse(): counts and tensor
    // placement are bounded by `file_size`. Throws GgufNeedMore when `prefix` ends inside the
    // header. The result holds no tensor data (GgufTensorInfo::data is null) and no view of `prefix`.
    static GgufFile parse_header(std::span<const uint8_t> prefix, uint64_t file_size, std::string name);

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    size_t alignment() const { return alignment_; }
    size_t data_offset() const { return data_offset_; }
    size_t file_size() const { return file_size_; }

    // Metadata in file order.
    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
    const GgufValue* find(std::string_view key) const;
    // Typed look-ups that throw a GgufError naming the key when it is present with a wrong type.
    std::string get_string(std::string_view key, std::string fallback = {}) const;
    int64_t get_int(std::string_view key, int64_t fallback) const;
    double get_float(std::string_view key, double fallback) const;
    bool get_bool(std::string_view key, bool fallback) const;

    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    const GgufTensorInfo* find_tensor(std::string_view name) const;

   private:
    std::string path_;
    std::shared_ptr<MappedFile> mapping_;
    std::span<const uint8_t> bytes_;
    size_t file_size_ = 0;
    uint32_t version_ = 0;
    size_t alignment_ = kDefaultAlignment;
    size_t data_offset_ = 0;
    std::vector<std::pair<std::string, GgufValue>> metadata_;
    std::map<std::string, size_t, std::less<>> metadata_index_;
    std::vector<GgufTensorInfo> tensors_;
    std::map<std::string, size_t, std::less<>> tensor_index_;

    friend class GgufParser;
};

}  // namespace deskside::models
