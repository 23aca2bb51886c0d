/* SPDX-License-Identifier: MIT */
/*
 * test_bench_storage.c - what ringbench's storage scenarios check their
 * bytes with (bench/rand.c, bench/cold.c): the random I/O file's block
 * content and its check, the write scenario's read-back and clean-up, and
 * dropping the page cache as the cold scenario does. No loop: plain
 * tests, on real files.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "../bench/cold.h"
#include "../bench/rand.h"
#include "helpers.h"

static char scratch[256];

static void make_scratch(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(scratch, sizeof(scratch), "%s/rb-storage-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(scratch));
}

static void remove_scratch(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(bench_storage, .init = make_scratch, .fini = remove_scratch);

Test(bench_storage, a_block_is_right_only_at_its_offset)
{
	static uint64_t block[512], other[512];
	uint64_t gen;

	bench_pattern_fill(block, sizeof(block), 8192, 0);
	cr_assert(bench_pattern_check(block, sizeof(block), 8192, &gen));
	cr_assert_eq(gen, 0);
	/* The same bytes read back from another offset are wrong. */
	cr_assert_not(bench_pattern_check(block, sizeof(block), 4096, &gen));
	cr_assert_not(bench_pattern_check(block, sizeof(block), 12288, &gen));
	/* A generation is one value for the whole block. */
	bench_pattern_fill(block, sizeof(block), 8192, 0x1234567);
	cr_assert(bench_pattern_check(block, sizeof(block), 8192, &gen));
	cr_assert_eq(gen, 0x1234567);
	/* One byte changed, anywhere, is seen. */
	for (size_t at = 0; at < sizeof(block); at += 509) {
		((unsigned char *)block)[at] ^= 0x40;
		cr_assert_not(
			bench_pattern_check(block, sizeof(block), 8192, &gen),
			"byte %zu", at);
		((unsigned char *)block)[at] ^= 0x40;
	}
	/* A torn block: half of one write, half of another. */
	bench_pattern_fill(other, sizeof(other), 8192, 99);
	memcpy(block + 256, other + 256, 256 * sizeof(uint64_t));
	cr_assert_not(bench_pattern_check(block, sizeof(block), 8192, &gen));
	/* Zeroes (a hole, a short read's tail) are wrong too. */
	memset(block, 0, sizeof(block));
	cr_assert_not(bench_pattern_check(block, sizeof(block), 8192, &gen));
}

Test(bench_storage, the_stamps_see_a_wrong_or_torn_block)
{
	static uint64_t block[512], other[512];
	uint64_t gen;

	bench_pattern_fill(block, sizeof(block), 1 << 20, 7);
	cr_assert(bench_pattern_stamps(block, sizeof(block), 1 << 20, &gen));
	cr_assert_eq(gen, 7);
	cr_assert_not(bench_pattern_stamps(block, sizeof(block), 4096, &gen));
	/* Torn at any sector: the sector's stamp is another generation. */
	bench_pattern_fill(other, sizeof(other), 1 << 20, 8);
	for (unsigned sector = 1; sector < 8; sector++) {
		uint64_t torn[512];

		memcpy(torn, block, sizeof(torn));
		memcpy(torn + 64 * sector, other + 64 * sector,
		       (512 - 64 * sector) * sizeof(uint64_t));
		cr_assert_not(
			bench_pattern_stamps(torn, sizeof(torn), 1 << 20, &gen),
			"torn at sector %u", sector);
	}
	/* A byte inside a sector is only seen by the whole check, which one
	 * read in BENCH_RAND_FULL gets. */
	((unsigned char *)block)[1000] ^= 1;
	cr_assert(bench_pattern_stamps(block, sizeof(block), 1 << 20, &gen));
	cr_assert_not(bench_pattern_check(block, sizeof(block), 1 << 20, &gen));
}

Test(bench_storage, the_layout_is_one_fill_whatever_the_chunks)
{
	static uint64_t whole[1024], parts[1024];
	uint64_t gen;

	bench_pattern_fill(whole, sizeof(whole), 1 << 20, 0);
	bench_pattern_fill(parts, 4096, 1 << 20, 0);
	bench_pattern_fill(parts + 512, 4096, (1 << 20) + 4096, 0);
	cr_assert_arr_eq(whole, parts, sizeof(whole));
	cr_assert(
		bench_pattern_check(parts + 512, 4096, (1 << 20) + 4096, &gen));
}

