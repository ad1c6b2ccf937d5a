'use strict';
// Cache operations through the official client on cache `text` (text/plain keys and values,
// the client's default data format): single-key, conditional, versioned, bulk, iteration,
// size/clear and statistics. The cache-wide tests (size, clear, iteration) assume no other test
// file writes to `text` at the same time: run.sh runs the files one at a time.

const assert = require('node:assert/strict');
const { after, before, describe, test } = require('node:test');

const { Clients, uniqueKey } = require('../lib/weft');

const TIMEOUT_MS = 15_000;
const clients = new Clients();
let client;

before(async () => {
  client = await clients.connect({ cacheName: 'text' });
});
after(() => clients.closeAll());

describe('single-key operations', () => {
  // Proves put/get/containsKey/remove and their answers for present and absent keys.
  test('put, get, containsKey, remove', { timeout: TIMEOUT_MS }, async () => {
    const key = uniqueKey('op-basic');
    assert.equal(await client.get(key), undefined);
    assert.equal(await client.containsKey(key), false);
    assert.equal(await client.put(key, 'v1'), undefined);
    assert.equal(await client.get(key), 'v1');
    assert.equal(await client.containsKey(key), true);
    assert.equal(await client.put(key, 'v2'), undefined);
    assert.equal(await client.get(key), 'v2');
    assert.equal(await client.remove(key), true);
    assert.equal(await client.remove(key), false);
    assert.equal(await client.get(key), undefined);
    assert.equal(await client.containsKey(key), false);
  });

  // Proves keys and values are UTF-8 text byte for byte, including multi-byte characters,
  // the empty value and a value larger than one TCP segment.
  test('unicode, empty and large values', { timeout: TIMEOUT_MS }, async () => {
    const unicodeKey = uniqueKey('op-ключ-鍵');
    await client.put(unicodeKey, 'значение 値 🎉');
    assert.equal(await client.get(unicodeKey), 'значение 値 🎉');

    const emptyKey = uniqueKey('op-empty');
    await client.put(emptyKey, '');
    assert.equal(await client.containsKey(emptyKey), true);
    assert.equal(await client.get(emptyKey), '');

    const largeKey = uniqueKey('op-large');
    const large = 'abcdefghij'.repeat(20_000);
    await client.put(largeKey, large);
    assert.equal(await client.get(largeKey), large);

    for (const key of [unicodeKey, emptyKey, largeKey]) assert.equal(await client.remove(key), true);
  });

  // Proves putIfAbsent writes only when the key is absent and replace only when it is present.
  test('putIfAbsent and replace', { timeout: TIMEOUT_MS }, async () => {
    const key = uniqueKey('op-cond');
    assert.equal(await client.replace(key, 'nope'), false);
    assert.equal(await client.get(key), undefined);
    assert.equal(await client.putIfAbsent(key, 'first'), true);
    assert.equal(await client.putIfAbsent(key, 'second'), false);
    assert.equal(await client.get(key), 'first');
    assert.equal(await client.replace(key, 'third'), true);
    assert.equal(await client.get(key), 'third');
    assert.equal(await client.remove(key), true);
  });
});

describe('versions and metadata', () => {
  // Proves getWithMetadata returns the value and an 8-byte version that changes on every
  // write, and that replaceWithVersion/removeWithVersion act only on the current version.
  test('getWithMetadata, replaceWithVersion, removeWithVersion', { timeout: TIMEOUT_MS }, async () => {
    const key = uniqueKey('op-versioned');
    assert.equal(await client.getWithMetadata(key), undefined);
    await client.put(key, 'v1');

    const first = await client.getWithMetadata(key);
    assert.equal(first.value, 'v1');
    assert.ok(Buffer.isBuffer(first.version) && first.version.length === 8, 'version is 8 bytes');
    // An immortal entry: both "infinite" flags set, so no timestamps are sent.
    assert.equal(first.lifespan, -1);
    assert.equal(first.maxIdle, -1);

    const stale = Buffer.from(first.version);
    stale[7] ^= 0xff;
    assert.equal(await client.replaceWithVersion(key, 'v-stale', stale), false);
    assert.equal(await client.get(key), 'v1');
    assert.equal(await client.replaceWithVersion(key, 'v2', first.version), true);

    const second = await client.getWithMetadata(key);
    assert.equal(second.value, 'v2');
    assert.notDeepEqual(second.version, first.version, 'a write changes the version');
    assert.equal(await client.removeWithVersion(key, first.version), false);
    assert.equal(await client.get(key), 'v2');
    assert.equal(await client.removeWithVersion(key, second.version), true);
    assert.equal(await client.get(key), undefined);
    assert.equal(await client.replaceWithVersion(key, 'v3', second.version), false);
    assert.equal(await client.get(key), undefined);
  });

  // Proves lifespan and maxIdle given in other units come back in seconds, with creation and
  // last-use timestamps in epoch milliseconds.
  test('getWithMetadata reports lifespan and maxIdle', { timeout: TIMEOUT_MS }, async () => {
    const key = uniqueKey('op-meta');
    const before = Date.now();
    await client.put(key, 'v', { lifespan: '1h', maxIdle: '30m' });
    const meta = await client.getWithMetadata(key);
    assert.equal(meta.value, 'v');
    assert.equal(meta.lifespan, 3600);
    assert.equal(meta.maxIdle, 1800);
    for (const field of ['created', 'lastUsed']) {
      assert.ok(meta[field] >= before - 5000 && meta[field] <= Date.now() + 5000,
        `${field} ${meta[field]} is an epoch-ms timestamp near now`);
    }
    assert.equal(await client.remove(key), true);
  });
});

