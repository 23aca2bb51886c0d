/* SPDX-License-Identifier: MIT */
/*
 * http_parse.h - an incremental parser of HTTP/1.x requests (RFC 9112) for
 * the HTTP example: the request line and the header fields, byte by byte,
 * so a request may arrive split anywhere across reads and several may
 * arrive in one read (pipelining). It keeps no copy of the request, only
 * what the server needs: the method, the version, whether the connection
 * stays open, and the length of a body to skip.
 *
 * Bad input gets the status a server should answer before it closes the
 * connection: 400 (malformed, or HTTP/1.1 without Host), 414 (request line
 * over HTTP_MAX_LINE), 431 (header section over HTTP_MAX_HEADERS bytes or
 * HTTP_MAX_FIELDS fields), 501 (a Transfer-Encoding, which this parser
 * does not decode), 505 (not HTTP/1.x). Limits bound what a client can
 * make the server hold, whatever it sends and however slowly.
 */
#ifndef HTTP_PARSE_H
#define HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HTTP_MAX_LINE	 8192 /* the request line */
#define HTTP_MAX_HEADERS 8192 /* the header section, all lines */
#define HTTP_MAX_FIELDS	 64   /* header fields */

enum http_state {
	HS_START, /* before the request line (empty lines are skipped) */
	HS_METHOD,
	HS_TARGET,
	HS_VERSION, /* "HTTP/1.1" */
	HS_LINE_LF, /* the request line's CR was seen */
	HS_NAME_START,
	HS_NAME,
	HS_VALUE_OWS, /* spaces after the colon */
	HS_VALUE,
	HS_FIELD_LF, /* a field line's CR was seen */
	HS_END_LF,   /* the empty line's CR was seen */
	HS_BODY,
};

struct http_parser {
	enum http_state state;
	size_t line;	 /* bytes of the request line so far */
	size_t head;	 /* bytes of the header section so far */
	unsigned fields; /* header fields so far */
	char method[16]; /* NUL-terminated */
	unsigned mlen;
	char version[9]; /* "HTTP/1.x" */
	unsigned vlen;
	char name[32];	 /* the current field's name, lower case */
	unsigned nlen;	 /* its length (may pass sizeof(name): not kept) */
	char value[64];	 /* the current field's value, when interesting */
	unsigned vallen; /* its length (may pass sizeof(value)) */
	bool has_host, has_length, conn_close, conn_keep_alive, chunked;
	uint64_t length; /* Content-Length */
	uint64_t body;	 /* body bytes still to skip */
	/* What a complete request says. */
	int minor; /* HTTP/1.<minor> */
	bool keep_alive;
	int error; /* the status to answer a bad request with */
};

enum http_event {
	HTTP_MORE,    /* every byte consumed, no request complete yet */
	HTTP_REQUEST, /* a request is complete (head and body) */
	HTTP_ERROR,   /* bad request: p->error; do not feed more */
};

static inline void http_parser_init(struct http_parser *p)
{
	memset(p, 0, sizeof(*p));
}

/* RFC 9110 5.6.2: the characters of a token. */
static inline bool http_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A field value's characters: visible, obs-text, space and tab. */
static inline bool http_vchar(unsigned char c)
{
	return (c >= 0x21 && c != 0x7f) || c == ' ' || c == '\t';
}

static inline enum http_event http_fail(struct http_parser *p, int status)
{
	p->error = status;
	return HTTP_ERROR;
}

/* Does the comma-separated list v (lower case) hold the token tok? */
static inline bool http_has_token(const char *v, size_t len, const char *tok)
{
	size_t tlen = strlen(tok), i = 0;

	while (i < len) {
		size_t s, e;

		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < len && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - s == tlen && memcmp(v + s, tok, tlen) == 0)
			return true;
	}
	return false;
}

/* The end of a field line: the fields the server acts on. */
static inline enum http_event http_field_done(struct http_parser *p)
{
	size_t vlen = p->vallen;

	/* Trailing spaces are not part of the value (RFC 9112 5). */
	while (vlen && vlen <= sizeof(p->value) &&
	       (p->value[vlen - 1] == ' ' || p->value[vlen - 1] == '\t'))
		vlen--;
	if (++p->fields > HTTP_MAX_FIELDS)
		return http_fail(p, 431);
	if (p->nlen == 4 && memcmp(p->name, "host", 4) == 0) {
		if (p->has_host) /* RFC 9112 3.2: exactly one */
			return http_fail(p, 400);
		p->has_host = true;
	} else if (p->nlen == 14 &&
		   memcmp(p->name, "content-length", 14) == 0) {
		uint64_t n = 0;

		if (vlen == 0 || vlen > 19)
			return http_fail(p, 400);
		for (size_t i = 0; i < vlen; i++) {
			if (p->value[i] < '0' || p->value[i] > '9')
				return http_fail(p, 400);
			n = n * 10 + (uint64_t)(p->value[i] - '0');
		}
		if (p->has_length && n != p->length)
			return http_fail(p, 400);
		p->has_length = true;
		p->length = n;
	} else if (p->nlen == 17 &&
		   memcmp(p->name, "transfer-encoding", 17) == 0) {
		p->chunked = true;
	} else if (p->nlen == 10 && memcmp(p->name, "connection", 10) == 0 &&
		   vlen <= sizeof(p->value)) {
		if (http_has_token(p->value, vlen, "close"))
			p->conn_close = true;
		if (http_has_token(p->value, vlen, "keep-alive"))
			p->conn_keep_alive = true;
	}
	return HTTP_MORE;
}

