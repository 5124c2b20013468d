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

void GgufWriter::remove(const std::string& key) {
    std::erase_if(metadata_, [&](const auto& kv) { return kv.first == key; });
}

void GgufWriter::check_new_tensor(const std::string& name, quant::TypeId type,
                                  const std::vector<int64_t>& shape) const {
    for (const PendingTensor& t : tensors_) {
        if (t.name == name) throw GgufError("GGUF writer: duplicate tensor '" + name + "'");
    }
    if (shape.empty() || shape.size() > GgufFile::kMaxDims)
        throw GgufError("GGUF writer: tensor '" + name + "': rank must be 1.." + std::to_string(GgufFile::kMaxDims));
    for (int64_t d : shape) {
        if (d < 0) throw GgufError("GGUF writer: tensor '" + name + "': negative dimension");
    }
    if (shape[0] % quant::type_info(type).block_size != 0)
        throw GgufError("GGUF writer: tensor '" + name + "': row length is not a multiple of the block size");
}

size_t GgufWriter::tensor_bytes(const PendingTensor& t) const {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    return quant::row_bytes(t.type, n);
}

void GgufWriter::add_tensor(const std::string& name, quant::TypeId type, std::vector<int64_t> shape,
                            std::span<const uint8_t> data) {
    check_new_tensor(name, type, shape);
    PendingTensor t{name, type, std::move(shape), data, true};
    if (tensor_bytes(t) != data.size())
        throw GgufError("GGUF writer: tensor '" + name + "': " + std::to_string(data.size()) + " bytes given, " +
                        std::to_string(tensor_bytes(t)) + " expected");
    tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor(const std::string& name, quant::TypeId type, std::vector<int64_t> shape) {
    check_new_tensor(name, type, shape);
    tensors_.push_back({name, type, std::move(shape), {}, false});
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
        offset += padded(tensor_bytes(t));
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
        if (!t.has_data) throw GgufError("GGUF writer: tensor '" + t.name + "' was declared without its data");
        out.insert(out.end(), t.data.begin(), t.data.end());
        out.resize(out.size() + padded(t.data.size()) - t.data.size(), 0);
    }
    return out;
}

void GgufWriter::write(const std::string& path) const {
    for (const PendingTensor& t : tensors_) {
        if (!t.has_data) throw GgufError("GGUF writer: tensor '" + t.name + "' was declared without its data");
    }
    Stream out = begin(path);
    for (const PendingTensor& t : tensors_) out.append(t.data);
    out.commit();
}

GgufWriter::Stream GgufWriter::begin(const std::string& path) const { return Stream(*this, path); }

GgufWriter::Stream::Stream(const GgufWriter& writer, std::string path)
    : writer_(&writer), path_(std::move(path)), tmp_(path_ + ".part") {
    const std::vector<uint8_t> header = writer.header_bytes();
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (!file_) throw GgufError(path_ + ": cannot create: " + std::strerror(errno));
    if (std::fwrite(header.data(), 1, header.size(), file_) != header.size()) fail("write failed");
}

GgufWriter::Stream::Stream(Stream&& other) noexcept
    : writer_(other.writer_), path_(std::move(other.path_)), tmp_(std::move(other.tmp_)), file_(other.file_),
      next_(other.next_) {
    other.file_ = nullptr;
}

GgufWriter::Stream::~Stream() {
    if (!file_) return;
    std::fclose(file_);
    std::remove(tmp_.c_str());
}

void GgufWriter::Stream::fail(const std::string& what) {
    const int err = errno;
    std::fclose(file_);
    file_ = nullptr;
    std::remove(tmp_.c_str());
    throw GgufError(path_ + ": " + what + (err ? std::string(": ") + std::strerror(err) : std::string()));
}

void GgufWriter::Stream::append(std::span<const uint8_t> data) {
    if (!file_) throw GgufError(path_ + ": the stream is closed");
    if (next_ >= writer_->tensors_.size()) fail("more tensors appended than declared");
    const PendingTensor& t = writer_->tensors_[next_];
    const size_t want = writer_->tensor_bytes(t);
    errno = 0;
    if (data.size() != want) {
        fail("tensor '" + t.name + "': " + std::to_string(data.size()) + " bytes given, " + std::to_string(want) +
             " expected");
    }
    static const uint8_t kZeros[64] = {};
    bool ok = std::fwrite(data.data(), 1, data.size(), file_) == data.size();
    size_t pad = writer_->padded(want) - want;
    while (ok && pad > 0) {
        const size_t n = std::min(pad, sizeof kZeros);
        ok = std::fwrite(kZeros, 1, n, file_) == n;
        pad -= n;
    }
    if (!ok) fail("write failed");
    ++next_;
}

void GgufWriter::Stream::commit() {
    if (!file_) throw GgufError(path_ + ": the stream is closed");
    errno = 0;
    if (next_ != writer_->tensors_.size()) {
        fail("tensor '" + writer_->tensors_[next_].name + "' was never appended");
    }
    if (std::fflush(file_) != 0) fail("write failed");
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!closed) {
        std::remove(tmp_.c_str());
        throw GgufError(path_ + ": write failed");
    }
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) {
        std::remove(tmp_.c_str());
        throw GgufError(path_ + ": cannot move into place: " + ec.message());
    }
}

}  // namespace deskside::models
