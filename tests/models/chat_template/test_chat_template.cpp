// Chat templates against Python's jinja2: every real template in ../shared/templates (and the
// Hugging Face tokenizer directories) rendered for the conversations in
// tests/templates/cases.json must match, byte for byte, what scripts/render_templates.py got
// from jinja2 configured as transformers configures it; where jinja2 raised, we must raise the
// same kind of error. snippets.txt pins single behaviours (whitespace control, scoping, filters,
// Python repr, ...) the same way.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "models/chat_template/chat_template.h"
#include "support/paths.h"
#include "support/process.h"

namespace {

namespace fs = std::filesystem;
using deskside::models::ChatTemplate;
using deskside::models::TemplateError;
using nlohmann::ordered_json;

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

const fs::path kFixtures = deskside::test::source_path("tests/templates");
const fs::path kExpected = kFixtures / "expected";

const ordered_json& spec() {
    static const ordered_json s = [] {
        ordered_json j = ordered_json::parse(read_text(kFixtures / "cases.json"));
        setenv("DESKSIDE_NOW", j["now"].get<std::string>().c_str(), 1);  // what strftime_now sees
        return j;
    }();
    return s;
}

struct Outcome {
    bool ok = false;
    std::string text;         // the rendering, or the error message
    std::string python_type;  // error class as jinja2 would name it
    TemplateError::Kind kind = TemplateError::Kind::kRuntime;
};

Outcome render(const std::string& source, const ordered_json& context) {
    Outcome o;
    try {
        o.text = ChatTemplate::parse(source).render(context);
        o.ok = true;
    } catch (const TemplateError& e) {
        o.text = e.what();
        o.python_type = e.python_type();
        o.kind = e.kind();
    }
    return o;
}

// Compares one rendering with its fixture (<stem>.txt or <stem>.error); returns a failure
// description, empty when it matches.
std::string compare(const std::string& stem, const Outcome& got) {
    const fs::path txt = kExpected / (stem + ".txt"), err = kExpected / (stem + ".error");
    if (fs::exists(txt)) {
        if (!got.ok) return stem + ": jinja2 renders, we fail with: " + got.text;
        const std::string want = read_text(txt);
        if (got.text == want) return {};
        size_t i = 0;
        while (i < want.size() && i < got.text.size() && want[i] == got.text[i]) ++i;
        return stem + ": output differs at byte " + std::to_string(i) + "\n--- jinja2:\n" + want.substr(i > 80 ? i - 80 : 0, 240) +
               "\n--- ours:\n" + got.text.substr(i > 80 ? i - 80 : 0, 240);
    }
    if (!fs::exists(err)) return stem + ": no fixture; run scripts/render_templates.py";
    std::string want = read_text(err);
    while (!want.empty() && want.back() == '\n') want.pop_back();
    const std::string want_type = want.substr(0, want.find(':'));
    const std::string want_msg = want.substr(want.find(':') + 2);
    if (got.ok) return stem + ": jinja2 raises " + want + ", we rendered:\n" + got.text.substr(0, 300);
    if (want_type == "TemplateError") {  // raise_exception(message): the message itself
        if (got.kind != TemplateError::Kind::kRaised || got.text != want_msg)
            return stem + ": jinja2 raises '" + want_msg + "', we: " + got.text;
        return {};
    }
    const bool want_syntax = want_type == "TemplateSyntaxError" || want_type == "TemplateAssertionError";
    if (want_syntax != (got.kind == TemplateError::Kind::kSyntax))
        return stem + ": jinja2 raises " + want + ", we: " + got.text;
    if (!want_syntax && got.python_type != want_type) return stem + ": jinja2 raises " + want + ", we: " + got.text;
    return {};
}

ordered_json case_context(const ordered_json& c, const std::string& bos, const std::string& eos) {
    return ChatTemplate::make_context(c["messages"], c.value("tools", ordered_json(nullptr)),
                                      c["add_generation_prompt"].get<bool>(), bos, eos,
                                      c.value("kwargs", ordered_json::object()));
}

}  // namespace

TEST_CASE("every shared chat template renders as jinja2 does", "[template]") {
    const ordered_json& s = spec();
    std::vector<fs::path> templates;
    for (const auto& entry : fs::directory_iterator(deskside::test::shared_path("templates")))
        if (entry.path().extension() == ".jinja") templates.push_back(entry.path());
    std::sort(templates.begin(), templates.end());
    REQUIRE(templates.size() >= 68);

    size_t checked = 0;
    std::vector<std::string> failures;
    for (const fs::path& t : templates) {
        const std::string source = read_text(t);
        for (const ordered_json& c : s["cases"]) {
            const std::string stem = t.stem().string() + "." + c["name"].get<std::string>();
            const Outcome got = render(source, case_context(c, s["bos_token"], s["eos_token"]));
            if (std::string f = compare(stem, got); !f.empty()) failures.push_back(f);
            ++checked;
        }
    }
    for (const std::string& f : failures) UNSCOPED_INFO(f);
    INFO(failures.size() << " of " << checked << " renderings differ from jinja2");
    CHECK(failures.empty());
}

