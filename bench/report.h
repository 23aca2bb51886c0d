/* SPDX-License-Identifier: MIT */
/*
 * report.h - what ringbench prints and writes: the text report (header,
 * a line per cell as it finishes, the tables, the raw run times, the
 * noise notes), JSON lines (the meta record, then one object per cell:
 * the contract DESIGN.md and the README describe) and CSV.
 *
 * The text goes to stdout, or to stderr with --json, which puts the JSON
 * lines on stdout. Unless --no-out, the JSON and CSV also go to
 * <out>/<timestamp>.{json,csv}; bench/results/latest.{json,csv} point to
 * the newest run that measured at least one cell.
 */
#ifndef RINGBENCH_REPORT_H
#define RINGBENCH_REPORT_H

#include <stdio.h>

#include "cell.h"
#include "machine.h"

/* Opens the result files (exits 1 when it cannot), prints the header and
 * the meta record. */
void bench_report_open(const struct bench_machine *m);
void bench_report_cell(const struct bench_cell *c);
void bench_report_table(struct bench_cell *const *cells, unsigned n);
/* Closes the files; latest.* are updated only when some cell has times. */
void bench_report_close(struct bench_cell *const *cells, unsigned n);
FILE *bench_report_text(void);
/* One JSON line of another kind than a cell (--micro's), written where
 * the cells go; fmt makes the whole line, its newline included. */
void bench_report_json(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

#endif
