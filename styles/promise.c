/* SPDX-License-Identifier: MIT */
/*
 * promise.c - the promise core: the context and its pools, settling,
 * references, and the reactions then/catch/finally/subscribe/adopt.
 *
 * Nothing here runs a reaction synchronously. Settling a promise queues
 * each of its waiters as a loop microtask (rl_task_queue) in the order they
 * were attached; attaching to a settled promise queues at once. Adoption
 * takes two microtasks like JavaScript's resolve(thenable): one job that
 * starts waiting on the adopted promise, one reaction when it settles. So
 * the order of a program's log matches the same program in JavaScript, and
 * the stack depth stays constant whatever the chain length.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "promise_internal.h"

/* ------------------------------------------------------------------ pools */

/* Records are 16-byte aligned; a chunk starts with the link to the next
 * chunk, padded to 16 bytes. */
#define RL__CHUNK_HDR 16
#define RL__CHUNK_MIN 64
#define RL__CHUNK_MAX 4096

static void record_pool_init(struct rl__record_pool *pool, size_t size)
{
	memset(pool, 0, sizeof(*pool));
	pool->size = (size + 15) & ~(size_t)15;
	pool->chunk = RL__CHUNK_MIN;
}

/* Chunks double up to RL__CHUNK_MAX records, so a pool reaches its steady
 * size in a few mallocs and a burst of a million records costs a few
 * hundred, not a million. */
static int record_pool_grow(struct rl__record_pool *pool)
{
	char *chunk = malloc(RL__CHUNK_HDR + pool->chunk * pool->size);
	size_t i;

	if (!chunk)
		return -ENOMEM;
	*(void **)chunk = pool->chunks;
	pool->chunks = chunk;
	for (i = pool->chunk; i-- > 0;) {
		void **rec = (void **)(chunk + RL__CHUNK_HDR + i * pool->size);

		*rec = pool->free;
		pool->free = rec;
	}
	if (pool->chunk < RL__CHUNK_MAX)
		pool->chunk *= 2;
	return 0;
}

void *rl__record_get(struct rl__record_pool *pool)
{
	void **rec;

	if (!pool->free && (record_pool_grow(pool) < 0 || !pool->free))
		return NULL;
	rec = pool->free;
	pool->free = *rec;
	pool->live++;
	return rec;
}

void rl__record_put(struct rl__record_pool *pool, void *rec)
{
	*(void **)rec = pool->free;
	pool->free = rec;
	pool->live--;
}

static void record_pool_free(struct rl__record_pool *pool)
{
	void *chunk = pool->chunks, *next;

	while (chunk) {
		next = *(void **)chunk;
		free(chunk);
		chunk = next;
	}
	pool->chunks = pool->free = NULL;
}

/*
 * Combinator arrays vary in size, so they come from power-of-two size
 * classes with one free list each. Every block is also on the context's
 * list of all blocks, so closing the context frees them even when the
 * program leaked a promise.
 */
struct block_hdr {
	struct block_hdr *next; /* free list of its class */
	struct block_hdr *all;	/* every block of the context */
	size_t cls;
	size_t pad; /* keeps the data 16-byte aligned */
};

_Static_assert(sizeof(struct block_hdr) % 16 == 0, "block header alignment");

void *rl__block_get(rl_promise_ctx *ctx, size_t bytes)
{
	size_t total = bytes + sizeof(struct block_hdr);
	unsigned cls = RL__BLOCK_MIN;
	struct block_hdr *b;

	while (cls < RL__BLOCK_CLASSES && ((size_t)1 << cls) < total)
		cls++;
	if (cls >= RL__BLOCK_CLASSES)
		return NULL;
	b = ctx->blocks[cls];
	if (b) {
		ctx->blocks[cls] = b->next;
	} else {
		b = malloc((size_t)1 << cls);
		if (!b)
			return NULL;
		b->cls = cls;
		b->all = ctx->all_blocks;
		ctx->all_blocks = b;
	}
	ctx->block_live++;
	return b + 1;
}

