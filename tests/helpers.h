/* SPDX-License-Identifier: MIT */
/*
 * helpers.h - what every test file shares: the backend parameters, a
 * scratch directory with real files, and the end-of-test checks.
 *
 * Every behaviour test is a BACKEND_TEST: Criterion runs it once per
 * backend configuration in tp_backends(), each in its own process.
 */
#ifndef RL_TEST_HELPERS_H
#define RL_TEST_HELPERS_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <linux/audit.h>
#include <stdbool.h>
#include <stddef.h>
#include <unistd.h>

#include "ringloop/ringloop.h"

struct tp {
	int backend;
	unsigned flags;
	const char *name;
};

/* The backend configurations every behaviour test runs on. */
struct criterion_test_params tp_backends(void);
/* The configuration's name ("uring", "epoll-pool", ...); never tp->name,
 * which is only valid in the runner. */
const char *tp_name(const struct tp *tp);

#define BACKEND_TEST(suite, name, ...)           \
	ParameterizedTestParameters(suite, name) \
	{                                        \
		return tp_backends();            \
	}                                        \
	ParameterizedTest(const struct tp *tp, suite, name, ##__VA_ARGS__)

/*
 * For tests that use only microtasks, timers and synchronous calls: once
 * per backend, since the I/O variants of BACKEND_TEST (no-link, no-direct,
 * pool-only) change nothing for them and each run is a process.
 */
struct criterion_test_params tp_core(void);

#define CORE_TEST(suite, name)                   \
	ParameterizedTestParameters(suite, name) \
	{                                        \
		return tp_core();                \
	}                                        \
	ParameterizedTest(const struct tp *tp, suite, name)

/*
 * Skips the test on io_uring under Valgrind (RL_VALGRIND): Valgrind 3.19
 * keeps its big lock across io_uring_enter, so no other thread runs (and
 * no signal is delivered, not even alarm()) while the loop waits in it. A
 * test whose loop waits for one of its threads (a FIFO's writer, a pipe's
 * reader, a poster, the other loops of a group) would hang there: a
 * deadlock of the tool, not of the loop. Call it before opening anything.
 */
void tskip_uring_threads_under_valgrind(const struct tp *tp);

/* Opens a loop on tp's backend; fails the test if it cannot. */
rl_loop *tloop(const struct tp *tp);
rl_loop *tloop_opts(const struct tp *tp, struct rl_options *opt);
/* Holds the lock on the system's AIO events shared (a test that counts
 * what went through AIO) or exclusive (a test that takes them all); first
 * thing in the test, helpers.c says why. */
void tlock_aio_events(bool exclusive);

/* Closes the loop and checks that nothing is left: no fd beyond those open
 * when the test started (see tfd_baseline). */
void tclose(rl_loop *loop);

/* A fresh scratch directory for this test; paths inside it. */
const char *tdir(void);
const char *tpath(const char *name);
/* A copy of path that stays valid for the whole test (tpath() recycles
 * four buffers), and a FIFO made at such a path in the scratch
 * directory. */
const char *tkeep_path(const char *path);
const char *tfifo(const char *name);
/* Writes len bytes of a known pattern (seeded by name) to tpath(name). */
const char *tfile(const char *name, size_t len);
/* The byte the pattern has at offset off for file name. */
unsigned char tbyte(const char *name, size_t off);
/* Checks buf holds the pattern of file name from offset 0. */
void tcheck(const char *name, const void *buf, size_t len);

/* Number of open fds of this process. */
int tfd_count(void);

/* The share of the first len bytes' pages of path (at most 64 pages) that
 * are in the page cache now, by mincore() on a mapping that cannot fault
 * them in. */
double tresident(const char *path, size_t len);
/* Number of threads of this process (/proc/self/task). */
int tthread_count(void);
/* CLOCK_MONOTONIC in nanoseconds and milliseconds, for the bounded waits
 * of tests. */
uint64_t tnow_ns(void);
uint64_t tnow_ms(void);
/* Spins (no sleep, no syscall but the clock's) for us microseconds: a
 * delay short and exact enough to land between two steps of a race. */
void tspin_us(unsigned us);

/* Whether openat2() with RESOLVE_CACHED works here, i.e. whether the
 * epoll backend's inline fast path can open files (not on kernels before
 * 5.12, nor under Valgrind 3.19, which does not know the syscall). */
bool thave_resolve_cached(void);

/* A request callback that counts its calls and keeps the last result:
 * req->data points to a struct tseen. */
struct tseen {
	int calls;
	int64_t result;
};
void tseen_cb(rl_req *req);

/* A group of loops of tp's configuration (rl_group_open() asserted), or
 * the test skipped where it cannot run: a group of io_uring loops under
 * Valgrind 3.19, which runs no other thread while one sits in
 * io_uring_enter, so loops each asleep in their own would wait for each
 * other for ever. */
rl_group *tgroup(const struct tp *tp, unsigned loops, unsigned flags, int wake);
/* The same with the caller's options (loops > 0), tp's backend and flags
 * added to its loop options. */
rl_group *tgroup_opts(const struct tp *tp, struct rl_group_options *opt);

/* Polls cond every millisecond for up to ms milliseconds: whether it came
 * true. A lost wake-up then fails the test instead of hanging it, and
 * what the kernel ends on its own time (io_uring's io-wq workers leave
 * after their ring is gone) is given that time. */
#define twait_until(cond, ms)                  \
	({                                     \
		int left_ = (ms);              \
		while (!(cond) && left_-- > 0) \
			usleep(1000);          \
		(bool)(cond);                  \
	})

/* Runs the loop to idle and asserts it returned >= 0. */
void trun(rl_loop *loop);

/*
 * A tmpfs of size bytes mounted at tpath(name), in a mount namespace of
 * this test's own process (unshare(CLONE_NEWNS), every mount private), so
 * that nothing is seen outside it and it goes with the process. Skips the
 * test, with the reason, where that is not allowed (not root, or
 * unshare() refused). tmount_readonly() remounts it read-only; the mount
 * goes at the end of the test, or with tumount().
 */
const char *tmount_tmpfs(const char *name, size_t size);
void tmount_readonly(const char *mnt);
void tumount(void);

/*
 * Runs the loop without waiting in the kernel until cond holds, for tests
 * where another thread must act while the loop waits: Valgrind 3.19 lets
 * no other thread run (and delivers no signal, not even an alarm) while
 * one sits in io_uring_enter.
 */
#define TRUN_UNTIL(loop, cond)                                         \
	do {                                                           \
		while (!(cond)) {                                      \
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0); \
			usleep(1000);                                  \
		}                                                      \
	} while (0)

