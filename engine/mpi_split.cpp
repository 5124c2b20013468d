// StageLink over MPI point-to-point messages on MPI_COMM_WORLD (ref: MPI 3.1 standard, chapter 3).
//
// Waiting is polled (MPI_Iprobe / MPI_Test) rather than blocking in MPI_Recv: Open MPI's blocking
// receive spins a core at 100%, which a rank idling between requests (serve) must not do. A
// waiting rank spins for the first few milliseconds (a step's answer comes soon; sleeping then
// would add to the per-token time), then sleeps between polls.
#include "engine/mpi_split.h"

#include <cstdio>
#include <stdexcept>

#ifdef DESKSIDE_MPI
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>
#endif

namespace deskside::engine {

#ifdef DESKSIDE_MPI

namespace {

constexpr int kTagCommand = 1, kTagActivations = 2;
int g_stderr = STDERR_FILENO;  // this rank's stderr before the redirection of open_mpi_link

// Polls `ready` until it returns true: spinning (yielding the core) for 20 ms, then sleeping.
template <class Ready>
void poll(Ready&& ready) {
    using clock = std::chrono::steady_clock;
    const clock::time_point start = clock::now();
    while (!ready()) {
        if (clock::now() - start < std::chrono::milliseconds(20)) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

void wait(MPI_Request& request) {
    poll([&] {
        int done = 0;
        MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        return done != 0;
    });
}

int count_arg(size_t n) {
    if (n > static_cast<size_t>(INT_MAX)) throw std::runtime_error("--split-hosts: a message over 2^31 elements");
    return static_cast<int>(n);
}

void finalize() {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

class MpiLink final : public StageLink {
   public:
    MpiLink() {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
    }
    int rank() const override { return rank_; }
    int n_ranks() const override { return size_; }

    void send_command(std::span<const int32_t> words) override {
        for (int r = 1; r < size_; ++r) send_words(r, kTagCommand, words.data(), words.size(), MPI_INT32_T);
    }
    std::vector<int32_t> receive_command() override {
        MPI_Status status;
        poll([&] {
            int flag = 0;
            MPI_Iprobe(0, kTagCommand, MPI_COMM_WORLD, &flag, &status);
            return flag != 0;
        });
        int count = 0;
        MPI_Get_count(&status, MPI_INT32_T, &count);
        std::vector<int32_t> words(static_cast<size_t>(count));
        MPI_Recv(words.data(), count, MPI_INT32_T, 0, kTagCommand, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return words;
    }
    void send(int peer, std::span<const float> values) override {
        send_words(peer, kTagActivations, values.data(), values.size(), MPI_FLOAT);
    }
    void receive(int peer, std::span<float> values) override {
        MPI_Request request;
        MPI_Irecv(values.data(), count_arg(values.size()), MPI_FLOAT, peer, kTagActivations, MPI_COMM_WORLD, &request);
        wait(request);
    }

    void agree(const std::string& error) override {
        const int length = count_arg(error.size());
        std::vector<int> lengths(static_cast<size_t>(size_)), offsets(static_cast<size_t>(size_));
        MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
        int total = 0;
        for (int r = 0; r < size_; ++r) {
            offsets[r] = total;
            total += lengths[r];
        }
        std::string all(static_cast<size_t>(total), '\0');
        MPI_Allgatherv(error.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                       MPI_COMM_WORLD);
        std::string message;
        for (int r = 0; r < size_; ++r)
            if (lengths[r] > 0)
                message += (message.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " +
                           all.substr(offsets[r], lengths[r]);
        if (!message.empty()) throw std::runtime_error("--split-hosts: " + message);
    }

   private:
    void send_words(int peer, int tag, const void* data, size_t count, MPI_Datatype type) {
        MPI_Request request;
        MPI_Isend(data, count_arg(count), type, peer, tag, MPI_COMM_WORLD, &request);
        wait(request);
    }

    int rank_ = 0, size_ = 1;
};

}  // namespace

bool mpi_available() { return true; }

std::unique_ptr<StageLink> open_mpi_link(size_t n_hosts) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        // Serialized: the engine thread makes a model's calls, the main thread its last (Stop).
        int provided = 0;
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
        if (provided < MPI_THREAD_SERIALIZED) {
            MPI_Finalize();
            throw std::runtime_error("--split-hosts: the MPI library does not allow calls from several threads");
        }
        std::atexit(finalize);
    }
    auto link = std::make_unique<MpiLink>();
    if (static_cast<size_t>(link->n_ranks()) != n_hosts)
        throw std::invalid_argument("--split-hosts gives " + std::to_string(n_hosts) + " hosts but the job has " +
                                    std::to_string(link->n_ranks()) + " processes (start it as mpirun -np " +
                                    std::to_string(n_hosts) + " deskside ...)");
    if (link->rank() != 0) {
        std::fflush(stdout);
        std::fflush(stderr);
        g_stderr = dup(STDERR_FILENO);
        const int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
            close(null);
        }
    }
    return link;
}

void abort_mpi_job(const std::string& why) {
    const std::string line = "deskside: " + why + "\n";
    if (write(g_stderr, line.data(), line.size()) < 0) {
        // Nowhere left to say it; the abort below still ends the job.
    }
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
}

#else  // built without MPI

bool mpi_available() { return false; }

std::unique_ptr<StageLink> open_mpi_link(size_t) {
    throw std::runtime_error("--split-hosts: this deskside was built without MPI (install libopenmpi-dev and "
                             "configure again)");
}

void abort_mpi_job(const std::string& why) {
    std::fprintf(stderr, "deskside: %s\n", why.c_str());
    std::abort();
}

#endif

}  // namespace deskside::engine
