// deskside: one binary, subcommands (see DESIGN.md). This file only dispatches.
#include <array>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace deskside::cli {

std::span<const Command> commands() {
    static const std::array kCommands{
        &kInspectCommand,
        &kFitsCommand,
        &kTemplateCommand,
        &kTokenizeCommand,
        &kGenerateCommand,
        &kChatCommand,
        &kServeCommand,
        &kBenchCommand,
        &kScoreCommand,
        &kPullCommand,
        &kListCommand,
        &kRmCommand,
        &kDevicesCommand,
        &kEnvCommand,
        &kImatrixCommand,
        &kQuantizeCommand,
    };
    static const auto kTable = [] {
        std::vector<Command> out;
        for (const Command* c : kCommands) out.push_back(*c);
        return out;
    }();
    return kTable;
}

}  // namespace deskside::cli

namespace {

void print_help() {
    std::printf("deskside %s: run open-weight language models on your desk, behind an OpenAI-style API\n\n",
                DESKSIDE_VERSION);
    std::printf("usage: deskside COMMAND [options]    (deskside COMMAND --help for details)\n\ncommands:\n");
    for (const auto& c : deskside::cli::commands()) {
        std::printf("  %-10.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                    static_cast<int>(c.summary.size()), c.summary.data());
    }
}

}  // namespace

int main(int argc, char** argv) {
    using namespace deskside::cli;
    if (argc < 2) {
        print_help();
        return 2;
    }
    const std::string name = argv[1];
    if (name == "--help" || name == "-h" || name == "help") {
        print_help();
        return 0;
    }
    if (name == "--version") {
        std::printf("deskside %s\n", DESKSIDE_VERSION);
        return 0;
    }
    for (const Command& c : commands()) {
        if (c.name != name) continue;
        std::vector<std::string> rest(argv + 2, argv + argc);
        for (const std::string& a : rest) {
            if (a == "--") break;
            if (a == "--help" || a == "-h") {
                std::fwrite(c.usage.data(), 1, c.usage.size(), stdout);
                return 0;
            }
        }
        try {
            Args args(std::move(rest));
            return c.run(args);
        } catch (const UsageError& e) {
            std::fprintf(stderr, "deskside %s: %s\n(see deskside %s --help)\n", name.c_str(), e.what(), name.c_str());
            return 2;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "deskside %s: error: %s\n", name.c_str(), e.what());
            return 1;
        }
    }
    std::fprintf(stderr, "deskside: unknown command '%s'\n\n", name.c_str());
    print_help();
    return 2;
}
