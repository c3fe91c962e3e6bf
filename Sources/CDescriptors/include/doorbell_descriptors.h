#ifndef DOORBELL_DESCRIPTORS_H
#define DOORBELL_DESCRIPTORS_H
// Descriptors that are close-on-exec from the moment they exist (pipe2, accept4: glibc declares
// them only under _GNU_SOURCE, which Swift's Glibc module is built without). No system header
// here: a second Clang module over <sys/socket.h> would hide Glibc's SOCK_* constants from Swift.

/// pipe2(O_CLOEXEC [| O_NONBLOCK]): 0, or -errno.
int doorbell_pipe_cloexec(int fds[2], int nonblocking);

/// accept4(SOCK_CLOEXEC) without the peer's address: the connection's fd, or -errno.
int doorbell_accept_cloexec(int listener);

/// Adds "close every descriptor from `lowest` up" to a posix_spawn_file_actions_t (glibc ≥ 2.34),
/// so a child inherits only what the spawn dup2'ed, even a library's socket made without
/// SOCK_CLOEXEC (libcurl, libmosquitto). 0, or an error number.
int doorbell_spawn_close_from(void *file_actions, int lowest);

/// Names the calling thread for the kernel (`top -H`, `ps -L`, perf): pthread_setname_np, also a
/// _GNU_SOURCE call. At most 15 bytes are kept; the caller cuts. 0, or an error number.
int doorbell_set_thread_name(const char *name);

/// Unmaps (MADV_DONTNEED) the pages of the loaded ELF objects' read-only PT_LOAD segments that lie
/// in `ranges` (`count` pairs of start, end: the mappings smaps showed clean; ProcessMappings).
/// It runs inside dl_iterate_phdr, which holds the loader's lock, so no object is unloaded and
/// its addresses reused while the pages go. Writes the bytes unmapped to `released` and returns
/// how many madvise calls failed, -EAGAIN when objects were loaded or unloaded during the call
/// (nothing was unmapped), or -ENOMEM.
int doorbell_release_clean_segments(const unsigned long long *ranges, unsigned long count, unsigned long long *released);

#endif
