// A driver for grammar-constrained sampling, used by tests/py/test_grammar_jsonschema.py (which
// checks the documents with the jsonschema package) and by scripts/bench-grammar.sh.
//   grammar_tool sample VOCAB.gguf (SCHEMA.json | --json-object) [--seed S] [--count N] [--max-tokens M]
//       draws random logits (standard normal, temperature 1) and samples among the allowed tokens
//       until an end-of-generation token; with --count 1 (the default) prints the document, else
//       one JSON line {"seed": s, "text": "..."} per document (seeds S, S+1, ...). Exit 3 when a
//       document is not complete after M tokens, 2 on an unsupported schema (the message names
//       the keyword and its path).
//   grammar_tool bench VOCAB.gguf [--docs N] [--seed S] [--clock wall|cpu]
//       times apply() + accept() per token over built-in schemas: "cold" documents each start
//       from a new grammar (empty caches), "warm" ones share one grammar (what a server sees for a
//       schema used again); prints mean / p50 / p99 microseconds per token. --clock cpu times the
//       thread's CPU time instead of the wall clock (for a machine that is not idle: time spent
//       preempted is not counted, cache misses are).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <time.h>

#include "engine/grammar.h"
#include "models/gguf.h"
#include "models/tokenizer/tokenizer.h"

namespace ds = deskside;
using ds::engine::GrammarMatcher;
using ds::engine::GrammarVocab;

namespace {

struct Document {
    std::string text;
    bool complete = false;
    std::vector<double> micros;  // apply() + accept() per token
};

// The clock per-token times are read from: the wall clock, or the thread's CPU time.
bool g_cpu_clock = false;

double now_micros() {
    if (g_cpu_clock) {
        timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One document: random logits each step, masked, a softmax draw among the finite ones.
Document sample(const std::shared_ptr<const ds::engine::Grammar>& grammar,
                const std::shared_ptr<const GrammarVocab>& vocab, uint64_t seed, int max_tokens) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal;
    GrammarMatcher m(grammar, vocab);
    std::vector<float> logits(static_cast<size_t>(vocab->n_vocab()));
    std::vector<double> probs(logits.size());
    Document doc;
    for (int t = 0; t < max_tokens; ++t) {
        for (float& l : logits) l = normal(rng);
        const double t0 = now_micros();
        m.apply(logits);
        const double t1 = now_micros();
        const float top = *std::max_element(logits.begin(), logits.end());
        if (!std::isfinite(top)) throw std::runtime_error("the mask left no token");
        double sum = 0;
        for (size_t i = 0; i < logits.size(); ++i)
            sum += probs[i] = std::isfinite(logits[i]) ? std::exp(logits[i] - top) : 0.0;
        double u = std::uniform_real_distribution<double>(0, sum)(rng);
        int32_t token = 0;
        for (size_t i = 0; i < probs.size(); ++i) {
            if (probs[i] > 0) token = static_cast<int32_t>(i);
            if ((u -= probs[i]) < 0 && probs[i] > 0) break;
        }
        const double t2 = now_micros();
        if (!m.accept(token)) throw std::runtime_error("accept() refused an allowed token " + std::to_string(token));
        const double t3 = now_micros();
        doc.micros.push_back((t1 - t0) + (t3 - t2));
        if (vocab->is_eog(token)) {
            doc.complete = true;
            return doc;
        }
        doc.text += vocab->text(token);
    }
    return doc;
}

std::shared_ptr<const GrammarVocab> load_vocab(const std::string& path) {
    const auto tokenizer = ds::models::Tokenizer::from_gguf(ds::models::GgufFile::open(path));
    return std::make_shared<const GrammarVocab>(*tokenizer);
}

std::string option(std::vector<std::string>& args, const std::string& name, const std::string& fallback) {
    const auto it = std::find(args.begin(), args.end(), name);
    if (it == args.end()) return fallback;
    if (it + 1 == args.end()) throw std::runtime_error(name + " needs a value");
    std::string v = *(it + 1);
    args.erase(it, it + 2);
    return v;
}

int run_sample(std::vector<std::string> args) {
    const uint64_t seed = std::stoull(option(args, "--seed", "0"));
    const int count = std::stoi(option(args, "--count", "1"));
    const int max_tokens = std::stoi(option(args, "--max-tokens", "4000"));
    if (args.size() != 2) throw std::runtime_error("sample needs VOCAB and SCHEMA (or --json-object)");
    std::shared_ptr<const ds::engine::Grammar> grammar;
    if (args[1] == "--json-object") {
        grammar = ds::engine::json_object_grammar();
    } else {
        std::ifstream in(args[1]);
        if (!in) throw std::runtime_error("cannot read " + args[1]);
        grammar = ds::engine::json_schema_grammar(nlohmann::json::parse(in));
    }
    const auto vocab = load_vocab(args[0]);
    int status = 0;
    for (int i = 0; i < count; ++i) {
        const Document doc = sample(grammar, vocab, seed + static_cast<uint64_t>(i), max_tokens);
        if (!doc.complete) status = 3;
        if (count == 1) {
            std::cout << doc.text;
        } else {
            // A document cut at max_tokens may end inside a UTF-8 sequence: replaced, not refused.
            std::cout << nlohmann::json{{"seed", seed + i}, {"text", doc.text}, {"complete", doc.complete}}.dump(
                             -1, ' ', false, nlohmann::json::error_handler_t::replace)
                      << "\n";
        }
    }
    return status;
}

// Schemas of the shapes structured outputs and tool calls use.
const std::vector<std::pair<const char*, const char*>> kBenchSchemas = {
    {"person", R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 150}, "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 4}},
        "required": ["name", "age"], "additionalProperties": false})"},
    {"tool_call", R"({"type": "object", "properties": {"name": {"enum": ["get_weather", "search", "send_mail"]},
        "arguments": {"type": "object", "properties": {"city": {"type": "string"},
        "unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer", "minimum": 1, "maximum": 14}},
        "required": ["city"], "additionalProperties": false}}, "required": ["name", "arguments"],
        "additionalProperties": false})"},
    {"tree", R"({"$defs": {"node": {"type": "object", "properties": {"label": {"type": "string", "maxLength": 12},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["label"],
        "additionalProperties": false}}, "$ref": "#/$defs/node"})"},
    {"json_object", nullptr},
};

