/*
 * Takes a lock with a short lease, waits for the agent to say the lease
 * ended without blocking anywhere but in poll(2), then unlocks.
 *
 *     cc -std=c99 -Wall -Wextra example.c $(pkg-config --cflags --libs snaplock)
 *     ./a.out [SOCKET]
 *
 * Exits 0 when every step gave the expected result, 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "snaplock.h"

#define OBJECT "example/https://example.com/user/42#edit"

static int failed(const char *what, snaplock_conn *conn, snaplock_result r)
{
    char why[256];
    snaplock_conn_last_error(conn, why, sizeof why);
    fprintf(stderr, "example: %s: %s (%" PRIu32 ")%s%s\n", what,
            snaplock_result_str(r), (uint32_t)r, why[0] ? ": " : "", why);
    return 1;
}

/* Takes every event already there; returns 1 once the lease of OBJECT
 * ended, 0 if not yet, -1 on a failure. */
static int drain_events(snaplock_conn *conn, snaplock_event *event)
{
    int expired = 0;
    for (int i = 0; i < 1000; i++) {
        snaplock_result r = snaplock_next_event(conn, event);
        if (r == SNAPLOCK_RESULT_NO_EVENT)
            return expired;
        if (r != SNAPLOCK_RESULT_OK) {
            failed("next_event", conn, r);
            return -1;
        }
        printf("event %" PRIu32 " about \"%s\"\n", (uint32_t)event->kind,
               event->object_name);
        if (event->kind == SNAPLOCK_EVENT_KIND_LOST) {
            fprintf(stderr, "example: the lock was lost\n");
            return -1;
        }
        if (event->kind == SNAPLOCK_EVENT_KIND_EXPIRED
            && strcmp(event->object_name, OBJECT) == 0)
            expired = 1;
    }
    return expired;
}

int main(int argc, char **argv)
{
    const char *socket_path = argc > 1 ? argv[1] : NULL;
    static snaplock_event event; /* over 4 KiB: not on the stack */
    snaplock_conn *conn = NULL;
    snaplock_conn *other = NULL;
    int status = 1;

    printf("libsnaplock %s\n", snaplock_version());
    snaplock_result r = snaplock_connect(socket_path, &conn);
    if (r != SNAPLOCK_RESULT_OK) {
        fprintf(stderr, "example: connect: %s: %s\n", snaplock_result_str(r),
                r == SNAPLOCK_RESULT_IO ? strerror(errno) : "");
        return 1;
    }
    bool ready = false;
    r = snaplock_status(conn, &ready);
    if (r != SNAPLOCK_RESULT_OK) {
        failed("status", conn, r);
        goto out;
    }
    printf("agent ready: %s\n", ready ? "yes" : "no");

    snaplock_lock_options opts = snaplock_lock_options_default();
    opts.wait_ms = 2000;
    opts.duration_ms = 1000;      /* a short lease, to see it end */
    opts.unlock_duration_ms = 0;  /* the name is free when it ends */
    snaplock_grant grant;
    r = snaplock_lock(conn, OBJECT, &opts, &grant);
    if (r != SNAPLOCK_RESULT_OK) {
        failed("lock", conn, r);
        goto out;
    }
    printf("locked %s: fence %" PRIu64 ", lease ends at %" PRId64 ".%06" PRId64 "\n",
           OBJECT, grant.fence, grant.timeout_date_us / 1000000,
           grant.timeout_date_us % 1000000);

    /* A second connection cannot have it meanwhile. */
    r = snaplock_connect(socket_path, &other);
    if (r != SNAPLOCK_RESULT_OK) {
        fprintf(stderr, "example: second connect: %s\n", snaplock_result_str(r));
        goto out;
    }
    snaplock_lock_options try_once = snaplock_lock_options_default();
    try_once.try_once = true;
    snaplock_grant unused;
    r = snaplock_lock(other, OBJECT, &try_once, &unused);
    if (r != SNAPLOCK_RESULT_BUSY) {
        failed("try_once on a held lock did not give BUSY", other, r);
        goto out;
    }
    printf("second connection: %s\n", snaplock_result_str(r));

    /* What snaplock_lock_options has no room for: a counted lock, then a
     * reliability contract that an agent started just now cannot meet. */
    snaplock_lock_options counted = snaplock_lock_options_default();
    counted.limit = 2;
    snaplock_lock_extra extra = {0};
    extra.counted = true;
    r = snaplock_lock_ex(other, OBJECT "/counted", &counted, &extra, &unused);
    if (r != SNAPLOCK_RESULT_OK) {
        failed("counted lock", other, r);
        goto out;
    }
    extra.min_uptime_ms = 3600000; /* an hour */
    r = snaplock_lock_ex(other, OBJECT "/contract", &counted, &extra, &unused);
    if (r != SNAPLOCK_RESULT_UNTRUSTED) {
        failed("a min_uptime of an hour did not give UNTRUSTED", other, r);
        goto out;
    }
    printf("counted lock: fence %" PRIu64 "; min_uptime of an hour: %s\n",
           unused.fence, snaplock_result_str(r));

    /* The event loop: events a call already brought in first, then poll. */
    int expired = drain_events(conn, &event);
    struct pollfd pfd = { .fd = snaplock_fd(conn), .events = POLLIN };
    for (int i = 0; expired == 0 && i < 50; i++) {  /* 5 s at most */
        int n = poll(&pfd, 1, 100);
        if (n < 0 && errno != EINTR) {
            perror("example: poll");
            goto out;
        }
        if (n > 0)
            expired = drain_events(conn, &event);
    }
    if (expired != 1) {
        fprintf(stderr, "example: no expiry event within 5 s\n");
        goto out;
    }
    printf("lease ended\n");

    r = snaplock_extend(conn, OBJECT, 5000, &grant);
    if (r == SNAPLOCK_RESULT_OK) {
        fprintf(stderr, "example: extended a lease that had ended\n");
        goto out;
    }
    printf("extend after the end: %s\n", snaplock_result_str(r));

    r = snaplock_unlock(conn, OBJECT);
    if (r != SNAPLOCK_RESULT_OK) {
        failed("unlock", conn, r);
        goto out;
    }
    printf("unlocked\n");
    status = 0;
out:
    snaplock_conn_free(other);
    snaplock_conn_free(conn);
    return status;
}
