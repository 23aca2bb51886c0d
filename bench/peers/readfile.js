// SPDX-License-Identifier: MIT
// readfile.js - ringbench's scenarios in JavaScript, for node and bun.
//
// The same work as bench/ringbench: read one small file N times, every
// result checked, per style:
//   callback: fs.readFile with a callback
//   promise:  fs.promises.readFile with Promise.all / a .then chain
//   coro:     async/await (JavaScript's equivalent of a coroutine)
// and per scenario:
//   parallel: start all N reads, then wait for all of them
//   blocking: each read starts when the previous one has finished
// Each cell runs once as warm-up, then RUNS times; one JSON line per cell,
// with the fields of ringbench's --json contract that apply: median, min,
// max, stdev and every run's time, and the CPU time of a run
// (process.cpuUsage(): user + system of every thread of the process, the
// thread pool's included, like ringbench's getrusage). Per-read latency is
// not measured here (null).
//
// usage: node readfile.js FILE N RUNS BACKEND_LABEL
'use strict';
const fs = require('fs');
const { median, stdev, r3 } = require('./stats.js');

const [file, nArg, runsArg, label] = process.argv.slice(2);
const N = Number(nArg || 10000);
const RUNS = Number(runsArg || 5);
const expect = fs.readFileSync(file);

function check(err, data) {
  if (err) throw err;
  if (!expect.equals(data)) throw new Error('wrong content');
}

const cells = {
  'callback parallel': () => new Promise((resolve, reject) => {
    let done = 0;
    for (let i = 0; i < N; i++) {
      fs.readFile(file, (err, data) => {
        try { check(err, data); } catch (e) { return reject(e); }
        if (++done === N) resolve();
      });
    }
  }),
  'callback blocking': () => new Promise((resolve, reject) => {
    let i = 0;
    const next = () => fs.readFile(file, (err, data) => {
      try { check(err, data); } catch (e) { return reject(e); }
      if (++i === N) return resolve();
      next();
    });
    next();
  }),
  'promise parallel': () => {
    const all = [];
    for (let i = 0; i < N; i++) all.push(fs.promises.readFile(file));
    return Promise.all(all).then((v) => v.forEach((d) => check(null, d)));
  },
  'promise blocking': () => {
    let p = Promise.resolve();
    // A chain built one link at a time: each read starts in the reaction
    // to the previous one, as ringbench's then-chain does.
    const step = (i) => fs.promises.readFile(file).then((d) => {
      check(null, d);
      if (i + 1 < N) return step(i + 1);
    });
    return p.then(() => step(0));
  },
  'coro parallel': async () => {
    const one = async () => check(null, await fs.promises.readFile(file));
    const all = [];
    for (let i = 0; i < N; i++) all.push(one());
    await Promise.all(all);
  },
  'coro blocking': async () => {
    for (let i = 0; i < N; i++) check(null, await fs.promises.readFile(file));
  },
};

(async () => {
  for (const [name, fn] of Object.entries(cells)) {
    const [style, scenario] = name.split(' ');
    const row = { backend: label, style, scenario, n: N, runs: RUNS,
                  warmup: 1, bytes: expect.length };
    try {
      await fn();
      const ms = [];
      const cpu = [];
      for (let r = 0; r < RUNS; r++) {
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await fn();
        ms.push(performance.now() - t0);
        const c = process.cpuUsage(c0);
        cpu.push((c.user + c.system) / 1000);
      }
      const med = median(ms);
      Object.assign(row, { median_ms: r3(med),
                           min_ms: r3(Math.min(...ms)),
                           max_ms: r3(Math.max(...ms)),
                           stdev_ms: r3(stdev(ms)),
                           runs_ms: ms.map(r3),
                           cpu_ms: r3(median(cpu)),
                           cpu_us_per_op: r3(median(cpu) * 1000 / N),
                           cpu_util: r3(median(cpu) / med),
                           lat_p50_us: null, lat_p99_us: null,
                           lat_p999_us: null, lat_max_us: null,
                           syscalls_per_op: null });
    } catch (e) {
      row.error = String(e && e.message || e);
    }
    const ru = process.resourceUsage ? process.resourceUsage() : null;
    row.peak_rss_mb = +(ru && ru.maxRSS ? ru.maxRSS / 1024
                                          : process.memoryUsage().rss / 1048576).toFixed(1);
    console.log(JSON.stringify(row));
  }
})();
