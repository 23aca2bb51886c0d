/* SPDX-License-Identifier: MIT */
/*
 * files.c - the bench files (see files.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"

#define MAX_EXPECT (1ull << 30)

static char tmpdir[256];
static const char **made;
static unsigned nmade;

static void remove_files(void)
{
	for (unsigned i = 0; i < nmade; i++)
		unlink(made[i]);
	if (tmpdir[0])
		rmdir(tmpdir);
}

static const char *kind_of(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a regular file";
}

/* Reads fd to its end: the size fstat gives is 0 for procfs files and
 * may be stale for a file being written. */
static int read_all(int fd, unsigned char **out, size_t *len)
{
	size_t cap = 4096, got = 0;
	unsigned char *buf = malloc(cap);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t r;

		if (got == cap) {
			unsigned char *nb;

			if (cap >= MAX_EXPECT) {
				free(buf);
				return -EFBIG;
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = -errno;

			free(buf);
			return err;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	*out = buf;
	*len = got;
	return 0;
}

static int use_file(struct bench_files *f, const char *path)
{
	struct stat st;
	int fd, ret;

	/* stat first and open non-blocking: opening a FIFO nobody writes to
	 * would otherwise wait for good. */
	if (stat(path, &st) < 0) {
		fprintf(stderr, "ringbench: --file %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr,
			"ringbench: --file %s: %s; ringbench reads "
			"regular files (procfs and sysfs ones too)\n",
			path, kind_of(st.st_mode));
		return -1;
	}
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "ringbench: --file %s: %s\n", path,
			fd < 0 ? strerror(errno) : "changed under us");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	ret = read_all(fd, &f->expect, &f->size);
	close(fd);
	if (ret < 0) {
		fprintf(stderr, "ringbench: --file %s: %s\n", path,
			ret == -EFBIG ? "more than 1 GiB" : strerror(-ret));
		return -1;
	}
	f->paths = malloc(sizeof(*f->paths));
	if (!f->paths)
		return -2;
	f->paths[0] = path;
	f->count = 1;
	return 0;
}

/* The seed's file says "Hello, world" (12 bytes); other sizes repeat it. */
int bench_files_make(struct bench_files *f, const char *path, unsigned count,
		     size_t size)
{
	static const char hello[] = "Hello, world";
	const char *base = getenv("TMPDIR");

	memset(f, 0, sizeof(*f));
	if (path)
		return use_file(f, path);
	f->expect = malloc(size + 1);
	f->paths = calloc(count, sizeof(*f->paths));
	made = calloc(count, sizeof(*made));
	if (!f->expect || !f->paths || !made)
		return -2;
	f->size = size;
	for (size_t i = 0; i < size; i++)
		f->expect[i] = (unsigned char)hello[i % (sizeof(hello) - 1)];
	snprintf(tmpdir, sizeof(tmpdir), "%s/ringbench-XXXXXX",
		 base && *base ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		fprintf(stderr, "ringbench: mkdtemp %s: %s\n", tmpdir,
			strerror(errno));
		tmpdir[0] = 0;
		return -2;
	}
	atexit(remove_files);
	for (unsigned i = 0; i < count; i++) {
		char p[300];
		int fd;

		snprintf(p, sizeof(p), "%s/text-%u.txt", tmpdir, i);
		made[i] = f->paths[i] = strdup(p);
		if (!made[i])
			return -2;
		nmade = i + 1;
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, f->expect, size) != (ssize_t)size) {
			fprintf(stderr, "ringbench: writing %s: %s\n", p,
				strerror(errno));
			if (fd >= 0)
				close(fd);
			return -2;
		}
		close(fd);
	}
	f->count = count;
	return 0;
}
