// SPDX-License-Identifier: MIT
// storage.js - ringbench's write and cold scenarios in JavaScript, for node
// and bun, written the way a Node program does file I/O with a FileHandle.
//
//   write: N new files per run, each written whole into a fresh directory
//          (open 'w', write, fsync when asked, close); every file read back
//          and compared after the run, then all removed (not timed).
//   cold:  one read of each of N distinct files (open, read, close) whose
//          page cache is dropped before every run by
//          `ringbench --drop-cache DIR`, which also says the share of
//          pages still resident (resident_before: the largest of the runs).
// per style:
//   callback: fs.open / fs.write or fs.read / fs.close with callbacks
//   promise:  fs.promises.open, then FileHandle.write or .read, then
//             .close, as a then-chain (Promise.all for parallel)
//   coro:     the same with async/await
// and per mode: parallel (all N at once, then wait for all) or blocking
// (each one starts when the previous one has finished).
//
// Each cell runs once as warm-up, then RUNS times; one JSON line per cell
// in ringbench's contract (scenario, mode, qd, bs, iops, mb_s, cpu...).
// Per-operation latency is not measured here (null).
//
// usage: node storage.js write|cold DIR N RUNS LABEL [--fsync]
//                        [--ringbench PATH] [--content FILE]
// write: DIR is a scratch directory; every run's directory is made inside
//        with a name of its own and stays, emptied, after the run
//        (scripts/peers.sh marks DIR chattr +T and removes the empty
//        directories later, as ringbench does its own: bench/cold.h says
//        why);
// cold:  DIR holds N files, cold-0 .. cold-<N-1>, each with the content of
//        --content FILE ("Hello, world" by default).
'use strict';
const fs = require('fs');
const { median, stdev, r3 } = require('./stats.js');
const fsp = fs.promises;
const path = require('path');
const { execFileSync } = require('child_process');

const args = process.argv.slice(2);
const [scenario, dir, nArg, runsArg, label] = args;
const N = Number(nArg || 10000);
const RUNS = Number(runsArg || 5);
const FSYNC = args.includes('--fsync');
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const RINGBENCH = opt('--ringbench', 'bench/ringbench');
const content = opt('--content') ? fs.readFileSync(opt('--content'))
  : Buffer.from('Hello, world');
const SIZE = content.length;

function check(buf, n) {
  if (n !== SIZE || !content.equals(buf.subarray(0, n))) throw new Error('wrong content');
}

// ------------------------------------------------------------------ write

let wrun = 0;
let wdir = null;
let wpaths = [];

function writeCb(p, done) {
  fs.open(p, 'w', (err, fd) => {
    if (err) return done(err);
    fs.write(fd, content, 0, SIZE, 0, (err2, n) => {
      const close = (e) => fs.close(fd, (e2) => done(e || e2 ||
        (n !== SIZE ? new Error('short write') : null)));
      if (err2 || !FSYNC) return close(err2);
      fs.fsync(fd, close);
    });
  });
}

function writePromise(p) {
  return fsp.open(p, 'w').then((fh) => fh.write(content, 0, SIZE, 0)
    .then((r) => {
      if (r.bytesWritten !== SIZE) throw new Error('short write');
      return FSYNC ? fh.sync() : undefined;
    })
    .finally(() => fh.close()));
}

async function writeAsync(p) {
  const fh = await fsp.open(p, 'w');
  try {
    const r = await fh.write(content, 0, SIZE, 0);
    if (r.bytesWritten !== SIZE) throw new Error('short write');
    if (FSYNC) await fh.sync();
  } finally {
    await fh.close();
  }
}

// ------------------------------------------------------------------- cold

const cpaths = Array.from({ length: N }, (_, i) => path.join(dir, `cold-${i}`));

function readCb(p, done) {
  const buf = Buffer.allocUnsafe(SIZE + 1);
  fs.open(p, 'r', (err, fd) => {
    if (err) return done(err);
    fs.read(fd, buf, 0, SIZE + 1, 0, (err2, n) => {
      fs.close(fd, (e3) => {
        if (err2 || e3) return done(err2 || e3);
        try { check(buf, n); } catch (e) { return done(e); }
        done(null);
      });
    });
  });
}

function readPromise(p) {
  const buf = Buffer.allocUnsafe(SIZE + 1);
  return fsp.open(p, 'r').then((fh) => fh.read(buf, 0, SIZE + 1, 0)
    .then((r) => check(buf, r.bytesRead))
    .finally(() => fh.close()));
}

async function readAsync(p) {
  const buf = Buffer.allocUnsafe(SIZE + 1);
  const fh = await fsp.open(p, 'r');
  try {
    const r = await fh.read(buf, 0, SIZE + 1, 0);
    check(buf, r.bytesRead);
  } finally {
    await fh.close();
  }
}

// ---------------------------------------------------------------- patterns

const ops = scenario === 'write'
  ? { callback: writeCb, promise: writePromise, coro: writeAsync, paths: null }
  : { callback: readCb, promise: readPromise, coro: readAsync, paths: cpaths };

