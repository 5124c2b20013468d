// Grammars for JSON Schema string formats and for integer ranges.
// ref: RFC 3339 section 5.6 (full-date, full-time, date-time); RFC 4122 (uuid); RFC 5321 4.1.2
// dot-atom (email); RFC 2673 dotted quad (ipv4).
#include <algorithm>
#include <cstdint>
#include <string>

#include "engine/json_schema.h"

namespace deskside::engine {

using Rule = GrammarBuilder::Rule;

namespace {

Rule digits(GrammarBuilder& b, int64_t n) { return b.repeat(b.byte_range('0', '9'), n, n); }

Rule choice_of(GrammarBuilder& b, std::initializer_list<const char*> words) {
    std::vector<Rule> alts;
    for (const char* w : words) alts.push_back(b.literal(w));
    return b.choice(std::move(alts));
}

// YYYY-MM-DD with the day valid for its month and a year from 0001. February stops at 28: the 29th would need the
// leap-year rule on the year digits, so it is left out (every output is still a valid date).
Rule full_date(GrammarBuilder& b) {
    const Rule d09 = b.byte_range('0', '9');
    const Rule day28 =
        b.choice({b.sequence({b.literal("0"), b.byte_range('1', '9')}), b.sequence({b.literal("1"), d09}),
                  b.sequence({b.literal("2"), b.byte_range('0', '8')})});
    const Rule day30 = b.choice({day28, b.literal("29"), b.literal("30")});
    const Rule day31 = b.choice({day30, b.literal("31")});
    const Rule month_day = b.choice({
        b.sequence({choice_of(b, {"01", "03", "05", "07", "08", "10", "12"}), b.literal("-"), day31}),
        b.sequence({choice_of(b, {"04", "06", "09", "11"}), b.literal("-"), day30}),
        b.sequence({b.literal("02-"), day28}),
    });
    // Years 0001-9999: RFC 3339 allows 0000, but validators built on ISO 8601 calendars (Python's
    // datetime, hence the jsonschema package) reject it, and no caller means it.
    const Rule year = b.choice({b.sequence({b.byte_range('1', '9'), digits(b, 3)}),
                                b.sequence({b.literal("0"), b.byte_range('1', '9'), digits(b, 2)}),
                                b.sequence({b.literal("00"), b.byte_range('1', '9'), digits(b, 1)}),
                                b.sequence({b.literal("000"), b.byte_range('1', '9')})});
    return b.sequence({year, b.literal("-"), month_day});
}

// HH:MM:SS[.frac](Z|+HH:MM|-HH:MM). Seconds stop at 59 (a leap second is valid only at the end
// of some days) and the fraction at 6 digits (what Python's datetime reads).
Rule full_time(GrammarBuilder& b) {
    const Rule hour = b.choice({b.sequence({b.byte_range('0', '1'), b.byte_range('0', '9')}),
                                b.sequence({b.literal("2"), b.byte_range('0', '3')})});
    const Rule sixty = b.sequence({b.byte_range('0', '5'), b.byte_range('0', '9')});
    const Rule fraction = b.sequence({b.literal("."), b.repeat(b.byte_range('0', '9'), 1, 6)});
    std::bitset<256> sign;
    sign.set('+');
    sign.set('-');
    const Rule offset = b.choice({b.literal("Z"), b.sequence({b.byte_set(sign), hour, b.literal(":"), sixty})});
    return b.sequence({hour, b.literal(":"), sixty, b.literal(":"), sixty, b.repeat(fraction, 0, 1), offset});
}

Rule uuid(GrammarBuilder& b) {
    std::bitset<256> hex;
    for (int c = '0'; c <= '9'; ++c) hex.set(c);
    for (int c = 'a'; c <= 'f'; ++c) hex.set(c);
    for (int c = 'A'; c <= 'F'; ++c) hex.set(c);
    const Rule h = b.byte_set(hex);
    const auto run = [&](int64_t n) { return b.repeat(h, n, n); };
    const Rule dash = b.literal("-");
    return b.sequence({run(8), dash, run(4), dash, run(4), dash, run(4), dash, run(12)});
}

// local@domain: a dot-atom local part and a dot-separated host name of letter-digit-hyphen labels
// that neither start nor end with a hyphen (label lengths are not bounded).
Rule email(GrammarBuilder& b) {
    std::bitset<256> alnum;
    for (int c = '0'; c <= '9'; ++c) alnum.set(c);
    for (int c = 'a'; c <= 'z'; ++c) alnum.set(c);
    for (int c = 'A'; c <= 'Z'; ++c) alnum.set(c);
    std::bitset<256> atext = alnum;
    for (char c : std::string("!#$%&'*+/=?^_`{|}~-")) atext.set(static_cast<unsigned char>(c));
    const Rule atom = b.repeat(b.byte_set(atext), 1, -1);
    const Rule local = b.repeat(atom, 1, -1, b.literal("."));
    const Rule an = b.byte_set(alnum);
    std::bitset<256> inner = alnum;
    inner.set('-');
    const Rule label = b.sequence({an, b.repeat(b.sequence({b.repeat(b.byte_set(inner), 0, -1), an}), 0, 1)});
    return b.sequence({local, b.literal("@"), b.repeat(label, 2, -1, b.literal("."))});
}

Rule ipv4(GrammarBuilder& b) {
    const Rule octet = json_integer_range(b, 0, 255);
    return b.repeat(octet, 4, 4, b.literal("."));
}

// Same-length digit strings between lo and hi (lexicographic order is numeric order here).
Rule digits_between(GrammarBuilder& b, const std::string& lo, const std::string& hi) {
    if (lo.empty()) return b.literal("");
    if (lo == hi) return b.literal(lo);
    const int64_t n = static_cast<int64_t>(lo.size());
    if (lo.find_first_not_of('0') == std::string::npos && hi.find_first_not_of('9') == std::string::npos) {
        return digits(b, n);
    }
    const std::string nines(n - 1, '9'), zeros(n - 1, '0');
    if (lo[0] == hi[0]) return b.sequence({b.literal(lo.substr(0, 1)), digits_between(b, lo.substr(1), hi.substr(1))});
    std::vector<Rule> alts{b.sequence({b.literal(lo.substr(0, 1)), digits_between(b, lo.substr(1), nines)})};
    if (lo[0] + 1 <= hi[0] - 1) {
        alts.push_back(b.sequence(
            {b.byte_range(static_cast<uint8_t>(lo[0] + 1), static_cast<uint8_t>(hi[0] - 1)), digits(b, n - 1)}));
    }
    alts.push_back(b.sequence({b.literal(hi.substr(0, 1)), digits_between(b, zeros, hi.substr(1))}));
    return b.choice(std::move(alts));
}

uint64_t pow10(size_t n) {
    uint64_t p = 1;
    for (size_t i = 0; i < n; ++i) p *= 10;
    return p;
}

// Non-negative integers in [lo, hi] (hi absent: unbounded), without leading zeros.
Rule naturals(GrammarBuilder& b, uint64_t lo, std::optional<uint64_t> hi) {
    const size_t lo_len = std::to_string(lo).size();
    const size_t hi_len = hi ? std::to_string(*hi).size() : lo_len;
    std::vector<Rule> alts;
    for (size_t len = lo_len; len <= hi_len; ++len) {
        const uint64_t first = std::max(lo, len == 1 ? uint64_t{0} : pow10(len - 1));
        const uint64_t last = hi && len == hi_len ? *hi : pow10(len) - 1;
        if (first <= last) alts.push_back(digits_between(b, std::to_string(first), std::to_string(last)));
    }
    if (!hi) {  // every number longer than lo
        alts.push_back(
            b.sequence({b.byte_range('1', '9'), b.repeat(b.byte_range('0', '9'), static_cast<int64_t>(lo_len), -1)}));
    }
    return b.choice(std::move(alts));
}

uint64_t magnitude(int64_t v) { return v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v); }

}  // namespace

