'use strict';
// Expiration set through the client: lifespan (from creation) and maxIdle (from last access),
// in the units the client encodes in the request's time-unit byte.

const assert = require('node:assert/strict');
const { after, before, describe, test } = require('node:test');

const { Clients, sleep, uniqueKey, waitFor } = require('../lib/weft');

const TIMEOUT_MS = 20_000;
const clients = new Clients();
let client;

before(async () => {
  client = await clients.connect({ cacheName: 'text' });
});
after(() => clients.closeAll());

describe('expiration', () => {
  // Proves an entry with a 1 s lifespan is readable at first and gone once the second passes.
  test('lifespan in seconds', { timeout: TIMEOUT_MS }, async () => {
    const key = uniqueKey('exp-lifespan');
    const written = Date.now();
    await client.put(key, 'short-lived', { lifespan: '1s' });
    assert.equal(await client.get(key), 'short-lived');
    assert.equal((await client.getWithMetadata(key)).lifespan, 1);
    await waitFor('the entry to expire', async () => (await client.get(key)) === undefined, { timeoutMs: 5000 });
    assert.ok(Date.now() - written >= 900, `expired after ${Date.now() - written} ms, before its lifespan`);
    assert.equal(await client.containsKey(key), false);
  });

  // Proves a lifespan in milliseconds is honoured as milliseconds, and that an entry without
  // a lifespan next to it stays.
  test('lifespan in milliseconds', { timeout: TIMEOUT_MS }, async () => {
    const mortal = uniqueKey('exp-ms');
    const immortal = uniqueKey('exp-immortal');
    await client.put(mortal, 'short-lived', { lifespan: '1500ms' });
    await client.put(immortal, 'stays');
    await sleep(500);
    assert.equal(await client.get(mortal), 'short-lived', 'still there after 500 ms of 1500');
    await waitFor('the entry to expire', async () => (await client.get(mortal)) === undefined, { timeoutMs: 5000 });
    assert.equal(await client.get(immortal), 'stays');
    assert.equal(await client.remove(immortal), true);
  });

  // Proves maxIdle is reset by each read and expires the entry once reads stop.
  test('maxIdle', { timeout: TIMEOUT_MS }, async () => {
    const key = uniqueKey('exp-idle');
    await client.put(key, 'idle', { maxIdle: '2s' });
    assert.equal((await client.getWithMetadata(key)).maxIdle, 2);
    // Reads 700 ms apart for 2.8 s in all: longer than maxIdle, so only the reads keep it alive.
    for (let i = 0; i < 4; i += 1) {
      await sleep(700);
      assert.equal(await client.get(key), 'idle', `read ${i + 1} finds the entry`);
    }
    await sleep(3000);
    assert.equal(await client.get(key), undefined, 'gone after 3 s without a read');
  });

  // Proves a lifespan cuts an entry short even while it is being read within its maxIdle.
  test('lifespan wins over maxIdle', { timeout: TIMEOUT_MS }, async () => {
    const key = uniqueKey('exp-both');
    await client.put(key, 'both', { lifespan: '2s', maxIdle: '1h' });
    const meta = await client.getWithMetadata(key);
    assert.equal(meta.lifespan, 2);
    assert.equal(meta.maxIdle, 3600);
    await waitFor('the entry to expire', async () => (await client.get(key)) === undefined, { timeoutMs: 6000 });
  });
});
