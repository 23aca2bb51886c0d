/* SPDX-License-Identifier: MIT */
/*
 * cat_coro.c - prints the files named on the command line with the
 * coroutine style. The coroutine reads each file a chunk at a time with
 * calls that look blocking: each one suspends the coroutine until the
 * loop has the result, so files of any size stream through a small buffer.
 *
 *	cc -o cat_coro cat_coro.c $(pkg-config --cflags --libs ringloop)
 *	./cat_coro /etc/hostname /etc/os-release
 */
#include <fcntl.h>
#include <stdio.h>

#include <ringloop/ringloop.h>
#include <ringloop/coro.h>

struct cat {
	char **paths;
	int status;
};

static int64_t cat_files(void *arg)
{
	struct cat *cat = arg;
	char buf[4096]; /* on the coroutine's own stack (64 KiB) */

	for (char **path = cat->paths; *path; path++) {
		int fd = rl_coro_fs_open(*path, O_RDONLY, 0);
		int64_t n;

		if (fd < 0) {
			fprintf(stderr, "cat: %s: %s\n", *path,
				rl_strerror(fd));
			cat->status = 1;
			continue;
		}
		/* offset -1: from the file's position, like read(2) */
		while ((n = rl_coro_fs_read(fd, buf, sizeof(buf), -1)) > 0)
			fwrite(buf, 1, (size_t)n, stdout);
		if (n < 0) {
			fprintf(stderr, "cat: %s: %s\n", *path,
				rl_strerror((int)n));
			cat->status = 1;
		}
		rl_coro_fs_close(fd);
	}
	return cat->status;
}

int main(int argc, char **argv)
{
	struct cat cat = { argv + 1, 0 };
	rl_coro_ctx *sched;
	rl_loop *loop;
	int err;

	(void)argc;
	if (rl_loop_open(&loop, NULL) < 0)
		return 1;
	err = rl_coro_ctx_open(loop, &sched, NULL);
	if (err == 0)
		/* NULL handle: detached, nobody joins it. It starts from the
		 * loop, once rl_run() runs. */
		err = rl_coro_spawn(sched, NULL, cat_files, &cat, NULL);
	if (err < 0) {
		fprintf(stderr, "cat: %s\n", rl_strerror(err));
		cat.status = 1;
	}
	rl_run(loop, RL_RUN_DEFAULT);
	rl_loop_close(loop); /* closes the scheduler too */
	return cat.status;
}
