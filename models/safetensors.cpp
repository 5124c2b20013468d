#include "models/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace deskside::models {

namespace {

struct DtypeInfo {
    SafetensorsDtype dtype;
    std::string_view name;
    size_t bytes;
};

constexpr std::array kDtypes{
    DtypeInfo{SafetensorsDtype::BOOL, "BOOL", 1},       DtypeInfo{SafetensorsDtype::U8, "U8", 1},
    DtypeInfo{SafetensorsDtype::I8, "I8", 1},           DtypeInfo{SafetensorsDtype::F8_E4M3, "F8_E4M3", 1},
    DtypeInfo{SafetensorsDtype::F8_E5M2, "F8_E5M2", 1}, DtypeInfo{SafetensorsDtype::I16, "I16", 2},
    DtypeInfo{SafetensorsDtype::U16, "U16", 2},         DtypeInfo{SafetensorsDtype::F16, "F16", 2},
    DtypeInfo{SafetensorsDtype::BF16, "BF16", 2},       DtypeInfo{SafetensorsDtype::I32, "I32", 4},
    DtypeInfo{SafetensorsDtype::U32, "U32", 4},         DtypeInfo{SafetensorsDtype::F32, "F32", 4},
    DtypeInfo{SafetensorsDtype::I64, "I64", 8},         DtypeInfo{SafetensorsDtype::U64, "U64", 8},
    DtypeInfo{SafetensorsDtype::F64, "F64", 8},
};

const DtypeInfo& dtype_info(SafetensorsDtype d) {
    for (const DtypeInfo& i : kDtypes) {
        if (i.dtype == d) return i;
    }
    return kDtypes[0];  // unreachable: every enumerator is listed
}

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr size_t kLengthBytes = 8;

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
    return s + "]";
}

}  // namespace

std::string_view safetensors_dtype_name(SafetensorsDtype d) { return dtype_info(d).name; }
size_t safetensors_dtype_bytes(SafetensorsDtype d) { return dtype_info(d).bytes; }

