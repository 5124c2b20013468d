// Grammar-constrained sampling. References we did not write: std::regex (ECMAScript) for the
// combinators and for `pattern`, integer arithmetic for integer ranges, nlohmann::json's parser for
// the documents, the stories260K SentencePiece and Qwen2 byte-level BPE vocabularies for the masks.
// The Python side (tests/py/test_grammar_jsonschema.py) validates sampled documents with jsonschema.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <regex>
#include <set>

#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "models/gguf.h"
#include "models/tokenizer/tokenizer.h"
#include "support/paths.h"

namespace deskside::engine {
namespace {

using json = nlohmann::json;

// Every string over `alphabet` up to `max_len` characters.
void each_string(const std::string& alphabet, size_t max_len, const std::function<void(const std::string&)>& f) {
    std::vector<std::string> level{""};
    f("");
    for (size_t len = 1; len <= max_len; ++len) {
        std::vector<std::string> next;
        for (const std::string& s : level) {
            for (char c : alphabet) {
                next.push_back(s + c);
                f(next.back());
            }
        }
        level = std::move(next);
    }
}

// The grammar accepts exactly what the ECMAScript regex matches in full, and is_prefix holds
// exactly for prefixes of accepted strings (within max_len + 2).
void check_against_regex(const Grammar& g, const std::string& re, const std::string& alphabet, size_t max_len,
                         const std::string& quote = "") {
    const std::regex r(re, std::regex::ECMAScript);
    std::set<std::string> prefixes;
    each_string(alphabet, max_len + 2, [&](const std::string& s) {
        if (!std::regex_match(s, r)) return;
        for (size_t i = 0; i <= s.size(); ++i) prefixes.insert(s.substr(0, i));
    });
    each_string(alphabet, max_len, [&](const std::string& s) {
        INFO("regex " << re << " string '" << s << "'");
        CHECK(g.matches(quote + s + quote) == std::regex_match(s, r));
        if (quote.empty()) CHECK(g.is_prefix(s) == (prefixes.count(s) > 0));
    });
}

std::shared_ptr<const Grammar> schema(const char* text) { return json_schema_grammar(json::parse(text)); }

// Valid JSON, also when a number is beyond double range (nlohmann::json refuses those, error 406).
bool parses(const std::string& text) {
    try {
        return !json::parse(text).is_discarded();
    } catch (const json::out_of_range& e) {
        return e.id == 406;
    } catch (const json::exception&) {
        return false;
    }
}

std::unique_ptr<models::Tokenizer> load(const std::string& rel) {
    return models::Tokenizer::from_gguf(models::GgufFile::open(test::shared_path(rel)));
}

}  // namespace

TEST_CASE("literal, sequence, choice and repeat accept what the equivalent regex accepts", "[grammar]") {
    {
        GrammarBuilder b;
        const auto item = b.choice({b.literal("ab"), b.literal("c")});
        const auto g = b.build(b.repeat(item, 2, 4, b.literal(",")));
        check_against_regex(*g, "(ab|c)(,(ab|c)){1,3}", "abc,", 6);
    }
    {
        GrammarBuilder b;
        const auto g = b.build(
            b.sequence({b.literal("a"), b.repeat(b.literal("b"), 0, -1), b.choice({b.literal(""), b.literal("c")})}));
        check_against_regex(*g, "ab*c?", "abc", 7);
    }
    {
        GrammarBuilder b;  // unbounded with a separator, and an empty-able item
        const auto item = b.repeat(b.literal("a"), 0, 2);
        const auto g = b.build(b.repeat(item, 1, -1, b.literal(";")));
        check_against_regex(*g, "a{0,2}(;a{0,2})*", "a;", 7);
    }
    {
        GrammarBuilder b;  // a shared sub-rule and recursion through a forward rule: balanced brackets
        const auto x = b.forward();
        b.define(x, b.repeat(b.sequence({b.literal("["), x, b.literal("]")}), 0, -1));
        const auto g = b.build(x);
        CHECK(g->matches("[[][]][]"));
        CHECK(g->matches(""));
        CHECK_FALSE(g->matches("[[]"));
        CHECK(g->is_prefix("[[]"));
        CHECK_FALSE(g->is_prefix("[]]"));
    }
}

TEST_CASE("grammar builder rejects left recursion and undefined rules", "[grammar]") {
    GrammarBuilder b;
    const auto x = b.forward();
    b.define(x, b.choice({b.sequence({x, b.literal("a")}), b.literal("b")}));
    CHECK_THROWS_AS(b.build(x), std::invalid_argument);
    GrammarBuilder c;
    const auto y = c.forward();
    CHECK_THROWS_AS(c.build(c.sequence({c.literal("a"), y})), std::invalid_argument);
}

TEST_CASE("integer bounds give exactly the integers in range, canonical", "[grammar]") {
    const std::vector<std::pair<const char*, std::pair<int64_t, int64_t>>> cases = {
        {R"({"type": "integer", "minimum": -37, "maximum": 1234})", {-37, 1234}},
        {R"({"type": "integer", "exclusiveMinimum": 9, "exclusiveMaximum": 100})", {10, 99}},
        {R"({"type": "integer", "minimum": 0.5, "maximum": 7.9})", {1, 7}},
        {R"({"type": "integer", "minimum": -500, "maximum": -120})", {-500, -120}},
        {R"({"type": "integer", "minimum": 42})", {42, INT64_MAX}},
        {R"({"type": "integer", "maximum": -3})", {INT64_MIN, -3}},
        {R"({"type": "integer"})", {INT64_MIN, INT64_MAX}},
    };
    for (const auto& [text, range] : cases) {
        const auto g = schema(text);
        INFO(text);
        for (int64_t n = -3000; n <= 3000; ++n) {
            INFO(n);
            REQUIRE(g->matches(std::to_string(n)) == (n >= range.first && n <= range.second));
        }
        CHECK_FALSE(g->matches("-0"));
        CHECK_FALSE(g->matches("042"));
        CHECK(g->matches("123456789012") == (range.second == INT64_MAX));
    }
}

TEST_CASE("pattern follows ECMAScript search semantics on the decoded string", "[grammar]") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"^[a-c]{2,3}(x|yz)?$", "abcxyz"},
        {"b+c", "abcx"},
        {"^a.c", "abcx"},
        {"^(?:ab|c)*$", "abc"},
        {"^[^b]?x$", "abx"},
        {"^\\d\\w$", "a1_-"},
        {"x$|^y", "xyz"},
        {"^a{2}b{1,}$", "ab"},
    };
    for (const auto& [re, alphabet] : cases) {
        const auto g = json_schema_grammar(json{{"type", "string"}, {"pattern", re}});
        // .*(R).* is search semantics for any R, anchors included
        check_against_regex(*g, ".*(" + re + ").*", alphabet, 6, "\"");
    }
    // Characters that need escapes in JSON are written in one canonical form.
    const auto quote = json_schema_grammar(json{{"type", "string"}, {"pattern", "^[\"\\\\\n]$"}});
    CHECK(quote->matches(R"("\"")"));
    CHECK(quote->matches(R"("\\")"));
    CHECK(quote->matches(R"("\n")"));
    CHECK_FALSE(quote->matches(R"("n")"));
    for (const char* bad : {"(?=a)b", "\\bword", "(a)\\1", "\\s+", "[α-ω]", "a^b", "(?<n>x)"}) {
        INFO(bad);
        CHECK_THROWS_AS(json_schema_grammar(json{{"type", "string"}, {"pattern", bad}}), SchemaError);
    }
}

