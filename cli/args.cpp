#include "cli/args.h"

#include <charconv>
#include <cstdlib>

namespace deskside::cli {

Args::Args(std::vector<std::string> argv) {
    for (auto& a : argv) items_.push_back({std::move(a), false});
}

// Returns the indices of the matching items; for options that take a value, the value is the
// text after '=' or the next item, which is marked used too.
std::vector<size_t> Args::find(std::string_view name, std::string_view short_name, bool takes_value) {
    std::vector<size_t> hits;
    for (size_t i = 0; i < items_.size(); ++i) {
        Item& it = items_[i];
        if (it.text == "--") break;
        if (it.used) continue;
        const std::string_view t = it.text;
        const bool exact = t == name || (!short_name.empty() && t == short_name);
        const bool with_eq = t.size() > name.size() && t.starts_with(name) && t[name.size()] == '=';
        if (!exact && !with_eq) continue;
        if (!takes_value && with_eq) throw UsageError(std::string(name) + " takes no value");
        it.used = true;
        if (takes_value && exact) {
            if (i + 1 >= items_.size()) throw UsageError(std::string(name) + " needs a value");
            items_[i + 1].used = true;
        }
        hits.push_back(i);
    }
    return hits;
}

bool Args::flag(std::string_view name, std::string_view short_name) {
    return !find(name, short_name, false).empty();
}

std::vector<std::string> Args::values(std::string_view name, std::string_view short_name) {
    std::vector<std::string> out;
    for (size_t i : find(name, short_name, true)) {
        const std::string& t = items_[i].text;
        const size_t eq = t.find('=');
        const bool exact = t == name || t == short_name;
        out.push_back(exact ? items_[i + 1].text : t.substr(eq + 1));
    }
    return out;
}

std::optional<std::string> Args::value(std::string_view name, std::string_view short_name) {
    auto v = values(name, short_name);
    if (v.empty()) return std::nullopt;
    if (v.size() > 1) throw UsageError(std::string(name) + " given more than once");
    return v.front();
}

std::optional<long long> Args::int_value(std::string_view name, std::string_view short_name) {
    auto v = value(name, short_name);
    if (!v) return std::nullopt;
    long long out = 0;
    const auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    if (ec != std::errc() || ptr != v->data() + v->size())
        throw UsageError(std::string(name) + ": '" + *v + "' is not an integer");
    return out;
}

std::optional<double> Args::float_value(std::string_view name, std::string_view short_name) {
    auto v = value(name, short_name);
    if (!v) return std::nullopt;
    char* end = nullptr;
    const double out = std::strtod(v->c_str(), &end);
    if (v->empty() || end != v->c_str() + v->size())
        throw UsageError(std::string(name) + ": '" + *v + "' is not a number");
    return out;
}

std::vector<std::string> Args::positionals() {
    std::vector<std::string> out;
    bool after_dashes = false;
    for (Item& it : items_) {
        if (it.used) continue;
        if (!after_dashes && it.text == "--") {
            after_dashes = true;
            it.used = true;
            continue;
        }
        if (!after_dashes && it.text.size() > 1 && it.text[0] == '-') continue;  // left for finish()
        it.used = true;
        out.push_back(it.text);
    }
    return out;
}

void Args::finish() {
    for (const Item& it : items_) {
        if (!it.used) throw UsageError("unknown argument '" + it.text + "'");
    }
}

}  // namespace deskside::cli
