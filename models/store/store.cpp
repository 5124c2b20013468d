#include "models/store/store.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>

#include "models/model.h"
#include "models/store/sha256.h"
#include "quant/types.h"

namespace deskside::models::store {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifestName = "manifest.json";

std::string utc_now_iso() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string random_suffix() {
    std::random_device rd;
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(rd()));
    return buf;
}

// Bytes of regular files under `dir`, not following links (a linked entry costs no space here).
uint64_t disk_usage(const fs::path& dir) {
    uint64_t total = 0;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->is_regular_file(ec) && !it->is_symlink(ec)) total += it->file_size(ec);
    }
    return total;
}

template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
    if (!j.contains(key)) throw std::runtime_error(where + ": missing field '" + key + "'");
    try {
        return j.at(key).get<T>();
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(where + ": field '" + key + "' has the wrong type: " + e.what());
    }
}

}  // namespace

std::vector<QuantEntry> quantization_mix(const ModelInfo& info) {
    std::map<std::string, QuantEntry> by_type;
    for (const Tensor& t : info.tensors) {
        const std::string type(quant::type_info(t.type).name);
        QuantEntry& e = by_type[type];
        e.type = type;
        e.tensors += 1;
        e.bytes += t.n_bytes;
    }
    std::vector<QuantEntry> out;
    for (auto& [_, e] : by_type) out.push_back(e);
    std::stable_sort(out.begin(), out.end(), [](const QuantEntry& a, const QuantEntry& b) { return a.bytes > b.bytes; });
    return out;
}

std::string Manifest::main_quant() const { return quantization.empty() ? "" : quantization.front().type; }

nlohmann::json manifest_to_json(const Manifest& m) {
    nlohmann::json quant = nlohmann::json::array();
    for (const QuantEntry& q : m.quantization) quant.push_back({{"type", q.type}, {"tensors", q.tensors}, {"bytes", q.bytes}});
    return {
        {"name", m.name},
        {"source", m.source},
        {"file", m.file},
        {"sha256", m.sha256 ? nlohmann::json(*m.sha256) : nlohmann::json(nullptr)},
        {"size", m.size},
        {"format", m.format},
        {"architecture", m.architecture},
        {"quantization", quant},
        {"pulled_at", m.pulled_at},
        {"linked", m.linked},
    };
}

Manifest manifest_from_json(const nlohmann::json& j, const std::string& where) {
    if (!j.is_object()) throw std::runtime_error(where + ": manifest is not a JSON object");
    Manifest m;
    m.name = field<std::string>(j, "name", where);
    m.source = field<std::string>(j, "source", where);
    m.file = field<std::string>(j, "file", where);
    if (j.contains("sha256") && !j.at("sha256").is_null()) m.sha256 = field<std::string>(j, "sha256", where);
    m.size = field<uint64_t>(j, "size", where);
    m.format = field<std::string>(j, "format", where);
    m.architecture = field<std::string>(j, "architecture", where);
    m.pulled_at = field<std::string>(j, "pulled_at", where);
    m.linked = j.value("linked", false);
    const auto quant = field<nlohmann::json>(j, "quantization", where);
    if (!quant.is_array()) throw std::runtime_error(where + ": field 'quantization' is not an array");
    for (size_t i = 0; i < quant.size(); ++i) {
        const std::string at = where + ": quantization[" + std::to_string(i) + "]";
        m.quantization.push_back({field<std::string>(quant[i], "type", at), field<int64_t>(quant[i], "tensors", at),
                                  field<uint64_t>(quant[i], "bytes", at)});
    }
    // `file` must stay inside the entry: a manifest is data, not a pointer to anywhere on disk.
    if (m.file.empty() || m.file.find('/') != std::string::npos || m.file == "." || m.file == "..") {
        throw std::runtime_error(where + ": field 'file' must be a plain file name, got '" + m.file + "'");
    }
    return m;
}

void validate_name(const std::string& name) {
    const bool ok_chars = std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
    if (name.empty() || name.size() > 128 || name.front() == '.' || !ok_chars) {
        throw std::invalid_argument("invalid model name '" + name +
                                    "': use 1-128 letters, digits, '.', '_' or '-', not starting with '.'");
    }
}

std::string default_store_dir() {
    if (const char* env = std::getenv("DESKSIDE_MODELS"); env && *env) return env;
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : ".") + "/.cache/deskside/models";
}

Store::Store(std::string dir) : dir_(std::move(dir)) {}

std::vector<Manifest> Store::list() const {
    std::vector<Manifest> out;
    std::error_code ec;
    if (!fs::is_directory(dir_, ec)) return out;
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || name.front() == '.' || !entry.is_directory(ec)) continue;
        if (!fs::exists(entry.path() / kManifestName, ec)) continue;
        try {
            if (auto m = find(name)) out.push_back(std::move(*m));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "warning: skipping store entry %s: %s\n", name.c_str(), e.what());
        }
    }
    std::sort(out.begin(), out.end(), [](const Manifest& a, const Manifest& b) { return a.name < b.name; });
    return out;
}