TEST_CASE("schemas: objects, arrays, enums, anyOf, nullable, formats", "[grammar]") {
    const auto person = schema(R"({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 3}, "age": {"type": "integer", "minimum": 0},
        "nick": {"type": ["string", "null"]}}, "required": ["name", "age"], "additionalProperties": false})");
    CHECK(person->matches(R"({"age": 3, "name": "ab"})"));
    CHECK(person->matches(R"({"age":3,"name":"ab","nick":null})"));
    CHECK(person->matches("{\n  \"age\": 3,\n  \"name\": \"\\u00e9\"\n}"));
    CHECK_FALSE(person->matches(R"({"age": 3})"));                       // required
    CHECK_FALSE(person->matches(R"({"age": 3, "name": ""})"));           // minLength
    CHECK_FALSE(person->matches(R"({"age": 3, "name": "abcd"})"));       // maxLength
    CHECK_FALSE(person->matches(R"({"age": -1, "name": "a"})"));         // minimum
    CHECK_FALSE(person->matches(R"({"age": 3, "name": "a", "x": 1})"));  // additionalProperties
    CHECK_FALSE(person->matches(R"({"age": 3,  "name": "a"})"));         // two spaces
    CHECK_FALSE(person->matches(R"({"age": 3, "name": "\ud800"})"));     // lone surrogate escape

    // Properties come in the schema's order, as the client wrote it (OpenAI's structured outputs).
    const auto ordered = json_schema_grammar(nlohmann::ordered_json::parse(
        R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"]})"));
    CHECK(ordered->matches(R"({"name": "a", "age": 3})"));
    CHECK_FALSE(ordered->matches(R"({"age": 3, "name": "a"})"));

    const auto arr = schema(R"({"type": "array", "prefixItems": [{"const": "x"}], "items": {"enum": [1, "two", null]},
        "minItems": 2, "maxItems": 3})");
    CHECK(arr->matches(R"(["x", 1])"));
    CHECK(arr->matches(R"(["x", "two", null])"));
    CHECK_FALSE(arr->matches(R"(["x"])"));
    CHECK_FALSE(arr->matches(R"(["x", 1, 1, 1])"));
    CHECK_FALSE(arr->matches(R"([1, 1])"));
    CHECK_FALSE(arr->matches(R"(["x", 2])"));

    const auto extra = schema(R"({"type": "object", "properties": {"id": {"type": "integer"}},
        "additionalProperties": {"type": "boolean"}})");
    CHECK(extra->matches(R"({"id": 1, "i": true, "idx": false})"));
    CHECK_FALSE(extra->matches(R"({"id": 1, "id": true})"));  // a fixed name is not an additional one
    CHECK_FALSE(extra->matches(R"({"id": 1, "x": 2})"));

    const auto any =
        schema(R"({"anyOf": [{"type": "string", "format": "date"}, {"type": "number"}], "nullable": true})");
    CHECK(any->matches(R"("2024-02-28")"));
    CHECK_FALSE(any->matches(R"("2024-02-30")"));
    CHECK(any->matches("-1.5e+3"));
    CHECK(any->matches("null"));
    const auto dt = schema(R"({"type": "string", "format": "date-time"})");
    CHECK(dt->matches(R"("2026-12-02T05:15:31.25Z")"));
    CHECK(dt->matches(R"("2026-12-02T23:59:59+05:30")"));
    CHECK_FALSE(dt->matches(R"("2026-12-02T24:00:00Z")"));
    const auto id = schema(R"({"type": "string", "format": "uuid"})");
    CHECK(id->matches(R"("123e4567-e89b-12d3-a456-426614174000")"));
    CHECK_FALSE(id->matches(R"("123e4567e89b-12d3-a456-426614174000")"));
}

