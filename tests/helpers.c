/* SPDX-License-Identifier: MIT */
/* helpers.c - scratch files, backend parameters and end-of-test checks. */
#include "helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Both io_uring rings are covered without a configuration of their own:
 * "uring" has the default ring (SINGLE_ISSUER | DEFER_TASKRUN), the
 * no-link and no-direct variants the plain one. */
static const struct tp backends[] = {
	{ RL_BACKEND_URING, 0, "uring" },
#ifndef RL_TEST_URING_ONLY
	{ RL_BACKEND_EPOLL, 0, "epoll" },
	{ RL_BACKEND_EPOLL, RL_NO_INLINE | RL_NO_AIO, "epoll-pool" },
#endif
	/* The ring variants last: Valgrind leaves them out (below). */
	{ RL_BACKEND_URING, RL_NO_LINK | RL_SHARED_RING, "uring-nolink" },
	{ RL_BACKEND_URING, RL_NO_DIRECT | RL_SHARED_RING, "uring-nodirect" },
};

#define N_BACKENDS	(sizeof(backends) / sizeof(backends[0]))
#define N_RING_VARIANTS 2

/*
 * Under Valgrind (RL_VALGRIND, make test-valgrind) the ring variants are
 * left to the plain and sanitizer runs: they change flags of a ring whose
 * code paths "uring" already takes, and each configuration costs every
 * behaviour test another process under Valgrind: five of them took CI's
 * Valgrind pass past its time limit. The default ring and both epoll
 * configurations (inline and AIO, pool only) still run every test.
 */
struct criterion_test_params tp_backends(void)
{
	size_t n = N_BACKENDS;

	if (getenv("RL_VALGRIND"))
		n -= N_RING_VARIANTS;
	return cr_make_param_array(struct tp, (struct tp *)backends, n);
}

static const struct tp core_backends[] = {
	{ RL_BACKEND_URING, 0, "uring" },
#ifndef RL_TEST_URING_ONLY
	{ RL_BACKEND_EPOLL, 0, "epoll" },
#endif
};

/* tp->name points into the memory of the runner that made the parameter
 * array, not of the process that runs the test: the name is found again
 * from the configuration's backend and flags, in this process's table. */
const char *tp_name(const struct tp *tp)
{
	for (size_t i = 0; i < N_BACKENDS; i++)
		if (backends[i].backend == tp->backend &&
		    backends[i].flags == tp->flags)
			return backends[i].name;
	return tp->backend == RL_BACKEND_URING ? "uring" : "epoll";
}

struct criterion_test_params tp_core(void)
{
	return cr_make_param_array(struct tp, (struct tp *)core_backends,
				   sizeof(core_backends) /
					   sizeof(core_backends[0]));
}

static char dir[256];
static char pathbuf[4][512];
static int pathi;
static int fd_baseline = -1;

/*
 * The system's AIO events (/proc/sys/fs/aio-max-nr) are shared by every
 * test process, and a few tests take them all (test_fs_aio_attack.c). An
 * epoll loop of another test could not make its AIO context meanwhile and
 * would send its direct I/O to the pool, which the tests that count what
 * went through AIO would take for a bug. So those tests hold this lock
 * shared, and a test that takes every event holds it exclusive while it
 * does. The fd stays open until the test process exits: take the lock
 * before tloop() and before any count of fds of the test's own.
 */
static int aio_lock_fd = -1;

