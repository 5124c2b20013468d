// deskside template: render a model's chat template for a conversation, exactly as
// transformers' apply_chat_template would, so prompts can be checked before serving.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "models/chat_template/chat_template.h"
#include "models/gguf.h"

namespace deskside::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr std::string_view kUsage =
    "usage: deskside template (-m MODEL | --template FILE) --messages FILE.json [options]\n"
    "\n"
    "Renders the chat template for a conversation and prints the prompt to stdout, byte for byte\n"
    "what transformers' apply_chat_template(tokenize=False) produces. A template that raises\n"
    "(raise_exception) or fails prints its error to stderr and exits 1.\n"
    "\n"
    "  -m, --model MODEL        GGUF file (tokenizer.chat_template) or Hugging Face directory\n"
    "                           (tokenizer_config.json \"chat_template\", else chat_template.jinja)\n"
    "  --template FILE          a Jinja template file instead of a model's\n"
    "  --messages FILE.json     the messages: a JSON list of {role, content, ...}\n"
    "  --tools FILE.json        tool definitions (a JSON list), passed as `tools`\n"
    "  --add-generation-prompt  end with the assistant turn header\n"
    "  --bos TEXT, --eos TEXT   bos_token / eos_token; default: the model's own tokens (left\n"
    "                           undefined for a --template file or a config without them)\n"
    "  --kwargs JSON            extra template variables, e.g. '{\"enable_thinking\": false}'\n"
    "\n"
    "DESKSIDE_NOW=YYYY-MM-DD fixes the date strftime_now() sees.\n";