std::optional<Manifest> Store::find(const std::string& name) const {
    validate_name(name);
    const fs::path path = fs::path(dir_) / name / kManifestName;
    std::ifstream in(path);
    if (!in) return std::nullopt;
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(path.string() + ": not valid JSON: " + e.what());
    }
    Manifest m = manifest_from_json(j, path.string());
    if (m.name != name) throw std::runtime_error(path.string() + ": field 'name' is '" + m.name + "', expected '" + name + "'");
    return m;
}

std::string Store::model_path(const Manifest& m) const {
    return fs::absolute(fs::path(dir_) / m.name / m.file).lexically_normal().string();
}

void Store::remove(const std::string& name) {
    validate_name(name);
    const fs::path entry = fs::path(dir_) / name;
    std::error_code ec;
    if (!fs::exists(entry / kManifestName, ec)) {
        throw std::runtime_error("no model named '" + name + "' in the store " + dir_);
    }
    // Rename first so a crash half-way through the delete leaves no half entry visible.
    const fs::path trash = fs::path(make_staging_dir(name + ".rm"));
    fs::rename(entry, trash / name);
    fs::remove_all(trash);  // removes links themselves, never their targets
}

std::string Store::partial_path(const std::string& name, const std::string& url) const {
    validate_name(name);
    Sha256 h;
    h.update(url);
    // The URL's digest in the name: a different source for the same name never resumes this one.
    return (fs::path(dir_) / ".partial" / (name + "-" + h.hex_digest().substr(0, 12) + ".partial")).string();
}

std::string Store::make_staging_dir(const std::string& name) const {
    const fs::path tmp = fs::path(dir_) / ".tmp";
    fs::create_directories(tmp);
    for (int attempt = 0; attempt < 16; ++attempt) {
        const fs::path p = tmp / (name + "." + random_suffix());
        if (fs::create_directory(p)) return p.string();
    }
    throw std::runtime_error("cannot create a staging directory under " + tmp.string());
}

std::optional<uint64_t> Store::room_left() const {
    const char* env = std::getenv("DESKSIDE_STORE_MAX_BYTES");
    if (!env || !*env) return std::nullopt;
    char* end = nullptr;
    const unsigned long long max = std::strtoull(env, &end, 10);
    if (*end != '\0') throw std::runtime_error(std::string("DESKSIDE_STORE_MAX_BYTES is not a byte count: '") + env + "'");
    std::error_code ec;
    const uint64_t used = fs::is_directory(dir_, ec) ? disk_usage(dir_) : 0;
    return used >= max ? 0 : max - used;
}

void Store::check_room(uint64_t incoming, const std::string& what) const {
    const auto room = room_left();
    if (room && incoming > *room) {
        throw std::runtime_error("no space in the store " + dir_ + " for " + what + ": needs " + std::to_string(incoming) +
                                 " bytes, " + std::to_string(*room) + " left under DESKSIDE_STORE_MAX_BYTES");
    }
}

Manifest Store::commit(const std::string& staging_dir, const std::string& name, const std::string& file,
                       const std::string& source, std::optional<std::string> sha256, bool force, bool linked) {
    validate_name(name);
    const fs::path staged_model = fs::path(staging_dir) / file;
    ModelInfo info;
    try {
        info = load_model(staged_model.string());
    } catch (const std::exception& e) {
        throw std::runtime_error("'" + source + "' is not a model deskside can read: " + e.what());
    }
    Manifest m;
    m.name = name;
    m.source = source;
    m.file = file;
    std::error_code ec;
    if (!fs::is_directory(staged_model, ec)) m.sha256 = sha256 ? *sha256 : sha256_file(staged_model.string());
    m.size = info.file_size;
    m.format = info.format;
    m.architecture = info.hparams.architecture;
    m.quantization = quantization_mix(info);
    m.pulled_at = utc_now_iso();
    m.linked = linked;
    {
        const fs::path manifest = fs::path(staging_dir) / kManifestName;
        std::ofstream out(manifest);
        out << manifest_to_json(m).dump(2) << "\n";
        out.close();
        if (!out) throw std::runtime_error(manifest.string() + ": cannot write the manifest (disk full?)");
    }
    const fs::path target = fs::path(dir_) / name;
    std::optional<fs::path> old;
    if (fs::exists(target, ec)) {
        if (!force) throw std::runtime_error("the store already has a model named '" + name + "' (use --force to replace it)");
        old = fs::path(make_staging_dir(name + ".old")) / name;
        fs::rename(target, *old);
    }
    fs::rename(staging_dir, target);
    if (old) fs::remove_all(old->parent_path(), ec);
    return m;
}

}  // namespace deskside::models::store