describe('previous values', () => {
  // Protocols 2.x and 3.x send the previous value as a bare byte array, which the client
  // returns as the value itself.
  test('previous values (version 3.1)', { timeout: TIMEOUT_MS }, async () => {
    const v31 = await clients.connect({ version: '3.1', cacheName: 'text' });
    const key = uniqueKey('op-prev-3.1');
    assert.equal(await v31.put(key, 'v1', { previous: true }), undefined);
    assert.equal(await v31.put(key, 'v2', { previous: true }), 'v1');
    assert.equal(await v31.putIfAbsent(key, 'v3', { previous: true }), 'v2');
    assert.equal(await v31.replace(key, 'v4', { previous: true }), 'v2');
    assert.equal(await v31.get(key), 'v4');
    assert.equal(await v31.remove(key, { previous: true }), 'v4');
    assert.equal(await v31.remove(key, { previous: true }), undefined);
    assert.equal(await v31.replace(key, 'v5', { previous: true }), undefined);
    assert.equal(await v31.putIfAbsent(key, 'v6', { previous: true }), undefined);
    assert.equal(await v31.get(key), 'v6');
    assert.equal(await v31.remove(key), true);
  });

  // Protocol 4.x sends the previous entry's metadata with its value, which the client returns
  // as an object like getWithMetadata's: the test compares the two.
  test('previous values with metadata (version 4.x)', { timeout: TIMEOUT_MS }, async () => {
    const key = uniqueKey('op-prev-4');
    assert.equal(await client.put(key, 'v1', { previous: true }), undefined);
    const v1 = await client.getWithMetadata(key);
    assert.deepEqual(await client.put(key, 'v2', { previous: true, lifespan: '1h' }), v1);
    const v2 = await client.getWithMetadata(key);
    assert.equal(v2.lifespan, 3600);
    assert.deepEqual(await client.putIfAbsent(key, 'v3', { previous: true }), v2);
    assert.deepEqual(await client.replace(key, 'v4', { previous: true }), v2);
    const v4 = await client.getWithMetadata(key);
    assert.equal(v4.value, 'v4');
    assert.deepEqual(await client.remove(key, { previous: true }), v4);
    assert.equal(await client.remove(key, { previous: true }), undefined);
    assert.equal(await client.replace(key, 'v5', { previous: true }), undefined);
    assert.equal(await client.putIfAbsent(key, 'v6', { previous: true }), undefined);
    assert.equal(await client.get(key), 'v6');
    assert.equal(await client.remove(key), true);
  });
});