TEST_CASE("jinja2 behaviour snippets", "[template]") {
    const ordered_json& s = spec();
    // Same format as render_templates.py: "### name" headers, bodies without the last newline.
    std::vector<std::pair<std::string, std::string>> snippets;
    std::istringstream in(read_text(kFixtures / "snippets.txt"));
    std::string line, name, body;
    bool have = false;
    auto flush = [&] {
        if (!have) return;
        if (!body.empty()) body.pop_back();  // the newline before the next header
        snippets.emplace_back(name, body);
    };
    while (std::getline(in, line)) {
        if (line.rfind("### ", 0) == 0) {
            flush();
            name = line.substr(4);
            body.clear();
            have = true;
        } else if (have) {
            body += line + "\n";
        }
    }
    while (!body.empty() && body.back() == '\n') body.pop_back();
    if (have) snippets.emplace_back(name, body);
    REQUIRE(snippets.size() > 50);

    std::vector<std::string> failures;
    for (const auto& [n, source] : snippets) {
        if (std::string f = compare("snippet." + n, render(source, s["snippet_context"])); !f.empty()) failures.push_back(f);
    }
    for (const std::string& f : failures) UNSCOPED_INFO(f);
    CHECK(failures.empty());
}

TEST_CASE("template errors say where and why", "[template]") {
    try {
        ChatTemplate::parse("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}");
        FAIL("no syntax error");
    } catch (const TemplateError& e) {
        CHECK(e.kind() == TemplateError::Kind::kSyntax);
        CHECK(std::string(e.what()).find("line 3, column") != std::string::npos);
    }
    try {
        ChatTemplate::parse("{{ raise_exception('Only user and assistant roles are supported!') }}").render(ordered_json::object());
        FAIL("no error raised");
    } catch (const TemplateError& e) {
        CHECK(e.kind() == TemplateError::Kind::kRaised);
        CHECK(std::string(e.what()) == "Only user and assistant roles are supported!");
    }
    try {
        ChatTemplate::parse("a\nb {{ messages[0].content.upper() + 1 }}").render(ordered_json{{"messages", {{{"content", "x"}}}}});
        FAIL("no error raised");
    } catch (const TemplateError& e) {
        CHECK(e.kind() == TemplateError::Kind::kRuntime);
        CHECK(std::string(e.what()).find("can only concatenate str") != std::string::npos);
        CHECK(std::string(e.what()).find("template line 2") != std::string::npos);
    }
}

TEST_CASE("deskside template renders HF tokenizer directories and template files", "[template][cli]") {
    const ordered_json& s = spec();
    const fs::path work = fs::temp_directory_path() / ("deskside_template_test_" + std::to_string(::getpid()));
    fs::create_directories(work);
    auto write = [&](const std::string& file, const ordered_json& j) {
        std::ofstream(work / file) << j.dump();
        return (work / file).string();
    };
    std::vector<std::string> failures;
    for (const char* dir : {"llama3", "qwen3"}) {
        for (const ordered_json& c : s["cases"]) {
            std::vector<std::string> args{"template", "-m", deskside::test::shared_path(std::string("models/hf-tokenizers/") + dir),
                                          "--messages", write("messages.json", c["messages"])};
            if (c.contains("tools")) args.insert(args.end(), {"--tools", write("tools.json", c["tools"])});
            if (c["add_generation_prompt"].get<bool>()) args.push_back("--add-generation-prompt");
            if (c.contains("kwargs")) args.insert(args.end(), {"--kwargs", c["kwargs"].dump()});
            const auto r = deskside::test::run_deskside(args);
            const std::string stem = std::string("hf-") + dir + "." + c["name"].get<std::string>();
            Outcome got;
            got.ok = r.exit_code == 0;
            got.text = got.ok ? r.out : r.err;
            if (!got.ok) {  // the CLI reports errors as text; accept any error where jinja2 raised
                got.kind = got.text.find("template raised") != std::string::npos ? TemplateError::Kind::kRaised
                                                                                  : TemplateError::Kind::kRuntime;
                if (fs::exists(kExpected / (stem + ".error")) && r.exit_code == 1) continue;
            }
            if (std::string f = compare(stem, got); !f.empty()) failures.push_back(f);
        }
    }
    for (const std::string& f : failures) UNSCOPED_INFO(f);
    CHECK(failures.empty());

    // A template file with a raised error: message on stderr, exit code 1.
    std::ofstream(work / "raise.jinja") << "{{ raise_exception('no ' ~ messages[0].role ~ ' role here') }}";
    const std::string msgs = write("messages.json", ordered_json::parse(R"([{"role": "tool", "content": "x"}])"));
    auto r = deskside::test::run_deskside({"template", "--template", (work / "raise.jinja").string(), "--messages", msgs});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find("no tool role here") != std::string::npos);

    // --kwargs and --bos/--eos reach the template.
    std::ofstream(work / "vars.jinja") << "{{ bos_token }}|{{ flag }}|{{ tools }}|{{ add_generation_prompt }}|{{ eos_token }}";
    r = deskside::test::run_deskside({"template", "--template", (work / "vars.jinja").string(), "--messages", msgs, "--bos",
                                      "<B>", "--eos", "<E>", "--kwargs", R"({"flag": false})"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "<B>|False|None|False|<E>");

    // A GGUF without tokenizer.chat_template is a clear error, not a crash.
    r = deskside::test::run_deskside({"template", "-m", deskside::test::shared_path("models/stories260K.gguf"), "--messages", msgs});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("no tokenizer.chat_template") != std::string::npos);

    fs::remove_all(work);
}
