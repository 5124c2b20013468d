// Tokenizer::from_sentencepiece: a tokenizer.model file, encoded by libsentencepiece itself. The
// vocabulary (pieces, scores, types) is read from the processor so that decoding, special
// tokens and end-of-generation ids work as for a GGUF vocabulary.
#include <sentencepiece_processor.h>

#include "models/tokenizer/encoder.h"
#include "models/tokenizer/tokenizer.h"
#include "models/tokenizer/utf8.h"
#include "models/tokenizer/vocab.h"

namespace deskside::models {

using tokenizer::Vocab;

namespace tokenizer {
namespace {

class SentencePieceEncoder final : public Encoder {
   public:
    explicit SentencePieceEncoder(std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp) : sp_(std::move(sp)) {}

    void encode(std::string_view text, std::vector<int32_t>& out) const override {
        std::vector<int> ids;
        const auto status = sp_->Encode(text, &ids);
        if (!status.ok()) throw std::runtime_error("sentencepiece: " + status.ToString());
        out.insert(out.end(), ids.begin(), ids.end());
    }

   private:
    std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace

std::unique_ptr<Encoder> make_sentencepiece_encoder(std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp) {
    return std::make_unique<SentencePieceEncoder>(std::move(sp));
}

}  // namespace tokenizer

std::unique_ptr<Tokenizer> Tokenizer::from_sentencepiece(const std::string& model_path) {
    auto sp = std::make_shared<sentencepiece::SentencePieceProcessor>();
    if (const auto status = sp->Load(model_path); !status.ok()) {
        throw TokenizerError(model_path + ": cannot load SentencePiece model: " + status.ToString());
    }
    auto vocab = std::make_unique<Vocab>();
    vocab->kind = tokenizer::VocabKind::Spm;
    vocab->escape_whitespace = true;
    const int n = sp->GetPieceSize();
    for (int id = 0; id < n; ++id) {
        uint32_t attr = tokenizer::kAttrNormal;
        if (sp->IsControl(id)) {
            attr = tokenizer::kAttrControl;
        } else if (sp->IsUnknown(id)) {
            attr = tokenizer::kAttrUnknown;
        } else if (sp->IsByte(id)) {
            attr = tokenizer::kAttrByte;
        } else if (sp->IsUnused(id)) {
            attr = tokenizer::kAttrUnused;
        }
        try {
            vocab->add_token(sp->IdToPiece(id), sp->GetScore(id), attr);
        } catch (const std::runtime_error& e) {
            throw TokenizerError(model_path + ": " + e.what());
        }
    }
    auto id_or_none = [&](int id) { return id >= 0 && id < n ? id : Vocab::kNone; };
    vocab->bos = id_or_none(sp->bos_id());
    vocab->eos = id_or_none(sp->eos_id());
    vocab->unk = id_or_none(sp->unk_id());
    vocab->pad = id_or_none(sp->pad_id());
    vocab->add_bos = vocab->bos != Vocab::kNone;
    // The model proto's add_dummy_prefix is not exposed by the library; it shows in the
    // encoding of a lone letter.
    std::vector<std::string> pieces;
    vocab->add_space_prefix = sp->Encode("a", &pieces).ok() && !pieces.empty() &&
                              std::string_view(pieces.front()).starts_with(tokenizer::kSpmSpace);
    vocab->finalize({});

    std::unique_ptr<Tokenizer> tok(new Tokenizer(std::move(vocab), "sentencepiece"));
    tok->set_encoder(tokenizer::make_sentencepiece_encoder(std::move(sp)));
    return tok;
}

}  // namespace deskside::models