void rl__block_put(rl_promise_ctx *ctx, void *block)
{
	struct block_hdr *b = (struct block_hdr *)block - 1;

	b->next = ctx->blocks[b->cls];
	ctx->blocks[b->cls] = b;
	ctx->block_live--;
}

/* ---------------------------------------------------------------- context */

/* The promise layer's own codes, for rl_strerror(). */
static const char *describe(int err)
{
	switch (err) {
	case RL_EAGGREGATE:
		return "every promise given to any() rejected";
	default:
		return NULL;
	}
}

static pthread_once_t describe_once = PTHREAD_ONCE_INIT;

static void describe_register(void)
{
	rl_strerror_register(describe);
}

static void ctx_free(rl_promise_ctx *ctx)
{
	struct block_hdr *b, *next;

	record_pool_free(&ctx->promises);
	record_pool_free(&ctx->inputs);
	record_pool_free(&ctx->ops);
	for (b = ctx->all_blocks; b; b = next) {
		next = b->all;
		free(b);
	}
	free(ctx);
}

/*
 * rl_loop_close() of our loop: requests and timers of the context are
 * cancelled, so their promises reject with -ECANCELED, and the reactions
 * behind them run now, while the loop still works. From then on the
 * context starts nothing (its request promises reject at once), and its
 * memory goes at the last call of the hook, when no other layer's
 * callback (a coroutine awaiting one of our promises) can reach it.
 */
static int close_with_loop(rl_close_hook *hook, rl_loop *loop)
{
	rl_promise_ctx *ctx = RL__CONTAINER(hook, rl_promise_ctx, close_hook);

	if (ctx->closed) {
		ctx_free(ctx);
		return 0;
	}
	ctx->closed = true;
	rl__ops_cancel_all(ctx);
	while (ctx->inflight || ctx->queued)
		if (rl_run(loop, RL_RUN_ONCE) < 0)
			break;
	return RL_CLOSE_AGAIN;
}

int rl_promise_ctx_open(rl_loop *loop, rl_promise_ctx **out)
{
	rl_promise_ctx *ctx;

	if (!loop || !out)
		return -EINVAL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	pthread_once(&describe_once, describe_register);
	ctx->loop = loop;
	record_pool_init(&ctx->promises, sizeof(struct rl_promise));
	record_pool_init(&ctx->inputs, sizeof(struct rl__input));
	record_pool_init(&ctx->ops, rl__op_size());
	rl_loop_on_close(loop, &ctx->close_hook, close_with_loop);
	*out = ctx;
	return 0;
}

int rl_promise_ctx_close(rl_promise_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	/* An open connection points at the context, and its next read or
	 * write would use it after the free; so does a remote handle, whose
	 * settlement may come from another thread at any time, and a
	 * subscription, whose subscriber (a coroutine's await) still holds
	 * the promise and will withdraw it or wait for its settle function
	 * through the context. */
	if (ctx->queued || ctx->inflight || ctx->dispatching || ctx->conns ||
	    ctx->remotes || ctx->subs)
		return -EBUSY;
	/* The loop's close has the context (a subscription it runs may
	 * call us): close_with_loop() still uses it and frees it last. */
	if (ctx->closed)
		return -EBUSY;
	rl_loop_off_close(ctx->loop, &ctx->close_hook);
	ctx_free(ctx);
	return 0;
}

size_t rl_promise_ctx_live(const rl_promise_ctx *ctx)
{
	return ctx->promises.live;
}

rl_loop *rl_promise_ctx_loop(const rl_promise_ctx *ctx)
{
	return ctx->loop;
}

/* ------------------------------------------------------------- references */

