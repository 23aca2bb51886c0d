/* SPDX-License-Identifier: MIT */
/*
 * test_list.c - loop/list.h, the intrusive list every layer uses: order,
 * O(1) removal anywhere, the zeroed state of an unlinked link, splicing.
 * A data structure, not a loop behaviour: no backend is involved.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "list.h"

struct item {
	int value;
	struct rl_link link;
};

/* The values of the list, front to back, checked against want; the back
 * links are walked too, so a broken prev pointer fails here. */
static void expect(struct rl_link *head, const int *want, int n)
{
	struct rl_link *pos;
	int i = 0;

	rl__list_for_each(pos, head)
	{
		cr_assert_lt(i, n, "more items than the %d expected", n);
		cr_assert_eq(RL__CONTAINER(pos, struct item, link)->value,
			     want[i], "item %d", i);
		i++;
	}
	cr_assert_eq(i, n);
	for (pos = head->prev; pos != head; pos = pos->prev)
		cr_assert_eq(RL__CONTAINER(pos, struct item, link)->value,
			     want[--i]);
	cr_assert_eq(i, 0);
	cr_assert_eq(rl__list_empty(head), n == 0);
}

/* Items valued 0..n-1, their links zeroed: on no list. */
static void items(struct item *it, int n)
{
	memset(it, 0, (size_t)n * sizeof(*it));
	for (int i = 0; i < n; i++)
		it[i].value = i;
}

Test(list, fifo_and_stack_order)
{
	struct rl_link head;
	struct item it[4];

	items(it, 4);
	rl__list_init(&head);
	expect(&head, NULL, 0);
	cr_assert_null(rl__list_pop(&head));
	rl__list_add_tail(&head, &it[1].link);
	rl__list_add_tail(&head, &it[2].link);
	rl__list_add_head(&head, &it[0].link);
	rl__list_add_tail(&head, &it[3].link);
	expect(&head, (int[]){ 0, 1, 2, 3 }, 4);
	for (int i = 0; i < 4; i++) {
		struct rl_link *link = rl__list_pop(&head);

		cr_assert_not_null(link);
		cr_assert_eq(RL__CONTAINER(link, struct item, link)->value, i);
		cr_assert_not(rl__list_linked(link), "a popped link is zeroed");
	}
	cr_assert_null(rl__list_pop(&head));
	expect(&head, NULL, 0);
}

Test(list, removal_anywhere_zeroes_the_link)
{
	struct rl_link head;
	struct item it[5];

	items(it, 5);
	rl__list_init(&head);
	for (int i = 0; i < 5; i++) {
		cr_assert_not(rl__list_linked(&it[i].link),
			      "a zeroed link is on no list");
		rl__list_add_tail(&head, &it[i].link);
		cr_assert(rl__list_linked(&it[i].link));
	}
	rl__list_del(&it[2].link); /* middle */
	expect(&head, (int[]){ 0, 1, 3, 4 }, 4);
	rl__list_del(&it[0].link); /* front */
	rl__list_del(&it[4].link); /* back */
	expect(&head, (int[]){ 1, 3 }, 2);
	cr_assert_not(rl__list_linked(&it[0].link));
	cr_assert_not(rl__list_linked(&it[2].link));
	cr_assert_not(rl__list_linked(&it[4].link));
	/* A removed link can be queued again, anywhere. */
	rl__list_add_head(&head, &it[4].link);
	rl__list_add_tail(&head, &it[2].link);
	expect(&head, (int[]){ 4, 1, 3, 2 }, 4);
	rl__list_del(&it[1].link);
	rl__list_del(&it[3].link);
	rl__list_del(&it[4].link);
	rl__list_del(&it[2].link);
	expect(&head, NULL, 0);
}

Test(list, splice_moves_everything_in_order)
{
	struct rl_link a, b;
	struct item it[5];

	items(it, 5);
	rl__list_init(&a);
	rl__list_init(&b);
	rl__list_splice_tail(&a, &b); /* both empty */
	expect(&a, NULL, 0);
	rl__list_add_tail(&a, &it[0].link);
	rl__list_add_tail(&a, &it[1].link);
	rl__list_add_tail(&b, &it[2].link);
	rl__list_add_tail(&b, &it[3].link);
	rl__list_add_tail(&b, &it[4].link);
	rl__list_splice_tail(&a, &b);
	expect(&a, (int[]){ 0, 1, 2, 3, 4 }, 5);
	expect(&b, NULL, 0);
	rl__list_splice_tail(&b, &a); /* into an empty list */
	expect(&b, (int[]){ 0, 1, 2, 3, 4 }, 5);
	expect(&a, NULL, 0);
}

/* A static head, as the registries of a process would have one. */
static struct rl_link static_head = RL__LIST_HEAD(static_head);

Test(list, a_static_head_starts_empty)
{
	struct item it = { 7, { NULL, NULL } };

	expect(&static_head, NULL, 0);
	rl__list_add_tail(&static_head, &it.link);
	expect(&static_head, (int[]){ 7 }, 1);
	rl__list_del(&it.link);
	expect(&static_head, NULL, 0);
}
