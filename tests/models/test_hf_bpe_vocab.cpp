// models::bpe_check_hash / bpe_pre_name against the hashes Python's `tokenizers` package gives for
// the converter's test text with the real tokenizer.json files of ../shared/models/hf-tokenizers
// (sha256(str(Tokenizer.from_file(F).encode(chktxt).ids)), computed once and written here), and the
// names llama.cpp's convert_hf_to_gguf.py gives those hashes. tests/py/test_hf_bpe_vocab.py checks
// whole converted vocabularies against llama.cpp's vocab files, transformers and gguf-py.
#include <catch2/catch.hpp>

#include "models/hf_bpe_vocab.h"
#include "models/tokenizer/tokenizer.h"
#include "support/paths.h"
#include "support/required.h"

using deskside::models::bpe_check_hash;
using deskside::models::bpe_check_text;
using deskside::models::bpe_pre_name;
using deskside::models::Tokenizer;
using deskside::test::shared_path;

TEST_CASE("bpe_check_hash: the ids of llama.cpp's test text hash as Python's tokenizers gives them",
          "[hf][tokenizer]") {
    struct Case {
        const char* dir;
        const char* hash;  // Python: the `tokenizers` package, Tokenizer.from_file(dir + "/tokenizer.json")
        const char* pre;   // convert_hf_to_gguf.py's get_vocab_base_pre for that hash
    };
    // The shared llama3 tokenizer.json adds no BOS (its post-processor is ByteLevel only), as
    // Smaug-Llama-3's: llama.cpp names it smaug-bpe, a pre-tokenizer the same as llama-bpe's.
    const Case cases[] = {
        {"models/hf-tokenizers/llama3", "c136ed14d01c2745d4f60a9596ae66800e2b61fa45643e72436041855ad4089d",
         "smaug-bpe"},
        {"models/hf-tokenizers/qwen3", "e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea", "qwen2"},
    };
    for (const Case& c : cases) {
        INFO(c.dir);
        const std::string dir = shared_path(c.dir);
        if (!deskside::test::model_or_skip(dir + "/tokenizer.json", "the Hugging Face tokenizer",
                                           "see ../shared/models/README.md"))
            return;
        const auto tok = Tokenizer::from_hf_dir(dir);
        CHECK(bpe_check_hash(*tok) == c.hash);
        CHECK(bpe_pre_name(c.hash) == std::optional<std::string>(c.pre));
    }
}

TEST_CASE("bpe_pre_name: the converter's table", "[hf]") {
    CHECK(bpe_pre_name("0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5") ==
          std::optional<std::string>("llama-bpe"));
    // listed twice by the converter (mpt, then olmo): its ifs run in order, so the later name is written
    CHECK(bpe_pre_name("b6dc8df998e1cfbdc4eac8243701a65afe638679230920b50d6f17d81c098166") ==
          std::optional<std::string>("olmo"));
    CHECK_FALSE(bpe_pre_name(std::string(64, '0')));
    // the text starts with "\n \n\n" and ends with "We'Ve a'lL" (convert_hf_to_gguf_update.py's chktxt)
    CHECK(bpe_check_text().starts_with("\n \n\n \n\n\n \t \t\t \t\n"));
    CHECK(bpe_check_text().ends_with("We'Ve a'lL"));
}