rl_promise *rl__promise_alloc(rl_promise_ctx *ctx, uint8_t pkind, uint32_t refs)
{
	rl_promise *p = rl__record_get(&ctx->promises);

	if (!p)
		return NULL;
	memset(p, 0, sizeof(*p));
	p->ctx = ctx;
	p->refs = refs;
	p->pkind = pkind;
	return p;
}

void rl__drop(rl_promise *p, rl_promise **work)
{
	if (!p || --p->refs)
		return;
	p->w.next = *work ? &(*work)->w : NULL;
	*work = p;
}

/* Frees what p holds: waiters that will never run (a source nothing can
 * settle any more), the promise its value points into, a combinator's
 * array, a thunk's original promise. Promises this frees go on *work, so
 * freeing a long dropped chain is a loop, not a recursion. */
static void destroy(rl_promise *p, rl_promise **work)
{
	struct rl__waiter *w, *next;

	for (w = p->waiters; w; w = next) {
		next = w->next;
		switch (w->kind) {
		case RL__W_ALL:
		case RL__W_ALL_SETTLED:
		case RL__W_ANY:
		case RL__W_RACE:
			rl__drop(rl__input_of(w)->to.comb, work);
			rl__record_put(&p->ctx->inputs, rl__input_of(w));
			break;
		case RL__W_SUB:
			p->ctx->subs--;
			rl__record_put(&p->ctx->inputs, rl__input_of(w));
			break;
		default:
			rl__drop(RL__CONTAINER(w, rl_promise, w), work);
			break;
		}
	}
	rl__drop(p->hold, work);
	if (p->pkind == RL__P_COMB)
		rl__comb_release(p, work);
	else if (p->pkind == RL__P_DERIVED && p->w.kind == RL__W_THUNK)
		rl__drop(p->u.h.arg, work);
	rl__record_put(&p->ctx->promises, p);
}

rl_promise *rl_promise_ref(rl_promise *p)
{
	if (p)
		p->refs++;
	return p;
}

void rl_promise_unref(rl_promise *p)
{
	rl_promise *work = NULL;

	rl__drop(p, &work);
	while ((p = work)) {
		work = p->w.next ? RL__CONTAINER(p->w.next, rl_promise, w)
				 : NULL;
		destroy(p, &work);
	}
}

/* --------------------------------------------------------------- settling */

static void run_waiter(rl_task *task);

static void queue(rl_promise *src, struct rl__waiter *w)
{
	w->src = src;
	src->refs++;
	src->ctx->queued++;
	rl_task_queue(src->ctx->loop, &w->task, run_waiter);
}

void rl__wait(rl_promise *src, struct rl__waiter *w, uint8_t kind)
{
	w->kind = kind;
	if (src->state != RL_PROMISE_PENDING) {
		queue(src, w);
		return;
	}
	w->next = src->waiters;
	src->waiters = w;
}

rl_promise *rl__value_owner(rl_promise *p)
{
	if (p->pkind == RL__P_COMB && p->u.c.block &&
	    p->value.p == p->u.c.block)
		return p;
	return p->hold;
}

int rl__settle(rl_promise *p, int err, struct rl_value value, rl_promise *owner)
{
	struct rl__waiter *w, *rev = NULL;

	if (p->state != RL_PROMISE_PENDING)
		return -EALREADY;
	p->state = err < 0 ? RL_PROMISE_REJECTED : RL_PROMISE_FULFILLED;
	p->err = err < 0 ? err : 0;
	p->value = value;
	if (owner && owner != p)
		p->hold = rl_promise_ref(owner);
	/* The list is LIFO; reverse it so reactions run in attach order. */
	while ((w = p->waiters)) {
		p->waiters = w->next;
		w->next = rev;
		rev = w;
	}
	while ((w = rev)) {
		rev = w->next;
		w->next = NULL;
		queue(p, w);
	}
	return 0;
}

/* The owner to keep when value came (unchanged) from src. */
static rl_promise *owner_if_same(rl_promise *src, struct rl_value value)
{
	if (value.p && value.p == src->value.p)
		return rl__value_owner(src);
	return NULL;
}

