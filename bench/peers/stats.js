// SPDX-License-Identifier: MIT
// stats.js - what every peer script reports of its runs, computed as
// ringbench does (bench/stats.c): the median, the sample standard
// deviation (n - 1), and three decimals in the JSON.
'use strict';

function median(v) {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function stdev(v) {
  if (v.length < 2) return 0;
  const mean = v.reduce((a, b) => a + b, 0) / v.length;
  return Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / (v.length - 1));
}

const r3 = (x) => +x.toFixed(3);

module.exports = { median, stdev, r3 };
