// BullMQ 6.7.0, unmodified, against Weft's RESP endpoint, used as an application uses it:
// Queue.add, Workers (concurrency, rate limiter), retries with backoff, delayed and prioritized
// jobs, progress, logs, pause/resume, a job scheduler, QueueEvents (XREAD BLOCK on the events
// stream), drain and obliterate. BullMQ does its work in Lua scripts (ioredis sends each by
// EVAL the first time on a connection, by EVALSHA after) over lists, sorted sets, hashes and a
// stream, and its workers wait in BZPOPMIN; every test checks the outcome through BullMQ and
// with raw commands (ioredis) on the keys BullMQ keeps (`bull:<queue>:…`).
//
// Connects to 127.0.0.1:$WEFT_PORT (run.sh starts a release weft and sets it). Any Redis 7
// server works too: WEFT_PORT=6379 node --test bullmq.test.mjs.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { Job, Queue, QueueEvents, Worker } from 'bullmq';
import Redis from 'ioredis';

const port = Number(process.env.WEFT_PORT);
if (!Number.isInteger(port) || port <= 0) {
  throw new Error('WEFT_PORT must name the port of a running server (run.sh starts one)');
}
// ioredis retries a lost connection forever; a server that goes away fails the test instead.
const connection = { host: '127.0.0.1', port, retryStrategy: () => null };
const TIMEOUT_MS = 15_000;
const run = randomBytes(4).toString('hex');

/** Everything opened, closed in reverse order by `after` (and by each test that can). */
const opened = [];
function track(closeable) {
  opened.push(closeable);
  return closeable;
}
async function closeAll(items) {
  for (const item of items.reverse()) {
    await Promise.race([item.close().catch(() => {}), sleep(5_000)]);
  }
}

let raw;
before(async () => {
  raw = new Redis({ ...connection, maxRetriesPerRequest: 1 });
  assert.equal(await raw.ping(), 'PONG');
});
after(async () => {
  await closeAll(opened.splice(0));
  raw?.disconnect();
});

function queueName(label) {
  return `weft-${label}-${run}`;
}

/** A queue and its QueueEvents (ready: its XREAD BLOCK is waiting on the events stream). */
async function openQueue(label) {
  const name = queueName(label);
  const queue = track(new Queue(name, { connection }));
  const events = track(new QueueEvents(name, { connection }));
  await queue.waitUntilReady();
  await events.waitUntilReady();
  return { name, queue, events };
}

function openWorker(name, processor, options = {}) {
  return track(new Worker(name, processor, { connection, ...options }));
}

