// Linux facts that Swift's Glibc module does not export (sys/timex.h is not in its module map).
#ifndef DOORBELL_CLINUX_SHIM_H
#define DOORBELL_CLINUX_SHIM_H
#include <sys/timex.h>
#include <sys/types.h>
#include <sys/socket.h>

// 1 when the kernel says the wall clock is not NTP-synchronized (a Pi without RTC at boot).
static inline int doorbell_clock_unsynchronized(void) {
    struct timex tx = {0};
    int state = adjtimex(&tx);
    return state == TIME_ERROR || (tx.status & STA_UNSYNC) != 0;
}

// The peer of a Unix socket (struct ucred needs _GNU_SOURCE, which Swift's Glibc lacks; same layout).
struct doorbell_peer { int pid; unsigned int uid; unsigned int gid; };
static inline int doorbell_peer_credentials(int fd, struct doorbell_peer *out) {
    socklen_t len = sizeof(*out);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, out, &len);
}

// libFuzzer's entry for programs that keep their own main (used only by doorbell-fuzz built with
// -sanitize=fuzzer; declared here because Swift cannot declare a C function itself).
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const unsigned char *data, unsigned long size));
#endif
