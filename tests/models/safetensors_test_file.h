// Hand-built safetensors files for tests: the byte layout is spelled out here (8-byte length,
// JSON header padded with spaces to a multiple of 8, data), independently of the reader.
// ref: https://github.com/huggingface/safetensors (README, "Format")
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace deskside::test {

struct StTensor {
    std::string name;
    std::string dtype;            // "F32", "BF16", ...
    std::vector<int64_t> shape;   // row-major, as safetensors stores it
    std::vector<uint8_t> data;    // empty: zeros of the right size
};

inline size_t st_dtype_bytes(const std::string& dtype) {
    if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
    if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
    return 1;
}

// The file bytes for `header_text` followed by `data`, with the length prefix.
inline std::vector<uint8_t> safetensors_raw(std::string header_text, const std::vector<uint8_t>& data, bool pad = true) {
    while (pad && header_text.size() % 8 != 0) header_text += ' ';
    std::vector<uint8_t> out(8);
    const uint64_t n = header_text.size();
    for (int k = 0; k < 8; ++k) out[k] = static_cast<uint8_t>(n >> (8 * k));
    out.insert(out.end(), header_text.begin(), header_text.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

// A well-formed file holding `tensors` back to back in the given order.
inline std::vector<uint8_t> safetensors_bytes(const std::vector<StTensor>& tensors, const nlohmann::ordered_json& metadata = nullptr) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.is_null()) header["__metadata__"] = metadata;
    std::vector<uint8_t> data;
    for (const StTensor& t : tensors) {
        size_t n = st_dtype_bytes(t.dtype);
        for (int64_t d : t.shape) n *= static_cast<size_t>(d);
        const size_t begin = data.size();
        if (t.data.empty()) {
            data.resize(begin + n, 0);
        } else {
            data.insert(data.end(), t.data.begin(), t.data.end());
        }
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
    }
    return safetensors_raw(header.dump(), data);
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
}

}  // namespace deskside::test
