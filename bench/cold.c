/* SPDX-License-Identifier: MIT */
/*
 * cold.c - the cold and write file sets, and dropping the page cache
 * (see cold.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cold.h"

int bench_fileset_make(struct bench_fileset *s, const char *base,
		       const char *name, unsigned count,
		       const unsigned char *content, size_t size, int write_now)
{
	memset(s, 0, sizeof(*s));
	/* write: "<base>/<name>-000000", the digits rewritten per run. */
	snprintf(s->dir, sizeof(s->dir), write_now ? "%s/%s" : "%s/%s-000000",
		 base, name);
	s->run_at = strlen(s->dir) - 6;
	s->paths = calloc(count, sizeof(*s->paths));
	if (!s->paths)
		return -ENOMEM;
	s->content = content;
	s->size = size;
	for (unsigned i = 0; i < count; i++) {
		char p[460];

		snprintf(p, sizeof(p), "%s/%s-%u", s->dir, name, i);
		s->paths[i] = strdup(p);
		if (!s->paths[i])
			return -ENOMEM;
		s->count = i + 1;
	}
	if (!write_now)
		return 0;
	if (mkdir(s->dir, 0755) < 0)
		goto fail;
	for (unsigned i = 0; i < count; i++) {
		int fd = open(s->paths[i],
			      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd < 0 || write(fd, content, size) != (ssize_t)size) {
			if (fd >= 0)
				close(fd);
			goto fail;
		}
		close(fd);
	}
	/* Dirty pages cannot be dropped: the files go to the disk first. */
	{
		int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd < 0 || syncfs(dfd) < 0) {
			if (dfd >= 0)
				close(dfd);
			goto fail;
		}
		close(dfd);
	}
	return 0;
fail:
	fprintf(stderr, "ringbench: making %u files in %s: %s\n", count, s->dir,
		strerror(errno));
	return errno ? -errno : -EIO;
}

void bench_fileset_free(struct bench_fileset *s)
{
	for (unsigned i = 0; i < s->count; i++)
		free((void *)s->paths[i]);
	free(s->paths);
	s->paths = NULL;
	s->count = 0;
}

void bench_mark_topdir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int flags;

	if (fd < 0)
		return;
	/* Best effort: a file system without the flag changes nothing. */
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
		flags |= FS_TOPDIR_FL;
		if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0) {
			/* not ext2/3/4, or not allowed: the default placement */
		}
	}
	close(fd);
}

void bench_fileset_remove(const struct bench_fileset *s)
{
	for (unsigned i = 0; i < s->count; i++)
		unlink(s->paths[i]);
}

static int remove_one(const char *path, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void bench_remove_old(const char *dir, const char *prefix, unsigned age_s)
{
	time_t now = time(NULL);
	size_t plen = strlen(prefix);
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[4200];
		struct stat st;

		if (strncmp(e->d_name, prefix, plen))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st) == 0 && st.st_mtime + (time_t)age_s < now)
			nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	}
	closedir(d);
}

/* ----------------------------------------------------------- page cache */

#define DROP_TRIES 4

/* Drops fd's pages; returns its pages and, in *resident, how many of them
 * mincore() still finds in the page cache. */
