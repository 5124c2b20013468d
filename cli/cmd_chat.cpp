// deskside chat -m MODEL: an interactive conversation in the terminal. Each turn re-renders the
// whole conversation with the model's chat template and decodes only the tokens after the prefix
// the KV cache already holds, so a long conversation costs one turn's worth of prompt per turn.
// Answers stream to stdout; everything else (template used, speed) goes to stderr.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "engine/engine_loop.h"
#include "engine/sampler.h"
#include "models/builtin_templates.h"
#include "models/chat_template/chat_template.h"

namespace deskside::cli {
namespace {

using nlohmann::ordered_json;

// Set by SIGINT; the generation loop and the line reader check it.
volatile std::sig_atomic_t g_interrupted = 0;

void on_sigint(int) { g_interrupted = 1; }

// Installs on_sigint without SA_RESTART, so that a blocked read() returns EINTR on Ctrl-C.
class SigintGuard {
   public:
    SigintGuard() {
        struct sigaction sa {};
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &previous_);
    }
    ~SigintGuard() { sigaction(SIGINT, &previous_, nullptr); }

   private:
    struct sigaction previous_ {};
};

// Lines from stdin through read(2) rather than iostreams, which cannot tell Ctrl-C from EOF.
class LineReader {
   public:
    enum class Status { kLine, kEof, kInterrupted };

    Status read_line(std::string& line) {
        for (;;) {
            const size_t nl = buffer_.find('\n');
            if (nl != std::string::npos) {
                line = buffer_.substr(0, nl);
                buffer_.erase(0, nl + 1);
                return Status::kLine;
            }
            char chunk[4096];
            const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
            if (n < 0 && errno == EINTR) {
                buffer_.clear();  // the terminal discards the typed line too
                return Status::kInterrupted;
            }
            if (n <= 0) {
                if (buffer_.empty()) return Status::kEof;
                line = std::move(buffer_);  // last line without a newline
                buffer_.clear();
                return Status::kLine;
            }
            buffer_.append(chunk, static_cast<size_t>(n));
        }
    }