/** Keys of one queue, through SCAN (BullMQ's own names: `bull:<queue>:<suffix>`). */
async function queueKeys(name) {
  const keys = [];
  let cursor = '0';
  for (let i = 0; i < 1000; i++) {
    const [next, batch] = await raw.scan(cursor, 'MATCH', `bull:${name}:*`, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
    if (cursor === '0') return keys.sort();
  }
  throw new Error('SCAN did not finish in 1000 calls');
}

/** The events BullMQ recorded on the queue's stream, as {event, jobId, …} objects. */
async function streamEvents(name) {
  const entries = await raw.xrange(`bull:${name}:events`, '-', '+');
  return entries.map(([, fields]) => {
    const record = {};
    for (let i = 0; i < fields.length; i += 2) record[fields[i]] = fields[i + 1];
    return record;
  });
}

/** Polls `check` every 20 ms until it returns a truthy value, at most `ms`. */
async function eventually(check, ms, what) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const value = await check();
    if (value) return value;
    await sleep(20);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

describe('BullMQ 6.7.0', () => {
  // Proves Queue.add (addStandardJob script), a Worker fetching and completing jobs
  // (moveToActive / moveToFinished scripts, BZPOPMIN on the marker key) and QueueEvents
  // reading the `completed` events from the stream with XREAD BLOCK.
  test('add, process, return values, waitUntilFinished', { timeout: TIMEOUT_MS }, async () => {
    const { name, queue, events } = await openQueue('basic');
    const jobs = await queue.addBulk([1, 2, 3].map((n) => ({ name: 'double', data: { n } })));
    jobs.push(await queue.add('double', { n: 4 }), await queue.add('double', { n: 5 }));
    assert.deepEqual(await queue.getJobCounts('waiting'), { waiting: 5 });
    assert.equal(await raw.llen(`bull:${name}:wait`), 5);

    const worker = openWorker(name, async (job) => ({ doubled: job.data.n * 2, id: job.id }));
    const results = await Promise.all(jobs.map((job) => job.waitUntilFinished(events, 10_000)));
    assert.deepEqual(results.map((r) => r.doubled), [2, 4, 6, 8, 10]);
    assert.deepEqual(results.map((r) => r.id), jobs.map((job) => job.id));

    const counts = await queue.getJobCounts('waiting', 'active', 'completed', 'failed');
    assert.deepEqual(counts, { waiting: 0, active: 0, completed: 5, failed: 0 });
    const completed = await queue.getCompleted();
    assert.equal(completed.length, 5);
    for (const job of completed) {
      assert.deepEqual(job.returnvalue, { doubled: job.data.n * 2, id: job.id });
      assert.equal(job.attemptsMade, 1);
      assert.equal(await job.getState(), 'completed');
    }

    // Raw: the completed set, the job hash's return value, the events stream.
    assert.equal(await raw.zcard(`bull:${name}:completed`), 5);
    const hash = await raw.hgetall(`bull:${name}:${jobs[0].id}`);
    assert.equal(hash.name, 'double');
    assert.deepEqual(JSON.parse(hash.data), { n: 1 });
    assert.deepEqual(JSON.parse(hash.returnvalue), { doubled: 2, id: jobs[0].id });
    assert.ok(Number(hash.finishedOn) >= Number(hash.processedOn));
    const recorded = await streamEvents(name);
    const completedIds = recorded.filter((e) => e.event === 'completed').map((e) => e.jobId);
    assert.deepEqual(completedIds.sort(), jobs.map((job) => job.id).sort());
    assert.ok(recorded.some((e) => e.event === 'added'));
    await worker.close();
  });

  // Proves a failing job retried with a fixed backoff (moveToFinished → delayed, then back
  // to wait), failing for good after its last attempt with its reason recorded.
  test('retries with fixed backoff, then fails', { timeout: TIMEOUT_MS }, async () => {
    const { name, queue, events } = await openQueue('retry');
    const attemptTimes = [];
    const worker = openWorker(name, async (job) => {
      attemptTimes.push(Date.now());
      throw new Error(`boom ${job.attemptsMade + 1}`);
    });
    const job = await queue.add('flaky', { x: 1 }, { attempts: 3, backoff: { type: 'fixed', delay: 100 } });

    await assert.rejects(job.waitUntilFinished(events, 10_000), /boom 3/);
    assert.equal(attemptTimes.length, 3);
    for (let i = 1; i < 3; i++) {
      // The backoff is a delay of 100 ms between a failure and the next attempt.
      assert.ok(attemptTimes[i] - attemptTimes[i - 1] >= 90, `attempts ${attemptTimes}`);
    }

    const failed = await Job.fromId(queue, job.id);
    assert.equal(await failed.getState(), 'failed');
    assert.equal(failed.failedReason, 'boom 3');
    assert.equal(failed.attemptsMade, 3);
    assert.equal(failed.stacktrace.length, 3);
    assert.deepEqual(await queue.getJobCounts('failed', 'delayed', 'wait'), { failed: 1, delayed: 0, wait: 0 });

    assert.equal(await raw.hget(`bull:${name}:${job.id}`, 'failedReason'), 'boom 3');
    assert.equal(await raw.hget(`bull:${name}:${job.id}`, 'atm'), '3');
    assert.notEqual(await raw.zscore(`bull:${name}:failed`, job.id), null);
    const recorded = await streamEvents(name);
    assert.equal(recorded.filter((e) => e.event === 'retries-exhausted').length, 1);
    assert.equal(recorded.filter((e) => e.event === 'failed').length, 1);
    assert.equal(recorded.filter((e) => e.event === 'delayed').length, 2);
    await worker.close();
  });

  // Proves delayed jobs wait in the delayed set and are processed after their delay, not before.
  test('delayed jobs run after their delay', { timeout: TIMEOUT_MS }, async () => {
    const { name, queue, events } = await openQueue('delayed');
    const worker = openWorker(name, async (job) => Date.now() - job.timestamp);
    await worker.waitUntilReady();
    const delayed = await queue.add('later', { d: true }, { delay: 300 });
    const now = await queue.add('now', { d: false });

    assert.equal(await delayed.getState(), 'delayed');
    const score = Number(await raw.zscore(`bull:${name}:delayed`, delayed.id));
    assert.ok(score > 0, `delayed score ${score}`);

    await now.waitUntilFinished(events, 5_000);
    const state = await delayed.getState();
    if (Date.now() - delayed.timestamp < 250) {
      assert.equal(state, 'delayed', 'processed before its delay');
    }
    const waited = await delayed.waitUntilFinished(events, 5_000);
    assert.ok(waited >= 300, `processed ${waited} ms after it was added`);

    const job = await Job.fromId(queue, delayed.id);
    assert.ok(job.processedOn - job.timestamp >= 300);
    assert.equal(await raw.zcard(`bull:${name}:delayed`), 0);
    assert.equal(await raw.zcard(`bull:${name}:completed`), 2);
    await worker.close();
  });

  // Proves prioritized jobs (the `prioritized` sorted set) are taken lowest number first, after
  // the jobs without a priority, and getJobCounts for each state.
  test('priorities and getJobCounts', { timeout: TIMEOUT_MS }, async () => {
    const { name, queue, events } = await openQueue('priority');
    const priorities = [5, 1, 3, 10, 2];
    const jobs = [];
    for (const priority of priorities) {
      jobs.push(await queue.add(`p${priority}`, { priority }, { priority }));
    }
    jobs.push(await queue.add('none', { priority: 0 }));
    jobs.push(await queue.add('later', { priority: -1 }, { delay: 60_000 }));

    const counts = await queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active', 'completed');
    assert.deepEqual(counts, { waiting: 1, prioritized: 5, delayed: 1, active: 0, completed: 0 });
    assert.equal(await queue.count(), 7);
    assert.equal(await raw.zcard(`bull:${name}:prioritized`), 5);
    assert.equal(await raw.llen(`bull:${name}:wait`), 1);
    assert.equal(await jobs[1].getState(), 'prioritized');

    const order = [];
    const worker = openWorker(name, async (job) => {
      order.push(job.data.priority);
    });
    await Promise.all(jobs.slice(0, 6).map((job) => job.waitUntilFinished(events, 10_000)));
    assert.deepEqual(order, [0, 1, 2, 3, 5, 10]);
    assert.deepEqual(await queue.getJobCounts('waiting', 'prioritized', 'delayed', 'completed'), {
      waiting: 0, prioritized: 0, delayed: 1, completed: 6,
    });
    await worker.close();
  });

  // Proves a worker with concurrency 4 runs jobs side by side.
  test('concurrency', { timeout: TIMEOUT_MS }, async () => {
    const { name, queue, events } = await openQueue('concurrency');
    let active = 0;
    let maxActive = 0;
    const worker = openWorker(name, async () => {
      active++;
      maxActive = Math.max(maxActive, active);
      await sleep(200);
      active--;
      return 'ok';
    }, { concurrency: 4 });
    const started = Date.now();
    const jobs = await queue.addBulk(Array.from({ length: 8 }, (_, i) => ({ name: 'c', data: { i } })));
    const results = await Promise.all(jobs.map((job) => job.waitUntilFinished(events, 10_000)));
    const elapsed = Date.now() - started;
    assert.deepEqual(results, Array(8).fill('ok'));
    assert.equal(maxActive, 4);
    assert.ok(elapsed < 8 * 200, `8 jobs of 200 ms took ${elapsed} ms`);
    assert.equal(await raw.zcard(`bull:${name}:completed`), 8);
    await worker.close();
  });

  // Proves the rate limiter: at most `max` jobs per `duration` (the limiter key and its PTTL).
  test('rate limiter', { timeout: TIMEOUT_MS }, async () => {
    const { name, queue, events } = await openQueue('limiter');
    const starts = [];
    const worker = openWorker(name, async () => {
      starts.push(Date.now());
    }, { concurrency: 3, limiter: { max: 2, duration: 500 } });
    const jobs = await queue.addBulk(Array.from({ length: 6 }, (_, i) => ({ name: 'r', data: { i } })));
    await Promise.all(jobs.map((job) => job.waitUntilFinished(events, 10_000)));
    starts.sort((a, b) => a - b);
    // Six jobs, two per 500 ms window: the fifth starts at least two windows after the first.
    assert.ok(starts[4] - starts[0] >= 900, `starts ${starts.map((t) => t - starts[0])}`);
    for (let i = 2; i < starts.length; i++) {
      assert.ok(starts[i] - starts[i - 2] >= 400, `starts ${starts.map((t) => t - starts[0])}`);
    }
    assert.equal(await raw.zcard(`bull:${name}:completed`), 6);
    await worker.close();
  });

  // Proves drain (waiting and delayed jobs removed) and obliterate with force (every key of
  // the queue gone), then that the queue's connections close without leaving the test hanging.
  test('drain, obliterate and close', { timeout: TIMEOUT_MS }, async () => {
    const { name, queue, events } = await openQueue('obliterate');
    const worker = openWorker(name, async (job) => job.data.i, { autorun: false });
    await queue.addBulk(Array.from({ length: 4 }, (_, i) => ({ name: 'w', data: { i } })));
    await queue.add('d', { i: 99 }, { delay: 60_000 });
    await queue.add('p', { i: 98 }, { priority: 3 });
    assert.deepEqual(await queue.getJobCounts('waiting', 'delayed', 'prioritized'), { waiting: 4, delayed: 1, prioritized: 1 });

    await queue.drain(true);
    assert.deepEqual(await queue.getJobCounts('waiting', 'delayed', 'prioritized'), { waiting: 0, delayed: 0, prioritized: 0 });
    assert.equal(await raw.exists(`bull:${name}:wait`, `bull:${name}:delayed`, `bull:${name}:prioritized`), 0);

    const done = await queue.add('w', { i: 7 });
    worker.run().catch(() => {});
    assert.equal(await done.waitUntilFinished(events, 5_000), 7);
    await worker.close();
    await queue.add('w', { i: 8 }); // left waiting
    await queue.add('d', { i: 9 }, { delay: 60_000 });
    assert.ok((await queueKeys(name)).length > 0);

    await queue.obliterate({ force: true });
    assert.deepEqual(await queueKeys(name), []);
    assert.deepEqual(await queue.getJobCounts('waiting', 'delayed', 'completed'), { waiting: 0, delayed: 0, completed: 0 });

    await closeAll([queue, events]);
    // The raw connection still works once BullMQ's connections are closed.
    assert.equal(await raw.ping(), 'PONG');
  });

  // Proves progress updates reach QueueEvents, job logs, pause/resume (the `paused` meta
  // flag: jobs wait while paused), and removeOnComplete (the job hash is deleted).
  test('progress, logs, pause and resume, removeOnComplete', { timeout: TIMEOUT_MS }, async () => {
    const { name, queue, events } = await openQueue('progress');
    const progress = [];
    events.on('progress', ({ jobId, data }) => progress.push([jobId, data]));
    await queue.pause();
    assert.equal(await queue.isPaused(), true);
    assert.equal(await raw.hget(`bull:${name}:meta`, 'paused'), '1');
    const worker = openWorker(name, async (job) => {
      await job.log(`working on ${job.data.n}`);
      await job.updateProgress(50);
      await job.updateProgress({ step: 'done' });
      return job.data.n;
    });
    const kept = await queue.add('kept', { n: 1 });
    const removed = await queue.add('removed', { n: 2 }, { removeOnComplete: true });
    await sleep(300);
    assert.deepEqual(await queue.getJobCounts('waiting', 'active', 'completed'), { waiting: 2, active: 0, completed: 0 });
    // The removed job's hash is gone once it completes (waitUntilFinished would then find no
    // job): its `completed` event, read from the stream, is what says it ran.
    const completed = new Map();
    events.on('completed', ({ jobId, returnvalue }) => completed.set(jobId, returnvalue));
    await queue.resume();
    assert.equal(await queue.isPaused(), false);
    await eventually(() => completed.size === 2, 5_000, 'both jobs completed');
    assert.deepEqual([completed.get(kept.id), completed.get(removed.id)].map(String), ['1', '2']);

    assert.deepEqual((await queue.getJobLogs(kept.id)).logs, ['working on 1']);
    assert.deepEqual(await raw.lrange(`bull:${name}:${kept.id}:logs`, 0, -1), ['working on 1']);
    await eventually(() => progress.length >= 4, 5_000, 'four progress events');
    assert.deepEqual(progress.filter(([id]) => id === kept.id).map(([, data]) => data), [50, { step: 'done' }]);
    assert.deepEqual((await Job.fromId(queue, kept.id)).progress, { step: 'done' });
    assert.equal(await Job.fromId(queue, removed.id), undefined);
    assert.equal(await raw.exists(`bull:${name}:${removed.id}`), 0);
    assert.deepEqual(await raw.zrange(`bull:${name}:completed`, 0, -1), [kept.id]);
    await worker.close();
  });

  // Proves a job scheduler (repeatable job every 150 ms): it produces jobs on schedule until
  // removed.
  test('job scheduler', { timeout: TIMEOUT_MS }, async () => {
    const { name, queue } = await openQueue('scheduler');
    const runs = [];
    const worker = openWorker(name, async (job) => {
      runs.push({ at: Date.now(), name: job.name, data: job.data });
    });
    await queue.upsertJobScheduler('tick', { every: 150 }, { name: 'tick', data: { x: 1 } });
    assert.equal(await queue.getJobSchedulersCount(), 1);
    assert.equal(await raw.zcard(`bull:${name}:repeat`), 1);
    await eventually(() => runs.length >= 3, 5_000, 'three scheduled runs');
    assert.ok(runs.every((run) => run.name === 'tick' && run.data.x === 1));
    assert.ok(runs[2].at - runs[0].at >= 200, `runs at ${runs.map((r) => r.at - runs[0].at)}`);
    assert.equal(await queue.removeJobScheduler('tick'), true);
    assert.equal(await queue.getJobSchedulersCount(), 0);
    await worker.close();
  });

  // Proves BullMQ's Lua scripts run as ioredis sends them: EVAL with the script's text the
  // first time on a connection, EVALSHA (the server's script cache) after that.
  test('the scripts run by EVAL, then EVALSHA', { timeout: TIMEOUT_MS }, async () => {
    const calls = async () => {
      const stats = await raw.info('commandstats');
      const count = (name) => Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
      return { eval: count('eval'), evalsha: count('evalsha') };
    };
    const { queue } = await openQueue('scripts');
    const before = await calls();
    await queue.add('x', {});
    await queue.add('y', {}); // the same script again: EVALSHA
    await queue.add('z', {}, { delay: 1_000 });
    const now = await calls();
    assert.ok(now.evalsha - before.evalsha >= 1, `${JSON.stringify(before)} → ${JSON.stringify(now)}`);
    assert.ok(now.eval + now.evalsha - before.eval - before.evalsha >= 3);
    assert.deepEqual(await queue.getJobCounts('waiting', 'delayed'), { waiting: 2, delayed: 1 });
    await queue.obliterate({ force: true });
  });
});
