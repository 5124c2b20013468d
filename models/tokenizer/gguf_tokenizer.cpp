// Tokenizer::from_gguf: the tokenizer.ggml.* metadata keys, with llama.cpp's defaults for keys a
// file leaves out.
// ref: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (Tokenizer section)
#include <cmath>

#include "models/gguf.h"
#include "models/tokenizer/encoder.h"
#include "models/tokenizer/tokenizer.h"
#include "models/tokenizer/vocab.h"

namespace deskside::models {

using tokenizer::Vocab;

namespace {

[[noreturn]] void fail(const GgufFile& f, std::string_view key, const std::string& what) {
    throw TokenizerError(f.path() + ": " + std::string(key) + ": " + what);
}

const GgufArray& array_of(const GgufFile& f, std::string_view key, bool required) {
    static const GgufArray kEmpty;
    const GgufValue* v = f.find(key);
    if (!v) {
        if (required) fail(f, key, "missing");
        return kEmpty;
    }
    if (v->type != GgufType::ARRAY) fail(f, key, "expected an array, found " + std::string(gguf_type_name(v->type)));
    return v->as_array();
}

// A special-token id key: kept only when inside the vocabulary (files use 0xFFFFFFFF for none).
void read_id(const GgufFile& f, std::string_view key, int32_t& id, int32_t n_tokens) {
    if (id >= n_tokens) id = Vocab::kNone;  // a default that this vocabulary is too small for
    const GgufValue* v = f.find(key);
    if (!v) return;
    if (!v->is_integer()) fail(f, key, "expected an integer");
    const int64_t x = v->as_int();
    if (x >= 0 && x < n_tokens) id = static_cast<int32_t>(x);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
    const std::string model = f.get_string("tokenizer.ggml.model");
    std::string pre = f.get_string("tokenizer.ggml.pre");
    auto vocab = std::make_unique<Vocab>();
    tokenizer::PreTokenizerSpec spec;

    if (model == "llama") {
        vocab->kind = tokenizer::VocabKind::Spm;
        vocab->bos = 1, vocab->eos = 2, vocab->unk = 0;
        vocab->add_bos = true;
        vocab->add_space_prefix = true;
        vocab->escape_whitespace = true;
    } else if (model == "gpt2" || model == "gemma4") {
        vocab->kind = tokenizer::VocabKind::Bpe;
        if (model == "gemma4") {
            pre = "gemma4";
        } else {
            vocab->bos = 11, vocab->eos = 11;
        }
        try {
            spec = tokenizer::pretokenizer_for_gguf(pre);
        } catch (const std::runtime_error& e) {
            fail(f, "tokenizer.ggml.pre", e.what());
        }
        vocab->byte_level = spec.byte_level;
        vocab->escape_whitespace = spec.escape_whitespace;
        vocab->ignore_merges = spec.ignore_merges;
        vocab->clean_spaces = spec.clean_spaces;
        vocab->add_bos = spec.add_bos;
    } else if (model.empty()) {
        fail(f, "tokenizer.ggml.model", "missing (the file has no tokenizer)");
    } else {
        fail(f, "tokenizer.ggml.model", "'" + model + "' tokenizers are not supported (only llama, gpt2, gemma4)");
    }
    vocab->add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", vocab->add_space_prefix);

    const GgufArray& tokens = array_of(f, "tokenizer.ggml.tokens", true);
    const GgufArray& scores = array_of(f, "tokenizer.ggml.scores", false);
    const GgufArray& types = array_of(f, "tokenizer.ggml.token_type", false);
    if (tokens.elem_type != GgufType::STRING) fail(f, "tokenizer.ggml.tokens", "expected an array of strings");
    const size_t n = tokens.items.size();
    if (n == 0 || n > static_cast<size_t>(INT32_MAX)) fail(f, "tokenizer.ggml.tokens", "bad token count " + std::to_string(n));
    if (!scores.items.empty() && scores.items.size() < n) fail(f, "tokenizer.ggml.scores", "fewer scores than tokens");
    if (!types.items.empty() && types.items.size() < n) fail(f, "tokenizer.ggml.token_type", "fewer types than tokens");
    if (!scores.items.empty() && !scores.items[0].is_number()) fail(f, "tokenizer.ggml.scores", "expected numbers");
    if (!types.items.empty() && !types.items[0].is_integer()) fail(f, "tokenizer.ggml.token_type", "expected integers");

    vocab->texts.reserve(n);
    vocab->scores.reserve(n);
    vocab->attrs.reserve(n);
    vocab->ids.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        std::string text = tokens.items[i].as_string();
        if (text.empty()) text = "[EMPTY_" + std::to_string(i) + "]";
        const float score = scores.items.empty() ? 0.0f : static_cast<float>(scores.items[i].as_float());
        const uint32_t attr = types.items.empty() ? tokenizer::kAttrNormal
                                                  : tokenizer::attr_from_token_type(types.items[i].as_int());
        try {
            vocab->add_token(std::move(text), score, attr);
        } catch (const std::runtime_error& e) {
            fail(f, "tokenizer.ggml.tokens", e.what());
        }
    }

    if (vocab->kind == tokenizer::VocabKind::Bpe) {
        const GgufArray& merges = array_of(f, "tokenizer.ggml.merges", true);
        if (!merges.items.empty() && merges.elem_type != GgufType::STRING) {
            fail(f, "tokenizer.ggml.merges", "expected an array of strings");
        }
        vocab->merge_ids.reserve(merges.items.size());
        for (size_t i = 0; i < merges.items.size(); ++i) vocab->add_merge(merges.items[i].as_string(), static_cast<int>(i));
    }

    const auto n_tokens = static_cast<int32_t>(n);
    read_id(f, "tokenizer.ggml.bos_token_id", vocab->bos, n_tokens);
    read_id(f, "tokenizer.ggml.eos_token_id", vocab->eos, n_tokens);
    read_id(f, "tokenizer.ggml.eot_token_id", vocab->eot, n_tokens);
    read_id(f, "tokenizer.ggml.eom_token_id", vocab->eom, n_tokens);
    read_id(f, "tokenizer.ggml.unknown_token_id", vocab->unk, n_tokens);
    read_id(f, "tokenizer.ggml.padding_token_id", vocab->pad, n_tokens);
    vocab->add_bos = f.get_bool("tokenizer.ggml.add_bos_token", vocab->add_bos);
    vocab->add_eos = f.get_bool("tokenizer.ggml.add_eos_token", vocab->add_eos);
    if (pre == "gemma4") vocab->add_bos = true;  // Gemma 4 files say false but the model needs BOS
    if (vocab->add_bos && vocab->bos == Vocab::kNone) fail(f, "tokenizer.ggml.add_bos_token", "true but there is no BOS token");
    if (vocab->add_eos && vocab->eos == Vocab::kNone) fail(f, "tokenizer.ggml.add_eos_token", "true but there is no EOS token");

    vocab->finalize(f.get_string("general.name"));

    const bool spm = vocab->kind == tokenizer::VocabKind::Spm;
    std::unique_ptr<Tokenizer> tok(new Tokenizer(std::move(vocab), spm ? "spm" : "bpe"));
    tok->set_encoder(spm ? tokenizer::make_spm_encoder(*tok->vocab_) : tokenizer::make_bpe_encoder(*tok->vocab_, spec));
    return tok;
}

}  // namespace deskside::models
