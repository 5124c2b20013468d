#include "models/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

namespace deskside::models {

std::string_view gguf_type_name(GgufType t) {
    switch (t) {
        case GgufType::U8: return "u8";
        case GgufType::I8: return "i8";
        case GgufType::U16: return "u16";
        case GgufType::I16: return "i16";
        case GgufType::U32: return "u32";
        case GgufType::I32: return "i32";
        case GgufType::F32: return "f32";
        case GgufType::BOOL: return "bool";
        case GgufType::STRING: return "string";
        case GgufType::ARRAY: return "array";
        case GgufType::U64: return "u64";
        case GgufType::I64: return "i64";
        case GgufType::F64: return "f64";
    }
    return "?";
}

namespace {

// Smallest on-disk size of one value of a type; used to bound array counts by the bytes left.
size_t min_value_bytes(GgufType t) {
    switch (t) {
        case GgufType::U8:
        case GgufType::I8:
        case GgufType::BOOL: return 1;
        case GgufType::U16:
        case GgufType::I16: return 2;
        case GgufType::U32:
        case GgufType::I32:
        case GgufType::F32: return 4;
        case GgufType::U64:
        case GgufType::I64:
        case GgufType::F64:
        case GgufType::STRING: return 8;  // the length prefix
        case GgufType::ARRAY: return 12;  // element type + count
    }
    return 1;
}

bool valid_type(uint32_t raw) { return raw <= static_cast<uint32_t>(GgufType::F64); }

constexpr int kMaxArrayDepth = 8;
constexpr size_t kMaxNameLength = 64 * 1024;

}  // namespace

bool GgufValue::is_integer() const {
    switch (type) {
        case GgufType::U8:
        case GgufType::I8:
        case GgufType::U16:
        case GgufType::I16:
        case GgufType::U32:
        case GgufType::I32:
        case GgufType::U64:
        case GgufType::I64: return true;
        default: return false;
    }
}

int64_t GgufValue::as_int() const {
    if (const auto* u = std::get_if<uint64_t>(&value)) {
        if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            throw GgufError("value " + std::to_string(*u) + " does not fit a signed 64-bit integer");
        return static_cast<int64_t>(*u);
    }
    if (const auto* i = std::get_if<int64_t>(&value)) return *i;
    throw GgufError(std::string("expected an integer, found ") + std::string(gguf_type_name(type)));
}

double GgufValue::as_float() const {
    if (const auto* d = std::get_if<double>(&value)) return *d;
    if (is_integer()) return static_cast<double>(as_int());
    throw GgufError(std::string("expected a number, found ") + std::string(gguf_type_name(type)));
}

bool GgufValue::as_bool() const {
    if (const auto* b = std::get_if<bool>(&value)) return *b;
    throw GgufError(std::string("expected a bool, found ") + std::string(gguf_type_name(type)));
}

const std::string& GgufValue::as_string() const {
    if (const auto* s = std::get_if<std::string>(&value)) return *s;
    throw GgufError(std::string("expected a string, found ") + std::string(gguf_type_name(type)));
}

const GgufArray& GgufValue::as_array() const {
    if (const auto* a = std::get_if<GgufArray>(&value)) return *a;
    throw GgufError(std::string("expected an array, found ") + std::string(gguf_type_name(type)));
}

std::string GgufValue::summary(size_t max_items) const {
    std::ostringstream os;
    if (const auto* u = std::get_if<uint64_t>(&value)) {
        os << *u;
    } else if (const auto* i = std::get_if<int64_t>(&value)) {
        os << *i;
    } else if (const auto* d = std::get_if<double>(&value)) {
        os << *d;
    } else if (const auto* b = std::get_if<bool>(&value)) {
        os << (*b ? "true" : "false");
    } else if (const auto* s = std::get_if<std::string>(&value)) {
        std::string shown = s->size() > 60 ? s->substr(0, 57) + "..." : *s;
        for (char& c : shown) {
            if (c == '\n') c = ' ';
        }
        os << '"' << shown << '"';
    } else {
        const GgufArray& a = std::get<GgufArray>(value);
        if (a.items.size() > max_items) {
            os << "[" << a.items.size() << " " << gguf_type_name(a.elem_type) << "]";
        } else {
            os << "[";
            for (size_t k = 0; k < a.items.size(); ++k) os << (k ? ", " : "") << a.items[k].summary(max_items);
            os << "]";
        }
    }
    return os.str();
}

int64_t GgufTensorInfo::n_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;  // overflow excluded when the file was parsed
    return n;
}

