// `pip download` run quietly with a progress bar of our own (models/store/progress.h) instead of
// pip's output: pip's informational lines go to a pipe that only we read (kept to explain a
// failure), its warnings and errors still reach stderr, and the bar follows the wheel as pip
// writes it into a temporary directory of ours (pip downloads into $TMPDIR, then copies the
// finished file to -d). The size comes from pip's "Downloading URL (12.3 MB)" line; nothing else
// of pip's output is used, and none of it reaches a shell or a terminal.
#pragma once

#include <string>
#include <vector>

namespace deskside::models::store {

// Runs `argv` (python -m pip download ... -d DIR) with TMPDIR=`tmp_dir` (created, then emptied),
// drawing one bar labelled `label`; the bar ends with the size of the newest .whl in `wheel_dir`
// (a local or cached wheel is copied without a download to watch). Returns pip's exit status
// (128+signal when killed); on failure pip's informational output is written to stderr first.
int pip_download(const std::vector<std::string>& argv, const std::string& label, const std::string& tmp_dir,
                 const std::string& wheel_dir);

}  // namespace deskside::models::store
