// llama.cpp's tokenizer test vectors (../shared/models/vocab/ggml-vocab-*.gguf.inp/.out), read
// the way its tests/test-tokenizer-0.cpp reads them: the .inp is cut at every
// "\n__ggml_vocab_test__\n" (the text after the last separator, if any, is one more case), the
// .out has one line of space-separated ids per case.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/paths.h"

namespace deskside::test {

struct VocabCase {
    std::string text;
    std::vector<int32_t> ids;
};

inline std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::vector<VocabCase> read_vocab_cases(const std::string& vocab_name) {
    const std::string base = shared_path("models/vocab/" + vocab_name + ".gguf");
    const std::string raw = read_all(base + ".inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> inputs;
    for (size_t pos = 0; pos < raw.size();) {
        const size_t next = raw.find(sep, pos);
        if (next == std::string::npos) {
            inputs.push_back(raw.substr(pos));
            break;
        }
        inputs.push_back(raw.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::ifstream out(base + ".out");
    std::vector<VocabCase> cases;
    size_t i = 0;
    for (std::string line; std::getline(out, line); ++i) {
        if (i >= inputs.size()) throw std::runtime_error(base + ".out has more lines than .inp has cases");
        VocabCase c{inputs[i], {}};
        std::istringstream ids(line);
        for (int32_t id; ids >> id;) c.ids.push_back(id);
        cases.push_back(std::move(c));
    }
    if (cases.size() != inputs.size()) throw std::runtime_error(base + ": .inp and .out hold different numbers of cases");
    return cases;
}

}  // namespace deskside::test