Rule json_integer_range(GrammarBuilder& b, std::optional<int64_t> lo, std::optional<int64_t> hi) {
    std::vector<Rule> alts;
    if (!hi || *hi >= 0) {
        const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
        alts.push_back(naturals(b, from, hi ? std::optional<uint64_t>(static_cast<uint64_t>(*hi)) : std::nullopt));
    }
    if (!lo || *lo < 0) {  // -k for k in [max(1, -hi), -lo]
        const uint64_t k_lo = hi && *hi < 0 ? magnitude(*hi) : 1;
        alts.push_back(
            b.sequence({b.literal("-"),
                        naturals(b, k_lo, lo ? std::optional<uint64_t>(magnitude(*lo)) : std::optional<uint64_t>())}));
    }
    return b.choice(std::move(alts));
}

Rule json_format_string(GrammarBuilder& b, const std::string& format, const std::string& path) {
    Rule body;
    if (format == "date") {
        body = full_date(b);
    } else if (format == "time") {
        body = full_time(b);
    } else if (format == "date-time") {
        body = b.sequence({full_date(b), b.literal("T"), full_time(b)});
    } else if (format == "uuid") {
        body = uuid(b);
    } else if (format == "email") {
        body = email(b);
    } else if (format == "ipv4") {
        body = ipv4(b);
    } else {
        throw SchemaError(path, "format", "format '" + format + "' is not supported");
    }
    return b.sequence({b.literal("\""), body, b.literal("\"")});
}

}  // namespace deskside::engine