TEST_CASE("recursion through $ref", "[grammar]") {
    const auto tree = schema(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}, "$ref": "#/$defs/node"})");
    CHECK(tree->matches(R"({"kids": [{"kids": [{"v": 3}], "v": 2}, {"v": 4}], "v": 1})"));
    CHECK_FALSE(tree->matches(R"({"kids": [{"kids": [{}], "v": 2}], "v": 1})"));
    const auto list = schema(R"({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
        "required": ["next"]})");
    CHECK(list->matches(R"({"next": {"next": {"next": null}}})"));
    CHECK_FALSE(list->matches(R"({"next": {"next": 1}})"));
}

TEST_CASE("unsupported keywords throw SchemaError naming the keyword and its path", "[grammar]") {
    const std::vector<std::tuple<const char*, const char*, const char*>> cases = {
        {R"({"properties": {"age": {"type": "integer", "multipleOf": 3}}})", "properties.age.multipleOf", "multipleOf"},
        {R"({"properties": {"x": {"type": "number", "exclusiveMinimum": 0}}})", "properties.x.exclusiveMinimum",
         "exclusiveMinimum"},
        {R"({"type": "object", "patternProperties": {"^a": {}}})", "patternProperties", "patternProperties"},
        {R"({"items": {"not": {"type": "string"}}})", "items.not", "not"},
        {R"({"type": "array", "uniqueItems": true})", "uniqueItems", "uniqueItems"},
        {R"({"type": "string", "format": "uri"})", "format", "format"},
        {R"({"type": "string", "pattern": "a", "maxLength": 3})", "pattern", "pattern"},
        {R"({"$ref": "other.json#/x"})", "$ref", "$ref"},
        {R"({"$ref": "#/$defs/missing"})", "$ref", "$ref"},
        {R"({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]})", "oneOf", "oneOf"},
        {R"({"if": {"type": "string"}, "then": {}})", "if", "if"},
        {R"({"type": "object", "minProperties": 1})", "minProperties", "minProperties"},
    };
    for (const auto& [text, path, keyword] : cases) {
        INFO(text);
        try {
            json_schema_grammar(json::parse(text));
            FAIL("no SchemaError");
        } catch (const SchemaError& e) {
            CHECK(e.path == path);
            CHECK(e.keyword == keyword);
            CHECK_THAT(e.what(), Catch::Contains(keyword) && Catch::Contains(path));
        }
    }
    // Annotations are ignored; oneOf with disjoint types or a constant discriminator is accepted.
    CHECK_NOTHROW(schema(R"({"title": "t", "description": "d", "$schema": "x", "examples": [1], "type": "integer",
        "default": 1, "deprecated": false, "readOnly": true, "$comment": "c"})"));
    CHECK_NOTHROW(schema(R"({"oneOf": [{"type": "string"}, {"type": "integer"}]})"));
    CHECK_NOTHROW(schema(R"({"oneOf": [
        {"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
        {"type": "object", "properties": {"k": {"const": "b"}, "n": {"type": "integer"}}, "required": ["k"]}]})"));
}

// Random walks through a document on a real vocabulary: each allowed token keeps the text a
// valid prefix (checked by stepping the grammar on the bytes, not through the trie), each refused
// one does not, EOG only when complete, and finished documents parse as JSON.
// A uniform pick among allowed tokens need not finish a free-form JSON value (it may keep nesting),
// so `must_finish` is set only for schemas that bound the nesting.
// Distinct logits of both signs, so a mask that changed an allowed one would show.
float logit_of(size_t id) { return static_cast<float>(static_cast<int64_t>(id % 2003) - 1001) * 0.37f; }

void check_masks(const models::Tokenizer& tok, const std::shared_ptr<const Grammar>& g, int docs, int check_every,
                 uint64_t seed, bool must_finish) {
    const auto vocab = std::make_shared<const GrammarVocab>(tok);
    std::mt19937_64 rng(seed);
    for (int d = 0; d < docs; ++d) {
        GrammarMatcher m(g, vocab);
        std::string text;
        for (int step = 0; step < 3000; ++step) {
            std::vector<float> logits(tok.n_vocab() + 7);  // a model may pad its output row
            for (size_t i = 0; i < logits.size(); ++i) logits[i] = logit_of(i);
            m.apply(logits);
            for (size_t i = tok.n_vocab(); i < logits.size(); ++i) REQUIRE(std::isinf(logits[i]));
            std::vector<int32_t> allowed;
            for (int32_t id = 0; id < tok.n_vocab(); ++id) {
                const bool ok = std::isfinite(logits[id]);
                if (ok) REQUIRE(logits[id] == logit_of(id));  // an allowed token's logit is left as it was
                if (ok) allowed.push_back(id);
                if (tok.is_eog(id)) {
                    REQUIRE(ok == g->matches(text));
                } else if (step % check_every == 0 || ok) {
                    const std::string piece = vocab->text(id);
                    INFO("text '" << text << "' token " << id << " '" << piece << "'");
                    REQUIRE(ok == (!piece.empty() && g->is_prefix(text + piece)));
                }
            }
            REQUIRE(!allowed.empty());
            const int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
            REQUIRE(m.accept(pick));
            if (tok.is_eog(pick)) break;
            text += vocab->text(pick);
            if (g->matches(text) && std::uniform_int_distribution<int>(0, 3)(rng) == 0) {
                std::vector<float> l(tok.n_vocab(), 0.0f);
                m.apply(l);
                REQUIRE(m.complete());
                CHECK(std::isfinite(l[tok.eog_ids()[0]]));
            }
        }
        INFO(text);
        if (must_finish) REQUIRE(m.complete());
        if (m.complete()) CHECK(parses(text));
    }
}

TEST_CASE("masks on the stories260K SentencePiece vocabulary", "[grammar]") {
    const auto tok = load("models/stories260K.gguf");
    check_masks(*tok, schema(R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"},
        "maxItems": 3}, "b": {"enum": ["x y", 2]}}, "required": ["b"], "additionalProperties": false})"),
                20, 1, 1, true);
    check_masks(*tok, json_object_grammar(), 10, 1, 2, false);
}

