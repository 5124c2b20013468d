// Command-line parsing shared by every subcommand: options are `--name value`, `--name=value`,
// short `-m value`, and boolean flags. Each command states its options by asking for them, then
// calls finish(), which rejects anything it did not ask for.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace deskside::cli {

class UsageError : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
};

class Args {
   public:
    explicit Args(std::vector<std::string> argv);

    // A boolean flag such as --json. Throws UsageError if given a value (--json=1).
    bool flag(std::string_view name, std::string_view short_name = {});
    // The value of an option given at most once; nullopt when absent.
    std::optional<std::string> value(std::string_view name, std::string_view short_name = {});
    // Every value of an option that may repeat (-m A -m B).
    std::vector<std::string> values(std::string_view name, std::string_view short_name = {});
    // Typed values; throw UsageError naming the option when the text does not parse.
    std::optional<long long> int_value(std::string_view name, std::string_view short_name = {});
    std::optional<double> float_value(std::string_view name, std::string_view short_name = {});

    // The remaining positional arguments. Call after every option has been asked for.
    std::vector<std::string> positionals();
    // Throws UsageError for any option nobody asked for.
    void finish();

   private:
    struct Item {
        std::string text;
        bool used = false;
    };
    std::vector<Item> items_;
    bool options_ended_ = false;
    std::vector<size_t> find(std::string_view name, std::string_view short_name, bool takes_value);
};

}  // namespace deskside::cli