static void put(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

Test(bench_storage, write_runs_are_read_back_then_removed)
{
	static const unsigned char hello[] = "Hello, world";
	struct bench_fileset s;
	char first[400];
	uint64_t errors = 0;
	struct stat st;

	cr_assert_eq(bench_fileset_make(&s, scratch, "w", 3, hello, 12, 0), 0);
	cr_assert_eq(bench_fileset_begin(&s), 0);
	cr_assert_eq(stat(s.dir, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	snprintf(first, sizeof(first), "%s", s.dir);
	put(s.paths[0], hello, 12);
	put(s.paths[1], "Hello, World", 12); /* wrong byte */
	/* paths[2] never written: missing */
	cr_assert_eq(bench_fileset_check_and_clear(&s, &errors), 0);
	cr_assert_eq(errors, 2);
	/* The files are gone; the directory stays, empty (see cold.h). */
	cr_assert_eq(rmdir(s.dir), 0, "%s: %s", s.dir, strerror(errno));
	/* The next run gets a directory of its own name. */
	cr_assert_eq(bench_fileset_begin(&s), 0);
	cr_assert_str_neq(s.dir, first);
	cr_assert_eq(strncmp(s.paths[2], s.dir, strlen(s.dir)), 0);
	for (unsigned i = 0; i < 3; i++)
		put(s.paths[i], hello, 12);
	errors = 0;
	cr_assert_eq(bench_fileset_check_and_clear(&s, &errors), 0);
	cr_assert_eq(errors, 0);
	cr_assert_eq(rmdir(s.dir), 0);
	bench_fileset_free(&s);
}

Test(bench_storage, dropped_pages_leave_the_page_cache)
{
	static unsigned char data[256 * 1024];
	struct bench_fileset s;
	struct statfs fs;
	unsigned char back[4096];
	double share;
	int fd;

	cr_assert_eq(statfs(scratch, &fs), 0);
	if (fs.f_type == TMPFS_MAGIC)
		cr_skip_test("%s is a tmpfs: its pages are the files", scratch);
	memset(data, 'x', sizeof(data));
	cr_assert_eq(
		bench_fileset_make(&s, scratch, "c", 4, data, sizeof(data), 1),
		0);
	/* Read one file back: its pages are in the cache again. */
	fd = open(s.paths[1], O_RDONLY);
	cr_assert_geq(fd, 0);
	while (read(fd, back, sizeof(back)) > 0)
		;
	close(fd);
	share = bench_cache_drop(s.paths, s.count);
	cr_assert_geq(share, 0, "%s", strerror((int)-share));
	cr_assert_leq(share, 0.01, "%.3f of the pages still resident", share);
	bench_fileset_remove(&s);
	cr_assert_eq(rmdir(s.dir), 0, "the files are gone");
	bench_fileset_free(&s);
}

Test(bench_storage, old_leftovers_are_removed_new_ones_kept)
{
	char old[300], young[300], other[300];
	struct timespec times[2] = { { 0, 0 }, { 0, 0 } };

	snprintf(old, sizeof(old), "%s/rs-old", scratch);
	snprintf(young, sizeof(young), "%s/rs-young", scratch);
	snprintf(other, sizeof(other), "%s/other-old", scratch);
	cr_assert_eq(mkdir(old, 0755), 0);
	cr_assert_eq(mkdir(young, 0755), 0);
	cr_assert_eq(mkdir(other, 0755), 0);
	put(strcat(strcpy((char[320]){ 0 }, old), "/f"), "x", 1);
	times[0].tv_sec = times[1].tv_sec = time(NULL) - 700;
	cr_assert_eq(utimensat(AT_FDCWD, old, times, 0), 0);
	cr_assert_eq(utimensat(AT_FDCWD, other, times, 0), 0);
	bench_remove_old(scratch, "rs-", 600);
	cr_assert_neq(access(old, F_OK), 0, "older than 600 s: removed");
	cr_assert_eq(access(young, F_OK), 0, "younger: kept");
	cr_assert_eq(access(other, F_OK), 0, "another prefix: kept");
}

/*
 * Pages just written are dirty: DONTNEED cannot drop them before they
 * are written back (which it starts), so how many are left depends on how
 * fast the disk is. What must hold is that the share reported is what is
 * really resident afterwards, never a pretended 0: nothing reads the file
 * meanwhile, so no page can come back, and nothing else drops them.
 */
Test(bench_storage, the_share_reported_is_what_stays_resident)
{
	static unsigned char data[64 * 1024];
	const char *paths[1];
	char path[300];
	struct statfs fs;
	double share;

	cr_assert_eq(statfs(scratch, &fs), 0);
	if (fs.f_type == TMPFS_MAGIC)
		cr_skip_test("%s is a tmpfs: its pages are the files", scratch);
	snprintf(path, sizeof(path), "%s/dirty", scratch);
	memset(data, 'y', sizeof(data));
	put(path, data, sizeof(data));
	cr_assert_eq(tresident(path, sizeof(data)), 1.0,
		     "a file just written is in the page cache");
	paths[0] = path;
	share = bench_cache_drop(paths, 1);
	cr_assert_geq(share, 0, "%s", strerror((int)-share));
	cr_assert_eq(share, tresident(path, sizeof(data)),
		     "reported %.3f resident", share);
	cr_assert_eq(unlink(path), 0);
}