// Reads the header and checks every entry. `field_` and `field_offset_` name what is being
// checked so that every error says where it happened.
class SafetensorsParser {
   public:
    SafetensorsParser(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

    void parse(SafetensorsFile& out) {
        field_ = "header length";
        if (bytes_.size() < kLengthBytes)
            fail_at(0, "file truncated: the 8-byte header length needs 8 bytes, the file has " + std::to_string(bytes_.size()));
        uint64_t header_len = 0;
        for (size_t k = 0; k < kLengthBytes; ++k) header_len |= uint64_t{bytes_[k]} << (8 * k);
        const size_t room = bytes_.size() - kLengthBytes;
        if (header_len > room) {
            fail_at(0, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                           std::to_string(room) + " bytes follow the length)");
        }
        if (header_len > SafetensorsFile::kMaxHeaderBytes) {
            fail_at(0, "header length " + std::to_string(header_len) + " exceeds the limit of " +
                           std::to_string(SafetensorsFile::kMaxHeaderBytes));
        }
        header_ = std::string_view(reinterpret_cast<const char*>(bytes_.data() + kLengthBytes), header_len);
        out.data_offset_ = kLengthBytes + static_cast<size_t>(header_len);
        data_size_ = bytes_.size() - out.data_offset_;

        field_ = "header JSON";
        if (header_.empty() || header_[0] != '{') fail_at(kLengthBytes, "the header must be a JSON object starting with '{'");
        const nlohmann::ordered_json root = parse_json();

        for (const auto& [key, value] : root.items()) {
            if (key == kMetadataKey) {
                read_metadata(value, out);
                continue;
            }
            SafetensorsTensor t = read_entry(key, value);
            out.index_.emplace(t.name, out.tensors_.size());
            out.tensors_.push_back(std::move(t));
        }
        check_overlaps(out);
        for (SafetensorsTensor& t : out.tensors_) t.data = bytes_.data() + out.data_offset_ + t.begin;
    }

   private:
    std::span<const uint8_t> bytes_;
    const std::string& name_;
    std::string_view header_;
    size_t data_size_ = 0;
    std::string field_;

    [[noreturn]] void fail_at(size_t offset, const std::string& what) const {
        throw SafetensorsError(name_ + ": " + field_ + " at byte offset " + std::to_string(offset) + ": " + what);
    }

    // Where a key's text starts in the file, for error messages; the header start when the key
    // needs JSON escaping and a plain search cannot find it.
    size_t key_offset(const std::string& key) const {
        const size_t at = header_.find("\"" + key + "\"");
        return kLengthBytes + (at == std::string_view::npos ? 0 : at);
    }

    nlohmann::ordered_json parse_json() {
        // The format forbids duplicate names; nlohmann keeps the last silently, so the parser
        // callback records the top-level keys and refuses a repeat.
        std::set<std::string> seen;
        std::string duplicate;
        auto on_event = [&](int depth, nlohmann::ordered_json::parse_event_t event, nlohmann::ordered_json& parsed) {
            if (depth == 1 && event == nlohmann::ordered_json::parse_event_t::key && duplicate.empty()) {
                const std::string key = parsed.get<std::string>();
                if (!seen.insert(key).second) duplicate = key;
            }
            return true;
        };
        nlohmann::ordered_json root;
        try {
            root = nlohmann::ordered_json::parse(header_.begin(), header_.end(), on_event);
        } catch (const nlohmann::json::parse_error& e) {
            const size_t at = kLengthBytes + (e.byte > 0 ? e.byte - 1 : 0);
            fail_at(at, std::string("invalid JSON: ") + e.what());
        }
        if (!duplicate.empty()) {
            field_ = "tensor '" + duplicate + "'";
            fail_at(key_offset(duplicate), "the name appears twice in the header");
        }
        if (!root.is_object()) fail_at(kLengthBytes, "the header must be a JSON object");
        return root;
    }

    void read_metadata(const nlohmann::ordered_json& value, SafetensorsFile& out) {
        field_ = std::string(kMetadataKey);
        const size_t at = key_offset(field_);
        if (!value.is_object()) fail_at(at, "must be an object of strings, found " + std::string(value.type_name()));
        for (const auto& [k, v] : value.items()) {
            if (!v.is_string()) {
                field_ = std::string(kMetadataKey) + "." + k;
                fail_at(at, "metadata values must be strings, found " + std::string(v.type_name()));
            }
            out.metadata_.emplace(k, v.get<std::string>());
        }
    }

    uint64_t read_unsigned(const nlohmann::ordered_json& v, const std::string& what, size_t at) const {
        if (!v.is_number_unsigned()) fail_at(at, what + " must be a non-negative integer, found " + v.dump());
        return v.get<uint64_t>();
    }

    SafetensorsTensor read_entry(const std::string& key, const nlohmann::ordered_json& value) {
        SafetensorsTensor t;
        t.name = key;
        field_ = "tensor '" + key + "'";
        const size_t at = key_offset(key);
        if (key.empty()) fail_at(at, "empty tensor name");
        if (!value.is_object()) fail_at(at, "entry must be an object, found " + std::string(value.type_name()));
        for (const char* required : {"dtype", "shape", "data_offsets"}) {
            if (!value.contains(required)) fail_at(at, std::string("missing field '") + required + "'");
        }

        const auto& dtype = value["dtype"];
        if (!dtype.is_string()) fail_at(at, "field 'dtype' must be a string, found " + dtype.dump());
        const std::string dtype_name = dtype.get<std::string>();
        const auto info = std::find_if(kDtypes.begin(), kDtypes.end(), [&](const DtypeInfo& i) { return i.name == dtype_name; });
        if (info == kDtypes.end()) fail_at(at, "unknown dtype '" + dtype_name + "'");
        t.dtype = info->dtype;

        const auto& shape = value["shape"];
        if (!shape.is_array()) fail_at(at, "field 'shape' must be an array, found " + shape.dump());
        uint64_t n_elements = 1;
        for (const auto& d : shape) {
            const uint64_t dim = read_unsigned(d, "shape dimension", at);
            if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) fail_at(at, "shape dimension " + d.dump() + " is too large");
            if (dim != 0 && n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / dim)
                fail_at(at, "element count of shape " + shape.dump() + " overflows");
            n_elements *= dim;
            t.shape.push_back(static_cast<int64_t>(dim));
        }
        if (n_elements > std::numeric_limits<uint64_t>::max() / info->bytes) fail_at(at, "byte size of shape " + shape.dump() + " overflows");
        const uint64_t expected_bytes = n_elements * info->bytes;

        const auto& offsets = value["data_offsets"];
        if (!offsets.is_array() || offsets.size() != 2)
            fail_at(at, "field 'data_offsets' must be an array [begin, end], found " + offsets.dump());
        t.begin = read_unsigned(offsets[0], "data_offsets begin", at);
        t.end = read_unsigned(offsets[1], "data_offsets end", at);
        const std::string range = "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ")";
        if (t.end < t.begin) fail_at(at, range + " end before they begin");
        if (t.end > data_size_) {
            fail_at(at, range + " lie outside the data section of " + std::to_string(data_size_) + " bytes (file bytes " +
                            std::to_string(bytes_.size() - data_size_) + ".." + std::to_string(bytes_.size()) + ")");
        }
        if (t.end - t.begin != expected_bytes) {
            fail_at(at, "dtype " + dtype_name + " x shape " + shape_text(t.shape) + " needs " + std::to_string(expected_bytes) +
                            " bytes, but " + range + " hold " + std::to_string(t.end - t.begin));
        }
        return t;
    }

    // No two tensors share bytes. Gaps are allowed (the format does not forbid padding).
    void check_overlaps(const SafetensorsFile& out) {
        std::vector<const SafetensorsTensor*> order;
        for (const SafetensorsTensor& t : out.tensors_) order.push_back(&t);
        std::sort(order.begin(), order.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
            return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
        });
        const SafetensorsTensor* reach = nullptr;  // the tensor seen so far that ends last
        for (const SafetensorsTensor* cur : order) {
            if (cur->end == cur->begin) continue;  // empty tensors hold no bytes
            if (reach && reach->end > cur->begin) {
                field_ = "tensor '" + cur->name + "'";
                fail_at(out.data_offset_ + cur->begin, "data [" + std::to_string(cur->begin) + ", " + std::to_string(cur->end) +
                                                           ") overlaps tensor '" + reach->name + "' [" +
                                                           std::to_string(reach->begin) + ", " + std::to_string(reach->end) + ")");
            }
            if (!reach || cur->end > reach->end) reach = cur;
        }
    }
};

SafetensorsFile SafetensorsFile::parse(std::span<const uint8_t> bytes, std::string name) {
    SafetensorsFile f;
    f.path_ = std::move(name);
    f.bytes_ = bytes;
    SafetensorsParser(bytes, f.path_).parse(f);
    return f;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
    std::shared_ptr<MappedFile> mapping;
    try {
        mapping = std::make_shared<MappedFile>(path);
    } catch (const std::runtime_error& e) {
        throw SafetensorsError(e.what());
    }
    SafetensorsFile f = parse(mapping->bytes(), path);
    f.mapping_ = std::move(mapping);
    return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace deskside::models
