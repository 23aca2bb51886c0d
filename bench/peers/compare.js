// SPDX-License-Identifier: MIT
// compare.js - prints ringbench's cells beside the JavaScript peers'.
//
// usage: node compare.js RESULTS.jsonl
// Reads JSON lines (ringbench --json and readfile.js output), prints one
// table per scenario x style: every backend's median, and for each
// ringbench backend how many times faster it is than the fastest peer.
'use strict';
const fs = require('fs');

const rows = fs.readFileSync(process.argv[2], 'utf8').split('\n')
  .filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
const peers = new Set(['node', 'node-uring', 'bun']);
const fmt = (x) => (x === undefined ? '-' : x.toFixed(2));

console.log('\nringbench vs peers (median ms; "x faster" = fastest peer / ringbench)');
console.log('scenario  style     backend        median_ms   vs fastest peer');
for (const scenario of ['parallel', 'blocking']) {
  for (const style of ['callback', 'promise', 'coro']) {
    const cell = rows.filter((r) => r.scenario === scenario && r.style === style);
    const peerRows = cell.filter((r) => peers.has(r.backend) && !r.error);
    const best = peerRows.reduce((m, r) => Math.min(m, r.median_ms), Infinity);
    const base = rows.find((r) => r.backend === 'sync' && r.scenario === scenario);
    for (const r of cell) {
      const vs = r.error ? `error: ${r.error}`
        : peers.has(r.backend) ? (r.median_ms === best ? 'fastest peer' : '')
        : isFinite(best) ? `${(best / r.median_ms).toFixed(1)}x faster` : '';
      console.log(`${scenario.padEnd(9)} ${style.padEnd(9)} ${r.backend.padEnd(14)} ` +
                  `${(r.error ? '-' : fmt(r.median_ms)).padStart(9)}   ${vs}` +
                  (r.peak_rss_mb ? `   (peak RSS ${r.peak_rss_mb} MB)` : ''));
    }
    if (base && style === 'callback') {
      console.log(`${scenario.padEnd(9)} ${'baseline'.padEnd(9)} ${'sync'.padEnd(14)} ` +
                  `${fmt(base.median_ms).padStart(9)}`);
    }
  }
}
