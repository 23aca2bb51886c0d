/* SPDX-License-Identifier: MIT */
/*
 * cold.h - the files of the cold and write scenarios, and the page cache.
 *
 * cold: K distinct files with the bench content, written once and synced
 * to the disk. Before every run (the paired sync runs too) the driver
 * drops their pages from the page cache with posix_fadvise(DONTNEED) on
 * each file, then checks with mincore() on a mapping of each that the
 * pages really left: the run reports the share still resident, which must
 * be about 0. Only the data pages go; the inodes and dentries stay cached,
 * as they would for a server that opens files it has opened before.
 *
 * write: every run writes n new files into a fresh directory; after the
 * run every file is read back and compared, then removed (none of which
 * is timed). Each run's directory has a name of its own, in a parent
 * marked FS_TOPDIR_FL (chattr +T), and stays, empty, after its run: ext4
 * places such a directory in a block group with the fewest directories
 * (the Orlov allocator), so never in one whose files a run just removed.
 * That matters without a journal (this project's VM): ext4 then does not
 * reuse an inode freed in the last 60 to 360 seconds, and scans past
 * every such inode of the group for each new file (recently_deleted() in
 * fs/ext4/ialloc.c), which makes each create several times slower
 * (docs/bench.md, "write": the figures and how they were found). The empty directories are removed ten
 * minutes later, by the next ringbench that starts (storage.h). Other
 * programs' files spill into groups without directories too (a test
 * suite creating and removing thousands of files next door), so a run's
 * directory is also tried first: if making a file in it takes longer than
 * BENCH_PROBE_NS, the directory is left (empty) and another one made, up
 * to BENCH_PROBE_TRIES times (untimed, before the run).
 */

#define BENCH_PROBE_NS	  200000
#define BENCH_PROBE_TRIES 20
#ifndef RINGBENCH_COLD_H
#define RINGBENCH_COLD_H

#include <stddef.h>
#include <stdint.h>

struct bench_fileset {
	char dir[400];
	const char **paths; /* count paths inside dir */
	unsigned count;
	const unsigned char *content;
	size_t size;
	size_t run_at;	  /* write: where the run number is in dir and paths */
	unsigned run;	  /* write: the runs begun */
	unsigned skipped; /* write: directories left for a slow first file */
};

/*
 * Names count files "<dir>/<name>-<i>" under a new directory dir inside
 * base. With write_now, makes the directory, writes the files and syncs
 * them to the disk (cold); otherwise only names them, under a directory
 * named anew for every run (write). Returns 0, or -errno after saying why.
 */
int bench_fileset_make(struct bench_fileset *s, const char *base,
		       const char *name, unsigned count,
		       const unsigned char *content, size_t size,
		       int write_now);
void bench_fileset_free(struct bench_fileset *s);

/*
 * Drops the page cache of every file of paths[0..count) and returns the
 * share of their pages still resident afterwards (0..1), as mincore()
 * sees it, or -errno.
 */
double bench_cache_drop(const char *const *paths, unsigned count);

/* The same for a file, or for the regular files of a directory (one
 * level): ringbench --drop-cache, which scripts/peers.sh runs before every
 * run of the JavaScript peers. Prints the share; exit status 0 or 1. */
int bench_cache_drop_path(const char *path);

/* write: before a run, the fresh directory (its name new: s->run); after
 * it, every file read back and compared (errors counted in *errors), then
 * all removed. */
int bench_fileset_begin(struct bench_fileset *s);
int bench_fileset_check_and_clear(const struct bench_fileset *s,
				  uint64_t *errors);

/* Marks dir FS_TOPDIR_FL where the file system knows it (ext4). */
void bench_mark_topdir(const char *dir);

/* Removes the set's files (at exit); the directories stay (see above). */
void bench_fileset_remove(const struct bench_fileset *s);

/* Removes, under dir, the entries named prefix* older than age_s seconds
 * (with everything inside them): what earlier runs left. */
void bench_remove_old(const char *dir, const char *prefix, unsigned age_s);

#endif
