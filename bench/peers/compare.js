// SPDX-License-Identifier: MIT
// compare.js - prints ringbench's cells beside the JavaScript peers'.
//
// usage: node compare.js RESULTS.json
// Reads JSON lines (ringbench --json, with its meta record first, and
// readfile.js output), prints the machine, then one block per scenario x
// style: every backend's median and CPU per read, and for each ringbench
// backend how it compares with the fastest peer: "N× faster", or "N×
// slower" when it lost (never a fraction of a win).
'use strict';
const fs = require('fs');

const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n')
  .filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
const meta = (lines.find((r) => r.meta) || {}).meta;
const rows = lines.filter((r) => !r.meta);
const peers = new Set(['node', 'node-uring', 'bun']);
const fmt = (x) => (x === undefined || x === null ? '-' : x.toFixed(2));

function versus(best, mine) {
  const x = best / mine;
  return x >= 1 ? `${x.toFixed(1)}× faster` : `${(1 / x).toFixed(1)}× slower`;
}

if (meta) {
  console.log(`\nmachine: ${meta.cpu}, ${meta.cpus} CPUs, Linux ${meta.kernel}; ` +
              `a trivial syscall ${Math.round(meta.syscall_ns)} ns, io_uring_enter ` +
              `${meta.enter_ns === null ? '-' : Math.round(meta.enter_ns)} ns`);
}
console.log('\nringbench vs peers (median ms; compared with the fastest peer)');
console.log('scenario         style     backend        median_ms    cpu_us/op   vs fastest peer');
const blocks = [['parallel'], ['blocking'], ['write', 'parallel'], ['write', 'blocking'],
                ['cold', 'parallel'], ['cold', 'blocking']];
for (const [scenario, mode] of blocks) {
  const name = mode ? `${scenario} ${mode}` : scenario;
  for (const style of ['callback', 'promise', 'coro']) {
    const cell = rows.filter((r) => r.scenario === scenario && r.style === style &&
                             (r.mode || null) === (mode || null));
    if (!cell.length) continue;
    const peerRows = cell.filter((r) => peers.has(r.backend) && !r.error);
    const best = peerRows.reduce((m, r) => Math.min(m, r.median_ms), Infinity);
    const base = rows.find((r) => r.backend === 'sync' && r.scenario === scenario &&
                           (r.mode || null) === (mode || null) && !r.error);
    for (const r of cell) {
      const vs = r.error ? `error: ${r.error}`
        : peers.has(r.backend) ? (r.median_ms === best ? 'fastest peer' : '')
        : isFinite(best) ? versus(best, r.median_ms) : '';
      console.log(`${name.padEnd(16)} ${style.padEnd(9)} ${r.backend.padEnd(14)} ` +
                  `${(r.error ? '-' : fmt(r.median_ms)).padStart(9)}  ` +
                  `${(r.error ? '-' : fmt(r.cpu_us_per_op)).padStart(11)}   ${vs}` +
                  (r.peak_rss_mb ? `   (peak RSS ${r.peak_rss_mb} MB)` : ''));
    }
    if (base && style === 'callback') {
      console.log(`${name.padEnd(16)} ${'baseline'.padEnd(9)} ${'sync'.padEnd(14)} ` +
                  `${fmt(base.median_ms).padStart(9)}  ${fmt(base.cpu_us_per_op).padStart(11)}`);
    }
  }
}

// The storage targets: each ringbench backend's slowest style against the
// fastest peer, per scenario and mode.
const storage = blocks.filter(([, mode]) => mode);
let header = false;
for (const [scenario, mode] of storage) {
  const sel = rows.filter((r) => r.scenario === scenario && r.mode === mode && !r.error);
  const peerRows = sel.filter((r) => peers.has(r.backend));
  if (!peerRows.length) continue;
  const best = peerRows.reduce((m, r) => (r.median_ms < m.median_ms ? r : m));
  for (const backend of ['uring', 'epoll', 'epoll-pool']) {
    const mine = sel.filter((r) => r.backend === backend);
    if (!mine.length) continue;
    const worst = mine.reduce((m, r) => (r.median_ms > m.median_ms ? r : m));
    if (!header) {
      console.log('\nstorage: each backend\'s slowest style vs the fastest peer');
      header = true;
    }
    console.log(`${(scenario + ' ' + mode).padEnd(16)} ${backend.padEnd(11)} ` +
                `slowest ${worst.style.padEnd(8)} ${fmt(worst.median_ms).padStart(9)} ms: ` +
                `${versus(best.median_ms, worst.median_ms)} than ${best.backend} ${best.style} ` +
                `(${fmt(best.median_ms)} ms)`);
  }
}
