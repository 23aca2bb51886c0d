/* SPDX-License-Identifier: MIT */
/*
 * spin.h - what every busy-poll of the loop shares: the pause in its
 * polling loop and the rule that makes spinning back off where it does
 * not pay (the pool's workers and the epoll loop waiting for them,
 * threadpool.c and epoll.c; a loop's spin before it sleeps, loop.c).
 */
#ifndef RINGLOOP_SPIN_H
#define RINGLOOP_SPIN_H

#include <stdbool.h>

/*
 * Adaptive spinning. Spinning only pays when the thread waited for runs
 * meanwhile on another CPU. When the CPUs are oversubscribed it is worse
 * than useless: the spinner keeps the very thread it waits for off the
 * CPU, for the whole window, on every hand-off. So a spin that comes back
 * empty costs the next few chances to spin, twice as many after each miss
 * in a row (up to RL__SPIN_MAX_SKIP), and one that pays resets that. A
 * loaded machine then falls back to plain sleeping after a few misses,
 * with a rare probe; an idle one keeps spinning.
 */
#define RL__SPIN_MAX_SKIP 1024

struct rl__spin {
	unsigned skip;	  /* chances left to pass up */
	unsigned backoff; /* what the next miss costs */
};

static inline bool rl__spin_allowed(struct rl__spin *s)
{
	if (!s->skip)
		return true;
	s->skip--;
	return false;
}

static inline void rl__spin_outcome(struct rl__spin *s, bool hit)
{
	if (hit) {
		s->backoff = 0;
		return;
	}
	s->backoff = s->backoff ? s->backoff * 2 : 2;
	if (s->backoff > RL__SPIN_MAX_SKIP)
		s->backoff = RL__SPIN_MAX_SKIP;
	s->skip = s->backoff;
}

static inline void rl__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

#endif /* RINGLOOP_SPIN_H */
