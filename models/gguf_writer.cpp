#include "models/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <algorithm>

namespace deskside::models {
namespace {

class ByteSink {
   public:
    explicit ByteSink(std::vector<uint8_t>& out) : out_(out) {}

    template <typename T>
    void pod(T v) {
        const size_t at = out_.size();
        out_.resize(at + sizeof(T));
        std::memcpy(out_.data() + at, &v, sizeof(T));
    }
    void string(const std::string& s) {
        pod<uint64_t>(s.size());
        out_.insert(out_.end(), s.begin(), s.end());
    }
    void bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
    void pad_to(size_t alignment) { out_.resize((out_.size() + alignment - 1) / alignment * alignment, 0); }
    size_t size() const { return out_.size(); }

    void value(const GgufValue& v) {
        switch (v.type) {
            case GgufType::U8: pod<uint8_t>(static_cast<uint8_t>(std::get<uint64_t>(v.value))); break;
            case GgufType::I8: pod<int8_t>(static_cast<int8_t>(std::get<int64_t>(v.value))); break;
            case GgufType::U16: pod<uint16_t>(static_cast<uint16_t>(std::get<uint64_t>(v.value))); break;
            case GgufType::I16: pod<int16_t>(static_cast<int16_t>(std::get<int64_t>(v.value))); break;
            case GgufType::U32: pod<uint32_t>(static_cast<uint32_t>(std::get<uint64_t>(v.value))); break;
            case GgufType::I32: pod<int32_t>(static_cast<int32_t>(std::get<int64_t>(v.value))); break;
            case GgufType::U64: pod<uint64_t>(std::get<uint64_t>(v.value)); break;
            case GgufType::I64: pod<int64_t>(std::get<int64_t>(v.value)); break;
            case GgufType::F32: pod<float>(static_cast<float>(std::get<double>(v.value))); break;
            case GgufType::F64: pod<double>(std::get<double>(v.value)); break;
            case GgufType::BOOL: pod<uint8_t>(std::get<bool>(v.value) ? 1 : 0); break;
            case GgufType::STRING: string(std::get<std::string>(v.value)); break;
            case GgufType::ARRAY: {
                const GgufArray& a = std::get<GgufArray>(v.value);
                pod<uint32_t>(static_cast<uint32_t>(a.elem_type));
                pod<uint64_t>(a.items.size());
                for (const GgufValue& item : a.items) {
                    if (item.type != a.elem_type) throw GgufError("GGUF writer: array element type differs from the array's");
                    value(item);
                }
                break;
            }
        }
    }

   private:
    std::vector<uint8_t>& out_;
};

// Each variant alternative only fits certain declared types; a mismatch would write garbage.
void check_value(const std::string& key, const GgufValue& v) {
    bool ok = false;
    switch (v.type) {
        case GgufType::U8:
        case GgufType::U16:
        case GgufType::U32:
        case GgufType::U64: ok = std::holds_alternative<uint64_t>(v.value); break;
        case GgufType::I8:
        case GgufType::I16:
        case GgufType::I32:
        case GgufType::I64: ok = std::holds_alternative<int64_t>(v.value); break;
        case GgufType::F32:
        case GgufType::F64: ok = std::holds_alternative<double>(v.value); break;
        case GgufType::BOOL: ok = std::holds_alternative<bool>(v.value); break;
        case GgufType::STRING: ok = std::holds_alternative<std::string>(v.value); break;
        case GgufType::ARRAY: {
            ok = std::holds_alternative<GgufArray>(v.value);
            if (ok) {
                for (const GgufValue& item : std::get<GgufArray>(v.value).items) check_value(key, item);
            }
            break;
        }
    }
    if (!ok) throw GgufError("GGUF writer: metadata key '" + key + "': value does not match its type " + std::string(gguf_type_name(v.type)));
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
    check_value(key, value);
    for (auto& [k, v] : metadata_) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, quant::TypeId type, std::vector<int64_t> shape,
                            std::span<const uint8_t> data) {
    for (const PendingTensor& t : tensors_) {
        if (t.name == name) throw GgufError("GGUF writer: duplicate tensor '" + name + "'");
    }
    if (shape.empty() || shape.size() > GgufFile::kMaxDims)
        throw GgufError("GGUF writer: tensor '" + name + "': rank must be 1.." + std::to_string(GgufFile::kMaxDims));
    const quant::TypeInfo& info = quant::type_info(type);
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) throw GgufError("GGUF writer: tensor '" + name + "': negative dimension");
        n *= d;
    }
    if (shape[0] % info.block_size != 0)
        throw GgufError("GGUF writer: tensor '" + name + "': row length is not a multiple of the block size");
    if (quant::row_bytes(type, n) != data.size())
        throw GgufError("GGUF writer: tensor '" + name + "': " + std::to_string(data.size()) + " bytes given, " +
                        std::to_string(quant::row_bytes(type, n)) + " expected");
    tensors_.push_back({name, type, std::move(shape), data});
}