static long drop_fd(int fd, long *resident)
{
	static long page;
	unsigned char vec[256];
	struct stat st;
	long pages, left = 0;
	void *map;

	if (!page)
		page = sysconf(_SC_PAGESIZE);
	*resident = 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return 0;
	pages = (long)((st.st_size + page - 1) / page);
	/* PROT_NONE: mincore() needs a mapping, not access to it, and a
	 * readable mapping of a file is read by tools that watch mappings
	 * (Valgrind reads its first page to look for an ELF header),
	 * bringing back the page the count is about. */
	map = mmap(NULL, (size_t)st.st_size, PROT_NONE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -1;
	/* Dirty pages stay (the files are synced once, when made: an
	 * fdatasync per file here would send the disk a flush for each), and
	 * the count below shows them. A clean page the kernel holds a
	 * moment longer (a page being migrated or compacted, a batch of
	 * another CPU) also survives one DONTNEED: a few more tries drop
	 * those, and what is left after them is what the run reports. */
	for (int tries = 0; tries < DROP_TRIES; tries++) {
		errno = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		if (errno) {
			munmap(map, (size_t)st.st_size);
			return -1;
		}
		left = 0;
		for (long done = 0; done < pages; done += 256) {
			long chunk = pages - done < 256 ? pages - done : 256;

			if (mincore((char *)map + done * page,
				    (size_t)(chunk * page), vec) < 0) {
				munmap(map, (size_t)st.st_size);
				return -1;
			}
			for (long i = 0; i < chunk; i++)
				left += vec[i] & 1;
		}
		if (!left)
			break;
	}
	munmap(map, (size_t)st.st_size);
	*resident = left;
	return pages;
}

double bench_cache_drop(const char *const *paths, unsigned count)
{
	long total = 0, resident = 0;

	for (unsigned i = 0; i < count; i++) {
		int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
		long left, pages;

		if (fd < 0)
			return -errno;
		pages = drop_fd(fd, &left);
		if (pages < 0) {
			int err = -errno;

			close(fd);
			return err;
		}
		close(fd);
		total += pages;
		resident += left;
	}
	return total ? (double)resident / (double)total : 0;
}

int bench_cache_drop_path(const char *path)
{
	struct stat st;
	const char **paths = NULL;
	unsigned n = 0, cap = 0;
	double share;
	DIR *d;
	struct dirent *e;

	if (stat(path, &st) < 0) {
		fprintf(stderr, "ringbench: --drop-cache %s: %s\n", path,
			strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		share = bench_cache_drop(&path, 1);
		goto out;
	}
	d = opendir(path);
	if (!d) {
		fprintf(stderr, "ringbench: --drop-cache %s: %s\n", path,
			strerror(errno));
		return 1;
	}
	while ((e = readdir(d))) {
		char p[4096];

		if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN)
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (stat(p, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			const char **np;

			cap = cap ? 2 * cap : 1024;
			np = realloc(paths, cap * sizeof(*paths));
			if (!np)
				break;
			paths = np;
		}
		paths[n++] = strdup(p);
	}
	closedir(d);
	share = bench_cache_drop(paths, n);
	for (unsigned i = 0; i < n; i++)
		free((void *)paths[i]);
	free(paths);
out:
	if (share < 0) {
		fprintf(stderr, "ringbench: --drop-cache %s: %s\n", path,
			strerror((int)-share));
		return 1;
	}
	printf("%.6f\n", share);
	return 0;
}

/* ----------------------------------------------------------- write runs */

/* How long making (and removing) one file in dir takes, in ns. */
static uint64_t probe_ns(const char *dir)
{
	struct timespec t0, t1;
	char path[460];
	int fd;

	snprintf(path, sizeof(path), "%s/probe", dir);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (fd < 0)
		return 0;
	close(fd);
	unlink(path);
	return (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u +
	       (uint64_t)(t1.tv_nsec - t0.tv_nsec);
}

int bench_fileset_begin(struct bench_fileset *s)
{
	for (unsigned tries = 1;; tries++) {
		char digits[8];

		snprintf(digits, sizeof(digits), "%06u", ++s->run % 1000000);
		memcpy(s->dir + s->run_at, digits, 6);
		if (mkdir(s->dir, 0755) < 0) {
			int err = -errno;

			fprintf(stderr, "ringbench: mkdir %s: %s\n", s->dir,
				strerror(errno));
			return err;
		}
		if (tries == BENCH_PROBE_TRIES ||
		    probe_ns(s->dir) < BENCH_PROBE_NS)
			break;
		s->skipped++;
	}
	for (unsigned i = 0; i < s->count; i++)
		memcpy((char *)s->paths[i] + s->run_at, s->dir + s->run_at, 6);
	return 0;
}

int bench_fileset_check_and_clear(const struct bench_fileset *s,
				  uint64_t *errors)
{
	unsigned char *buf = malloc(s->size + 1);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (unsigned i = 0; i < s->count; i++) {
		int fd = open(s->paths[i], O_RDONLY | O_CLOEXEC);
		ssize_t got = fd < 0 ? -1 : read(fd, buf, s->size + 1);

		if (got != (ssize_t)s->size || memcmp(buf, s->content, s->size))
			(*errors)++;
		if (fd >= 0)
			close(fd);
		if (unlink(s->paths[i]) < 0 && errno != ENOENT)
			ret = -errno;
	}
	/* The directory stays (see cold.h). */
	free(buf);
	return ret;
}
