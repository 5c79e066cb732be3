/* An MPI program that really communicates, installed in the node image as
 * /usr/lib64/<mpi>/bin/mpi_allreduce for Open MPI and MPICH.
 *
 * Every rank passes a token around a ring (point-to-point between every pair
 * of neighbours, so across nodes) and then contributes rank + 1 to an
 * MPI_Allreduce. Every rank checks both results and prints one line; the
 * exit status is 0 only when every rank got the expected values. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int size, rank, name_len, token, sum, expected, ok, all_ok;
    char name[MPI_MAX_PROCESSOR_NAME];

    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Get_processor_name(name, &name_len);

    /* Ring: rank 0 starts the token at 0, every rank adds its own rank. */
    if (rank == 0) {
        token = 0;
        if (size > 1) {
            MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    } else {
        MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        token += rank;
        MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
    }
    MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);

    int mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    expected = size * (size + 1) / 2;
    ok = sum == expected && token == size * (size - 1) / 2;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);

    printf("allreduce rank %d of %d on %s: sum %d (expected %d), ring %d (expected %d): %s\n",
           rank, size, name, sum, expected, token, size * (size - 1) / 2,
           all_ok ? "ok" : "FAILED");

    MPI_Finalize();
    return all_ok ? 0 : 1;
}
