// See doorbell_descriptors.h. A C target because the calls need _GNU_SOURCE.
#define _GNU_SOURCE
#include "doorbell_descriptors.h"
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <spawn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

int doorbell_pipe_cloexec(int fds[2], int nonblocking) {
    return pipe2(fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0)) == 0 ? 0 : -errno;
}

int doorbell_accept_cloexec(int listener) {
    int fd;
    do { fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC); } while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
}

int doorbell_spawn_close_from(void *file_actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np((posix_spawn_file_actions_t *)file_actions, lowest);
}

int doorbell_set_thread_name(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

// The release runs in two passes over the loaded objects, both inside dl_iterate_phdr (which
// holds the loader's lock: no object is unloaded and its addresses reused meanwhile). The first
// counts them from the loader's own records; the second reads each object's program headers
// (which maps its first pages again) and, at the last object, unmaps the clean parts of every
// read-only segment at once, so the headers it read go too. Objects added or removed between
// the passes: nothing is unmapped (the caller tries again later).
enum { DOORBELL_MAX_SEGMENTS = 2048 };

struct doorbell_release {
    const unsigned long long *ranges;
    unsigned long count;
    uint64_t page;
    unsigned long long adds, subs;
    size_t objects, seen, segments;
    uint64_t start[DOORBELL_MAX_SEGMENTS], end[DOORBELL_MAX_SEGMENTS];
    uint64_t released;
    int failures, done;
};

static int doorbell_count_objects(struct dl_phdr_info *info, size_t size, void *data) {
    struct doorbell_release *r = data;
    if (r->objects == 0 && size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
        r->adds = info->dlpi_adds;
        r->subs = info->dlpi_subs;
    }
    r->objects++;
    return 0;
}

static void doorbell_unmap_collected(struct doorbell_release *r) {
    for (size_t s = 0; s < r->segments; s++) {
        for (unsigned long k = 0; k < r->count; k++) {
            uint64_t a = r->ranges[2 * k] > r->start[s] ? (uint64_t)r->ranges[2 * k] : r->start[s];
            uint64_t b = r->ranges[2 * k + 1] < r->end[s] ? (uint64_t)r->ranges[2 * k + 1] : r->end[s];
            if (a >= b) continue;
            if (madvise((void *)(uintptr_t)a, (size_t)(b - a), MADV_DONTNEED) == 0) r->released += b - a;
            else r->failures++;
        }
    }
    r->done = 1;
}

static int doorbell_release_object(struct dl_phdr_info *info, size_t size, void *data) {
    struct doorbell_release *r = data;
    if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs
        || info->dlpi_adds != r->adds || info->dlpi_subs != r->subs) return 1; // changed: stop, unmap nothing
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        // Only segments the loader maps without write permission: never relocated, never written.
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) || ph->p_memsz == 0) continue;
        if (r->segments == DOORBELL_MAX_SEGMENTS) break;
        r->start[r->segments] = (info->dlpi_addr + ph->p_vaddr) & ~(r->page - 1);
        r->end[r->segments] = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + r->page - 1) & ~(r->page - 1);
        r->segments++;
    }
    if (++r->seen == r->objects) doorbell_unmap_collected(r);
    return 0;
}

int doorbell_release_clean_segments(const unsigned long long *ranges, unsigned long count, unsigned long long *released) {
    // 32 KiB of segment bounds: on the heap, not on a thread's stack.
    struct doorbell_release *r = calloc(1, sizeof *r);
    *released = 0;
    if (r == NULL) return -ENOMEM;
    r->ranges = ranges;
    r->count = count;
    r->page = (uint64_t)sysconf(_SC_PAGESIZE);
    dl_iterate_phdr(doorbell_count_objects, r);
    dl_iterate_phdr(doorbell_release_object, r);
    *released = r->released;
    int result = r->done ? r->failures : -EAGAIN;
    free(r);
    return result;
}
