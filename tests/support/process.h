// Runs a program (no shell) and captures what it printed and how it ended, for CLI tests.
#pragma once

#include <string>
#include <vector>

namespace deskside::test {

struct ProcessResult {
    int exit_code = -1;  // valid when !signaled
    bool signaled = false;
    int signal = 0;
    std::string out;
    std::string err;
};

// Runs argv[0] with the given arguments; `stdin_text` is fed to its standard input.
ProcessResult run_process(const std::vector<std::string>& argv, const std::string& stdin_text = {});

// run_process with the built deskside binary as argv[0].
ProcessResult run_deskside(const std::vector<std::string>& args, const std::string& stdin_text = {});

}  // namespace deskside::test