describe('bulk operations', () => {
  // Proves putAll stores every pair and getAll returns exactly the present keys.
  test('putAll and getAll', { timeout: TIMEOUT_MS }, async () => {
    const pairs = Array.from({ length: 20 }, (_, i) => ({ key: uniqueKey(`op-bulk-${i}`), value: `bulk value ${i}` }));
    assert.equal(await client.putAll(pairs), undefined);
    const missing = uniqueKey('op-bulk-missing');
    const wanted = [pairs[0].key, pairs[7].key, pairs[19].key, missing];
    const got = await client.getAll(wanted);
    const byKey = new Map(got.map(({ key, value }) => [key, value]));
    assert.equal(got.length, 3, 'a missing key is left out');
    assert.equal(byKey.get(pairs[0].key), 'bulk value 0');
    assert.equal(byKey.get(pairs[7].key), 'bulk value 7');
    assert.equal(byKey.get(pairs[19].key), 'bulk value 19');
    for (const { key, value } of pairs) assert.equal(await client.get(key), value);
    for (const { key } of pairs) assert.equal(await client.remove(key), true);
  });

  // Proves size counts entries and clear empties the cache.
  test('size and clear', { timeout: TIMEOUT_MS }, async () => {
    await client.clear();
    assert.equal(await client.size(), 0);
    const pairs = Array.from({ length: 25 }, (_, i) => ({ key: uniqueKey(`op-size-${i}`), value: `${i}` }));
    await client.putAll(pairs);
    assert.equal(await client.size(), 25);
    await client.remove(pairs[0].key);
    assert.equal(await client.size(), 24);
    await client.clear();
    assert.equal(await client.size(), 0);
    assert.equal(await client.get(pairs[1].key), undefined);
  });

  // Proves the iterator visits every entry exactly once across many batches.
  test('iterator over a few hundred entries', { timeout: TIMEOUT_MS }, async () => {
    await client.clear();
    const expected = new Map();
    for (let i = 0; i < 300; i += 1) expected.set(uniqueKey(`op-iter-${i}`), `iterated ${i}`);
    await client.putAll([...expected].map(([key, value]) => ({ key, value })));

    const iterator = await client.iterator(32);
    const seen = new Map();
    for (let step = 0; step <= expected.size; step += 1) {
      const entry = await iterator.next();
      if (entry.done) break;
      assert.ok(!seen.has(entry.key), `key ${entry.key} returned twice`);
      seen.set(entry.key, entry.value);
    }
    assert.equal((await iterator.next()).done, true, 'the iterator ends');
    assert.equal(await iterator.close(), true);
    assert.deepEqual(seen, expected);
    await client.clear();
  });

  // Proves iteration with metadata returns each entry's version and expiration.
  test('iterator with metadata', { timeout: TIMEOUT_MS }, async () => {
    await client.clear();
    const mortal = uniqueKey('op-iter-mortal');
    const immortal = uniqueKey('op-iter-immortal');
    await client.put(mortal, 'm', { lifespan: '1h' });
    await client.put(immortal, 'i');

    const iterator = await client.iterator(1, { metadata: true });
    const seen = new Map();
    for (let step = 0; step < 5; step += 1) {
      const entry = await iterator.next();
      if (entry.done) break;
      seen.set(entry.key, entry);
    }
    await iterator.close();
    assert.deepEqual([...seen.keys()].sort(), [immortal, mortal].sort());
    assert.equal(seen.get(mortal).value, 'm');
    assert.equal(seen.get(mortal).lifespan, 3600);
    assert.equal(seen.get(mortal).maxIdle, -1);
    assert.equal(seen.get(immortal).lifespan, -1);
    const versionOf = async (key) => (await client.getWithMetadata(key)).version;
    assert.deepEqual(seen.get(mortal).version, await versionOf(mortal));
    assert.deepEqual(seen.get(immortal).version, await versionOf(immortal));
    await client.clear();
  });
});

describe('statistics', () => {
  // Proves stats() returns Infinispan's counters as numbers and that they count operations.
  test('stats', { timeout: TIMEOUT_MS }, async () => {
    const names = ['timeSinceStart', 'approximateEntries', 'stores', 'retrievals', 'hits', 'misses',
      'removeHits', 'removeMisses'];
    const before = await client.stats();
    for (const name of names) {
      assert.ok(Number.isInteger(before[name]) && before[name] >= 0, `stats.${name} = ${before[name]}`);
    }
    // Infinispan answers -1 here unless the cache counts its entries exactly (accurate-size).
    assert.ok(Number.isInteger(before.currentNumberOfEntries) && before.currentNumberOfEntries >= -1,
      `stats.currentNumberOfEntries = ${before.currentNumberOfEntries}`);

    const key = uniqueKey('op-stats');
    await client.put(key, 'v');
    assert.ok((await client.stats()).approximateEntries >= 1, 'the entry is counted');
    await client.get(key);
    await client.get(uniqueKey('op-stats-missing'));
    await client.remove(key);
    await client.remove(key);

    const after = await client.stats();
    assert.ok(after.stores >= before.stores + 1, 'a put is a store');
    assert.ok(after.hits >= before.hits + 1, 'a get of a present key is a hit');
    assert.ok(after.misses >= before.misses + 1, 'a get of an absent key is a miss');
    assert.ok(after.retrievals >= before.retrievals + 2, 'both gets are retrievals');
    assert.ok(after.removeHits >= before.removeHits + 1, 'a remove of a present key is a remove hit');
    assert.ok(after.removeMisses >= before.removeMisses + 1, 'a remove of an absent key is a remove miss');
  });
});
