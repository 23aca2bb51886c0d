/* SPDX-License-Identifier: MIT */
/*
 * fuzz_loop.c - libFuzzer target: random sequences of loop operations.
 *
 * The first byte picks the backend configuration; each following byte is an
 * operation on one of a few request and timer slots: submit (including
 * resubmitting a request in flight), cancel, run once or without waiting,
 * post. Paths include a FIFO nobody writes to (whose reads wait until
 * cancelled or closed), /dev/zero (endless: -EFBIG at the loop's small
 * read_file_max) and /dev/null. The input ends with the loop closed, with
 * or without running it to idle first (not once a FIFO may be waited on:
 * that wait has no end but a cancel). Invariants, checked with abort() so libFuzzer reports them:
 * every accepted request's callback runs exactly once, every rejected one's
 * never, results are >= 0 or a known -errno, and no fd is left open.
 *
 *   make fuzz FUZZ_SECONDS=60
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ringloop/ringloop.h"

#define SLOTS 8

struct fz {
	rl_loop *loop;
	rl_req reqs[SLOTS];
	rl_timer timers[SLOTS];
	struct rl_post posts[SLOTS];
	int owed_req[SLOTS], owed_timer[SLOTS], owed_post[SLOTS];
	char bufs[SLOTS][64];
	struct statx stx[SLOTS];
	int fds[SLOTS]; /* fds our opens returned, to read and close */
	bool fifo;	/* something may wait on the FIFO for good */
};

static struct fz F;
static char small_path[128], big_path[128], dir_path[128], fifo_path[128];

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_loop: invariant broken: %s\n", what);
		abort();
	}
}

static void req_cb(rl_req *req)
{
	int i = (int)(req - F.reqs);

	check(F.owed_req[i] == 1, "request callback ran twice or unasked");
	F.owed_req[i] = 0;
	check(req->result >= -4095, "result out of range");
	if (req->op == RL_OP_OPEN && req->result >= 0) {
		if (F.fds[i] >= 0)
			close(F.fds[i]);
		F.fds[i] = (int)req->result;
	}
	/* A close cancelled before it ran (-ECANCELED) left the fd open;
	 * any other result means it is gone (even EINTR, on Linux). */
	if (req->op == RL_OP_CLOSE && req->fd == F.fds[i] &&
	    req->result != -ECANCELED)
		F.fds[i] = -1;
	if (req->op == RL_OP_READ_FILE && req->buf != F.bufs[i])
		free(req->buf); /* grown by the loop */
}

static void timer_cb(rl_timer *t, int status)
{
	int i = (int)(t - F.timers);

	check(F.owed_timer[i] > 0, "timer callback unasked");
	check(status == 0 || status == -ECANCELED, "timer status");
	/* A timer is owed one callback, or one per period if repeating; the
	 * fuzzer only starts one-shot timers. */
	F.owed_timer[i] = 0;
}

static void post_cb(struct rl_post *p)
{
	int i = (int)(p - F.posts);

	check(F.owed_post[i] > 0, "post callback unasked");
	F.owed_post[i]--;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char dir[] = "/tmp/ringloop-fuzz-XXXXXX";
	int fd;

	(void)argc;
	(void)argv;
	if (!mkdtemp(dir))
		abort();
	snprintf(small_path, sizeof(small_path), "%s/small", dir);
	snprintf(big_path, sizeof(big_path), "%s/big", dir);
	snprintf(dir_path, sizeof(dir_path), "%s", dir);
	snprintf(fifo_path, sizeof(fifo_path), "%s/fifo", dir);
	if (mkfifo(fifo_path, 0600) < 0)
		abort();
	fd = open(small_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "Hello, world", 12) != 12)
		abort();
	close(fd);
	fd = open(big_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	for (int i = 0; i < 64; i++) {
		char block[1024];

		memset(block, 'a' + i % 26, sizeof(block));
		if (write(fd, block, sizeof(block)) != sizeof(block))
			abort();
	}
	close(fd);
	return 0;
}

