// One model split across processes, usually on different hosts (--split-hosts): each process (a
// rank, numbered from 0) runs a contiguous range of layers on its own devices, rank 0 the first
// range, the HTTP server and the sampler. This is the engine's side of it: what crosses between
// ranks and in what order; the transport (MPI) is behind StageLink (engine/mpi_split.h).
//
// Every rank keeps its own copy of the KV cache's block tables (engine/kv_cache.h). They stay
// equal because rank 0 sends every call that changes them (decode, embed, truncate, fork) to
// every other rank before running it, and each rank runs it on the same state: the same blocks,
// the same rows, the same validation errors. Only the step's activations cross then:
//   rank r -> r+1: the residual stream x of the step's n tokens, n * n_embd F32 (bit-exact)
//   last rank -> 0: the logits (or normed hidden states) of the tokens that want them
// so the logits equal one process's bits when the ranks' devices compute alike.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace deskside::engine {

class Model;
struct BatchToken;

// The transport between the ranks; messages between two ranks arrive in the order sent.
class StageLink {
   public:
    virtual ~StageLink() = default;
    virtual int rank() const = 0;
    virtual int n_ranks() const = 0;

    // Rank 0: a command to every other rank. Others: the next command from rank 0 (waits).
    virtual void send_command(std::span<const int32_t> words) = 0;
    virtual std::vector<int32_t> receive_command() = 0;
    // Activations to or from rank `peer`; the receiver knows how many floats come.
    virtual void send(int peer, std::span<const float> values) = 0;
    virtual void receive(int peer, std::span<float> values) = 0;

    // Called by every rank with its error ("" when it has none) at the same point, e.g. after
    // loading; throws std::runtime_error on every rank, naming the failed ranks, when one failed.
    virtual void agree(const std::string& error) = 0;
};

// What rank 0 sends before each call that the other ranks must repeat.
enum class StageOp : int32_t { Decode = 1, Embed = 2, Truncate = 3, Fork = 4, Stop = 5 };

struct StageCommand {
    StageOp op = StageOp::Stop;
    int32_t seq = 0;    // Truncate: the sequence; Fork: the source
    int32_t dst = 0;    // Fork: the destination
    int64_t n_pos = 0;  // Truncate, Fork
    std::vector<BatchToken> batch;  // Decode, Embed
};

std::vector<int32_t> encode_command(const StageCommand& c);
// Throws std::runtime_error for words that are not a command (a transport or version mismatch).
StageCommand decode_command(std::span<const int32_t> words);

// Ranks other than 0: repeats rank 0's calls on `model` until it sends Stop. An error a call
// raises here was raised on rank 0 too (the same state, the same checks) and is dropped.
void run_stage_worker(Model& model, StageLink& link);

}  // namespace deskside::engine