/*
 * Resolves p to q: the "resolve thenable" job is queued now and will make
 * p wait for q. Consumes the reference to q; p's job holds its own
 * reference to p.
 */
static void start_adopt(rl_promise *p, rl_promise *q)
{
	if (q == p) {
		/* JavaScript rejects a self-resolution with a TypeError.
		 * Settle before dropping q: the reference to q may be the
		 * caller's only one to p (rl_promise_adopt(p, p)), and p
		 * must not be freed before it is settled. */
		rl__settle(p, -EDEADLK, (struct rl_value){ 0, NULL }, NULL);
		rl_promise_unref(q);
		return;
	}
	if (q->ctx != p->ctx) {
		/* A promise of another context (another loop): its waiting
		 * list and microtasks are counted in its own context, and
		 * p's would be run and counted there (neither context
		 * could close after). Refused, as rl_promise_adopt() does. */
		rl_promise_unref(q);
		rl__settle(p, -EXDEV, (struct rl_value){ 0, NULL }, NULL);
		return;
	}
	p->locked = 1;
	p->refs++;
	p->w.kind = RL__W_ADOPT_JOB;
	p->w.src = q;
	p->ctx->queued++;
	rl_task_queue(p->ctx->loop, &p->w.task, run_waiter);
}

/* Takes a reaction's decision: adopt a promise, or settle with err/value. */
static void resolve_with(rl_promise *p, rl_promise *src, struct rl_outcome *o)
{
	if (o->adopt)
		start_adopt(p, o->adopt);
	else
		rl__settle(p, o->err, o->value, owner_if_same(src, o->value));
}

/* ------------------------------------------------------------- reactions */

static void run_then(rl_promise *p, rl_promise *src)
{
	struct rl_outcome o = { 0, src->value, NULL, src->err };
	rl_reaction_fn fn;

	fn = src->state == RL_PROMISE_FULFILLED ? p->u.h.ok : p->u.h.err;
	if (!fn) {
		/* No handler for this outcome: pass it on unchanged. */
		rl__settle(p, src->err, src->value, rl__value_owner(src));
		return;
	}
	fn(&o, p->u.h.arg);
	resolve_with(p, src, &o);
}

/*
 * JavaScript's finally is then(thenFinally, catchFinally), where each calls
 * the handler, then returns PromiseResolve(result).then(() => original
 * outcome). It is built the same way here, so it takes the same number of
 * microtasks: p adopts a thunk promise t that waits for the handler's
 * promise q (or an already fulfilled one) and then takes src's outcome.
 */
static void run_finally(rl_promise *p, rl_promise *src)
{
	struct rl_outcome o = { 0, src->value, NULL, src->err };
	rl_promise *q, *t;

	p->u.h.ok(&o, p->u.h.arg);
	if (o.adopt && o.adopt->ctx != p->ctx) {
		/* t would wait on another context's promise: start_adopt()
		 * says why that is refused. */
		rl_promise_unref(o.adopt);
		rl__settle(p, -EXDEV, (struct rl_value){ 0, NULL }, NULL);
		return;
	} else if (o.adopt) {
		q = o.adopt;
	} else if (o.err < 0) {
		rl__settle(p, o.err, o.value, owner_if_same(src, o.value));
		return;
	} else {
		q = rl_promise_resolved(p->ctx, (struct rl_value){ 0, NULL });
	}
	t = q ? rl__promise_alloc(p->ctx, RL__P_DERIVED, 2) : NULL;
	if (!t) {
		rl_promise_unref(q);
		rl__settle(p, -ENOMEM, (struct rl_value){ 0, NULL }, NULL);
		return;
	}
	t->u.h.arg = rl_promise_ref(src);
	rl__wait(q, &t->w, RL__W_THUNK);
	rl_promise_unref(q);
	start_adopt(p, t);
}

