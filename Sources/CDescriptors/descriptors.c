// See doorbell_descriptors.h. A C target because the calls need _GNU_SOURCE.
#define _GNU_SOURCE
#include "doorbell_descriptors.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stddef.h>
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
