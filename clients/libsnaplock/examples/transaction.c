/*
 * The medical example of snaplock(7), TRANSACTIONS: MDS entries for a
 * patient run together, a review runs alone, and entry and review
 * exclude each other. Two connections enter data; a review then fails at
 * its statement 2; once the entries end (their connections are freed),
 * the review commits, and ends by deleting its variable.
 *
 *     cc -std=c99 -Wall -Wextra transaction.c $(pkg-config --cflags --libs snaplock)
 *     ./a.out [SOCKET]
 *
 * Exits 0 when every step gave the expected result, 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "snaplock.h"

static const char *const entry[] = {
    "assert not exists Month-End/CGROVE-35",
    "assert not exists MDS-Review/CGROVE-35/R-45899",
    "assert set MDS-Entry/CGROVE-35/R-45899 dup",
};

static const char *const review[] = {
    "assert not exists Month-End/CGROVE-35",
    "assert not exists MDS-Entry/CGROVE-35/R-45899",
    "assert set MDS-Review/CGROVE-35/R-45899",
};

#define COUNT(a) (sizeof (a) / sizeof (a)[0])

static void say(const char *who, snaplock_conn *conn, snaplock_result r,
                const snaplock_tx_result *tx)
{
    char why[256] = "";
    if (r == SNAPLOCK_RESULT_OK) {
        printf("%s: committed, fence %" PRIu64 ", results", who, tx->fence);
        for (size_t i = 0; i < tx->count; i++)
            printf("%s%d", i ? "," : " ", tx->results[i] ? 1 : 0);
        printf("\n");
        return;
    }
    snaplock_conn_last_error(conn, why, sizeof why);
    printf("%s: %s at statement %" PRIu32 " (%s)\n", who, snaplock_result_str(r),
           tx->failed, why);
}

int main(int argc, char **argv)
{
    const char *socket_path = argc > 1 ? argv[1] : NULL;
    snaplock_conn *nurse = NULL, *aide = NULL, *reviewer = NULL;
    snaplock_tx_options opts = {0};
    snaplock_tx_result tx;
    int status = 1;

    if (snaplock_connect(socket_path, &nurse) != SNAPLOCK_RESULT_OK
        || snaplock_connect(socket_path, &aide) != SNAPLOCK_RESULT_OK
        || snaplock_connect(socket_path, &reviewer) != SNAPLOCK_RESULT_OK) {
        fprintf(stderr, "transaction: cannot connect to the agent\n");
        goto out;
    }
    opts.duration_ms = 30000; /* the variables live 30 s unless renewed */

    snaplock_result r = snaplock_transaction(nurse, "Clinical", entry, COUNT(entry),
                                             &opts, &tx);
    say("entry 1", nurse, r, &tx);
    if (r != SNAPLOCK_RESULT_OK)
        goto out;
    r = snaplock_transaction(aide, "Clinical", entry, COUNT(entry), &opts, &tx);
    say("entry 2", aide, r, &tx);
    if (r != SNAPLOCK_RESULT_OK)
        goto out;

    r = snaplock_transaction(reviewer, "Clinical", review, COUNT(review), &opts, &tx);
    say("review", reviewer, r, &tx);
    if (r != SNAPLOCK_RESULT_TX_FAILED || tx.failed != 2) {
        fprintf(stderr, "transaction: the review should fail at statement 2\n");
        goto out;
    }

    /* The entries end: their variables vanish with their connections. */
    snaplock_conn_free(nurse);
    snaplock_conn_free(aide);
    nurse = aide = NULL;
    for (int i = 0; i < 100; i++) { /* 2 s at most */
        r = snaplock_transaction(reviewer, "Clinical", review, COUNT(review), &opts, &tx);
        if (r != SNAPLOCK_RESULT_TX_FAILED)
            break;
        nanosleep(&(struct timespec){ .tv_nsec = 20000000 }, NULL);
    }
    say("review", reviewer, r, &tx);
    if (r != SNAPLOCK_RESULT_OK)
        goto out;
    printf("review committed\n");

    /* The review ends: its variable goes, whether or not it is still
     * there. */
    static const char *const end[] = { "anyway delete MDS-Review/CGROVE-35/R-45899" };
    r = snaplock_transaction(reviewer, "Clinical", end, COUNT(end), NULL, &tx);
    say("end of review", reviewer, r, &tx);
    if (r != SNAPLOCK_RESULT_OK || !tx.results[0])
        goto out;
    status = 0;
out:
    snaplock_conn_free(reviewer);
    snaplock_conn_free(aide);
    snaplock_conn_free(nurse);
    return status;
}
