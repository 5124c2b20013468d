// A test driver for quant/'s reference functions, used by tests/py/test_quant_gguf_py.py to
// check them against llama.cpp's own Python implementation (gguf.quants from PyPI).
//   quant_tool dequantize TYPE IN OUT   raw blocks of TYPE (e.g. tq1_0) -> little-endian F32
//   quant_tool quantize TYPE IN OUT     F32 -> blocks of TYPE with its reference quantizer
//   quant_tool tensor MODEL NAME OUT    tensor NAME of a GGUF file, read with our reader and
//                                       dequantized to F32 (every dimension flattened)
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace q = deskside::quant;

namespace {

std::vector<char> read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const void* data, size_t n) {
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    if (!f) throw std::runtime_error("cannot write " + path);
}

// The type named as llama.cpp prints it (case-insensitive), with reference traits.
const q::QuantTraits& traits_named(std::string name) {
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const q::TypeInfo& t : q::all_types()) {
        std::string own(t.name);
        for (char& c : own) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (own != name) continue;
        if (const q::QuantTraits* traits = q::quant_traits(t.id)) return *traits;
        throw std::runtime_error("type " + name + " has no reference functions");
    }
    throw std::runtime_error("unknown type " + name);
}

std::vector<float> dequantize(const q::QuantTraits& t, const void* blocks, size_t n_bytes) {
    const q::TypeInfo& info = q::type_info(t.type);
    if (n_bytes % info.block_bytes) throw std::runtime_error("input is not a whole number of blocks");
    const int64_t n = static_cast<int64_t>(n_bytes / info.block_bytes) * info.block_size;
    std::vector<float> out(static_cast<size_t>(n));
    t.to_float(blocks, out.data(), n);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: quant_tool dequantize|quantize TYPE IN OUT | tensor MODEL NAME OUT\n");
        return 2;
    }
    try {
        const std::string mode = argv[1];
        if (mode == "tensor") {
            const auto file = deskside::models::GgufFile::open(argv[2]);
            const deskside::models::GgufTensorInfo* t = file.find_tensor(argv[3]);
            if (!t) throw std::runtime_error(std::string("no tensor ") + argv[3]);
            const q::QuantTraits* traits = q::quant_traits(t->type);
            if (!traits) throw std::runtime_error("tensor type has no reference functions");
            const auto out = dequantize(*traits, t->data, t->n_bytes);
            write_all(argv[4], out.data(), out.size() * sizeof(float));
            return 0;
        }
        const q::QuantTraits& traits = traits_named(argv[2]);
        const std::vector<char> in = read_all(argv[3]);
        if (mode == "dequantize") {
            const auto out = dequantize(traits, in.data(), in.size());
            write_all(argv[4], out.data(), out.size() * sizeof(float));
        } else if (mode == "quantize") {
            if (!traits.from_float) throw std::runtime_error("type has no reference quantizer");
            const int64_t n = static_cast<int64_t>(in.size() / sizeof(float));
            const q::TypeInfo& info = q::type_info(traits.type);
            if (in.size() % sizeof(float) || n % info.block_size)
                throw std::runtime_error("input is not a whole number of blocks of floats");
            std::vector<float> x(static_cast<size_t>(n));
            std::memcpy(x.data(), in.data(), in.size());
            std::vector<uint8_t> out(q::row_bytes(traits.type, n));
            traits.from_float(x.data(), out.data(), n);
            write_all(argv[4], out.data(), out.size());
        } else {
            throw std::runtime_error("unknown mode " + mode);
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "quant_tool: %s\n", e.what());
        return 1;
    }
}
