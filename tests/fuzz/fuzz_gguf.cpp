// libFuzzer target: the GGUF reader and the model description built from it must reject any
// input cleanly (GgufError) or accept it, never crash, leak or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <span>

#include "models/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const auto f = deskside::models::GgufFile::parse(std::span(data, size), "fuzz");
        // Touch what an accepted file exposes, as inspect does.
        size_t sum = 0;
        for (const auto& [key, value] : f.metadata()) sum += key.size() + value.summary().size();
        for (const auto& t : f.tensors()) sum += t.n_bytes ? t.data[0] + t.data[t.n_bytes - 1] : 0;
        (void)f.get_string("general.architecture");
        return sum == 0xFFFFFFFF ? -1 : 0;
    } catch (const deskside::models::GgufError&) {
        return 0;
    }
}
