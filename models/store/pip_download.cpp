#include "models/store/pip_download.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>
#include <stdexcept>

#include "models/store/progress.h"

extern char** environ;

namespace deskside::models::store {

namespace fs = std::filesystem;

namespace {

constexpr size_t kKeptOutput = 16 << 10;  // pip's output kept to explain a failure
constexpr int kPollMs = 100;

// pip's size in "Downloading URL (12.3 MB)" (pip's format_size: decimal units), in bytes.
std::optional<uint64_t> announced_size(const std::string& line) {
    static const std::regex kLine(R"(^\s*Downloading \S+ \(([0-9]+(?:\.[0-9]+)?) (bytes|kB|MB|GB)\))");
    std::smatch m;
    if (!std::regex_search(line, m, kLine)) return std::nullopt;
    const double scale = m[2] == "GB" ? 1e9 : m[2] == "MB" ? 1e6 : m[2] == "kB" ? 1e3 : 1;
    return static_cast<uint64_t>(std::stod(m[1]) * scale);
}

// The largest file under `dir`: the wheel pip is writing.
uint64_t largest_file(const fs::path& dir) {
    uint64_t size = 0;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code fec;
        if (it->is_regular_file(fec)) size = std::max<uint64_t>(size, it->file_size(fec));
    }
    return size;
}

uint64_t newest_wheel_size(const fs::path& dir) {
    uint64_t size = 0;
    auto newest = fs::file_time_type::min();
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().extension() != ".whl" || e.last_write_time() < newest) continue;
        newest = e.last_write_time();
        size = e.file_size();
    }
    return size;
}

// The environment with TMPDIR replaced, built before fork (the child only calls async-signal-safe
// functions).
std::vector<std::string> environment_with_tmpdir(const std::string& tmp_dir) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
        if (std::strncmp(*e, "TMPDIR=", 7) != 0) env.emplace_back(*e);
    env.push_back("TMPDIR=" + tmp_dir);
    return env;
}

}  // namespace

int pip_download(const std::vector<std::string>& argv, const std::string& label, const std::string& tmp_dir,
                 const std::string& wheel_dir) {
    fs::create_directories(tmp_dir);
    std::vector<std::string> env = environment_with_tmpdir(tmp_dir);
    std::vector<char*> args, envp;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);

    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
    const pid_t pid = fork();
    if (pid < 0) {
        close(out[0]);
        close(out[1]);
        throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the copy
        execvpe(args[0], args.data(), envp.data());
        const char msg[] = "cannot run pip's python\n";
        (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
        _exit(127);
    }
    close(out[1]);

    std::string kept, line;
    std::optional<Progress> bar;
    char buf[4096];
    for (bool open = true; open;) {
        pollfd p{out[0], POLLIN, 0};
        const int ready = poll(&p, 1, kPollMs);
        if (ready < 0 && errno != EINTR) break;
        if (ready > 0) {
            const ssize_t n = read(out[0], buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) open = false;
            for (ssize_t i = 0; i < n; ++i) {
                if (buf[i] != '\n') {
                    line += buf[i];
                    continue;
                }
                if (const auto size = announced_size(line); size && !bar) bar.emplace(label, 0, *size);
                kept += line + '\n';
                line.clear();
            }
            if (kept.size() > kKeptOutput) kept.erase(0, kept.size() - kKeptOutput);
        }
        const uint64_t done = largest_file(tmp_dir);
        if (done > 0 && !bar) bar.emplace(label, 0, std::nullopt);  // no size announced
        if (bar) bar->update(done);
    }
    close(out[0]);
    kept += line;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
    }
    std::error_code ec;
    fs::remove_all(tmp_dir, ec);
    const int rc = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    if (rc != 0) {
        std::fwrite(kept.data(), 1, kept.size(), stderr);
        return rc;
    }
    const uint64_t size = newest_wheel_size(wheel_dir);
    if (!bar) bar.emplace(label, 0, size);
    bar->set_total(size);  // pip announces a rounded size
    bar->finish(size);
    return 0;
}

}  // namespace deskside::models::store