static void op(uint8_t b, uint8_t arg)
{
	int i = arg % SLOTS;
	rl_req *r = &F.reqs[i];
	int ret = 0, accepted_req = 0;
	static const char *const paths[] = { small_path,  big_path,
					     dir_path,	  "/nonexistent/x",
					     "",	  fifo_path,
					     "/dev/zero", "/dev/null" };
	const char *path = paths[arg % 8];

	if (path == fifo_path && b % 14 < 7)
		F.fifo = true;
	switch (b % 14) {
	case 0:
	case 1:
		ret = rl_fs_read_file(F.loop, r, path, F.bufs[i],
				      arg % 3 ? sizeof(F.bufs[i]) : 5, 0,
				      req_cb);
		accepted_req = 1;
		break;
	case 2:
		ret = rl_fs_read_file(F.loop, r, path, NULL, arg % 64,
				      RL_READ_FILE_GROW, req_cb);
		accepted_req = 1;
		break;
	case 3:
		ret = rl_fs_open(F.loop, r, path, O_RDONLY | O_CLOEXEC, 0,
				 req_cb);
		accepted_req = 1;
		break;
	case 4:
		ret = rl_fs_read(F.loop, r, F.fds[i] >= 0 ? F.fds[i] : 1000 + i,
				 F.bufs[i], arg % 65, arg % 2 ? -1 : arg,
				 req_cb);
		accepted_req = 1;
		break;
	case 5:
		/* Only fds this input opened are ever closed. */
		if (F.fds[i] < 0)
			return;
		ret = rl_fs_close(F.loop, r, F.fds[i], req_cb);
		accepted_req = 1;
		break;
	case 6:
		ret = rl_fs_stat(F.loop, r, path, &F.stx[i], req_cb);
		accepted_req = 1;
		break;
	case 7:
		ret = rl_timer_start(F.loop, &F.timers[i], arg % 3, 0,
				     timer_cb);
		if (ret == 0)
			F.owed_timer[i] = 1;
		return;
	case 8:
		rl_cancel(F.loop, r);
		return;
	case 9:
		rl_timer_cancel(F.loop, &F.timers[i]);
		return;
	case 10:
		check(rl_run(F.loop, RL_RUN_NOWAIT) >= 0, "run nowait");
		return;
	case 11:
		/* Once may wait for good on a FIFO: then only without
		 * waiting. */
		check(rl_run(F.loop, F.fifo ? RL_RUN_NOWAIT : RL_RUN_ONCE) >= 0,
		      "run once");
		return;
	case 12:
		if (F.owed_post[i] == 0 &&
		    rl_post(F.loop, &F.posts[i], post_cb) == 0)
			F.owed_post[i]++;
		return;
	case 13:
		rl_stop(F.loop);
		return;
	}
	if (accepted_req) {
		if (ret == 0) {
			check(F.owed_req[i] == 0,
			      "accepted a request in flight");
			F.owed_req[i] = 1;
		} else {
			check(ret < 0, "submit returned > 0");
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned flags[] = { 0, RL_NO_LINK, RL_NO_DIRECT, 0,
					  RL_NO_INLINE };
	struct rl_options opt;
	int fds_before = count_fds();

	if (size < 2)
		return 0;
	memset(&F, 0, sizeof(F));
	for (int i = 0; i < SLOTS; i++)
		F.fds[i] = -1;
	rl_options_init(&opt);
	opt.backend = data[0] % 5 < 3 ? RL_BACKEND_URING : RL_BACKEND_EPOLL;
	opt.flags = flags[data[0] % 5];
	opt.entries = 8; /* small rings: the SQ fills, requests queue */
	opt.cq_entries = 32;
	opt.direct_slots = 2;
	opt.pool_threads = 1;
	opt.read_file_max = 16384; /* /dev/zero: -EFBIG soon */
	if (rl_loop_open(&F.loop, &opt) < 0)
		return 0;
	for (size_t k = 1; k + 1 < size; k += 2)
		op(data[k], data[k + 1]);
	if ((data[size - 1] & 1) && !F.fifo)
		check(rl_run(F.loop, RL_RUN_DEFAULT) >= 0, "run to idle");
	check(rl_loop_close(F.loop) == 0, "close");
	for (int i = 0; i < SLOTS; i++) {
		check(F.owed_req[i] == 0, "a request callback never ran");
		check(F.owed_timer[i] == 0, "a timer callback never ran");
		check(F.owed_post[i] == 0, "a post callback never ran");
		if (F.fds[i] >= 0)
			close(F.fds[i]);
	}
	check(count_fds() == fds_before, "fd leaked");
	return 0;
}