/*
 * A job that blocks a thread pool worker for as long as the test wants,
 * on a regular file, with a real kernel mechanism: memory whose first
 * touch, by the kernel too, waits in userfaultfd until tstall_release().
 * A stat whose struct statx is there (stat always goes to a worker on
 * epoll) blocks its worker inside statx(), where no signal interrupts it
 * (the kernel waits for a fault of its own uninterruptibly): only
 * tstall_release() ends it. tstall_open() is false where userfaultfd is
 * not there (Valgrind
 * 3.19 does not know it, or no privilege): skip then. Its fd counts in
 * tclose()'s check: open it before tloop(), close it after tclose().
 */
struct tstall {
	int uffd;
	void *mem;
	size_t len;
};
bool tstall_open(struct tstall *st, size_t len);
void tstall_release(struct tstall *st);
void tstall_close(struct tstall *st);

/* The architecture a seccomp filter of the tests checks for; tests that
 * need one are left out where it is not defined. */
#if defined(__x86_64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define TEST_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef TEST_AUDIT_ARCH
/* A real seccomp filter on the calling thread: the n (at most 4) syscalls
 * nrs fail with err, everything else is allowed (helpers.c says more).
 * 0, or -errno when it could not be installed (-ENOSYS, -EINVAL: no
 * seccomp, as under Valgrind 3.19). Once in place it stays for the life
 * of the thread: call it in a child process. */
int tdeny_syscalls(const unsigned *nrs, unsigned n, int err);
#endif

#endif
