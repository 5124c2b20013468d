// The MPI transport of a model split across processes (--split-hosts, engine/stage_link.h), for
// jobs started by mpirun: `mpirun -np 2 --host a,b deskside serve -m MODEL --split-hosts 1,1`.
// Built when CMake finds an MPI (Debian: libopenmpi-dev); MPI is initialized only by
// open_mpi_link, so commands without --split-hosts never touch it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "engine/stage_link.h"

namespace deskside::engine {

// Whether this build has the MPI transport.
bool mpi_available();

// Initializes MPI (finalized at exit) and links this process to the other ranks of its job. On
// ranks other than 0 stdout and stderr go to /dev/null from here on (only rank 0 prints; a
// rank's errors reach rank 0 through StageLink::agree or abort_mpi_job). Throws
// std::invalid_argument when the job has not `n_hosts` processes, std::runtime_error when this
// build has no MPI.
std::unique_ptr<StageLink> open_mpi_link(size_t n_hosts);

// Writes `why` to the stderr this rank started with and ends the whole job (MPI_Abort): for a
// rank other than 0 that failed where rank 0 did not, which would otherwise wait forever.
[[noreturn]] void abort_mpi_job(const std::string& why);

}  // namespace deskside::engine
