/* SPDX-License-Identifier: MIT */
/*
 * uring_chain.c - the cost of one read_file chain shape against another,
 * with liburing alone (docs/experiments.md, "read_file on io_uring against
 * the raw chain"). Usage: uring_chain FILE WINDOW N REPS [MODE]; every
 * mode is run REPS times, interleaved; best and mean wall and CPU times.
 * Modes: 0 raw open/read/close; 1 open/read/probe/close linked; 2 open/read/
 * probe with a separate close (ringloop before); 3 raw with offset 0;
 * 4 statx linked before the chain; 5 statx() syscall then the raw chain;
 * 6 a zero-length RWF_DONTCACHE read as a type test in the chain; 7 the
 * same with a separate close; 8 open into the occupied slot/read/probe,
 * no close (ringloop now); 9 open into the occupied slot/zero-length
 * RWF_DONTCACHE read/read, no close; 10 the same with the read soft-linked
 * to a probe (which runs only when the read fills its buffer), every CQE
 * but the probe's skipped on success. The file must hold 12 bytes. DEFER=1
 * in the environment sets the ring up as the loop's default ring
 * (SINGLE_ISSUER | DEFER_TASKRUN).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

static struct io_uring ring;
static char bufs[1024][64];
static char probe[1024];
static const char *path;
static unsigned W;
static int mode;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static double cpu(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return r.ru_utime.tv_sec * 1e3 + r.ru_utime.tv_usec / 1e3 +
	       r.ru_stime.tv_sec * 1e3 + r.ru_stime.tv_usec / 1e3;
}

static unsigned freel[1024], nfree;
static void start(unsigned slot)
{
	struct io_uring_sqe *s;
	if (mode == 5) {
		struct statx sx;
		if (statx(AT_FDCWD, path, 0, STATX_SIZE | STATX_TYPE, &sx) < 0)
			exit(2);
	}
	if (mode == 4) {
		static struct statx stx[1024];
		s = io_uring_get_sqe(&ring);
		io_uring_prep_statx(s, AT_FDCWD, path, 0,
				    STATX_SIZE | STATX_TYPE, &stx[slot]);
		s->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
		s->user_data = slot << 3 | 0;
	}
	s = io_uring_get_sqe(&ring);
	io_uring_prep_openat_direct(s, AT_FDCWD, path, O_RDONLY, 0, slot);
	s->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
	s->user_data = slot << 3 | 0;
	if (mode == 6 || mode == 7 || mode == 9 || mode == 10) {
		s = io_uring_get_sqe(&ring);
		io_uring_prep_read(s, slot, bufs[slot], 0, (uint64_t)-1);
		s->rw_flags = 0x80;
		s->flags |= IOSQE_FIXED_FILE | IOSQE_IO_LINK |
			    IOSQE_CQE_SKIP_SUCCESS;
		s->user_data = slot << 3 | 4;
	}
	s = io_uring_get_sqe(&ring);
	io_uring_prep_read(s, slot, bufs[slot], 13,
			   mode == 0 || mode == 3 || mode == 5 || mode == 6 ||
					   mode == 7 || mode == 9 || mode == 10
				   ? 0
				   : (uint64_t)-1);
	/* The read of modes 7 and 9 ends the chain: a link there would tie
	 * it to the next chain's open (mode 7 had one until 2026-12-03, and
	 * measured 2.4x and 8.4x the raw chain for it). Mode 10's is short,
	 * which cancels the probe. */
	s->flags |= IOSQE_FIXED_FILE |
		    (mode == 9 || mode == 7 ? 0
		     : mode == 10 ? IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS
				  : IOSQE_IO_HARDLINK);
	s->user_data = slot << 3 | 1;
	if (mode == 10) {
		s = io_uring_get_sqe(&ring);
		io_uring_prep_read(s, slot, &probe[slot], 1, (uint64_t)-1);
		s->flags |= IOSQE_FIXED_FILE;
		s->user_data = slot << 3 | 2;
	}
	if (mode == 1 || mode == 2 || mode == 8) {
		s = io_uring_get_sqe(&ring);
		io_uring_prep_read(s, slot, &probe[slot], 1, (uint64_t)-1);
		s->flags |=
			IOSQE_FIXED_FILE | (mode == 1 ? IOSQE_IO_HARDLINK : 0);
		s->user_data = slot << 3 | 2;
	}
	if (mode != 2 && mode != 7 && mode != 8 && mode != 9 &&
	    mode != 10) { /*close*/
		s = io_uring_get_sqe(&ring);
		io_uring_prep_close_direct(s, slot);
		s->user_data = slot << 3 | 3;
	}
}
static void run(unsigned n, unsigned w)
{
	unsigned started = 0, done = 0, inflight = 0;
	while (done < n) {
		while (started < n && inflight < w && nfree) {
			start(freel[--nfree]);
			started++;
			inflight++;
		}
		struct io_uring_cqe *c;
		unsigned head, seen = 0;
		if (io_uring_sq_ready(&ring))
			io_uring_submit_and_wait(&ring, 1);
		else if (io_uring_peek_cqe(&ring, &c) == -EAGAIN)
			io_uring_wait_cqe(&ring, &c);
		io_uring_for_each_cqe(&ring, head, c)
		{
			unsigned slot = c->user_data >> 3,
				 tag = c->user_data & 7;
			seen++;
			if (tag == 1) {
				if (c->res != 12) {
					fprintf(stderr, "bad %d\n", c->res);
					exit(1);
				}
				if (mode == 9 || mode == 10) {
					inflight--;
					done++;
					freel[nfree++] = slot;
				}
				if (mode == 7) {
					struct io_uring_sqe *s =
						io_uring_get_sqe(&ring);
					if (!s) {
						io_uring_submit(&ring);
						s = io_uring_get_sqe(&ring);
					}
					io_uring_prep_close_direct(s, slot);
					s->user_data = slot << 3 | 3;
					inflight--;
					done++;
				}
			} else if (tag == 2) {
				if (c->res != 0) {
					fprintf(stderr, "probe %d\n", c->res);
					exit(1);
				}
				if (mode == 8) {
					inflight--;
					done++;
					freel[nfree++] = slot;
				}
				if (mode == 2) {
					struct io_uring_sqe *s =
						io_uring_get_sqe(&ring);
					if (!s) {
						io_uring_submit(&ring);
						s = io_uring_get_sqe(&ring);
					}
					io_uring_prep_close_direct(s, slot);
					s->user_data = slot << 3 | 3;
					inflight--;
					done++;
				}
			} else if (tag == 3) {
				if (mode != 2 && mode != 7) {
					inflight--;
					done++;
				}
				freel[nfree++] = slot;
			} else {
				fprintf(stderr, "open fail %d tag %u mode %d\n",
					c->res, tag, mode);
				exit(1);
			}
		}
		io_uring_cq_advance(&ring, seen);
	}
	/* drain closes */
	while (nfree < W) {
		struct io_uring_cqe *c;
		io_uring_submit_and_wait(&ring, 1);
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&ring, head, c)
		{
			seen++;
			if ((c->user_data & 7) == 3)
				freel[nfree++] = c->user_data >> 3;
		}
		io_uring_cq_advance(&ring, seen);
	}
}
int main(int argc, char **argv)
{
	path = argv[1];
	W = atoi(argv[2]);
	unsigned n = atoi(argv[3]);
	int reps = atoi(argv[4]);
	struct io_uring_params p = { 0 };
	if (getenv("DEFER"))
		p.flags =
			IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	if (io_uring_queue_init_params(4096, &ring, &p) < 0)
		return 1;
	io_uring_register_files_sparse(&ring, 1024);
	for (unsigned i = 0; i < W; i++)
		freel[nfree++] = W - 1 - i;
	double best[11][2];
	for (int m = 0; m < 11; m++)
		best[m][0] = best[m][1] = 1e9;
	double sum[11][2] = { 0 };
	int only = argc > 5 ? atoi(argv[5]) : -1;
	for (int r = 0; r < reps; r++)
		for (mode = 0; mode < 11; mode++) {
			if (only >= 0 && mode != only)
				continue;
			double t0 = now(), c0 = cpu();
			run(n, W);
			double t = now() - t0, c = cpu() - c0;
			if (t < best[mode][0])
				best[mode][0] = t;
			if (c < best[mode][1])
				best[mode][1] = c;
			sum[mode][0] += t;
			sum[mode][1] += c;
		}
	const char *names[] = { "raw3",		 "probe4-chain",
				"ringloop-like", "raw3-off0",
				"statx-chain",	 "syncstatx+raw3",
				"dctest-chain",	 "dctest-closelater",
				"probe-replace", "dctest-replace",
				"dctest-probe" };
	for (int m = 0; m < 11; m++)
		printf("%-14s W=%u best %.2f ms cpu %.2f ms | mean %.2f cpu %.2f | x raw(best) %.3f\n",
		       names[m], W, best[m][0], best[m][1], sum[m][0] / reps,
		       sum[m][1] / reps, best[m][0] / best[0][0]);
}
