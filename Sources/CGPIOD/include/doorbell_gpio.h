#ifndef DOORBELL_GPIO_H
#define DOORBELL_GPIO_H
// One small, version-neutral face over libgpiod for GPIOLine.swift. libgpiod 1.6 (Debian 12,
// Raspberry Pi OS bookworm: libgpiod2) and libgpiod 2.x (Debian 13, Raspberry Pi OS trixie:
// libgpiod3) have unrelated APIs; gpio.c picks one when it is compiled, from the gpiod.h of the
// system (or sysroot) it is built against, so the rest of the agent never knows which.
#include <stddef.h>
#include <stdint.h>

typedef struct doorbell_gpio_line doorbell_gpio_line;

typedef struct {
    int rising;            // 1 rising, 0 falling (raw, before active_low)
    uint64_t timestamp_ns; // CLOCK_MONOTONIC on kernels >= 5.7
} doorbell_gpio_edge;

/// The chip's label and line count; 0, or -1 with errno set.
int doorbell_gpio_chip_describe(const char *path, char *label, size_t label_cap, unsigned *lines);
/// Who holds a line (for "in use by ..."); 0 and an empty string when unknown.
int doorbell_gpio_line_consumer(const char *path, unsigned offset, char *buf, size_t cap);
/// Both-edge input; NULL with errno set.
doorbell_gpio_line *doorbell_gpio_request_edges(const char *path, unsigned offset, const char *consumer);
/// Output at the raw level `initial`; NULL with errno set.
doorbell_gpio_line *doorbell_gpio_request_output(const char *path, unsigned offset, const char *consumer, int initial);
int doorbell_gpio_fd(doorbell_gpio_line *line);
/// The raw level (0/1), or -1 with errno set.
int doorbell_gpio_get(doorbell_gpio_line *line);
/// 0, or -1 with errno set.
int doorbell_gpio_set(doorbell_gpio_line *line, int value);
/// Reads up to `max` queued edges (call when the fd is readable); count, or -1 with errno set.
int doorbell_gpio_read_edges(doorbell_gpio_line *line, doorbell_gpio_edge *out, unsigned max);
void doorbell_gpio_release(doorbell_gpio_line *line);
#endif
