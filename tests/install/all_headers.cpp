// SPDX-License-Identifier: MIT
//
// all_headers.cpp - every public header from C++, built against the
// installed library (tests/install/run.sh): it includes each header and
// calls into each layer, so a missing extern "C", a C-only construct in a
// header or a symbol missing from the library fails the build or the run.
//
//	all_headers FILE	reads FILE (which holds "hello\n") every way
#include <ringloop/ringloop.h>
#include <ringloop/callback.h>
#include <ringloop/promise.h>
#include <ringloop/coro.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

const char *path;
std::string got; // what each layer read, in the order the layers finish
int failures;

void check(bool ok, const char *what)
{
	if (!ok) {
		std::fprintf(stderr, "all_headers: %s failed\n", what);
		failures++;
	}
}

// The loop layer: a raw request and a timer.
struct raw_read {
	rl_req req;
	char buf[64];
};

void raw_done(rl_req *req)
{
	raw_read *r = static_cast<raw_read *>(req->data);

	check(req->result == 6, "rl_fs_read_file");
	if (req->result > 0)
		got += "loop:" + std::string(r->buf, (size_t)req->result);
}

} // namespace

int main(int argc, char **argv)
{
	rl_loop *loop = nullptr;
	rl_cb_ctx *cbs = nullptr;
	rl_promise_ctx *pctx = nullptr;
	rl_coro_ctx *sched = nullptr;
	struct rl_options opt;
	raw_read raw;
	rl_timer timer;
	char pbuf[64];

	if (argc != 2)
		return 2;
	path = argv[1];

	check(rl_version() == RL_VERSION_HEX, "rl_version");
	check(std::strcmp(rl_version_string(),
			  (std::to_string(RL_VERSION_MAJOR) + "." +
			   std::to_string(RL_VERSION_MINOR) + "." +
			   std::to_string(RL_VERSION_PATCH))
				  .c_str()) == 0,
	      "rl_version_string");

	rl_options_init(&opt);
	check(rl_loop_open(&loop, &opt) == 0, "rl_loop_open");
	if (!loop)
		return 1;

	// ringloop.h
	rl_req_init(&raw.req);
	raw.req.data = &raw;
	check(rl_fs_read_file(loop, &raw.req, path, raw.buf, sizeof(raw.buf), 0,
			      raw_done) == 0,
	      "rl_fs_read_file submit");
	check(rl_run(loop, RL_RUN_DEFAULT) >= 0, "rl_run");
	rl_timer_init(&timer);
	check(rl_timer_start(loop, &timer, 1, 0,
			     [](rl_timer *, int status) {
				     check(status == 0, "timer status");
				     got += "timer;";
			     }) == 0,
	      "rl_timer_start");
	check(rl_run(loop, RL_RUN_DEFAULT) >= 0, "rl_run");

	// callback.h
	check(rl_cb_ctx_open(loop, &cbs) == 0, "rl_cb_ctx_open");
	check(rl_cb_fs_read_file(
		      cbs, path,
		      [](int err, const void *data, size_t len, void *) {
			      check(err == 0, "rl_cb_fs_read_file");
			      got += "cb:" +
				     std::string(static_cast<const char *>(data),
						 len);
		      },
		      nullptr) == 0,
	      "rl_cb_fs_read_file submit");
	rl_run(loop, RL_RUN_DEFAULT);

	// promise.h
	check(rl_promise_ctx_open(loop, &pctx) == 0, "rl_promise_ctx_open");
	rl_promise *ps[2] = {
		rl_promise_fs_read_file(pctx, path, pbuf, sizeof(pbuf)),
		rl_promise_sleep(pctx, 1),
	};
	rl_promise *p = rl_then(
		rl_all(pctx, ps, 2),
		[](struct rl_outcome *out, void *arg) {
			const struct rl_value *v =
				static_cast<const struct rl_value *>(out->value.p);

			check(out->value.i == 2 && v[0].i == 6, "rl_all");
			got += "promise:" +
			       std::string(static_cast<const char *>(arg),
					   (size_t)v[0].i);
		},
		nullptr, pbuf);
	check(p != nullptr, "rl_then");
	rl_run(loop, RL_RUN_DEFAULT);
	check(rl_promise_state(p) == RL_PROMISE_FULFILLED, "rl_promise_state");
	rl_promise_unref(p);

	// coro.h, with an await of the promise layer
	struct rl_coro_ctx_options copt = {};
	check(rl_coro_ctx_open(loop, &sched, &copt) == 0, "rl_coro_ctx_open");
	rl_coro *co = nullptr;
	check(rl_coro_spawn(
		      sched, &co,
		      [](void *arg) -> int64_t {
			      char buf[64];
			      int64_t n = rl_coro_fs_read_file(
				      static_cast<const char *>(arg), buf,
				      sizeof(buf));
			      rl_promise_ctx *pc = nullptr;

			      if (n > 0)
				      got += "coro:" + std::string(buf, (size_t)n);
			      // rl_coro_loop() and the await bridge
			      if (rl_promise_ctx_open(rl_coro_loop(), &pc) == 0) {
				      struct rl_value v = {};
				      int err = rl_coro_await(
					      rl_promise_sleep(pc, 1), &v);

				      check(err == 0, "rl_coro_await");
				      check(rl_promise_ctx_close(pc) == 0,
					    "rl_promise_ctx_close");
			      }
			      return n;
		      },
		      const_cast<char *>(path), nullptr) == 0,
	      "rl_coro_spawn");
	rl_run(loop, RL_RUN_DEFAULT);
	check(co != nullptr && rl_coro_done(co), "rl_coro_done");

	check(rl_cb_ctx_close(cbs) == 0, "rl_cb_ctx_close");
	check(rl_promise_ctx_close(pctx) == 0, "rl_promise_ctx_close");
	check(rl_loop_close(loop) == 0, "rl_loop_close");

	check(got == "loop:hello\ntimer;cb:hello\npromise:hello\ncoro:hello\n",
	      "reading every way");
	if (failures)
		return 1;
	std::puts("all_headers: ok");
	return 0;
}
