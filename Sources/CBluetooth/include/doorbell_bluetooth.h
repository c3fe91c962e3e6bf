// The kernel's HCI socket through BlueZ's libbluetooth (bluetooth.c).
#ifndef DOORBELL_BLUETOOTH_H
#define DOORBELL_BLUETOOTH_H

// Controller hciN: exclusive = the HCI user channel (the controller is the caller's alone; it is
// taken down first), otherwise BlueZ's raw socket with a filter for command answers, hardware
// errors and LE meta events. Returns the fd, or -errno.
int doorbell_hci_open(int dev, int exclusive);

#endif