   private:
    std::string buffer_;
};

void print_out(std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

// A status line on stderr, dimmed when stderr is a terminal.
void print_note(const std::string& text) {
    const bool tty = isatty(STDERR_FILENO);
    std::fprintf(stderr, "%s%s%s\n", tty ? "\033[2m" : "", text.c_str(), tty ? "\033[0m" : "");
}

enum class Input { kMessage, kEof, kInterrupted };

// One user message: a line; lines ending in a backslash continue on the next line; a line that is
// exactly """ opens a block that runs to the next such line.
Input read_message(LineReader& reader, std::string& message) {
    message.clear();
    std::string line;
    print_out("> ");
    auto status = reader.read_line(line);
    if (status != LineReader::Status::kLine) return status == LineReader::Status::kEof ? Input::kEof : Input::kInterrupted;
    if (line == "\"\"\"") {
        for (bool first = true;; first = false) {
            print_out("... ");
            status = reader.read_line(line);
            if (status == LineReader::Status::kInterrupted) return Input::kInterrupted;
            if (status == LineReader::Status::kEof || line == "\"\"\"") return Input::kMessage;
            if (!first) message += '\n';
            message += line;
        }
    }
    while (!line.empty() && line.back() == '\\') {
        line.pop_back();
        message += line + '\n';
        print_out("... ");
        status = reader.read_line(line);
        if (status == LineReader::Status::kInterrupted) return Input::kInterrupted;
        if (status == LineReader::Status::kEof) return Input::kMessage;
    }
    message += line;
    return Input::kMessage;
}

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("--chat-template " + path + ": cannot open the file");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct TurnStats {
    size_t prompt_new = 0, prompt_reused = 0, generated = 0;
    double prompt_seconds = 0, generation_seconds = 0;
    std::string finish;  // "end of turn", "length", "interrupted", "context full"
};

// One conversation at a time, as long as the context.
engine::EngineLoopOptions loop_options(const FlagsModel& m) {
    engine::EngineLoopOptions o;
    o.max_running = 1;
    o.max_queue = 1;
    o.n_ctx = m.n_positions;
    return o;
}

// The conversation, answered on the generation loop: each turn's prompt is the whole
// conversation, and the loop reuses the KV blocks of the prefix it computed the turn before.
class ChatSession {
   public:
    ChatSession(FlagsModel& m, models::ChatTemplate tmpl, std::vector<std::string> stop, engine::SamplerParams sampling,
                int64_t max_tokens)
        : m_(m),
          tmpl_(std::move(tmpl)),
          stop_(std::move(stop)),
          sampling_(sampling),
          max_tokens_(max_tokens),
          loop_(*m.model, *m.tokenizer, loop_options(m)) {
        const models::Tokenizer& tok = *m_.tokenizer;
        if (tok.bos()) bos_text_ = tok.token_text(*tok.bos());
        if (tok.eos()) eos_text_ = tok.token_text(*tok.eos());
    }

    ordered_json& messages() { return messages_; }

    // Answers the last user message, streaming the text; appends the answer to the conversation.
    TurnStats answer() {
        const std::vector<int32_t> prompt = tokenize(render());
        if (static_cast<int64_t>(prompt.size()) >= m_.n_positions)
            throw std::length_error("the conversation is " + std::to_string(prompt.size()) +
                                    " tokens and the context holds " + std::to_string(m_.n_positions) +
                                    " (--ctx-size); /reset to start over");
        engine::JobSpec job;
        job.prompt = prompt;
        job.max_tokens = max_tokens_;
        job.sampling = sampling_;
        job.stop = stop_;

        TurnStats st;
        std::string text;
        const auto t0 = std::chrono::steady_clock::now();
        std::optional<std::chrono::steady_clock::time_point> first;
        const std::shared_ptr<engine::RequestStream> stream = loop_.submit({std::move(job)});
        st.finish = "interrupted";
        for (;;) {
            if (g_interrupted) {
                stream->stop(0);  // as a stop string would: the answer so far stays, and its KV
                break;
            }
            std::optional<engine::JobEvent> e = stream->pop(std::chrono::milliseconds(50));
            if (!e) continue;
            if (!first && (!e->tokens.empty() || e->done)) first = std::chrono::steady_clock::now();
            st.generated += e->tokens.size();
            text += e->text;
            print_out(e->text);
            if (!e->done) continue;
            if (e->finish_reason == "error") throw std::runtime_error("generation failed: " + e->error);
            st.prompt_reused = static_cast<size_t>(e->cached_tokens);
            if (e->finish_reason == "stop")
                st.finish = "end of turn";
            else if (max_tokens_ >= 0 && static_cast<int64_t>(st.generated) >= max_tokens_)
                st.finish = "length";
            else
                st.finish = "context full";
            break;
        }
        const auto t1 = std::chrono::steady_clock::now();
        if (!first) first = t1;
        st.prompt_new = prompt.size() - std::min(prompt.size(), st.prompt_reused);
        st.prompt_seconds = std::chrono::duration<double>(*first - t0).count();
        st.generation_seconds = std::chrono::duration<double>(t1 - *first).count();
        print_out("\n");
        // Stored without the leading space the model writes after "Assistant:"-style prompts, as
        // the template adds its own separator.
        const size_t start = text.find_first_not_of(" \t\n");
        messages_.push_back({{"role", "assistant"}, {"content", start == std::string::npos ? "" : text.substr(start)}});
        return st;
    }

   private:
    std::string render() {
        const auto context = [&](const ordered_json& msgs) {
            return models::ChatTemplate::make_context(msgs, nullptr, true, bos_text_, eos_text_);
        };
        try {
            return tmpl_.render(context(messages_));
        } catch (const models::TemplateError& e) {
            const bool has_system = !messages_.empty() && messages_[0]["role"] == "system";
            if (e.kind() != models::TemplateError::Kind::kRaised || !has_system || messages_.size() < 2) throw;
            // Templates that refuse a system role (Gemma's): put it at the start of the first user
            // turn, as Gemma 3's own template does ("SYSTEM\n\nUSER").
            if (!folded_warned_) {
                print_note("the chat template rejects a system message (\"" + std::string(e.what()) +
                           "\"): it goes at the start of the first user message instead");
                folded_warned_ = true;
            }
            ordered_json folded = ordered_json::array();
            for (size_t i = 1; i < messages_.size(); ++i) folded.push_back(messages_[i]);
            folded[0]["content"] = messages_[0]["content"].get<std::string>() + "\n\n" +
                                   folded[0]["content"].get<std::string>();
            return tmpl_.render(context(folded));
        }
    }

    std::vector<int32_t> tokenize(const std::string& text) const {
        const models::Tokenizer& tok = *m_.tokenizer;
        std::vector<int32_t> ids = tok.encode(text, false, true);
        // As llama.cpp: a template that does not write BOS still gets it where the model wants it.
        if (tok.add_bos() && tok.bos() && (ids.empty() || ids.front() != *tok.bos())) ids.insert(ids.begin(), *tok.bos());
        return ids;
    }

    FlagsModel& m_;
    models::ChatTemplate tmpl_;
    std::vector<std::string> stop_;
    engine::SamplerParams sampling_;
    int64_t max_tokens_;
    std::string bos_text_, eos_text_;
    engine::EngineLoop loop_;
    ordered_json messages_ = ordered_json::array();
    bool folded_warned_ = false;
};

std::string format_stats(const TurnStats& st) {
    char buf[256];
    const double gen_tps = st.generation_seconds > 0 ? st.generated / st.generation_seconds : 0;
    const double prompt_tps = st.prompt_seconds > 0 ? st.prompt_new / st.prompt_seconds : 0;
    std::snprintf(buf, sizeof buf, "[%zu tokens, %.1f tokens/s, %s; prompt: %zu new + %zu cached tokens, %.1f tokens/s]",
                  st.generated, gen_tps, st.finish.c_str(), st.prompt_new, st.prompt_reused, prompt_tps);
    return buf;
}

int run(Args& args) {
    ModelFlags flags = read_model_flags(args);
    const engine::SamplerParams sampling = read_sampling_flags(args);
    const auto system = args.value("--system", "-s");
    const auto template_file = args.value("--chat-template");
    const long long max_tokens = args.int_value("--n-predict", "-n").value_or(-1);
    const std::vector<std::string> extra_stop = args.values("--stop");
    args.finish();

    FlagsModel m = load_model_from_flags(flags, 4096);
    std::string source;
    std::vector<std::string> stop;
    if (template_file) {
        source = read_text_file(*template_file);
        print_note("chat template: " + *template_file);
    } else if (m.model->info().chat_template) {
        source = *m.model->info().chat_template;
        print_note("chat template: the model's own");
    } else {
        const models::BuiltinTemplate b = models::builtin_chat_template(m.model->hparams().architecture);
        source = b.source;
        stop = b.stop;
        print_note("chat template: the model has none; using the built-in \"" + std::string(b.name) +
                   "\" format for architecture " + m.model->hparams().architecture);
    }
    models::ChatTemplate tmpl = [&] {
        try {
            return models::ChatTemplate::parse(source);
        } catch (const models::TemplateError& e) {
            throw std::runtime_error("chat template " + (template_file ? *template_file : std::string("of the model")) +
                                     ": " + e.what());
        }
    }();

    stop.insert(stop.end(), extra_stop.begin(), extra_stop.end());
    ChatSession chat(m, std::move(tmpl), std::move(stop), sampling, max_tokens);
    const auto reset = [&] {
        chat.messages() = ordered_json::array();
        if (system) chat.messages().push_back({{"role", "system"}, {"content", *system}});
    };
    reset();
    print_note("/reset starts over, /exit or Ctrl-D quits, Ctrl-C stops an answer; end a line with \\ to continue "
               "it, or put a message between lines of \"\"\"");

    SigintGuard guard;
    LineReader reader;
    bool interrupted_at_prompt = false;
    for (;;) {
        std::string message;
        g_interrupted = 0;
        const Input in = read_message(reader, message);
        if (in == Input::kEof) {
            print_out("\n");
            return 0;
        }
        if (in == Input::kInterrupted) {
            if (interrupted_at_prompt) {
                print_out("\n");
                return 0;
            }
            interrupted_at_prompt = true;
            print_out("\n");
            print_note("(Ctrl-C again or /exit to quit)");
            continue;
        }
        interrupted_at_prompt = false;
        if (message.find_first_not_of(" \t\r\n") == std::string::npos) continue;
        if (message == "/exit" || message == "/quit") return 0;
        if (message == "/reset") {
            reset();
            print_note("(conversation cleared)");
            continue;
        }
        if (message.starts_with("/") && message.find_first_of(" \n") == std::string::npos) {
            print_note("unknown command " + message + " (commands: /reset, /exit)");
            continue;
        }
        chat.messages().push_back({{"role", "user"}, {"content", message}});
        try {
            const TurnStats st = chat.answer();
            print_note(format_stats(st));
        } catch (const std::length_error& e) {
            chat.messages().erase(chat.messages().end() - 1);
            print_note(std::string("error: ") + e.what());
        } catch (const models::TemplateError& e) {
            chat.messages().erase(chat.messages().end() - 1);
            print_note(std::string("error: the chat template failed: ") + e.what());
        }
    }
}

}  // namespace

const Command kChatCommand{
    "chat",
    "talk to a model in the terminal, using its chat template",
    "usage: deskside chat -m MODEL [--system TEXT] [--chat-template FILE] [-n N] [options]\n"
    "\n"
    "An interactive conversation: type a message, the answer streams back. /reset starts over,\n"
    "/exit or Ctrl-D quits. Ctrl-C stops an answer; at the prompt it clears the line, twice quits.\n"
    "A line ending with \\ continues on the next line; a line of \"\"\" starts a block that ends at\n"
    "the next line of \"\"\". Speed is printed on stderr after each answer.\n"
    "  -s, --system TEXT        a system message at the start of the conversation\n"
    "  --chat-template FILE     a Jinja chat template instead of the model's own (without one the\n"
    "                           model gets a built-in format for its architecture: Gemma's turns,\n"
    "                           or plain \"User: ...\\nAssistant:\")\n"
    "  --stop TEXT              also end an answer before TEXT (repeatable; for templates whose\n"
    "                           turns end in text rather than an end-of-turn token)\n"
    "  -n, --n-predict N        at most N tokens per answer (default: until the end of the turn)\n"
    "  -c, --ctx-size N         KV cache positions for the whole conversation (default: the\n"
    "                           model's training context, at most 4096)\n"
    "  -t, --threads N          CPU threads (default: physical cores)\n"
    "  --cache-type-k T, --cache-type-v T   f16 (default), q8_0 or f32\n"
    DESKSIDE_DEVICE_FLAGS_HELP
    "  --temp T                 temperature; 0 = greedy (default 0.8)\n"
    "  --top-k K, --top-p P, --min-p P   (defaults 40, 0.95, 0.05)\n"
    "  --repeat-penalty R, --presence-penalty P, --frequency-penalty F   (over the last 64 tokens)\n"
    "  --seed S                 same seed, same answers (default: random)\n",
    run,
};

}  // namespace deskside::cli
