/* SPDX-License-Identifier: MIT */
/*
 * files.h - the files ringbench reads, and the content every read must
 * return.
 */
#ifndef RINGBENCH_FILES_H
#define RINGBENCH_FILES_H

#include <stddef.h>

struct bench_files {
	const char **paths; /* count paths, all with the same content */
	unsigned count;
	unsigned char *expect;
	size_t size;
};

/*
 * Without path: writes count files of size bytes ("Hello, world"
 * repeated) in a fresh directory under $TMPDIR, removed at exit. With
 * path: that one file, which must be a regular file (procfs and sysfs
 * files, which say size 0, are read to their end for the expected
 * content). Returns 0, or prints why and returns -1 (path not benchable:
 * exit status 2) or -2 (anything else).
 */
int bench_files_make(struct bench_files *f, const char *path, unsigned count,
		     size_t size);

#endif
