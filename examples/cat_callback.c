/* SPDX-License-Identifier: MIT */
/*
 * cat_callback.c - prints the files named on the command line, in order,
 * with the callback style. Each read starts from the callback of the one
 * before it, so the output keeps the order of the arguments.
 *
 *	cc -o cat_callback cat_callback.c $(pkg-config --cflags --libs ringloop)
 *	./cat_callback /etc/hostname /etc/os-release
 */
#include <stdio.h>

#include <ringloop/ringloop.h>
#include <ringloop/callback.h>

struct cat {
	rl_cb_ctx *cbs;
	char **paths; /* the files still to print, NULL-terminated */
	int status;   /* the exit status: 1 once a file failed */
};

static void print_then_next(int err, const void *data, size_t len, void *arg);

/* Starts the read of the next file that can be read. */
static void read_next(struct cat *cat)
{
	for (; *cat->paths; cat->paths++) {
		int err = rl_cb_fs_read_file(cat->cbs, *cat->paths,
					     print_then_next, cat);

		if (err == 0)
			return; /* print_then_next() goes on from here */
		fprintf(stderr, "cat: %s: %s\n", *cat->paths, rl_strerror(err));
		cat->status = 1;
	}
}

/* Runs on the loop thread once the whole file is read, or failed. data is
 * valid only during the callback: the layer reuses its buffer. */
static void print_then_next(int err, const void *data, size_t len, void *arg)
{
	struct cat *cat = arg;

	if (err < 0) {
		fprintf(stderr, "cat: %s: %s\n", *cat->paths, rl_strerror(err));
		cat->status = 1;
	} else {
		fwrite(data, 1, len, stdout);
	}
	cat->paths++;
	read_next(cat);
}

int main(int argc, char **argv)
{
	struct cat cat = { .paths = argv + 1 };
	rl_loop *loop;
	int err;

	(void)argc;
	/* NULL options: io_uring, or epoll where io_uring is refused. */
	err = rl_loop_open(&loop, NULL);
	if (err < 0) {
		fprintf(stderr, "cat: loop: %s\n", rl_strerror(err));
		return 1;
	}
	err = rl_cb_ctx_open(loop, &cat.cbs);
	if (err < 0) {
		fprintf(stderr, "cat: %s\n", rl_strerror(err));
		rl_loop_close(loop);
		return 1;
	}
	read_next(&cat);
	rl_run(loop, RL_RUN_DEFAULT); /* until nothing is left in flight */
	rl_loop_close(loop);	      /* closes the context too */
	return cat.status;
}
