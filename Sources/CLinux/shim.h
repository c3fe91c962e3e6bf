// Linux facts that Swift's Glibc module does not export (sys/timex.h is not in its module map).
#ifndef DOORBELL_CLINUX_SHIM_H
#define DOORBELL_CLINUX_SHIM_H
#include <sys/timex.h>

// 1 when the kernel says the wall clock is not NTP-synchronized (a Pi without RTC at boot).
static inline int doorbell_clock_unsynchronized(void) {
    struct timex tx = {0};
    int state = adjtimex(&tx);
    return state == TIME_ERROR || (tx.status & STA_UNSYNC) != 0;
}
#endif
