// The regular expressions that split text into words before BPE merges, per GGUF
// tokenizer.ggml.pre name. They are the models' own pre-tokenizer patterns from their
// tokenizer.json files, in the form llama.cpp applies them (case-insensitive contractions
// spelled out as '[sS], split pre-tokenizers of a Sequence listed in order).
// ref: llama.cpp src/llama-vocab.cpp (llm_tokenizer_bpe), each model's tokenizer.json
#include <array>
#include <stdexcept>
#include <string>

#include "models/tokenizer/encoder.h"

namespace deskside::models::tokenizer {

const char* const kGpt2Pattern = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

namespace {

constexpr const char* kContractions = R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re";

std::string llama3_pattern() {
    return std::string(kContractions) +
           R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
}
std::string qwen2_pattern() {
    return std::string(kContractions) +
           R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
}
std::string qwen35_pattern() {
    return std::string(kContractions) +
           R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
}
// GPT-4o / Llama 4 and Mistral's tekken: upper-then-lower letter runs.
std::string gpt4o_pattern(const char* digits) {
    const std::string c = std::string(kContractions) + "?";
    return R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re" + c +
           R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re" + c + "|" + digits +
           R"re(| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
}
std::string tekken_pattern() {
    return R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
}

// CJK ideographs U+4E00..U+9FA5, U+0800..U+4E00 (as the DeepSeek files spell the range) and
// Hangul syllables.
constexpr const char* kDeepseekCjk = R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";

PreTokenizerSpec spec(std::vector<std::string> patterns, bool clean_spaces = true) {
    PreTokenizerSpec s;
    s.patterns = std::move(patterns);
    s.clean_spaces = clean_spaces;
    return s;
}

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
    for (std::string_view n : names) {
        if (name == n) return true;
    }
    return false;
}

}  // namespace

PreTokenizerSpec pretokenizer_for_gguf(std::string_view pre) {
    const std::string gpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
    if (pre.empty() || pre == "default") {
        return spec({R"re([\p{P}\$\+<=>\^~\|]+)re", gpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"});
    }
    if (one_of(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})) {
        auto s = spec({llama3_pattern()});
        s.ignore_merges = true;
        s.add_bos = true;
        return s;
    }
    if (one_of(pre, {"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"})) return spec({llama3_pattern()});
    if (pre == "deepseek-llm") {
        // The second class is the cased letters (Unicode L&) of DeepSeek's tokenizer.json, as
        // code points: several of them have canonical equivalents that an editor may normalize.
        return spec({"[\r\n]",
                     R"re(\s?[\x{0041}-\x{005A}\x{0061}-\x{007A}\x{00B5}\x{00C0}-\x{00D6}\x{00D8}-\x{00F6})re"
                     R"re(\x{00F8}-\x{01BA}\x{01BC}-\x{01BF}\x{01C4}-\x{0293}\x{0295}-\x{02AF}\x{0370}-\x{0373})re"
                     R"re(\x{0376}\x{0377}\x{037B}-\x{037D}\x{037F}\x{0386}\x{0388}-\x{038A}\x{038C})re"
                     R"re(\x{038E}-\x{03A1}\x{03A3}-\x{03F5}\x{03F7}-\x{0481}\x{048A}-\x{052F}\x{0531}-\x{0556})re"
                     R"re(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})re"
                     R"re(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})re"
                     R"re(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})re"
                     R"re(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})re"
                     R"re(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})re"
                     R"re(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})re"
                     R"re(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})re"
                     R"re(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})re"
                     R"re(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})re"
                     R"re(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})re"
                     R"re(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})re"
                     R"re(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})re"
                     R"re(\x{1E900}-\x{1E943}]+)re",
                     R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re",
                     R"re(\s+$)re", kDeepseekCjk, R"re(\p{N}+)re"},
                    false);
    }
    if (pre == "deepseek-coder") {
        return spec({"[\r\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kDeepseekCjk, R"re(\p{N})re"}, false);
    }
    if (one_of(pre, {"deepseek-v3", "hunyuan-dense"})) {
        return spec({R"re(\p{N}{1,3})re", R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
                     R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
                    false);
    }
    if (pre == "falcon") {
        return spec({R"re([\p{P}\$\+<=>\^~\|`]+)re", gpt2, "[0-9][0-9][0-9]"});
    }
    if (one_of(pre, {"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"})) {
        return spec({R"re(\p{N})re", gpt2});
    }
    if (one_of(pre, {"command-r", "smollm"})) return spec({R"re(\p{N})re", gpt2}, false);
    if (one_of(pre, {"gpt-2", "gpt-neox", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
                     "a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais", "exaone4"})) {
        return spec({gpt2});
    }
    if (one_of(pre, {"trillion", "granite-docling"})) return spec({gpt2}, false);
    if (one_of(pre, {"stablelm2", "megrez"})) return spec({qwen2_pattern()});
    if (one_of(pre, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open"})) {
        return spec({qwen2_pattern()}, false);
    }
    if (pre == "qwen35") return spec({qwen35_pattern()}, false);
    if (one_of(pre, {"poro-chat", "bloom", "gpt3-finnish"})) {
        return spec({R"re( ?[^(\s|.,!?…。，、।۔،)]+)re"}, pre != "poro-chat");
    }
    if (pre == "viking") return spec({R"re( ?[^(\s|.,!?…。，、।۔،)]+)re", R"re(\p{N})re"}, false);
    if (one_of(pre, {"gpt-4o", "llama4"})) return spec({gpt4o_pattern(R"re(\p{N}{1,3})re")}, false);
    if (pre == "tekken") {
        auto s = spec({tekken_pattern()}, false);
        s.ignore_merges = true;
        s.add_bos = true;
        return s;
    }
    if (pre == "seed-coder") {
        return spec({std::string(kContractions) +
                         R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
                    false);
    }
    if (pre == "grok-2") return spec({qwen2_pattern()}, false);
    if (one_of(pre, {"bailingmoe", "bailingmoe2", "llada-moe"})) {
        return spec({R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re"},
                    false);
    }
    if (pre == "gemma4") {
        // SentencePiece-style BPE: spaces become U+2581, merges run over raw UTF-8 of whole
        // lines; only newlines cut the text.
        auto s = spec({R"re([^\n]+|[\n]+)re"});
        s.byte_level = false;
        s.escape_whitespace = true;
        return s;
    }
    throw std::runtime_error("unknown pre-tokenizer '" + std::string(pre) + "'");
}

}  // namespace deskside::models::tokenizer
