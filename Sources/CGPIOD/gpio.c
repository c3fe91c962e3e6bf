// libgpiod 1.6 or 2.x behind doorbell_gpio.h. Only v1's gpiod.h defines
// GPIOD_LINE_BULK_MAX_LINES (v2 has no bulk objects), which is how the build tells them apart:
// pkg-config's version cannot reach the compiler through SwiftPM.
#include "doorbell_gpio.h"
#include <errno.h>
#include <gpiod.h>
#include <stdlib.h>
#include <string.h>

#define EDGE_BUFFER 64
#define KERNEL_EDGE_BUFFER 1024 /* the kernel's cap: 16 × GPIO_V2_LINES_MAX */

static void copy_text(char *buf, size_t cap, const char *text) {
    if (cap == 0) return;
    if (!text) text = "";
    strncpy(buf, text, cap - 1);
    buf[cap - 1] = 0;
}

#ifdef GPIOD_LINE_BULK_MAX_LINES
/* ---- libgpiod 1.6 ---------------------------------------------------------------------- */
struct doorbell_gpio_line {
    struct gpiod_chip *chip;
    struct gpiod_line *line;
};

int doorbell_gpio_chip_describe(const char *path, char *label, size_t cap, unsigned *lines) {
    struct gpiod_chip *chip = gpiod_chip_open(path);
    if (!chip) return -1;
    copy_text(label, cap, gpiod_chip_label(chip));
    *lines = gpiod_chip_num_lines(chip);
    gpiod_chip_close(chip);
    return 0;
}

int doorbell_gpio_line_consumer(const char *path, unsigned offset, char *buf, size_t cap) {
    copy_text(buf, cap, "");
    struct gpiod_chip *chip = gpiod_chip_open(path);
    if (!chip) return -1;
    struct gpiod_line *line = gpiod_chip_get_line(chip, offset);
    if (line && gpiod_line_update(line) == 0) copy_text(buf, cap, gpiod_line_consumer(line));
    gpiod_chip_close(chip);
    return 0;
}

static doorbell_gpio_line *take(const char *path, unsigned offset, int output, const char *consumer, int initial) {
    struct gpiod_chip *chip = gpiod_chip_open(path);
    if (!chip) return NULL;
    struct gpiod_line *line = gpiod_chip_get_line(chip, offset);
    int rc = -1;
    if (line) rc = output ? gpiod_line_request_output(line, consumer, initial)
                          : gpiod_line_request_both_edges_events(line, consumer);
    doorbell_gpio_line *handle = rc == 0 ? malloc(sizeof *handle) : NULL;
    if (!handle) {
        int e = rc == 0 ? ENOMEM : errno;
        if (rc == 0) gpiod_line_release(line);
        gpiod_chip_close(chip);
        errno = e;
        return NULL;
    }
    handle->chip = chip;
    handle->line = line;
    return handle;
}

int doorbell_gpio_fd(doorbell_gpio_line *h) { return gpiod_line_event_get_fd(h->line); }
int doorbell_gpio_get(doorbell_gpio_line *h) { return gpiod_line_get_value(h->line); }
int doorbell_gpio_set(doorbell_gpio_line *h, int value) { return gpiod_line_set_value(h->line, value); }

int doorbell_gpio_read_edges(doorbell_gpio_line *h, doorbell_gpio_edge *out, unsigned max) {
    struct gpiod_line_event events[EDGE_BUFFER];
    if (max > EDGE_BUFFER) max = EDGE_BUFFER;
    int n = gpiod_line_event_read_multiple(h->line, events, max);
    for (int i = 0; i < n; i++) {
        out[i].rising = events[i].event_type == GPIOD_LINE_EVENT_RISING_EDGE;
        out[i].timestamp_ns = (uint64_t)events[i].ts.tv_sec * 1000000000ull + (uint64_t)events[i].ts.tv_nsec;
    }
    return n;
}

void doorbell_gpio_release(doorbell_gpio_line *h) {
    if (!h) return;
    gpiod_line_release(h->line);
    gpiod_chip_close(h->chip);
    free(h);
}

#else
/* ---- libgpiod 2.x ---------------------------------------------------------------------- */
struct doorbell_gpio_line {
    struct gpiod_line_request *request;
    struct gpiod_edge_event_buffer *events;
    unsigned offset;
};

int doorbell_gpio_chip_describe(const char *path, char *label, size_t cap, unsigned *lines) {
    struct gpiod_chip *chip = gpiod_chip_open(path);
    if (!chip) return -1;
    struct gpiod_chip_info *info = gpiod_chip_get_info(chip);
    int e = errno;
    gpiod_chip_close(chip);
    if (!info) { errno = e; return -1; }
    copy_text(label, cap, gpiod_chip_info_get_label(info));
    *lines = (unsigned)gpiod_chip_info_get_num_lines(info);
    gpiod_chip_info_free(info);
    return 0;
}

int doorbell_gpio_line_consumer(const char *path, unsigned offset, char *buf, size_t cap) {
    copy_text(buf, cap, "");
    struct gpiod_chip *chip = gpiod_chip_open(path);
    if (!chip) return -1;
    struct gpiod_line_info *info = gpiod_chip_get_line_info(chip, offset);
    if (info) {
        copy_text(buf, cap, gpiod_line_info_get_consumer(info));
        gpiod_line_info_free(info);
    }
    gpiod_chip_close(chip);
    return 0;
}