static void run_thunk(rl_promise *t, rl_promise *q)
{
	rl_promise *orig = t->u.h.arg;

	if (q->state == RL_PROMISE_FULFILLED)
		rl__settle(t, orig->err, orig->value, rl__value_owner(orig));
	else
		rl__settle(t, q->err, q->value, rl__value_owner(q));
	t->u.h.arg = NULL;
	rl_promise_unref(orig);
}

static void run_waiter_kind(struct rl__waiter *w);

/* A subscription: its record goes back before fn runs, and nothing of the
 * context is touched after it, so fn (a coroutine resumed by an await)
 * may even close the context. The queued reference to src is the
 * subscriber's now. */
static void run_subscriber(struct rl__waiter *w)
{
	rl_promise *src = w->src;
	struct rl__input *in = rl__input_of(w);
	rl_settle_fn fn = in->to.fn;
	void *arg = in->at.arg;

	src->ctx->subs--;
	rl__record_put(&src->ctx->inputs, in);
	fn(src, arg);
}

/* A waiter runs as a microtask. While a reaction of the program's runs,
 * the context refuses to close: the records in use would go with it. */
static void run_waiter(rl_task *task)
{
	struct rl__waiter *w = RL__CONTAINER(task, struct rl__waiter, task);
	rl_promise_ctx *ctx = w->src->ctx;

	ctx->queued--;
	if (w->kind == RL__W_SUB) {
		run_subscriber(w);
		return;
	}
	ctx->dispatching++;
	run_waiter_kind(w);
	ctx->dispatching--;
}

static void run_waiter_kind(struct rl__waiter *w)
{
	rl_promise *src = w->src, *p = NULL;

	switch (w->kind) {
	case RL__W_THEN:
		p = RL__CONTAINER(w, rl_promise, w);
		run_then(p, src);
		break;
	case RL__W_FINALLY:
		p = RL__CONTAINER(w, rl_promise, w);
		run_finally(p, src);
		break;
	case RL__W_THUNK:
		p = RL__CONTAINER(w, rl_promise, w);
		run_thunk(p, src);
		break;
	case RL__W_ADOPT_JOB:
		/* Start waiting for src, the adopted promise: p's reference
		 * passes from this job to src's waiting list (or to the
		 * reaction queued now), and the job's src reference goes. */
		rl__wait(src, w, RL__W_ADOPT);
		rl_promise_unref(src);
		return;
	case RL__W_ADOPT:
		p = RL__CONTAINER(w, rl_promise, w);
		rl__settle(p, src->err, src->value, rl__value_owner(src));
		break;
	default:
		rl__input_run(rl__input_of(w));
		return;
	}
	rl_promise_unref(src);
	rl_promise_unref(p);
}

/* ------------------------------------------------------------ public API */

rl_promise *rl_promise_new(rl_promise_ctx *ctx)
{
	return ctx ? rl__promise_alloc(ctx, RL__P_PLAIN, 1) : NULL;
}

rl_promise *rl_promise_resolved(rl_promise_ctx *ctx, struct rl_value value)
{
	rl_promise *p = rl_promise_new(ctx);

	if (p)
		rl__settle(p, 0, value, NULL);
	return p;
}

rl_promise *rl_promise_rejected(rl_promise_ctx *ctx, int err)
{
	rl_promise *p = rl_promise_new(ctx);

	if (p)
		rl__settle(p, err < 0 ? err : -EINVAL,
			   (struct rl_value){ 0, NULL }, NULL);
	return p;
}

int rl_promise_resolve(rl_promise *p, struct rl_value value)
{
	if (!p)
		return -EINVAL;
	if (p->pkind != RL__P_PLAIN)
		return -EPERM;
	if (p->locked)
		return -EALREADY;
	return rl__settle(p, 0, value, NULL);
}