std::string read_file(const std::string& path, const char* what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(std::string("cannot read ") + what + " file '" + path + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

ordered_json read_json(const std::string& path, const char* what) {
    try {
        return ordered_json::parse(read_file(path, what));
    } catch (const ordered_json::parse_error& e) {
        throw std::runtime_error(std::string(what) + " file '" + path + "' is not valid JSON: " + e.what());
    }
}

struct TemplateSource {
    std::string text;
    // The model's own special tokens. A tokenizer_config.json with "bos_token": null leaves
    // bos_token undefined in the template, as transformers does.
    std::optional<std::string> bos, eos;
};

// tokenizer_config.json stores special tokens as a string or as {"content": ...}.
std::optional<std::string> token_text(const ordered_json& cfg, const char* key) {
    if (!cfg.contains(key)) return std::nullopt;
    const ordered_json& t = cfg[key];
    if (t.is_string()) return t.get<std::string>();
    if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"].get<std::string>();
    return std::nullopt;
}

TemplateSource from_hf_dir(const fs::path& dir) {
    TemplateSource src;
    const fs::path cfg_path = dir / "tokenizer_config.json";
    if (fs::is_regular_file(cfg_path)) {
        const ordered_json cfg = read_json(cfg_path.string(), "tokenizer config");
        src.bos = token_text(cfg, "bos_token");
        src.eos = token_text(cfg, "eos_token");
        if (cfg.contains("chat_template")) {
            const ordered_json& t = cfg["chat_template"];
            if (t.is_string()) {
                src.text = t.get<std::string>();
                return src;
            }
            if (!t.is_array())
                throw std::runtime_error(cfg_path.string() + ": \"chat_template\" must be a string or a list of {name, template}");
            for (const ordered_json& entry : t) {
                if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
                    entry["template"].is_string()) {
                    src.text = entry["template"].get<std::string>();
                    return src;
                }
            }
            throw std::runtime_error(cfg_path.string() + ": \"chat_template\" list has no entry named \"default\"");
        }
    }
    if (fs::is_regular_file(dir / "chat_template.jinja")) {
        src.text = read_file((dir / "chat_template.jinja").string(), "template");
        return src;
    }
    throw std::runtime_error("'" + dir.string() + "' has no chat template (tokenizer_config.json \"chat_template\" or chat_template.jinja)");
}

TemplateSource from_gguf(const std::string& path) {
    const models::GgufFile file = models::GgufFile::open(path);
    TemplateSource src;
    src.text = file.get_string("tokenizer.chat_template");
    if (src.text.empty()) throw std::runtime_error(path + ": no tokenizer.chat_template in the GGUF metadata");
    const models::GgufValue* tokens = file.find("tokenizer.ggml.tokens");
    auto token = [&](const char* id_key) -> std::optional<std::string> {
        const int64_t id = file.get_int(id_key, -1);
        if (!tokens || id < 0) return std::nullopt;
        const auto& items = tokens->as_array().items;
        if (id >= static_cast<int64_t>(items.size()))
            throw std::runtime_error(path + ": " + id_key + " " + std::to_string(id) + " is outside tokenizer.ggml.tokens");
        return items[static_cast<size_t>(id)].as_string();
    };
    src.bos = token("tokenizer.ggml.bos_token_id");
    src.eos = token("tokenizer.ggml.eos_token_id");
    return src;
}

int run(Args& args) {
    const auto model = model_arg(args);
    const auto template_file = args.value("--template");
    const auto messages_file = args.value("--messages");
    const auto tools_file = args.value("--tools");
    const bool add_generation_prompt = args.flag("--add-generation-prompt");
    const auto bos = args.value("--bos");
    const auto eos = args.value("--eos");
    const auto kwargs_text = args.value("--kwargs");
    const auto extra_args = args.positionals();
    args.finish();
    if (!extra_args.empty()) throw UsageError("unexpected argument '" + extra_args[0] + "'");
    if (model.has_value() == template_file.has_value()) throw UsageError("give exactly one of -m MODEL or --template FILE");
    if (!messages_file) throw UsageError("--messages FILE.json is required");

    TemplateSource src;
    if (template_file) {
        src.text = read_file(*template_file, "template");
    } else if (fs::is_directory(*model)) {
        src = from_hf_dir(*model);
    } else {
        src = from_gguf(*model);
    }
    const bool gguf = !template_file && !fs::is_directory(*model);
    if (bos) src.bos = *bos;
    if (eos) src.eos = *eos;
    if (gguf && (!src.bos || !src.eos))
        throw UsageError("the GGUF has no tokenizer.ggml.bos/eos_token_id; pass --bos TEXT --eos TEXT");

    const ordered_json messages = read_json(*messages_file, "messages");
    if (!messages.is_array()) throw std::runtime_error(*messages_file + ": messages must be a JSON list");
    const ordered_json tools = tools_file ? read_json(*tools_file, "tools") : ordered_json(nullptr);
    if (tools_file && !tools.is_array()) throw std::runtime_error(*tools_file + ": tools must be a JSON list");
    ordered_json extra = ordered_json::object();
    if (kwargs_text) {
        try {
            extra = ordered_json::parse(*kwargs_text);
        } catch (const ordered_json::parse_error& e) {
            throw UsageError(std::string("--kwargs is not valid JSON: ") + e.what());
        }
        if (!extra.is_object()) throw UsageError("--kwargs must be a JSON object");
    }

    try {
        const models::ChatTemplate tmpl = models::ChatTemplate::parse(src.text);
        ordered_json context = models::ChatTemplate::make_context(messages, tools, add_generation_prompt,
                                                                  src.bos.value_or(""), src.eos.value_or(""), extra);
        if (!src.bos && !extra.contains("bos_token")) context.erase("bos_token");
        if (!src.eos && !extra.contains("eos_token")) context.erase("eos_token");
        const std::string prompt = tmpl.render(context);
        std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    } catch (const models::TemplateError& e) {
        std::fprintf(stderr, "deskside template: %s: %s\n",
                     e.kind() == models::TemplateError::Kind::kRaised ? "template raised" : "template error", e.what());
        return 1;
    }
    return 0;
}

}  // namespace

const Command kTemplateCommand{"template", "render a chat template for a conversation (as transformers does)", kUsage, run};

}  // namespace deskside::cli
