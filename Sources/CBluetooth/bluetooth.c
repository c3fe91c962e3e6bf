// BlueZ's own library and headers for the kernel's HCI socket (libbluetooth, GPL-2.0-or-later;
// the project is GPL-3.0-or-later). A C target, not a module map over BlueZ's headers: they pull
// <sys/socket.h> into a second Clang module and Swift then loses Glibc's SOCK_* constants.
#include "doorbell_bluetooth.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>

// The controller hciN. Exclusive: the user channel (HCI_CHANNEL_USER), which the kernel grants
// only on a controller that is down, so it is taken down first (HCIDEVDOWN, needs CAP_NET_ADMIN;
// bluetoothd may power it up again in between: a few tries). Shared: hci_open_dev's raw socket
// with a filter for the events the radio reads. Returns the fd, or -errno.
int doorbell_hci_open(int dev, int exclusive) {
    if (!exclusive) {
        int fd = hci_open_dev(dev);
        if (fd < 0) return -errno;
        struct hci_filter f;
        hci_filter_clear(&f);
        hci_filter_set_ptype(HCI_EVENT_PKT, &f);
        hci_filter_set_event(EVT_CMD_COMPLETE, &f);
        hci_filter_set_event(EVT_CMD_STATUS, &f);
        hci_filter_set_event(EVT_HARDWARE_ERROR, &f);
        hci_filter_set_event(EVT_LE_META_EVENT, &f);
        if (setsockopt(fd, SOL_HCI, HCI_FILTER, &f, sizeof f) < 0) { int e = errno; hci_close_dev(fd); return -e; }
        return fd;
    }
    int fd = socket(AF_BLUETOOTH, SOCK_RAW | SOCK_CLOEXEC, BTPROTO_HCI);
    if (fd < 0) return -errno;
    struct sockaddr_hci a;
    memset(&a, 0, sizeof a);
    a.hci_family = AF_BLUETOOTH;
    a.hci_dev = (unsigned short)dev;
    a.hci_channel = HCI_CHANNEL_USER;
    int e = EBUSY;
    for (int attempt = 0; attempt < 20 && e == EBUSY; attempt++) {
        if (ioctl(fd, HCIDEVDOWN, dev) < 0 && errno != EALREADY) { e = errno; break; }
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
        e = errno;
        if (e == EBUSY) usleep(50000);
    }
    close(fd);
    return -e;
}