// Reads the header, metadata and tensor infos, checking each field before use. `field_` names
// what is being read so that every error says where it happened. `bytes_` may be only the first
// part of a file of `total_` bytes (parse_header): every bound is checked against the whole file,
// and reading past the part at hand throws GgufNeedMore instead of "truncated".
class GgufParser {
   public:
    GgufParser(std::span<const uint8_t> bytes, size_t total, const std::string& name)
        : bytes_(bytes), total_(total), name_(name) {}

    void parse(GgufFile& out) {
        field_ = "magic";
        const uint32_t magic = read_pod<uint32_t>();
        if (magic != GgufFile::kMagic) fail_at(0, "not a GGUF file (bad magic)");
        field_ = "version";
        out.version_ = read_pod<uint32_t>();
        if (out.version_ != 2 && out.version_ != 3)
            fail_at(4, "unsupported GGUF version " + std::to_string(out.version_) + " (deskside reads 2 and 3)");
        field_ = "tensor count";
        const uint64_t n_tensors = read_pod<uint64_t>();
        field_ = "metadata count";
        const uint64_t n_kv = read_pod<uint64_t>();
        // Each KV takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at least 8+4+4+8.
        if (n_kv > remaining() / 13) fail_at(16, "metadata count " + std::to_string(n_kv) + " exceeds what the file can hold");
        if (n_tensors > remaining() / 24) fail_at(8, "tensor count " + std::to_string(n_tensors) + " exceeds what the file can hold");

        for (uint64_t i = 0; i < n_kv; ++i) {
            field_ = "metadata key #" + std::to_string(i);
            std::string key = read_string(kMaxNameLength);
            if (key.empty()) fail("empty metadata key");
            field_ = "metadata key '" + key + "'";
            if (out.metadata_index_.count(key)) fail("duplicate metadata key");
            const size_t type_pos = pos_;
            const uint32_t raw_type = read_pod<uint32_t>();
            if (!valid_type(raw_type)) fail_at(type_pos, "invalid value type " + std::to_string(raw_type));
            GgufValue v = read_value(static_cast<GgufType>(raw_type), 0);
            out.metadata_index_.emplace(key, out.metadata_.size());
            out.metadata_.emplace_back(std::move(key), std::move(v));
        }

        if (const GgufValue* a = out.find("general.alignment")) {
            field_ = "metadata key 'general.alignment'";
            if (a->type != GgufType::U32) fail("must be u32, found " + std::string(gguf_type_name(a->type)));
            const int64_t align = a->as_int();
            if (align <= 0 || (align & (align - 1)) != 0) fail("must be a power of two, found " + std::to_string(align));
            out.alignment_ = static_cast<size_t>(align);
        }

        for (uint64_t i = 0; i < n_tensors; ++i) {
            field_ = "tensor #" + std::to_string(i);
            GgufTensorInfo t = read_tensor_info();
            if (out.tensor_index_.count(t.name)) fail("duplicate tensor name");
            out.tensor_index_.emplace(t.name, out.tensors_.size());
            out.tensors_.push_back(std::move(t));
        }

        field_ = "data section";
        const size_t header_end = pos_;
        size_t data_offset = header_end;
        if (n_tensors > 0) {
            data_offset = checked_add(header_end, (out.alignment_ - header_end % out.alignment_) % out.alignment_);
            if (data_offset > total_) fail_at(header_end, "file ends before the data section starts");
        }
        out.data_offset_ = data_offset;
        const size_t data_size = total_ - std::min(data_offset, total_);
        check_tensor_placement(out, data_size);
        if (bytes_.size() < total_) return;  // a header alone: no tensor data to point at
        for (GgufTensorInfo& t : out.tensors_) t.data = bytes_.data() + data_offset + t.offset;
    }

   private:
    std::span<const uint8_t> bytes_;
    size_t total_ = 0;
    const std::string& name_;
    size_t pos_ = 0;
    std::string field_;
    std::vector<size_t> tensor_info_pos_;

    [[noreturn]] void fail_at(size_t offset, const std::string& what) const {
        throw GgufError(name_ + ": " + field_ + " at byte offset " + std::to_string(offset) + ": " + what);
    }
    [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }

    size_t remaining() const { return total_ - pos_; }

    size_t checked_add(size_t a, size_t b) const {
        if (a > std::numeric_limits<size_t>::max() - b) fail("size arithmetic overflows");
        return a + b;
    }