struct Stats {
    std::vector<double> micros;
    int docs = 0;
    void add(const Document& d) {
        micros.insert(micros.end(), d.micros.begin(), d.micros.end());
        ++docs;
    }
    std::string line() {
        if (micros.empty()) return "no tokens";
        std::sort(micros.begin(), micros.end());
        double sum = 0;
        for (double x : micros) sum += x;
        const auto pct = [&](double p) {
            return micros[std::min(micros.size() - 1, static_cast<size_t>(p * micros.size()))];
        };
        char buf[200];
        std::snprintf(buf, sizeof buf, "%3d docs %6zu tokens  mean %8.1f  p50 %7.1f  p99 %8.1f us/token", docs,
                      micros.size(), sum / micros.size(), pct(0.5), pct(0.99));
        return buf;
    }
};

int run_bench(std::vector<std::string> args) {
    const int docs = std::stoi(option(args, "--docs", "5"));
    const uint64_t seed = std::stoull(option(args, "--seed", "1"));
    const std::string clock = option(args, "--clock", "wall");
    if (clock != "wall" && clock != "cpu") throw std::runtime_error("--clock is wall or cpu, not " + clock);
    g_cpu_clock = clock == "cpu";
    if (args.size() != 1) throw std::runtime_error("bench needs VOCAB");
    const auto t0 = std::chrono::steady_clock::now();
    const auto vocab = load_vocab(args[0]);
    std::printf("vocabulary %s: %d tokens, trie built in %.0f ms\n", args[0].c_str(), vocab->n_vocab(),
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    const auto make = [](const char* schema) {
        return schema ? ds::engine::json_schema_grammar(nlohmann::json::parse(schema))
                      : ds::engine::json_object_grammar();
    };
    Stats all_cold, all_warm;
    for (const auto& [name, schema] : kBenchSchemas) {
        Stats cold, warm;
        const auto shared = make(schema);
        for (int d = 0; d < docs; ++d) {
            const Document c = sample(make(schema), vocab, seed + d, 2000);
            cold.add(c);
            all_cold.add(c);
            const Document w = sample(shared, vocab, seed + d, 2000);
            if (d > 0) {  // the first document on the shared grammar filled its caches
                warm.add(w);
                all_warm.add(w);
            }
        }
        std::printf("%-12s cold: %s\n%-12s warm: %s\n", name, cold.line().c_str(), "", warm.line().c_str());
    }
    std::printf("%-12s cold: %s\n%-12s warm: %s\n", "all", all_cold.line().c_str(), "", all_warm.line().c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || (args[0] != "sample" && args[0] != "bench")) {
        std::fprintf(stderr,
                     "usage: grammar_tool sample VOCAB SCHEMA|--json-object [--seed S] [--count N] "
                     "[--max-tokens M] | bench VOCAB [--docs N] [--seed S] [--clock wall|cpu]\n");
        return 2;
    }
    try {
        const std::string mode = args[0];
        args.erase(args.begin());
        return mode == "sample" ? run_sample(args) : run_bench(args);
    } catch (const ds::engine::SchemaError& e) {
        std::fprintf(stderr, "grammar_tool: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "grammar_tool: %s\n", e.what());
        return 1;
    }
}
