/* SPDX-License-Identifier: MIT */
/*
 * epoll_fs.h - what the epoll backend's two files of file operations
 * share: epoll_fs.c (the job table, reads and the fast path) and
 * epoll_fs_write.c (the pool jobs of writes and of the other requests).
 * Neither the core (epoll.c) nor anything outside the backend includes
 * it.
 */
#ifndef RINGLOOP_EPOLL_FS_H
#define RINGLOOP_EPOLL_FS_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "epoll.h"

/*
 * One preadv2() or pwritev2() of req's data (buf and len, or its iovecs)
 * on fd, leaving out the first skip bytes: at req->offset + skip, or at
 * the file position when req->offset is -1. Returns what the syscall
 * returns, errno set.
 */
ssize_t rl__ep_rw(rl_req *req, int fd, size_t skip, int rwflags, bool write);

/* True for the file types a read or a write may wait on forever (a pipe,
 * a FIFO, a socket, a character device): the loop polls their reads, and
 * the slow lane takes their writes, so that no regular worker blocks on
 * them. An anonymous inode (an eventfd, a timerfd, a signalfd...) has no
 * file type at all in st_mode, and its reads and writes wait just the
 * same (an eventfd's counter at zero or full). */
static inline bool rl__ep_stream_type(mode_t mode)
{
	return S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) ||
	       (mode & S_IFMT) == 0;
}

/* Pool jobs of epoll_fs_write.c. */
void rl__ep_job_write(rl_req *req);
void rl__ep_job_write_file(rl_req *req);
void rl__ep_job_fsync(rl_req *req);
void rl__ep_job_ftruncate(rl_req *req);
void rl__ep_job_fallocate(rl_req *req);
void rl__ep_job_path(rl_req *req); /* unlink, rmdir, mkdir, rename */
void rl__ep_job_fstat(rl_req *req);

#endif /* RINGLOOP_EPOLL_FS_H */