    void need(size_t n) const {
        if (n > remaining())
            fail("file truncated: need " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left");
        at_hand(n);
    }

    // The next n bytes (inside the file) are in the prefix read so far, or GgufNeedMore.
    void at_hand(size_t n) const {
        if (n > bytes_.size() - pos_)
            throw GgufNeedMore(name_ + ": " + field_ + " at byte offset " + std::to_string(pos_) + ": header continues past the " +
                                   std::to_string(bytes_.size()) + " bytes read",
                               pos_ + n);
    }

    template <typename T>
    T read_pod() {
        need(sizeof(T));
        T v;
        std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    std::string read_string(size_t max_len) {
        const size_t at = pos_;
        const uint64_t len = read_pod<uint64_t>();
        if (len > remaining()) {
            fail_at(at, "string length " + std::to_string(len) + " runs past the end of the file (" +
                            std::to_string(remaining()) + " bytes left)");
        }
        if (len > max_len) fail_at(at, "string length " + std::to_string(len) + " exceeds the limit of " + std::to_string(max_len));
        at_hand(static_cast<size_t>(len));
        std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
        pos_ += static_cast<size_t>(len);
        return s;
    }

    GgufValue read_value(GgufType type, int depth) {
        GgufValue v;
        v.type = type;
        switch (type) {
            case GgufType::U8: v.value = uint64_t{read_pod<uint8_t>()}; break;
            case GgufType::I8: v.value = int64_t{read_pod<int8_t>()}; break;
            case GgufType::U16: v.value = uint64_t{read_pod<uint16_t>()}; break;
            case GgufType::I16: v.value = int64_t{read_pod<int16_t>()}; break;
            case GgufType::U32: v.value = uint64_t{read_pod<uint32_t>()}; break;
            case GgufType::I32: v.value = int64_t{read_pod<int32_t>()}; break;
            case GgufType::U64: v.value = read_pod<uint64_t>(); break;
            case GgufType::I64: v.value = read_pod<int64_t>(); break;
            case GgufType::F32: v.value = double{read_pod<float>()}; break;
            case GgufType::F64: v.value = read_pod<double>(); break;
            case GgufType::BOOL: {
                const size_t at = pos_;
                const uint8_t b = read_pod<uint8_t>();
                if (b > 1) fail_at(at, "bool value " + std::to_string(b) + " is neither 0 nor 1");
                v.value = b == 1;
                break;
            }
            case GgufType::STRING: v.value = read_string(std::numeric_limits<size_t>::max()); break;
            case GgufType::ARRAY: {
                if (depth >= kMaxArrayDepth) fail("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
                const size_t type_pos = pos_;
                const uint32_t raw = read_pod<uint32_t>();
                if (!valid_type(raw)) fail_at(type_pos, "invalid array element type " + std::to_string(raw));
                const auto elem = static_cast<GgufType>(raw);
                const size_t count_pos = pos_;
                const uint64_t n = read_pod<uint64_t>();
                if (n > remaining() / min_value_bytes(elem)) {
                    fail_at(count_pos, "array of " + std::to_string(n) + " " + std::string(gguf_type_name(elem)) +
                                           " runs past the end of the file");
                }
                GgufArray arr;
                arr.elem_type = elem;
                // Bounded by the bytes at hand, not the whole file's: a remote header's count is
                // only believed as far as its items have arrived.
                arr.items.reserve(std::min(static_cast<size_t>(n), (bytes_.size() - pos_) / min_value_bytes(elem)));
                for (uint64_t k = 0; k < n; ++k) arr.items.push_back(read_value(elem, depth + 1));
                v.value = std::move(arr);
                break;
            }
        }
        return v;
    }

    GgufTensorInfo read_tensor_info() {
        GgufTensorInfo t;
        const size_t start = pos_;
        t.name = read_string(kMaxNameLength);
        if (t.name.empty()) fail_at(start, "empty tensor name");
        field_ = "tensor '" + t.name + "'";
        const size_t dims_pos = pos_;
        const uint32_t n_dims = read_pod<uint32_t>();
        if (n_dims == 0 || n_dims > GgufFile::kMaxDims)
            fail_at(dims_pos, "rank " + std::to_string(n_dims) + " is outside 1.." + std::to_string(GgufFile::kMaxDims));
        int64_t n_elements = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            const size_t at = pos_;
            const uint64_t dim = read_pod<uint64_t>();
            if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                fail_at(at, "dimension " + std::to_string(d) + " is negative or too large");
            const auto sdim = static_cast<int64_t>(dim);
            if (sdim != 0 && n_elements > std::numeric_limits<int64_t>::max() / sdim)
                fail_at(at, "element count overflows");
            n_elements *= sdim;
            t.shape.push_back(sdim);
        }
        const size_t type_pos = pos_;
        const uint32_t raw_type = read_pod<uint32_t>();
        const auto info = quant::type_info(raw_type);
        if (!info) fail_at(type_pos, "unknown tensor type id " + std::to_string(raw_type));
        t.type = info->id;
        if (t.shape[0] % info->block_size != 0) {
            fail_at(dims_pos, "row length " + std::to_string(t.shape[0]) + " is not a multiple of the " +
                                  std::string(info->name) + " block size " + std::to_string(info->block_size));
        }
        const uint64_t n_blocks = static_cast<uint64_t>(n_elements / info->block_size);
        if (n_blocks > std::numeric_limits<size_t>::max() / info->block_bytes) fail_at(dims_pos, "byte size overflows");
        t.n_bytes = static_cast<size_t>(n_blocks) * info->block_bytes;
        tensor_info_pos_.push_back(pos_);
        t.offset = read_pod<uint64_t>();
        return t;
    }

    // Every tensor lies inside the data section, aligned, and no two overlap.
    void check_tensor_placement(const GgufFile& out, size_t data_size) {
        std::vector<size_t> order(out.tensors_.size());
        for (size_t i = 0; i < order.size(); ++i) {
            const GgufTensorInfo& t = out.tensors_[i];
            field_ = "tensor '" + t.name + "'";
            const size_t at = tensor_info_pos_[i];
            if (t.offset % out.alignment_ != 0)
                fail_at(at, "data offset " + std::to_string(t.offset) + " is not aligned to " + std::to_string(out.alignment_));
            if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
                fail_at(at, "data [" + std::to_string(t.offset) + ", +" + std::to_string(t.n_bytes) +
                                ") lies outside the data section of " + std::to_string(data_size) + " bytes");
            }
            order[i] = i;
        }
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return out.tensors_[a].offset < out.tensors_[b].offset; });
        for (size_t k = 1; k < order.size(); ++k) {
            const GgufTensorInfo& prev = out.tensors_[order[k - 1]];
            const GgufTensorInfo& cur = out.tensors_[order[k]];
            if (prev.offset + prev.n_bytes > cur.offset) {
                field_ = "tensor '" + cur.name + "'";
                fail_at(tensor_info_pos_[order[k]], "data overlaps tensor '" + prev.name + "'");
            }
        }
    }
};

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
    GgufFile f;
    f.path_ = std::move(name);
    f.bytes_ = bytes;
    f.file_size_ = bytes.size();
    GgufParser(bytes, bytes.size(), f.path_).parse(f);
    return f;
}