void tlock_aio_events(bool exclusive)
{
	if (aio_lock_fd < 0) {
		aio_lock_fd = open("/tmp/ringloop-test-aio-events.lock",
				   O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		cr_assert_geq(aio_lock_fd, 0, "the AIO events' lock: %s",
			      strerror(errno));
	}
	cr_assert_eq(flock(aio_lock_fd, exclusive ? LOCK_EX : LOCK_SH), 0,
		     "flock: %s", strerror(errno));
}

rl_loop *tloop_opts(const struct tp *tp, struct rl_options *opt)
{
	struct rl_options local;
	rl_loop *loop = NULL;
	int ret;

	if (!opt) {
		rl_options_init(&local);
		opt = &local;
	}
	opt->backend = tp->backend;
	opt->flags |= tp->flags;
	if (fd_baseline < 0)
		fd_baseline = tfd_count();
	ret = rl_loop_open(&loop, opt);
	cr_assert_eq(ret, 0, "rl_loop_open(%s): %s", tp_name(tp),
		     rl_strerror(ret));
	cr_assert_str_eq(rl_loop_backend(loop),
			 tp->backend == RL_BACKEND_URING ? "uring" : "epoll");
	return loop;
}

rl_loop *tloop(const struct tp *tp)
{
	return tloop_opts(tp, NULL);
}

void tclose(rl_loop *loop)
{
	cr_assert_eq(rl_loop_close(loop), 0);
	if (fd_baseline >= 0)
		cr_assert_eq(tfd_count(), fd_baseline,
			     "fds leaked: %d open, %d at start", tfd_count(),
			     fd_baseline);
	fd_baseline = -1;
}

void tseen_cb(rl_req *req)
{
	struct tseen *s = req->data;

	s->calls++;
	s->result = req->result;
}

rl_group *tgroup(const struct tp *tp, unsigned loops, unsigned flags, int wake)
{
	struct rl_group_options opt;

	rl_group_options_init(&opt);
	opt.loops = loops;
	opt.flags = flags;
	opt.msg_wake = wake;
	return tgroup_opts(tp, &opt);
}

rl_group *tgroup_opts(const struct tp *tp, struct rl_group_options *opt)
{
	rl_group *g = NULL;
	int ret;

	/* The group's other loops are threads. */
	tskip_uring_threads_under_valgrind(tp);
	opt->loop.backend = tp->backend;
	opt->loop.flags |= tp->flags;
	ret = rl_group_open(&g, opt);
	cr_assert_eq(ret, 0, "rl_group_open: %s", rl_strerror(ret));
	cr_assert_eq(rl_group_size(g), opt->loops);
	return g;
}

void tskip_uring_threads_under_valgrind(const struct tp *tp)
{
	if (tp->backend == RL_BACKEND_URING && getenv("RL_VALGRIND"))
		cr_skip_test("io_uring_enter blocks every thread under "
			     "Valgrind 3.19");
}

void trun(rl_loop *loop)
{
	int ret = rl_run(loop, RL_RUN_DEFAULT);

	cr_assert_geq(ret, 0, "rl_run: %s", rl_strerror(ret));
}

static void rm_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char sub[768];

	if (!d) {
		unlink(path);
		return;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		rm_tree(sub);
	}
	closedir(d);
	rmdir(path);
}

static void cleanup_dir(void)
{
	if (dir[0])
		rm_tree(dir);
}

const char *tdir(void)
{
	if (!dir[0]) {
		const char *base = getenv("TMPDIR");

		snprintf(dir, sizeof(dir), "%s/ringloop-test-XXXXXX",
			 base && *base ? base : "/tmp");
		cr_assert_not_null(mkdtemp(dir));
		atexit(cleanup_dir);
	}
	return dir;
}

const char *tpath(const char *name)
{
	char *p = pathbuf[pathi++ % 4];

	snprintf(p, sizeof(pathbuf[0]), "%s/%s", tdir(), name);
	return p;
}

const char *tkeep_path(const char *path)
{
	static char kept[128][512];
	static int n;

	cr_assert_lt(n, 128);
	snprintf(kept[n], sizeof(kept[n]), "%s", path);
	return kept[n++];
}

const char *tfifo(const char *name)
{
	const char *path = tkeep_path(tpath(name));

	cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo: %s", strerror(errno));
	return path;
}

unsigned char tbyte(const char *name, size_t off)
{
	unsigned h = 2166136261u;

	for (const char *c = name; *c; c++)
		h = (h ^ (unsigned char)*c) * 16777619u;
	return (unsigned char)((h >> 8) + off * 31 + (off >> 9));
}

const char *tfile(const char *name, size_t len)
{
	const char *path = tpath(name);
	unsigned char chunk[8192];
	size_t off = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	cr_assert_geq(fd, 0, "create %s: %s", path, strerror(errno));
	while (off < len) {
		size_t n =
			len - off < sizeof(chunk) ? len - off : sizeof(chunk);

		for (size_t i = 0; i < n; i++)
			chunk[i] = tbyte(name, off + i);
		cr_assert_eq(write(fd, chunk, n), (ssize_t)n);
		off += n;
	}
	close(fd);
	return path;
}

void tcheck(const char *name, const void *buf, size_t len)
{
	const unsigned char *b = buf;

	for (size_t i = 0; i < len; i++)
		if (b[i] != tbyte(name, i))
			cr_assert_fail("%s: byte %zu is %u, want %u", name, i,
				       b[i], tbyte(name, i));
}

/* Entries of a /proc directory, without . and .. */
static int proc_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d, "%s", path);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int tfd_count(void)
{
	return proc_entries("/proc/self/fd") - 1; /* the directory's own fd */
}

double tresident(const char *path, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t pages = (len + (size_t)page - 1) / (size_t)page, in = 0;
	unsigned char vec[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	void *map;

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_leq(pages, sizeof(vec));
	/* PROT_NONE: the mapping must not read the pages in. */
	map = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0);
	cr_assert_neq(map, MAP_FAILED);
	cr_assert_eq(mincore(map, len, vec), 0);
	for (size_t i = 0; i < pages; i++)
		in += vec[i] & 1;
	munmap(map, len);
	close(fd);
	return (double)in / (double)pages;
}

