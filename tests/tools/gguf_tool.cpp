// A test driver for the GGUF writer, used by tests/py/test_gguf_writer.py to check our files
// with llama.cpp's own reader (the gguf package from PyPI).
//   gguf_tool copy IN OUT        read IN with our reader, write it again with our writer
//   gguf_tool dequantize IN OUT  every tensor of IN through quant::to_float, as raw F32 one after
//                                another in file order (tests/py/test_iq_dequantize.py compares
//                                them with gguf.quants.dequantize)
//   gguf_tool from-json SPEC OUT write the metadata and F32 tensors described by a JSON spec:
//     {"metadata": [[key, type, value], ...], "tensors": [[name, [dims...], [floats...]], ...]}
//     type is a GGUF type name (u8 ... f64, bool, string) or {"array": ELEM}; nested arrays
//     use {"array": {"array": ELEM}}.
//   gguf_tool hf-metadata DIR OUT  a tensor-less GGUF holding models::hf_gguf_metadata(DIR)
//                                (tests/py/test_hf_export.py compares it with gguf-py's reading)
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/gguf.h"
#include "models/gguf_writer.h"
#include "models/hf_gguf_metadata.h"
#include "quant/quant.h"

using deskside::models::GgufArray;
using deskside::models::GgufType;
using deskside::models::GgufValue;

namespace {

GgufType type_from_name(const nlohmann::json& t) {
    if (t.is_object()) return GgufType::ARRAY;
    for (uint32_t i = 0; i <= static_cast<uint32_t>(GgufType::F64); ++i) {
        if (deskside::models::gguf_type_name(static_cast<GgufType>(i)) == t.get<std::string>()) return static_cast<GgufType>(i);
    }
    throw std::runtime_error("unknown type " + t.dump());
}

GgufValue value_from_json(const nlohmann::json& type, const nlohmann::json& v) {
    const GgufType t = type_from_name(type);
    switch (t) {
        case GgufType::U8:
        case GgufType::U16:
        case GgufType::U32:
        case GgufType::U64: return {t, v.get<uint64_t>()};
        case GgufType::I8:
        case GgufType::I16:
        case GgufType::I32:
        case GgufType::I64: return {t, v.get<int64_t>()};
        case GgufType::F32:
        case GgufType::F64: return {t, v.get<double>()};
        case GgufType::BOOL: return {t, v.get<bool>()};
        case GgufType::STRING: return {t, v.get<std::string>()};
        case GgufType::ARRAY: {
            const nlohmann::json& elem = type["array"];
            std::vector<GgufValue> items;
            for (const auto& item : v) items.push_back(value_from_json(elem, item));
            return GgufValue::array(type_from_name(elem), std::move(items));
        }
    }
    throw std::runtime_error("unreachable");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: gguf_tool copy IN OUT | dequantize IN OUT | from-json SPEC OUT | hf-metadata DIR OUT\n");
        return 2;
    }
    try {
        const std::string mode = argv[1];
        deskside::models::GgufWriter w;
        if (mode == "copy") {
            const auto in = deskside::models::GgufFile::open(argv[2]);
            for (const auto& [k, v] : in.metadata()) w.set(k, v);
            for (const auto& t : in.tensors()) w.add_tensor(t.name, t.type, t.shape, {t.data, t.n_bytes});
            w.write(argv[3]);
            return 0;
        }
        if (mode == "hf-metadata") {
            for (auto& [k, v] : deskside::models::hf_gguf_metadata(argv[2])) w.set(k, std::move(v));
            w.write(argv[3]);
            return 0;
        }
        if (mode == "dequantize") {
            const auto in = deskside::models::GgufFile::open(argv[2]);
            std::ofstream out(argv[3], std::ios::binary);
            for (const auto& t : in.tensors()) {
                const deskside::quant::QuantTraits* traits = deskside::quant::quant_traits(t.type);
                if (!traits) throw std::runtime_error(t.name + ": no dequantizer for its type");
                std::vector<float> values(static_cast<size_t>(t.n_elements()));
                traits->to_float(t.data, values.data(), t.n_elements());
                out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
            }
            if (!out) throw std::runtime_error(std::string("cannot write ") + argv[3]);
            return 0;
        }
        std::ifstream f(argv[2]);
        const auto spec = nlohmann::json::parse(f);
        for (const auto& kv : spec["metadata"]) w.set(kv[0].get<std::string>(), value_from_json(kv[1], kv[2]));
        std::vector<std::vector<float>> keep;
        for (const auto& t : spec["tensors"]) {
            keep.push_back(t[2].get<std::vector<float>>());
            const auto& data = keep.back();
            w.add_tensor(t[0].get<std::string>(), deskside::quant::TypeId::F32, t[1].get<std::vector<int64_t>>(),
                         {reinterpret_cast<const uint8_t*>(data.data()), data.size() * sizeof(float)});
        }
        w.write(argv[3]);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gguf_tool: %s\n", e.what());
        return 1;
    }
}
