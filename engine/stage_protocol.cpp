// The commands rank 0 sends to the other ranks of a model split across processes
// (engine/stage_link.h), and the loop that repeats them there.
//
// A command is one message of int32 words: [magic, op, seq, dst, n_pos low, n_pos high, count]
// and for Decode / Embed `count` tokens of [seq, token, pos, want_logits]. The magic word catches
// ranks running different builds of the protocol before their messages are misread.
#include <stdexcept>
#include <string>

#include "engine/model.h"
#include "engine/stage_link.h"

namespace deskside::engine {

namespace {

constexpr int32_t kMagic = 0x44534b31;  // "DSK1"
constexpr size_t kHeaderWords = 7, kTokenWords = 4;

}  // namespace

std::vector<int32_t> encode_command(const StageCommand& c) {
    const auto n_pos = static_cast<uint64_t>(c.n_pos);
    std::vector<int32_t> w{kMagic,
                           static_cast<int32_t>(c.op),
                           c.seq,
                           c.dst,
                           static_cast<int32_t>(n_pos & 0xffffffffu),
                           static_cast<int32_t>(n_pos >> 32),
                           static_cast<int32_t>(c.batch.size())};
    w.reserve(kHeaderWords + kTokenWords * c.batch.size());
    for (const BatchToken& t : c.batch) w.insert(w.end(), {t.seq, t.token, t.pos, t.want_logits ? 1 : 0});
    return w;
}

StageCommand decode_command(std::span<const int32_t> w) {
    if (w.size() < kHeaderWords || w[0] != kMagic || w[1] < static_cast<int32_t>(StageOp::Decode) ||
        w[1] > static_cast<int32_t>(StageOp::Stop) || w[6] < 0 ||
        w.size() != kHeaderWords + kTokenWords * static_cast<size_t>(w[6]))
        throw std::runtime_error("--split-hosts: a malformed command from rank 0 (" + std::to_string(w.size()) +
                                 " words); do all hosts run the same deskside build?");
    StageCommand c;
    c.op = static_cast<StageOp>(w[1]);
    c.seq = w[2];
    c.dst = w[3];
    c.n_pos = static_cast<int64_t>(static_cast<uint64_t>(static_cast<uint32_t>(w[4])) |
                                   static_cast<uint64_t>(static_cast<uint32_t>(w[5])) << 32);
    c.batch.resize(static_cast<size_t>(w[6]));
    for (size_t i = 0; i < c.batch.size(); ++i) {
        const int32_t* t = w.data() + kHeaderWords + kTokenWords * i;
        c.batch[i] = {t[0], t[1], t[2], t[3] != 0};
    }
    return c;
}

void run_stage_worker(Model& model, StageLink& link) {
    while (true) {
        const StageCommand c = decode_command(link.receive_command());
        try {
            switch (c.op) {
                case StageOp::Decode: model.decode(c.batch); break;
                case StageOp::Embed: model.embed(c.batch); break;
                case StageOp::Truncate: model.truncate(c.seq, c.n_pos); break;
                case StageOp::Fork: model.fork(c.seq, c.dst, c.n_pos); break;
                case StageOp::Stop: return;
            }
        } catch (const std::invalid_argument&) {
            // Rank 0 raised the same error from the same state before anything crossed.
        } catch (const std::runtime_error&) {
            // A full KV cache: likewise raised on rank 0, at the same step of the call.
        }
    }
}

}  // namespace deskside::engine
