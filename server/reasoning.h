// Reasoning ("thinking") text of models whose templates think in <think>...</think> (Qwen3,
// QwQ, DeepSeek-R1 and its distills): OpenAI-compatible servers return it apart from the answer,
// as message.reasoning_content (streamed as delta.reasoning_content), as vLLM and llama.cpp do.
//
// A template thinks when its source mentions the tags. When the rendered prompt already ends
// inside a <think> block (DeepSeek-R1's generation prompt opens it), the output starts as
// reasoning; otherwise reasoning starts at a <think> the model writes first. The split is
// incremental: text arrives in pieces, and a piece that might be the start of a tag is held back
// until it is decided, so streamed and whole answers split the same way. Whitespace around the
// reasoning and at the start of the answer is dropped (the template's own line breaks).
#pragma once

#include <string>
#include <string_view>

namespace deskside::server {

// Whether a chat template's source uses <think> blocks.
bool template_thinks(std::string_view template_source);

class ReasoningSplitter {
   public:
    // `prompt` is the rendered prompt: whether the answer starts inside a <think> block.
    explicit ReasoningSplitter(std::string_view prompt);

    struct Parts {
        std::string reasoning, content;
    };
    // The newly decided text of each kind.
    Parts push(std::string_view text);
    // The rest, at the end of the answer (an unclosed block is all reasoning).
    Parts flush();

   private:
    // kStart: before the first non-space (is it <think>?); kReasoning: inside the block;
    // kAfter: between </think> and the answer's first non-space; kContent: the answer.
    enum class State { kStart, kReasoning, kAfter, kContent };
    State state_;
    bool reasoning_begun_ = false;  // the block's leading whitespace is dropped
    std::string pending_;  // undecided: a possible tag prefix, or whitespace that may end the block
};

}  // namespace deskside::server