size_t GgufWriter::alignment() const {
    for (const auto& [k, v] : metadata_) {
        if (k == "general.alignment") return static_cast<size_t>(v.as_int());
    }
    return GgufFile::kDefaultAlignment;
}

// The header (magic through tensor infos, padded to the alignment); tensor data follows it, each
// tensor padded to the alignment, so only the header is ever built in memory.
std::vector<uint8_t> GgufWriter::header_bytes() const {
    const size_t align = alignment();
    if (align == 0 || (align & (align - 1)) != 0) throw GgufError("GGUF writer: general.alignment must be a power of two");
    std::vector<uint8_t> out;
    ByteSink sink(out);
    sink.pod<uint32_t>(GgufFile::kMagic);
    sink.pod<uint32_t>(3);
    sink.pod<uint64_t>(tensors_.size());
    sink.pod<uint64_t>(metadata_.size());
    for (const auto& [k, v] : metadata_) {
        sink.string(k);
        sink.pod<uint32_t>(static_cast<uint32_t>(v.type));
        sink.value(v);
    }
    uint64_t offset = 0;
    for (const PendingTensor& t : tensors_) {
        sink.string(t.name);
        sink.pod<uint32_t>(static_cast<uint32_t>(t.shape.size()));
        for (int64_t d : t.shape) sink.pod<uint64_t>(static_cast<uint64_t>(d));
        sink.pod<uint32_t>(static_cast<uint32_t>(t.type));
        sink.pod<uint64_t>(offset);
        offset += padded(t.data.size());
    }
    if (!tensors_.empty()) sink.pad_to(align);
    return out;
}

size_t GgufWriter::padded(size_t n) const {
    const size_t align = alignment();
    return (n + align - 1) / align * align;
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
    std::vector<uint8_t> out = header_bytes();
    for (const PendingTensor& t : tensors_) {
        out.insert(out.end(), t.data.begin(), t.data.end());
        out.resize(out.size() + padded(t.data.size()) - t.data.size(), 0);
    }
    return out;
}

void GgufWriter::write(const std::string& path) const {
    const std::vector<uint8_t> header = header_bytes();
    const std::string tmp = path + ".part";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) throw GgufError(path + ": cannot create: " + std::strerror(errno));
    static const uint8_t kZeros[64] = {};
    bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
    for (const PendingTensor& t : tensors_) {
        if (!ok) break;
        ok = std::fwrite(t.data.data(), 1, t.data.size(), f) == t.data.size();
        size_t pad = padded(t.data.size()) - t.data.size();
        while (ok && pad > 0) {
            const size_t n = std::min(pad, sizeof kZeros);
            ok = std::fwrite(kZeros, 1, n, f) == n;
            pad -= n;
        }
    }
    ok = ok && std::fflush(f) == 0;
    const int err = errno;
    std::fclose(f);
    if (!ok) {
        std::remove(tmp.c_str());
        throw GgufError(path + ": write failed: " + std::strerror(err));
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw GgufError(path + ": cannot move into place: " + ec.message());
    }
}

}  // namespace deskside::models
