// The subcommands of the deskside binary. Each lives in its own cli/cmd_<name>.cpp, parses its
// flags with cli::Args and calls into engine/, models/ or server/. A command returns the process
// exit code; it throws cli::UsageError for bad flags (exit 2) and any other exception for a
// failure (its message is printed, exit 1).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "cli/args.h"

namespace deskside::cli {

struct Command {
    std::string_view name;
    std::string_view summary;  // one line for `deskside --help`
    std::string_view usage;    // the full `deskside NAME --help` text
    int (*run)(Args& args);
};

// Every registered command, in the order `deskside --help` lists them.
std::span<const Command> commands();

// One declaration per command; defined in cli/cmd_<name>.cpp.
extern const Command kInspectCommand;
extern const Command kFitsCommand;
extern const Command kTemplateCommand;
extern const Command kTokenizeCommand;
extern const Command kGenerateCommand;
extern const Command kChatCommand;
extern const Command kServeCommand;
extern const Command kBenchCommand;
extern const Command kScoreCommand;
extern const Command kPullCommand;
extern const Command kListCommand;
extern const Command kRmCommand;
extern const Command kDevicesCommand;
extern const Command kEnvCommand;
extern const Command kImatrixCommand;
extern const Command kQuantizeCommand;

}  // namespace deskside::cli
