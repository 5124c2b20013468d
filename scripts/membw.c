// Memory read bandwidth, for the roofline in scripts/bench-cpu.sh: N threads each sum their own
// slice of a buffer far larger than the last-level cache; the best of several passes counts.
// Reading (not copying) is what token generation does with the weights, so this is the ceiling
// tg can approach. usage: membw [MiB=1024] [threads=all] [passes=5]
// Prints two numbers in GB/s (1e9 bytes): wall-clock bandwidth (what a benchmark run alongside
// it gets), and bytes per CPU-second times threads (what the threads reach while they are on a
// core: on a machine shared with other work the two differ by the share of the cores we got).
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char** argv) {
    const size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
    const int threads = argc > 2 ? atoi(argv[2]) : omp_get_max_threads();
    const int passes = argc > 3 ? atoi(argv[3]) : 5;
    const size_t n = mib * 1024 * 1024 / sizeof(uint64_t);
    uint64_t* buf = aligned_alloc(64, n * sizeof(uint64_t));
    if (!buf || threads < 1 || passes < 1) {
        fprintf(stderr, "membw: bad arguments or out of memory\n");
        return 1;
    }
    // First touch from the threads that read, so pages land near them.
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; ++i) buf[i] = i;
    double best = 0, best_cpu = 0;
    uint64_t check = 0;
    for (int p = 0; p < passes; ++p) {
        const double t0 = omp_get_wtime();
        const clock_t c0 = clock();  // CPU time of all threads of the process
        uint64_t total = 0;
        // Independent sums let the compiler keep several vector accumulators in flight.
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : total)
        for (size_t i = 0; i < n; ++i) total += buf[i];
        const double s = omp_get_wtime() - t0;
        const double cpu = (double)(clock() - c0) / CLOCKS_PER_SEC / threads;
        if (cpu > 0 && (double)(n * sizeof(uint64_t)) / cpu / 1e9 > best_cpu) best_cpu = (double)(n * sizeof(uint64_t)) / cpu / 1e9;
        const double gbs = (double)(n * sizeof(uint64_t)) / s / 1e9;
        if (gbs > best) best = gbs;
        check += total;
    }
    // Printing the checksum keeps the reads from being optimized away.
    fprintf(stderr, "membw: %zu MiB, %d threads, best of %d passes (checksum %llu)\n", mib, threads, passes,
            (unsigned long long)check);
    printf("%.2f %.2f\n", best, best_cpu);
    free(buf);
    return 0;
}
