/* SPDX-License-Identifier: MIT */
/*
 * cat_promise.c - prints the files named on the command line with the
 * promise style. Every file is read at once, in parallel; all_settled()
 * waits for all of them and gives their outcomes in the order of the
 * arguments, so a file that fails does not hide the others.
 *
 *	cc -o cat_promise cat_promise.c $(pkg-config --cflags --libs ringloop)
 *	./cat_promise /etc/hostname /etc/os-release
 */
#include <stdio.h>
#include <stdlib.h>

#include <ringloop/ringloop.h>
#include <ringloop/promise.h>

/* rl_promise_fs_read_file() reads into the caller's buffer; a larger file
 * fails with -EFBIG. Untouched pages of a buffer cost no memory. */
#define MAX_FILE (1u << 20)

struct cat {
	char **paths;
	int status;
};

/* A reaction: runs from the loop's microtask queue once every read has
 * settled. out->value.p is the array all_settled() fulfils with. */
static void print_all(struct rl_outcome *out, void *arg)
{
	const struct rl_settlement *s = out->value.p;
	struct cat *cat = arg;

	for (int64_t i = 0; i < out->value.i; i++) {
		if (s[i].err < 0) {
			fprintf(stderr, "cat: %s: %s\n", cat->paths[i],
				rl_strerror(s[i].err));
			cat->status = 1;
		} else {
			/* value.i: the bytes read, value.p: the buffer */
			fwrite(s[i].value.p, 1, (size_t)s[i].value.i, stdout);
		}
	}
}

int main(int argc, char **argv)
{
	size_t n = (size_t)argc - 1;
	struct cat cat = { argv + 1, 0 };
	rl_promise **reads = calloc(n + 1, sizeof(*reads));
	char **bufs = calloc(n + 1, sizeof(*bufs));
	rl_promise_ctx *ctx;
	rl_promise *done;
	rl_loop *loop;
	int err;

	if (!reads || !bufs || rl_loop_open(&loop, NULL) < 0)
		return 1;
	err = rl_promise_ctx_open(loop, &ctx);
	if (err < 0) {
		fprintf(stderr, "cat: %s\n", rl_strerror(err));
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		bufs[i] = malloc(MAX_FILE);
		/* NULL only when memory runs out; all_settled() passes a
		 * NULL input on as a NULL result. */
		reads[i] = rl_promise_fs_read_file(ctx, argv[i + 1], bufs[i],
						   bufs[i] ? MAX_FILE : 0);
	}
	/* all_settled() takes over the references to the reads; then()
	 * takes over the one to all_settled()'s promise. */
	done = rl_then(rl_all_settled(ctx, reads, n), print_all, NULL, &cat);
	if (!done)
		cat.status = 1;
	rl_run(loop, RL_RUN_DEFAULT);
	rl_promise_unref(done);
	rl_loop_close(loop); /* closes the promise context too */
	for (size_t i = 0; i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(reads);
	return cat.status;
}
