#include "support/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "support/paths.h"

extern char** environ;

namespace deskside::test {
namespace {

std::string slurp(int fd) {
    std::string s;
    char buf[65536];
    ::lseek(fd, 0, SEEK_SET);
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    return s;
}

int temp_fd() {
    char name[] = "/tmp/deskside-test-XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    ::unlink(name);
    return fd;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const std::string& stdin_text) {
    const int out_fd = temp_fd(), err_fd = temp_fd(), in_fd = temp_fd();
    if (!stdin_text.empty() && ::write(in_fd, stdin_text.data(), stdin_text.size()) != static_cast<ssize_t>(stdin_text.size()))
        throw std::runtime_error("cannot write stdin file");
    ::lseek(in_fd, 0, SEEK_SET);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_fd, 0);
    posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ProcessResult r;
    r.signaled = WIFSIGNALED(status);
    r.signal = r.signaled ? WTERMSIG(status) : 0;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out_fd);
    r.err = slurp(err_fd);
    ::close(out_fd);
    ::close(err_fd);
    ::close(in_fd);
    return r;
}

ProcessResult run_deskside(const std::vector<std::string>& args, const std::string& stdin_text) {
    std::vector<std::string> argv{deskside_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, stdin_text);
}

}  // namespace deskside::test
