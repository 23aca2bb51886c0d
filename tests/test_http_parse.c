/* SPDX-License-Identifier: MIT */
/*
 * test_http_parse.c - the HTTP example's request parser
 * (examples/http_parse.h): requests split at every byte, pipelined, with
 * bodies; what each request says (method, version, keep-alive); every
 * kind of bad input and every limit with the status it gets. The example
 * itself runs on real sockets in tests/net/examples.sh.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../examples/http_parse.h"

struct seen {
	int requests;
	int error;
	char method[4][16];
	int minor[4];
	bool keep[4];
};

/* Feeds buf in pieces of the given sizes (0 ends the list; the rest
 * goes in one piece), as reads would bring it. */
static void feed(const char *buf, size_t len, const size_t *pieces,
		 struct seen *s)
{
	struct http_parser p;
	size_t off = 0, k = 0;

	memset(s, 0, sizeof(*s));
	http_parser_init(&p);
	while (off < len && !s->error) {
		size_t n = pieces && pieces[k] ? pieces[k++] : len - off;
		const char *in = buf + off;

		if (n > len - off)
			n = len - off;
		off += n;
		while (n > 0) {
			size_t used;
			enum http_event ev = http_feed(&p, in, n, &used);

			cr_assert_leq(used, n);
			in += used;
			n -= used;
			if (ev == HTTP_ERROR) {
				s->error = p.error;
				break;
			}
			if (ev == HTTP_MORE) {
				cr_assert_eq(n, 0);
				break;
			}
			if (s->requests < 4) {
				strcpy(s->method[s->requests], p.method);
				s->minor[s->requests] = p.minor;
				s->keep[s->requests] = p.keep_alive;
			}
			s->requests++;
		}
	}
}

static void feed_str(const char *str, struct seen *s)
{
	feed(str, strlen(str), NULL, s);
}

static const char two[] = "GET /a?x=1 HTTP/1.1\r\nHost: example\r\n"
			  "User-Agent: t\r\nAccept: */*\r\n\r\n"
			  "POST /b HTTP/1.1\r\nHost: example\r\n"
			  "Content-Length: 11\r\n\r\nhello world";

Test(http_parse, split_at_every_byte_gives_the_same_two_requests)
{
	size_t len = sizeof(two) - 1;
	struct seen s;

	for (size_t cut = 1; cut < len; cut++) {
		size_t pieces[] = { cut, 0 };

		feed(two, len, pieces, &s);
		cr_assert_eq(s.error, 0, "cut %zu: %d", cut, s.error);
		cr_assert_eq(s.requests, 2, "cut %zu", cut);
		cr_assert_str_eq(s.method[0], "GET");
		cr_assert_str_eq(s.method[1], "POST");
	}
}

Test(http_parse, one_byte_at_a_time)
{
	size_t ones[sizeof(two)];
	struct seen s;

	for (size_t i = 0; i < sizeof(two); i++)
		ones[i] = 1;
	ones[sizeof(two) - 1] = 0;
	feed(two, sizeof(two) - 1, ones, &s);
	cr_assert_eq(s.error, 0);
	cr_assert_eq(s.requests, 2);
}

Test(http_parse, a_body_is_skipped_not_parsed)
{
	struct seen s;

	/* The body looks like a request: it must not count as one. */
	feed_str("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 33\r\n\r\n"
		 "GET /inside HTTP/1.1\r\nHost: h\r\n\r\n"
		 "GET /after HTTP/1.1\r\nHost: h\r\n\r\n",
		 &s);
	cr_assert_eq(s.error, 0);
	cr_assert_eq(s.requests, 2);
}

Test(http_parse, keep_alive_by_version_and_connection)
{
	static const struct {
		const char *req;
		int minor;
		bool keep;
	} cases[] = {
		{ "GET / HTTP/1.1\r\nHost: h\r\n\r\n", 1, true },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 1,
		  false },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n",
		  1, false },
		{ "GET / HTTP/1.0\r\n\r\n", 0, false },
		{ "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", 0, true },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n", 1,
		  true },
		/* Empty lines before a request are skipped (RFC 9112 2.2). */
		{ "\r\n\r\nHEAD / HTTP/1.1\r\nhost:h\r\n\r\n", 1, true },
	};
	struct seen s;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		feed_str(cases[i].req, &s);
		cr_assert_eq(s.error, 0, "case %zu", i);
		cr_assert_eq(s.requests, 1, "case %zu", i);
		cr_assert_eq(s.minor[0], cases[i].minor, "case %zu", i);
		cr_assert_eq(s.keep[0], cases[i].keep, "case %zu", i);
	}
}