GgufFile GgufFile::parse_header(std::span<const uint8_t> prefix, uint64_t file_size, std::string name) {
    if (file_size > std::numeric_limits<size_t>::max() || prefix.size() > file_size)
        throw GgufError(name + ": a prefix of " + std::to_string(prefix.size()) + " bytes of a " +
                        std::to_string(file_size) + "-byte file");
    GgufFile f;
    f.path_ = std::move(name);
    f.file_size_ = static_cast<size_t>(file_size);
    GgufParser(prefix, f.file_size_, f.path_).parse(f);
    for (GgufTensorInfo& t : f.tensors_) t.data = nullptr;  // even when the prefix is the whole file
    return f;
}

GgufFile GgufFile::open(const std::string& path) {
    std::shared_ptr<MappedFile> mapping;
    try {
        mapping = std::make_shared<MappedFile>(path);
    } catch (const std::runtime_error& e) {
        throw GgufError(e.what());
    }
    GgufFile f = parse(mapping->bytes(), path);
    f.mapping_ = std::move(mapping);
    return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
    auto it = metadata_index_.find(key);
    return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

namespace {

template <typename F>
auto typed_get(const GgufFile& f, std::string_view key, F&& convert) {
    const GgufValue* v = f.find(key);
    try {
        return convert(v);
    } catch (const GgufError& e) {
        throw GgufError(f.path() + ": metadata key '" + std::string(key) + "': " + e.what());
    }
}

}  // namespace

std::string GgufFile::get_string(std::string_view key, std::string fallback) const {
    return typed_get(*this, key, [&](const GgufValue* v) { return v ? v->as_string() : fallback; });
}

int64_t GgufFile::get_int(std::string_view key, int64_t fallback) const {
    return typed_get(*this, key, [&](const GgufValue* v) { return v ? v->as_int() : fallback; });
}

double GgufFile::get_float(std::string_view key, double fallback) const {
    return typed_get(*this, key, [&](const GgufValue* v) { return v ? v->as_float() : fallback; });
}

bool GgufFile::get_bool(std::string_view key, bool fallback) const {
    return typed_get(*this, key, [&](const GgufValue* v) { return v ? v->as_bool() : fallback; });
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace deskside::models