TEST_CASE("masks on the Qwen2 byte-level BPE vocabulary", "[grammar]") {
    const auto tok = load("models/vocab/ggml-vocab-qwen2.gguf");
    check_masks(*tok, schema(R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 10,
        "maximum": 99}, "s": {"type": "string", "maxLength": 2}}, "required": ["n", "s"],
        "additionalProperties": false})"),
                2, 7, 3, true);
}

TEST_CASE("only EOG remains when the grammar is complete and nothing may follow", "[grammar]") {
    const auto tok = load("models/vocab/ggml-vocab-qwen2.gguf");
    const auto vocab = std::make_shared<const GrammarVocab>(*tok);
    GrammarBuilder b;
    GrammarMatcher m(b.build(b.literal("ok")), vocab);
    for (int32_t id : tok->encode("ok", false, false)) REQUIRE(m.accept(id));
    REQUIRE(m.complete());
    std::vector<float> logits(tok->n_vocab(), 1.0f);
    m.apply(logits);
    for (int32_t id = 0; id < tok->n_vocab(); ++id) REQUIRE(std::isfinite(logits[id]) == tok->is_eog(id));
    CHECK_FALSE(m.accept(tok->encode("x", false, false)[0]));
}

TEST_CASE("a control token that does not end generation stands for its text", "[grammar]") {
    const auto tok = load("models/vocab/ggml-vocab-qwen2.gguf");
    const auto vocab = std::make_shared<const GrammarVocab>(*tok);
    const int32_t im_start = *tok->find_token("<|im_start|>");
    REQUIRE(tok->is_control(im_start));
    REQUIRE_FALSE(tok->is_eog(im_start));
    GrammarBuilder b;
    const auto g =
        b.build(b.sequence({b.literal("<|im_start|>tool\n"),
                            b.json_schema(json::parse(
                                R"({"type": "object", "properties": {"name": {"const": "f"}}, "required": ["name"]})")),
                            b.literal("\n</tool_call>")}));
    GrammarMatcher m(g, vocab);
    CHECK(m.allowed(im_start));
    CHECK(m.allowed(*tok->find_token("<")));
    GrammarMatcher plain(g, vocab);  // the same text from ordinary pieces
    for (int32_t id : tok->encode("<|im_start|>tool\n{\"name\": \"f\"}\n</tool_call>", false, false))
        REQUIRE(plain.accept(id));
    CHECK(plain.complete());
    REQUIRE(m.accept(im_start));
    for (int32_t id : tok->encode("tool\n{\"name\":\"f\"}", false, false)) REQUIRE(m.accept(id));
    CHECK_FALSE(m.complete());
    for (int32_t id : tok->encode("\n</tool_call>", false, false)) REQUIRE(m.accept(id));
    CHECK(m.complete());
}

}  // namespace deskside::engine