int tthread_count(void)
{
	return proc_entries("/proc/self/task");
}

uint64_t tnow_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void tspin_us(unsigned us)
{
	uint64_t end = tnow_ns() + (uint64_t)us * 1000;

	while (tnow_ns() < end)
		;
}

uint64_t tnow_ms(void)
{
	return tnow_ns() / 1000000;
}

bool thave_resolve_cached(void)
{
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_CACHED };
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static char mnt[512];

void tumount(void)
{
	if (mnt[0] && umount2(mnt, MNT_DETACH) == 0)
		mnt[0] = 0;
}

const char *tmount_tmpfs(const char *name, size_t size)
{
	char opts[64];
	const char *path = tpath(name);

	if (geteuid() != 0)
		cr_skip_test("needs root for a private tmpfs mount");
	if (unshare(CLONE_NEWNS) < 0)
		cr_skip_test("unshare(CLONE_NEWNS): %s", strerror(errno));
	/* The new namespace's mounts are copies of the host's and, under
	 * systemd, shared with them: make them private first, or the tmpfs
	 * would show up on the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		cr_skip_test("make / private: %s", strerror(errno));
	cr_assert_eq(mkdir(path, 0755), 0, "mkdir %s: %s", path,
		     strerror(errno));
	snprintf(opts, sizeof(opts), "size=%zu,mode=0755", size);
	if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		cr_skip_test("mount tmpfs: %s", strerror(errno));
	snprintf(mnt, sizeof(mnt), "%s", path);
	/* Registered after tdir()'s cleanup, so it runs before it: the
	 * scratch directory can then go. */
	atexit(tumount);
	return mnt;
}

void tmount_readonly(const char *path)
{
	cr_assert_eq(mount(NULL, path, NULL,
			   MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL),
		     0, "remount %s read-only: %s", path, strerror(errno));
}

bool tstall_open(struct tstall *st, size_t len)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg;
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);

	if (getenv("RL_VALGRIND"))
		return false;
	st->len = (len + ps - 1) & ~(ps - 1);
	st->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (st->uffd < 0)
		return false;
	if (ioctl(st->uffd, UFFDIO_API, &api) < 0) {
		close(st->uffd);
		return false;
	}
	st->mem = mmap(NULL, st->len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(st->mem, MAP_FAILED);
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (uintptr_t)st->mem;
	reg.range.len = st->len;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(st->uffd, UFFDIO_REGISTER, &reg) < 0) {
		munmap(st->mem, st->len);
		close(st->uffd);
		return false;
	}
	return true;
}

/* Fills the range with zero pages, which wakes every thread waiting on
 * it; the ones that touch it later do not wait. */
void tstall_release(struct tstall *st)
{
	struct uffdio_zeropage zp;

	memset(&zp, 0, sizeof(zp));
	zp.range.start = (uintptr_t)st->mem;
	zp.range.len = st->len;
	if (ioctl(st->uffd, UFFDIO_ZEROPAGE, &zp) < 0)
		cr_assert_eq(errno, EEXIST, "UFFDIO_ZEROPAGE: %s",
			     strerror(errno));
}

void tstall_close(struct tstall *st)
{
	munmap(st->mem, st->len);
	close(st->uffd);
}

#ifdef TEST_AUDIT_ARCH
/*
 * A syscall made with another architecture's numbering (x86-64 can run
 * i386 code) is killed, since its numbers mean something else; on x86-64
 * the x32 ABI shares the architecture but sets bit 30 of the number,
 * which is cleared before the comparison, so x32's calls are refused too.
 */
int tdeny_syscalls(const unsigned *nrs, unsigned n, int err)
{
	enum { MAX = 4 };
	struct sock_filter filter[7 + MAX];
	struct sock_fprog prog;
	unsigned k = 0;

	if (n == 0 || n > MAX)
		return -EINVAL;
	filter[k++] = (struct sock_filter)BPF_STMT(
		BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	filter[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
						   TEST_AUDIT_ARCH, 1, 0);
	filter[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
						   SECCOMP_RET_KILL_PROCESS);
	filter[k++] = (struct sock_filter)BPF_STMT(
		BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
	filter[k++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K,
						   ~0x40000000u);
#endif
	/* A match jumps over the other comparisons and the allow. */
	for (unsigned i = 0; i < n; i++)
		filter[k++] = (struct sock_filter)BPF_JUMP(
			BPF_JMP | BPF_JEQ | BPF_K, nrs[i],
			(unsigned char)(n - i), 0);
	filter[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
						   SECCOMP_RET_ALLOW);
	filter[k++] = (struct sock_filter)BPF_STMT(
		BPF_RET | BPF_K,
		SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA));
	prog.len = (unsigned short)k;
	prog.filter = filter;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return -errno;
	return 0;
}
#endif
