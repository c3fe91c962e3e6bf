// Linux facts that Swift's Glibc module does not export (sys/timex.h is not in its module map).
#ifndef DOORBELL_CLINUX_SHIM_H
#define DOORBELL_CLINUX_SHIM_H
#include <errno.h>
#include <sys/timex.h>
#include <sys/types.h>
#include <sys/socket.h>

// The kernel's NTP state: 1 unsynchronized (a Pi without RTC at boot), 0 synchronized, or -errno
// when the kernel will not say. systemd's ProtectClock=yes filters @clock, and systemd 252 (Debian
// 12) denies even this read-only adjtimex with EPERM: that must read as "unknown", never as
// "synchronized" (the field rig showed the -1 taken for a synchronized clock).
static inline int doorbell_clock_ntp_state(void) {
    struct timex tx = {0};
    int state = adjtimex(&tx);
    if (state < 0) return -errno;
    return (state == TIME_ERROR || (tx.status & STA_UNSYNC) != 0) ? 1 : 0;
}

// The peer of a Unix socket (struct ucred needs _GNU_SOURCE, which Swift's Glibc lacks; same layout).
struct doorbell_peer { int pid; unsigned int uid; unsigned int gid; };
static inline int doorbell_peer_credentials(int fd, struct doorbell_peer *out) {
    socklen_t len = sizeof(*out);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, out, &len);
}

#include <unistd.h>
#include <termios.h>
#include <fcntl.h>
#include <string.h>

// An H4 UART: raw 8N1 at `baud` (standard rates up to 3 Mbit/s), RTS/CTS when asked. 0 or -errno.
static inline int doorbell_serial_configure(int fd, int baud, int flow_control) {
    struct termios t;
    if (tcgetattr(fd, &t) < 0) return -errno;
    cfmakeraw(&t);
    speed_t s;
    switch (baud) {
    case 9600: s = B9600; break; case 19200: s = B19200; break; case 38400: s = B38400; break;
    case 57600: s = B57600; break; case 115200: s = B115200; break; case 230400: s = B230400; break;
    case 460800: s = B460800; break; case 500000: s = B500000; break; case 921600: s = B921600; break;
    case 1000000: s = B1000000; break; case 2000000: s = B2000000; break; case 3000000: s = B3000000; break;
    default: return -EINVAL;
    }
    cfsetispeed(&t, s);
    cfsetospeed(&t, s);
    t.c_cflag |= CLOCAL | CREAD;
    if (flow_control) t.c_cflag |= CRTSCTS; else t.c_cflag &= ~CRTSCTS;
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    if (tcsetattr(fd, TCSANOW, &t) < 0) return -errno;
    tcflush(fd, TCIOFLUSH);
    return 0;
}

// libFuzzer's entry for programs that keep their own main (used only by doorbell-fuzz built with
// -sanitize=fuzzer; declared here because Swift cannot declare a C function itself).
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const unsigned char *data, unsigned long size));
#endif