function cbParallel(fn, paths) {
  return new Promise((resolve, reject) => {
    let done = 0, failed = false;
    for (const p of paths) {
      fn(p, (err) => {
        if (failed) return;
        if (err) { failed = true; return reject(err); }
        if (++done === paths.length) resolve();
      });
    }
  });
}

function cbBlocking(fn, paths) {
  return new Promise((resolve, reject) => {
    let i = 0;
    const next = () => fn(paths[i], (err) => {
      if (err) return reject(err);
      if (++i === paths.length) return resolve();
      next();
    });
    next();
  });
}

// A chain built one link at a time: each one starts in the reaction to the
// previous one, as ringbench's then-chain does.
function promiseBlocking(fn, paths) {
  const step = (i) => fn(paths[i]).then(() => (i + 1 < paths.length ? step(i + 1) : undefined));
  return Promise.resolve().then(() => step(0));
}

async function asyncBlocking(fn, paths) {
  for (const p of paths) await fn(p);
}

const cells = {
  'callback parallel': () => cbParallel(ops.callback, ops.paths),
  'callback blocking': () => cbBlocking(ops.callback, ops.paths),
  'promise parallel': () => Promise.all(ops.paths.map((p) => ops.promise(p))),
  'promise blocking': () => promiseBlocking(ops.promise, ops.paths),
  'coro parallel': () => Promise.all(ops.paths.map((p) => ops.coro(p))),
  'coro blocking': () => asyncBlocking(ops.coro, ops.paths),
};

// ------------------------------------------------- around every run, untimed

// How long making one file in d takes, in ns (ringbench's probe: a
// directory where it takes more than 200 us is left for another one, up to
// 20 times; bench/cold.h says why).
function probeNs(d) {
  const p = path.join(d, 'probe');
  const t0 = process.hrtime.bigint();
  const fd = fs.openSync(p, 'wx');
  const t = Number(process.hrtime.bigint() - t0);
  fs.closeSync(fd);
  fs.unlinkSync(p);
  return t;
}

function before() {
  if (scenario === 'write') {
    for (let tries = 1; ; tries++) {
      wrun++;
      wdir = path.join(dir, `w-${process.pid}-${wrun}`);
      fs.mkdirSync(wdir);
      if (tries === 20 || probeNs(wdir) < 200000) break;
    }
    wpaths = Array.from({ length: N }, (_, i) => path.join(wdir, `w-${i}`));
    ops.paths = wpaths;
    return -1;
  }
  const out = execFileSync(RINGBENCH, ['--drop-cache', dir], { encoding: 'utf8' });
  return Number(out.trim());
}

function after() {
  if (scenario !== 'write') return;
  for (const p of wpaths) {
    if (!content.equals(fs.readFileSync(p))) throw new Error(`${p}: wrong content`);
    fs.unlinkSync(p);
  }
}

(async () => {
  for (const [name, fn] of Object.entries(cells)) {
    const [style, mode] = name.split(' ');
    const row = { backend: label, style, scenario, mode, n: N, runs: RUNS,
                  warmup: 1, bytes: SIZE, qd: mode === 'parallel' ? N : 1,
                  bs: SIZE };
    if (scenario === 'write') row.fsync = FSYNC;
    else row.files = N;
    let resident = 0;
    try {
      before();
      await fn();
      after();
      const ms = [];
      const cpu = [];
      for (let r = 0; r < RUNS; r++) {
        resident = Math.max(resident, before());
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        await fn();
        ms.push(performance.now() - t0);
        const c = process.cpuUsage(c0);
        cpu.push((c.user + c.system) / 1000);
        after();
      }
      const med = median(ms);
      const rates = ms.map((m) => N / (m / 1000));
      Object.assign(row, { median_ms: r3(med),
                           min_ms: r3(Math.min(...ms)),
                           max_ms: r3(Math.max(...ms)),
                           stdev_ms: r3(stdev(ms)),
                           runs_ms: ms.map(r3),
                           ops_per_s: Math.round(median(rates)),
                           cpu_ms: r3(median(cpu)),
                           cpu_us_per_op: r3(median(cpu) * 1000 / N),
                           cpu_util: r3(median(cpu) / med),
                           lat_p50_us: null, lat_p99_us: null,
                           lat_p999_us: null, lat_max_us: null,
                           syscalls_per_op: null,
                           iops: Math.round(median(rates)),
                           mb_s: r3(median(rates) * SIZE / 1e6) });
      if (scenario === 'cold') row.resident_before = +resident.toFixed(4);
    } catch (e) {
      row.error = String(e && e.message || e);
      for (const p of wpaths) {
        try { fs.unlinkSync(p); } catch (e2) { /* never written */ }
      }
    }
    const ru = process.resourceUsage ? process.resourceUsage() : null;
    row.peak_rss_mb = +(ru && ru.maxRSS ? ru.maxRSS / 1024
                                          : process.memoryUsage().rss / 1048576).toFixed(1);
    console.log(JSON.stringify(row));
  }
})();