static doorbell_gpio_line *take(const char *path, unsigned offset, int output, const char *consumer, int initial) {
    doorbell_gpio_line *handle = NULL;
    struct gpiod_line_request *request = NULL;
    struct gpiod_edge_event_buffer *events = NULL;
    struct gpiod_line_settings *settings = gpiod_line_settings_new();
    struct gpiod_line_config *config = gpiod_line_config_new();
    struct gpiod_request_config *rconfig = gpiod_request_config_new();
    struct gpiod_chip *chip = gpiod_chip_open(path);
    int e = ENOMEM;
    if (!settings || !config || !rconfig) goto out;
    if (!chip) { e = errno; goto out; }
    if (output) {
        gpiod_line_settings_set_direction(settings, GPIOD_LINE_DIRECTION_OUTPUT);
        gpiod_line_settings_set_output_value(settings, initial ? GPIOD_LINE_VALUE_ACTIVE : GPIOD_LINE_VALUE_INACTIVE);
    } else {
        gpiod_line_settings_set_direction(settings, GPIOD_LINE_DIRECTION_INPUT);
        gpiod_line_settings_set_edge_detection(settings, GPIOD_LINE_EDGE_BOTH);
        // Monotonic: the pipelines time pulses and the repeat gap on the monotonic clock, which
        // NTP never steps (realtime would), and HTE exists only on a few SoCs.
        gpiod_line_settings_set_event_clock(settings, GPIOD_LINE_CLOCK_MONOTONIC);
        if (!(events = gpiod_edge_event_buffer_new(EDGE_BUFFER))) goto out;
    }
    if (gpiod_line_config_add_line_settings(config, &offset, 1, settings) != 0) { e = errno; goto out; }
    gpiod_request_config_set_consumer(rconfig, consumer);
    // The kernel queues 16 edges per line unless asked for more, and drops the newest when full:
    // a stall of a few ms (a busy or emulated CPU; a receiver chattering at kHz) lost edges of
    // a press on the arm64 trixie board. v2 lets a request ask for up to 1024 (v1 cannot).
    if (!output) gpiod_request_config_set_event_buffer_size(rconfig, KERNEL_EDGE_BUFFER);
    request = gpiod_chip_request_lines(chip, rconfig, config);
    if (!request) { e = errno; goto out; }
    if (!(handle = malloc(sizeof *handle))) { gpiod_line_request_release(request); goto out; }
    handle->request = request;
    handle->events = events;
    handle->offset = offset;
    events = NULL;
    e = 0;
out:
    if (events) gpiod_edge_event_buffer_free(events);
    if (chip) gpiod_chip_close(chip); // a request outlives its chip in v2
    if (rconfig) gpiod_request_config_free(rconfig);
    if (config) gpiod_line_config_free(config);
    if (settings) gpiod_line_settings_free(settings);
    if (!handle) errno = e;
    return handle;
}

int doorbell_gpio_fd(doorbell_gpio_line *h) { return gpiod_line_request_get_fd(h->request); }

int doorbell_gpio_get(doorbell_gpio_line *h) {
    enum gpiod_line_value v = gpiod_line_request_get_value(h->request, h->offset);
    return v == GPIOD_LINE_VALUE_ERROR ? -1 : (v == GPIOD_LINE_VALUE_ACTIVE ? 1 : 0);
}

int doorbell_gpio_set(doorbell_gpio_line *h, int value) {
    return gpiod_line_request_set_value(h->request, h->offset, value ? GPIOD_LINE_VALUE_ACTIVE : GPIOD_LINE_VALUE_INACTIVE);
}

int doorbell_gpio_read_edges(doorbell_gpio_line *h, doorbell_gpio_edge *out, unsigned max) {
    if (!h->events) { errno = EINVAL; return -1; }
    if (max > EDGE_BUFFER) max = EDGE_BUFFER;
    int n = gpiod_line_request_read_edge_events(h->request, h->events, max);
    for (int i = 0; i < n; i++) {
        struct gpiod_edge_event *ev = gpiod_edge_event_buffer_get_event(h->events, (unsigned long)i);
        out[i].rising = gpiod_edge_event_get_event_type(ev) == GPIOD_EDGE_EVENT_RISING_EDGE;
        out[i].timestamp_ns = gpiod_edge_event_get_timestamp_ns(ev);
    }
    return n;
}

void doorbell_gpio_release(doorbell_gpio_line *h) {
    if (!h) return;
    gpiod_line_request_release(h->request);
    if (h->events) gpiod_edge_event_buffer_free(h->events);
    free(h);
}
#endif

// Both APIs: take() requests one line as a both-edge input or an output at a raw level.
doorbell_gpio_line *doorbell_gpio_request_edges(const char *path, unsigned offset, const char *consumer) {
    return take(path, offset, 0, consumer, 0);
}

doorbell_gpio_line *doorbell_gpio_request_output(const char *path, unsigned offset, const char *consumer, int initial) {
    return take(path, offset, 1, consumer, initial);
}
