#include "cli/split_hosts.h"

#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "cli/args.h"
#include "engine/mpi_split.h"

namespace deskside::cli {

bool split_hosts_worker(const engine::SplitSpec& hosts) {
    if (hosts.is_auto()) return false;
    // Open MPI, PMIx launchers, MPICH / Hydra.
    for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
        if (const char* rank = std::getenv(name)) return std::string(rank) != "0";
    return false;
}

engine::LoadedModel load_across_hosts(const engine::SplitSpec& hosts,
                                      const std::function<engine::LoadedModel(engine::StageLink&)>& load) {
    std::unique_ptr<engine::StageLink> link;
    try {
        link = engine::open_mpi_link(hosts.ratios.size());
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    engine::LoadedModel opened;
    std::string error;
    std::exception_ptr mine;
    try {
        opened = load(*link);
    } catch (const std::exception& e) {
        error = e.what();
        mine = std::current_exception();
    }
    // Every rank learns whether all loaded: a rank that failed alone would leave the others waiting.
    try {
        link->agree(error);
    } catch (const std::runtime_error&) {
        if (mine) std::rethrow_exception(mine);
        throw;
    }
    if (link->rank() == 0) {
        opened.link = std::move(link);
        return opened;
    }
    try {
        engine::run_stage_worker(*opened.model, *link);
    } catch (const std::exception& e) {
        engine::abort_mpi_job("rank " + std::to_string(link->rank()) + ": " + e.what());
    }
    opened.model.reset();
    std::exit(0);  // MPI is finalized at exit (engine/mpi_split.cpp)
}

}  // namespace deskside::cli
