/* iallreduce_bench — MPI_Iallreduce of N floats, in place (as swift-train) or from a separate
 * send buffer, timed over ITERS calls after one warm-up; rank 0 prints the mean in ms.
 * Used by hand on the simulated cluster (docs/distributed.md "What we tested and how"):
 *   mpicc -O2 -o /tmp/iab tests/cluster/iallreduce_bench.c
 *   tests/cluster/netns.sh mpirun /tmp/c /tmp/iab 26784 20 inplace */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n = argc > 1 ? atoi(argv[1]) : 26784, iters = argc > 2 ? atoi(argv[2]) : 20;
    int inplace = argc > 3 && strcmp(argv[3], "inplace") == 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++)
        a[i] = b[i] = (float)(i % 7) * 0.5f;
    double t0 = 0;
    for (int it = 0; it <= iters; it++) {
        if (it == 1) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        MPI_Request rq;
        MPI_Iallreduce(inplace ? MPI_IN_PLACE : a, b, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
    }
    double ms = (MPI_Wtime() - t0) * 1e3 / iters;
    if (rank == 0)
        printf("%d floats %s: %.2f ms\n", n, inplace ? "in place" : "send buffer", ms);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
