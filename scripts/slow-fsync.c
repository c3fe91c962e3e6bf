/* A slow device for scripts/bench-press.sh (BENCH_LATENCY_PRELOAD): every fdatasync/fsync of a
   file whose name ends in -wal (the outbox's write-ahead log) sleeps $SLOW_FSYNC_MS (default 60)
   before the real call. docs/benchmarks.md's "every WAL fsync + 60 ms" rows use it:
     cc -shared -fPIC -O1 -o /tmp/slow-fsync.so scripts/slow-fsync.c -ldl
     BENCH_LATENCY_PRELOAD=/tmp/slow-fsync.so scripts/bench-press.sh ... */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void slow(int fd) {
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 4) return;
    target[n] = 0;
    if (strcmp(target + n - 4, "-wal") != 0) return;
    const char *ms = getenv("SLOW_FSYNC_MS");
    usleep((useconds_t)(ms ? atoi(ms) : 60) * 1000);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    slow(fd);
    return real(fd);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    slow(fd);
    return real(fd);
}