/* The end of the header section: the request is complete but for a body. */
static inline enum http_event http_head_done(struct http_parser *p)
{
	if (p->chunked)
		return http_fail(p, 501);
	if (p->minor >= 1 && !p->has_host)
		return http_fail(p, 400);
	p->keep_alive = p->minor >= 1 ? !p->conn_close : p->conn_keep_alive;
	p->body = p->length;
	return HTTP_MORE;
}

/* After a complete request: ready for the next one, keeping what the
 * caller reads of the request (minor, keep_alive, method). */
static inline void http_next(struct http_parser *p)
{
	struct http_parser done = *p;

	http_parser_init(p);
	p->minor = done.minor;
	p->keep_alive = done.keep_alive;
	memcpy(p->method, done.method, sizeof(p->method));
}

/*
 * Feeds len bytes. Returns HTTP_REQUEST when a request is complete, with
 * *used the bytes of buf it took (the rest belongs to the next request:
 * feed it again), p->method, p->minor and p->keep_alive saying what it
 * was, and the parser ready for the next request; HTTP_MORE when it took all of them; HTTP_ERROR on bad
 * input, with p->error set.
 */
static inline enum http_event http_feed(struct http_parser *p, const char *buf,
					size_t len, size_t *used)
{
	size_t i = 0;

	*used = 0;
	for (; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (p->state == HS_BODY) {
			size_t n = len - i;

			if (n > p->body)
				n = (size_t)p->body;
			p->body -= n;
			i += n;
			if (p->body == 0)
				goto complete;
			break;
		}
		if (p->state <= HS_LINE_LF) {
			if (p->state != HS_START && ++p->line > HTTP_MAX_LINE)
				return http_fail(p, 414);
		} else if (++p->head > HTTP_MAX_HEADERS) {
			return http_fail(p, 431);
		}
		switch (p->state) {
		case HS_START:
			if (c == '\r' || c == '\n')
				continue;
			p->state = HS_METHOD;
			p->line = 1;
			/* fall through */
		case HS_METHOD:
			if (c == ' ') {
				if (p->mlen == 0)
					return http_fail(p, 400);
				p->state = HS_TARGET;
			} else if (!http_tchar(c) ||
				   p->mlen + 1 >= sizeof(p->method)) {
				return http_fail(p, 400);
			} else {
				p->method[p->mlen++] = (char)c;
			}
			break;
		case HS_TARGET:
			if (c == ' ') {
				if (p->vlen) /* the target's length */
					p->state = HS_VERSION;
				else
					return http_fail(p, 400);
				p->vlen = 0;
			} else if (c <= 0x20 || c >= 0x7f) {
				return http_fail(p, 400);
			} else {
				p->vlen = 1; /* not empty */
			}
			break;
		case HS_VERSION:
			if (c == '\r') {
				if (p->vlen != 8 ||
				    memcmp(p->version, "HTTP/", 5) != 0 ||
				    p->version[6] != '.' ||
				    p->version[5] < '0' ||
				    p->version[5] > '9' ||
				    p->version[7] < '0' || p->version[7] > '9')
					return http_fail(p, 400);
				if (p->version[5] != '1')
					return http_fail(p, 505);
				p->minor = p->version[7] - '0';
				p->state = HS_LINE_LF;
			} else if (p->vlen >= 8) {
				return http_fail(p, 400);
			} else {
				p->version[p->vlen++] = (char)c;
			}
			break;
		case HS_LINE_LF:
			if (c != '\n')
				return http_fail(p, 400);
			p->state = HS_NAME_START;
			break;
		case HS_NAME_START:
			if (c == '\r') {
				p->state = HS_END_LF;
				break;
			}
			/* A field line starting with a space is an obsolete
			 * fold (RFC 9112 5.2): refused. */
			p->nlen = 0;
			p->vallen = 0;
			p->state = HS_NAME;
			/* fall through */
		case HS_NAME:
			if (c == ':') {
				if (p->nlen == 0)
					return http_fail(p, 400);
				p->state = HS_VALUE_OWS;
			} else if (!http_tchar(c)) {
				/* Spaces before the colon too (RFC 9112
				 * 5.1). */
				return http_fail(p, 400);
			} else {
				if (p->nlen < sizeof(p->name))
					p->name[p->nlen] =
						(char)(c >= 'A' && c <= 'Z'
							       ? c + 32
							       : c);
				p->nlen++;
			}
			break;
		case HS_VALUE_OWS:
			if (c == ' ' || c == '\t')
				break;
			p->state = HS_VALUE;
			/* fall through */
		case HS_VALUE:
			if (c == '\r') {
				p->state = HS_FIELD_LF;
			} else if (!http_vchar(c)) {
				return http_fail(p, 400);
			} else {
				if (p->vallen < sizeof(p->value))
					p->value[p->vallen] =
						(char)(c >= 'A' && c <= 'Z'
							       ? c + 32
							       : c);
				p->vallen++;
			}
			break;
		case HS_FIELD_LF:
			if (c != '\n')
				return http_fail(p, 400);
			if (http_field_done(p) == HTTP_ERROR)
				return HTTP_ERROR;
			p->state = HS_NAME_START;
			break;
		case HS_END_LF:
			if (c != '\n')
				return http_fail(p, 400);
			if (http_head_done(p) == HTTP_ERROR)
				return HTTP_ERROR;
			if (p->body == 0) {
				i++;
				goto complete;
			}
			p->state = HS_BODY;
			break;
		case HS_BODY:
			break;
		}
	}
	*used = i;
	return HTTP_MORE;
complete:
	*used = i;
	http_next(p);
	return HTTP_REQUEST;
}

#endif
