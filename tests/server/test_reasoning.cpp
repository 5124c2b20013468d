// The <think> split of reasoning models' answers: whole and fed byte by byte alike, with the
// generation prompts of the real templates in ../shared/templates.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "server/reasoning.h"
#include "support/paths.h"

namespace deskside::server {
namespace {

ReasoningSplitter::Parts split(std::string_view prompt, std::string_view text, size_t piece) {
    ReasoningSplitter s(prompt);
    ReasoningSplitter::Parts all;
    for (size_t i = 0; i < text.size(); i += piece) {
        const auto p = s.push(text.substr(i, piece));
        all.reasoning += p.reasoning;
        all.content += p.content;
    }
    const auto p = s.flush();
    all.reasoning += p.reasoning;
    all.content += p.content;
    return all;
}

std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("reasoning: templates that think are recognised", "[reasoning]") {
    CHECK(template_thinks(read(test::shared_path("templates/Qwen-Qwen3-0.6B.jinja"))));
    CHECK(template_thinks(read(test::shared_path("templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"))));
    CHECK_FALSE(template_thinks(read(test::shared_path("templates/Qwen-Qwen2.5-7B-Instruct.jinja"))));
}

TEST_CASE("reasoning: <think> blocks split from the answer, streamed or whole", "[reasoning]") {
    struct Case {
        const char* prompt;
        const char* text;
        const char* reasoning;
        const char* content;
    };
    const Case cases[] = {
        {"<|im_start|>assistant\n", "<think>\nLet me add.\n2+2=4\n</think>\n\nIt is 4.", "Let me add.\n2+2=4", "It is 4."},
        // DeepSeek-R1's generation prompt opens the block itself.
        {"<｜Assistant｜><think>\n", "Hmm, simple.\n</think>\n\nFour.", "Hmm, simple.", "Four."},
        {"<|im_start|>assistant\n", "No thinking here.", "", "No thinking here."},
        {"<|im_start|>assistant\n", "<think>\n\n</think>\n\nEmpty block.", "", "Empty block."},
        {"<|im_start|>assistant\n", "<thinking> is not the tag", "", "<thinking> is not the tag"},
        {"<|im_start|>assistant\n", "<think>cut off mid-tho", "cut off mid-tho", ""},
        {"<|im_start|>assistant\n", "<think>a </thinker> b</think>c", "a </thinker> b", "c"},
    };
    for (const Case& c : cases) {
        for (const size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{1000}}) {
            INFO(c.text << " in pieces of " << piece);
            const auto p = split(c.prompt, c.text, piece);
            CHECK(p.reasoning == c.reasoning);
            CHECK(p.content == c.content);
        }
    }
}

}  // namespace deskside::server
