/* SPDX-License-Identifier: MIT */
/*
 * fs_helpers.h - what the file-request tests share: one request submitted
 * and run to idle (struct one and the do_*() calls, which assert exactly
 * one callback and give its result), a file's content read back with
 * plain syscalls, a callback-style result, a pattern buffer, paths that outlive tpath()'s reused
 * buffers, and a slow reader of a pipe that checks every byte.
 */
#ifndef RL_TEST_FS_HELPERS_H
#define RL_TEST_FS_HELPERS_H

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "helpers.h"

/* A callback-style result (rl_cb_fn): how many came, the last err and
 * value. */
struct cb_res {
	int calls;
	int err;
	int64_t value;
};

static inline void cb_res_fn(int err, int64_t value, void *arg)
{
	struct cb_res *r = arg;

	r->calls++;
	r->err = err;
	r->value = value;
}

/* One request, run to idle, its result. */
struct one {
	struct tseen s;
	rl_req req;
};

static inline rl_req *one_req(struct one *o)
{
	memset(o, 0, sizeof(*o));
	o->req.data = &o->s;
	return &o->req;
}

/* Runs the loop and checks the one callback came, and says its result. */
static inline int64_t one_result(rl_loop *loop, struct one *o)
{
	trun(loop);
	cr_assert_eq(o->s.calls, 1, "%d callbacks", o->s.calls);
	return o->s.result;
}

static inline int open_fd(rl_loop *loop, const char *path, int flags,
			  unsigned mode)
{
	struct one o;
	int64_t fd;

	cr_assert_eq(rl_fs_open(loop, one_req(&o), path, flags, mode, tseen_cb),
		     0);
	fd = one_result(loop, &o);
	cr_assert_geq(fd, 0, "open %s: %s", path, rl_strerror((int)fd));
	return (int)fd;
}

static inline int64_t do_write(rl_loop *loop, int fd, const void *buf,
			       size_t len, int64_t off)
{
	struct one o;

	cr_assert_eq(
		rl_fs_write(loop, one_req(&o), fd, buf, len, off, tseen_cb), 0);
	return one_result(loop, &o);
}

static inline int64_t do_writev(rl_loop *loop, int fd, const struct iovec *iov,
				unsigned n, int64_t off)
{
	struct one o;

	cr_assert_eq(rl_fs_writev(loop, one_req(&o), fd, iov, n, off, tseen_cb),
		     0);
	return one_result(loop, &o);
}

static inline int64_t do_read(rl_loop *loop, int fd, void *buf, size_t len,
			      int64_t off)
{
	struct one o;

	cr_assert_eq(rl_fs_read(loop, one_req(&o), fd, buf, len, off, tseen_cb),
		     0);
	return one_result(loop, &o);
}

static inline int64_t do_write_file(rl_loop *loop, const char *path,
				    const void *buf, size_t len, unsigned flags)
{
	struct one o;

	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path, buf, len, flags,
				      0644, tseen_cb),
		     0);
	return one_result(loop, &o);
}

static inline int64_t do_fsync(rl_loop *loop, int fd, unsigned flags)
{
	struct one o;

	cr_assert_eq(rl_fs_fsync(loop, one_req(&o), fd, flags, tseen_cb), 0);
	return one_result(loop, &o);
}

static inline int64_t do_ftruncate(rl_loop *loop, int fd, int64_t len)
{
	struct one o;

	cr_assert_eq(rl_fs_ftruncate(loop, one_req(&o), fd, len, tseen_cb), 0);
	return one_result(loop, &o);
}

static inline int64_t do_fallocate(rl_loop *loop, int fd, int mode, int64_t off,
				   int64_t len)
{
	struct one o;

	cr_assert_eq(rl_fs_fallocate(loop, one_req(&o), fd, mode, off, len,
				     tseen_cb),
		     0);
	return one_result(loop, &o);
}

static inline int64_t do_fstat(rl_loop *loop, int fd, struct statx *stx)
{
	struct one o;

	cr_assert_eq(rl_fs_fstat(loop, one_req(&o), fd, stx, tseen_cb), 0);
	return one_result(loop, &o);
}

static inline int64_t do_close(rl_loop *loop, int fd)
{
	struct one o;

	cr_assert_eq(rl_fs_close(loop, one_req(&o), fd, tseen_cb), 0);
	return one_result(loop, &o);
}

/* -errno of a syscall's return value, or the value. */
static inline int64_t sys(long r)
{
	return r < 0 ? -errno : r;
}

/* The whole content of path, read with plain syscalls; *len its size. */
static inline unsigned char *slurp(const char *path, size_t *len)
{
	struct stat st;
	unsigned char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	cr_assert_eq(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static inline void check_content(const char *path, const void *want, size_t len)
{
	size_t got;
	unsigned char *buf = slurp(path, &got);

	cr_assert_eq(got, len, "%s: %zu bytes, want %zu", path, got, len);
	cr_assert(memcmp(buf, want, len) == 0, "%s: content differs", path);
	free(buf);
}

static inline off_t file_size(const char *path)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0, "stat %s: %s", path, strerror(errno));
	return st.st_size;
}

/* len bytes of file name's pattern (helpers.h), malloc'ed. */
static inline unsigned char *pattern(const char *name, size_t len)
{
	unsigned char *p = malloc(len ? len : 1);

	cr_assert_not_null(p);
	for (size_t i = 0; i < len; i++)
		p[i] = tbyte(name, i);
	return p;
}

/* tpath(name) in storage of its own: tpath() reuses a few buffers, and a
 * request keeps its path until its callback. Freed at exit; one list per
 * test file. */
static char **tfs_spaths;
static size_t tfs_nspaths;

static inline void tfs_free_spaths(void)
{
	while (tfs_nspaths)
		free(tfs_spaths[--tfs_nspaths]);
	free(tfs_spaths);
}

static inline const char *spath(const char *name)
{
	char *p = strdup(tpath(name));

	cr_assert_not_null(p);
	if (!tfs_spaths)
		atexit(tfs_free_spaths);
	tfs_spaths = realloc(tfs_spaths, (tfs_nspaths + 1) * sizeof(char *));
	cr_assert_not_null(tfs_spaths);
	tfs_spaths[tfs_nspaths++] = p;
	return p;
}

struct drain {
	int fd;
	size_t want;
	size_t got;
	const char *name; /* the pattern the bytes must follow */
	bool ok;
};

/* Reads a pipe slowly (small reads, a pause before the first), so that
 * the writer meets a full pipe, and checks every byte. */
static inline void *drain_pipe(void *arg)
{
	struct drain *d = arg;
	unsigned char buf[4096];
	ssize_t r;

	d->ok = true;
	usleep(20000);
	while (d->got < d->want && (r = read(d->fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != tbyte(d->name, d->got + (size_t)i))
				d->ok = false;
		d->got += (size_t)r;
	}
	return NULL;
}

#endif
