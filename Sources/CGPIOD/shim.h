#ifndef DOORBELL_CGPIOD_SHIM_H
#define DOORBELL_CGPIOD_SHIM_H
// libgpiod 1.6 (Debian 12, Raspberry Pi OS bookworm): the character-device GPIO API.
#include <gpiod.h>
#endif
