// --split-hosts: loading one model across the processes of an MPI job (engine/stage_link.h), the
// CLI's part: every rank loads its layers, all agree that they did, and the ranks other than 0
// then serve rank 0's steps until it is done instead of running the command.
#pragma once

#include <functional>

#include "engine/loader.h"
#include "engine/placement.h"
#include "engine/stage_link.h"

namespace deskside::cli {

// Whether this process is a rank other than 0 of an MPI job with --split-hosts (`hosts`), from the
// rank mpirun puts in the environment: such a rank runs no front end (serve binds no port).
bool split_hosts_worker(const engine::SplitSpec& hosts);

// Opens the MPI link for `hosts` (one ratio per rank; UsageError when the job's size differs),
// runs `load` with it on every rank and returns rank 0's model, which owns the link. On the other
// ranks it does not return: they run their layers for rank 0 and exit when its model goes. When a
// rank fails to load, every rank throws (rank 0 its own error, or the failed ranks' messages).
engine::LoadedModel load_across_hosts(const engine::SplitSpec& hosts,
                                      const std::function<engine::LoadedModel(engine::StageLink&)>& load);

}  // namespace deskside::cli
