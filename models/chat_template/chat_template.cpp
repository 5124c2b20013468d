#include "models/chat_template/chat_template.h"

#include <cstdlib>
#include <ctime>
#include <string>

#include "models/chat_template/interpreter.h"
#include "models/chat_template/parser.h"

namespace deskside::models {

namespace {

// strftime_now's clock: DESKSIDE_NOW=YYYY-MM-DD pins the date (midnight) for reproducible
// prompts and tests; otherwise the local time, as datetime.now() gives it.
std::tm template_now() {
    std::tm tm{};
    if (const char* fixed = std::getenv("DESKSIDE_NOW"); fixed && *fixed) {
        int y = 0, m = 0, d = 0;
        if (std::sscanf(fixed, "%d-%d-%d", &y, &m, &d) != 3 || m < 1 || m > 12 || d < 1 || d > 31)
            throw TemplateError(TemplateError::Kind::kRuntime,
                                "DESKSIDE_NOW must be YYYY-MM-DD, got '" + std::string(fixed) + "'", "ValueError");
        tm.tm_year = y - 1900;
        tm.tm_mon = m - 1;
        tm.tm_mday = d;
        tm.tm_isdst = -1;
        std::mktime(&tm);  // fills in the weekday and day of the year
        return tm;
    }
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
    return tm;
}

std::string render_value(const std::shared_ptr<const jinja::TemplateBody>& body, const jinja::Value& ctx) {
    if (!ctx.is_mapping())
        throw TemplateError(TemplateError::Kind::kRuntime, "chat template context must be a JSON object", "TypeError");
    jinja::Interpreter in(*body, ctx, template_now());
    try {
        return in.render();
    } catch (const TemplateError&) {
        throw;
    } catch (const std::exception& e) {  // e.g. a number too large for std::stoll
        throw TemplateError(TemplateError::Kind::kRuntime, std::string("error while rendering: ") + e.what(), "Exception");
    }
}

}  // namespace

ChatTemplate ChatTemplate::parse(std::string source) {
    ChatTemplate t;
    try {
        t.body_ = jinja::parse_template(source);
        t.source_ = std::move(source);
    } catch (const TemplateError&) {
        throw;
    } catch (const std::exception& e) {
        throw TemplateError(TemplateError::Kind::kSyntax, std::string("cannot parse template: ") + e.what(),
                            "TemplateSyntaxError");
    }
    return t;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
    return render_value(body_, jinja::Value::from_json(context));
}

std::string ChatTemplate::render(const nlohmann::json& context) const {
    return render_value(body_, jinja::Value::from_json(context));
}

nlohmann::ordered_json ChatTemplate::make_context(const nlohmann::ordered_json& messages,
                                                  const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                                  const std::string& bos_token, const std::string& eos_token,
                                                  const nlohmann::ordered_json& extra) {
    nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
    ctx["messages"] = messages;
    ctx["tools"] = tools;  // null when the caller has none, as transformers passes tools=None
    ctx["documents"] = nullptr;
    ctx["add_generation_prompt"] = add_generation_prompt;
    ctx["bos_token"] = bos_token;
    ctx["eos_token"] = eos_token;
    if (extra.is_object())
        for (auto it = extra.begin(); it != extra.end(); ++it) ctx[it.key()] = it.value();
    return ctx;
}

}  // namespace deskside::models