Test(http_parse, bad_input_gets_its_status)
{
	static const struct {
		const char *req;
		int status;
	} cases[] = {
		{ "GET / HTTP/1.1\r\n\r\n", 400 }, /* no Host */
		{ "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400 },
		{ "GET /\r\n\r\n", 400 },
		{ " GET / HTTP/1.1\r\n", 400 },
		{ "G(T / HTTP/1.1\r\n", 400 },
		{ "GET  / HTTP/1.1\r\n", 400 },
		{ "GET /a b HTTP/1.1\r\n", 400 },
		{ "GET / HTTP/1.1 \r\n", 400 },
		{ "GET / http/1.1\r\n", 400 },
		{ "GET / HTTP/1.1\rX", 400 },
		{ "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\n: h\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nHost: h\r\nX: a\001b\r\n\r\n", 400 },
		{ "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n",
		  400 },
		{ "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n"
		  "Content-Length: 2\r\n\r\n",
		  400 },
		{ "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: "
		  "99999999999999999999\r\n\r\n",
		  400 },
		{ "GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
		  "\r\n",
		  501 },
		{ "GET / HTTP/2.0\r\n", 505 },
		{ "GET / HTTP/0.9\r\n", 505 },
	};
	struct seen s;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		feed_str(cases[i].req, &s);
		cr_assert_eq(s.error, cases[i].status, "case %zu: %d", i,
			     s.error);
		cr_assert_eq(s.requests, 0, "case %zu", i);
	}
	/* The same Content-Length twice is allowed. */
	feed_str("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n"
		 "Content-Length: 1\r\n\r\nx",
		 &s);
	cr_assert_eq(s.error, 0);
	cr_assert_eq(s.requests, 1);
}

/* A request of a target of n bytes, or of one header of n bytes. */
static char *big_request(size_t target, size_t header, unsigned fields)
{
	size_t cap = target + header + fields * 16 + 128;
	char *r = malloc(cap);
	size_t o;

	o = (size_t)sprintf(r, "GET /");
	memset(r + o, 'a', target);
	o += target;
	o += (size_t)sprintf(r + o, " HTTP/1.1\r\nHost: h\r\nX: ");
	memset(r + o, 'b', header);
	o += header;
	o += (size_t)sprintf(r + o, "\r\n");
	for (unsigned i = 0; i < fields; i++)
		o += (size_t)sprintf(r + o, "F%u: v\r\n", i);
	sprintf(r + o, "\r\n");
	return r;
}

Test(http_parse, limits)
{
	struct seen s;
	char *r;

	/* The request line is "GET /", the target, " HTTP/1.1" and CRLF:
	 * 16 bytes and the target. */
	r = big_request(HTTP_MAX_LINE - 16, 0, 0);
	feed_str(r, &s);
	cr_assert_eq(s.error, 0);
	cr_assert_eq(s.requests, 1);
	free(r);
	r = big_request(HTTP_MAX_LINE - 15, 0, 0);
	feed_str(r, &s);
	cr_assert_eq(s.error, 414);
	free(r);
	r = big_request(1, HTTP_MAX_HEADERS, 0);
	feed_str(r, &s);
	cr_assert_eq(s.error, 431);
	free(r);
	/* Host and X are two fields. */
	r = big_request(1, 1, HTTP_MAX_FIELDS - 2);
	feed_str(r, &s);
	cr_assert_eq(s.error, 0);
	cr_assert_eq(s.requests, 1);
	free(r);
	r = big_request(1, 1, HTTP_MAX_FIELDS - 1);
	feed_str(r, &s);
	cr_assert_eq(s.error, 431);
	free(r);
}
