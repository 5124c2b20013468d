// deskside tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--special] [--pieces]: the token ids
// of a text, as one JSON array on stdout, for checking a tokenizer against llama.cpp's or
// Hugging Face's.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "models/tokenizer/tokenizer.h"

namespace deskside::cli {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int run(Args& args) {
    const auto model = model_arg(args);
    const auto prompt = args.value("--prompt", "-p");
    const auto file = args.value("--file", "-f");
    const bool no_bos = args.flag("--no-bos");
    const bool special = args.flag("--special");
    const bool pieces = args.flag("--pieces");
    args.finish();
    if (!model) throw UsageError("-m MODEL is required");
    if (prompt.has_value() == file.has_value()) throw UsageError("give exactly one of -p TEXT or -f FILE");

    const std::string text = prompt ? *prompt : read_file(*file);
    const auto tok = models::Tokenizer::load(*model);
    const std::vector<int32_t> ids = tok->encode(text, !no_bos, special);

    nlohmann::json out = nlohmann::json::array();
    for (int32_t id : ids) {
        if (pieces) {
            out.push_back({id, tok->piece(id, true)});
        } else {
            out.push_back(id);
        }
    }
    // Pieces may hold part of a UTF-8 sequence; those bytes print as U+FFFD.
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
}

}  // namespace

const Command kTokenizeCommand{
    "tokenize",
    "print the token ids of a text as a JSON array",
    "usage: deskside tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--special] [--pieces]\n"
    "\n"
    "MODEL is a GGUF file (a vocab-only one is enough), a Hugging Face directory with\n"
    "tokenizer.json or tokenizer.model, or a SentencePiece .model file.\n"
    "  -p, --prompt TEXT   the text to tokenize\n"
    "  -f, --file FILE     read the text from FILE (bytes as they are)\n"
    "  --no-bos            do not add the BOS/EOS tokens the model asks for\n"
    "  --special           recognise control tokens (<|im_start|>, <s> ...) written in the text\n"
    "  --pieces            print [[id, \"piece\"], ...] instead of ids\n",
    run,
};

}  // namespace deskside::cli