int rl_promise_reject_value(rl_promise *p, int err, struct rl_value value)
{
	if (!p || err >= 0)
		return -EINVAL;
	if (p->pkind != RL__P_PLAIN)
		return -EPERM;
	if (p->locked)
		return -EALREADY;
	return rl__settle(p, err, value, NULL);
}

int rl_promise_reject(rl_promise *p, int err)
{
	return rl_promise_reject_value(p, err, (struct rl_value){ 0, NULL });
}

int rl_promise_adopt(rl_promise *p, rl_promise *q)
{
	if (!p || !q) {
		rl_promise_unref(q);
		return -EINVAL;
	}
	if (p->locked || p->state != RL_PROMISE_PENDING ||
	    p->pkind != RL__P_PLAIN) {
		rl_promise_unref(q);
		return -EALREADY;
	}
	if (q->ctx != p->ctx) {
		rl_promise_unref(q);
		return -EXDEV; /* see start_adopt() */
	}
	start_adopt(p, q);
	return 0;
}

enum rl_promise_state rl_promise_state(const rl_promise *p)
{
	return p->state;
}

enum rl_promise_state rl_promise_result(const rl_promise *p,
					struct rl_settlement *out)
{
	if (p->state != RL_PROMISE_PENDING && out) {
		out->err = p->err;
		out->value = p->value;
	}
	return p->state;
}

static rl_promise *derive(rl_promise *src, uint8_t kind, rl_reaction_fn ok,
			  rl_reaction_fn err, void *arg)
{
	rl_promise *p;

	if (!src)
		return NULL;
	/* One reference for the caller, one for src's waiting list. */
	p = rl__promise_alloc(src->ctx, RL__P_DERIVED, 2);
	if (p) {
		p->u.h.ok = ok;
		p->u.h.err = err;
		p->u.h.arg = arg;
		rl__wait(src, &p->w, kind);
	}
	rl_promise_unref(src);
	return p;
}

rl_promise *rl_then(rl_promise *p, rl_reaction_fn on_ok, rl_reaction_fn on_err,
		    void *arg)
{
	return derive(p, RL__W_THEN, on_ok, on_err, arg);
}

rl_promise *rl_catch(rl_promise *p, rl_reaction_fn on_err, void *arg)
{
	return derive(p, RL__W_THEN, NULL, on_err, arg);
}

rl_promise *rl_finally(rl_promise *p, rl_reaction_fn fn, void *arg)
{
	/* Like JavaScript, a finally without a handler is a plain then. */
	if (!fn)
		return derive(p, RL__W_THEN, NULL, NULL, NULL);
	return derive(p, RL__W_FINALLY, fn, NULL, arg);
}

int rl_promise_subscribe(rl_promise *p, rl_settle_fn fn, void *arg)
{
	struct rl__input *in;

	if (!p || !fn) {
		rl_promise_unref(p);
		return -EINVAL;
	}
	in = rl__record_get(&p->ctx->inputs);
	if (!in) {
		rl_promise_unref(p);
		return -ENOMEM;
	}
	in->to.fn = fn;
	in->at.arg = arg;
	p->ctx->subs++;
	rl__wait(p, &in->w, RL__W_SUB);
	rl_promise_unref(p);
	return 0;
}

int rl_promise_unsubscribe(rl_promise *p, rl_settle_fn fn, void *arg)
{
	struct rl__waiter **pp, *w;
	struct rl__input *in;

	if (!p || p->state != RL_PROMISE_PENDING)
		return -ENOENT;
	for (pp = &p->waiters; (w = *pp); pp = &w->next) {
		if (w->kind != RL__W_SUB)
			continue;
		in = rl__input_of(w);
		if (in->to.fn == fn && in->at.arg == arg) {
			*pp = w->next;
			p->ctx->subs--;
			rl__record_put(&p->ctx->inputs, in);
			return 0;
		}
	}
	return -ENOENT;
}
