'use strict';
// Remote listeners: events the server pushes on the connection that registered the listener,
// interleaved with normal responses. Writes go through a second client so that every event
// must have come from the server. This is the only file that registers listeners: the client
// names them 'listener_<n>' from a per-process counter, so two processes can pick the same id.

const assert = require('node:assert/strict');
const { after, before, describe, test } = require('node:test');

const { Clients, sleep, uniqueKey, waitFor } = require('../lib/weft');

const TIMEOUT_MS = 20_000;
const clients = new Clients();
let writer;

before(async () => {
  writer = await clients.connect({ cacheName: 'text' });
});
after(() => clients.closeAll());

/** Records every event the client delivers to the callbacks it hands out, in arrival order. */
function recorder() {
  const events = [];
  return {
    events,
    on(name) {
      return (key, ...rest) => events.push({ name, key, rest });
    },
    forKey(key) {
      return events.filter((event) => event.key === key);
    },
  };
}

/** Registers one remote listener for the four event kinds on `client`; returns its id. */
async function listenAll(client, record) {
  const listenerId = await client.addListener('create', record.on('create'));
  assert.equal(typeof listenerId, 'string', 'addListener resolves with the listener id');
  for (const name of ['modify', 'remove', 'expiry']) {
    assert.equal(await client.addListener(name, record.on(name), { listenerId }), listenerId);
  }
  return listenerId;
}

describe('listeners', () => {
  for (const version of ['3.0', 'auto']) {
    // Proves create, modify and remove events arrive in order with the right key, and that
    // create/modify carry the entry's new version.
    test(`create, modify and remove events (version ${version})`, { timeout: TIMEOUT_MS }, async () => {
      const listening = await clients.connect({ version, cacheName: 'text' });
      const record = recorder();
      const listenerId = await listenAll(listening, record);
      const key = uniqueKey(`listen-${version}`);

      await writer.put(key, 'v1');
      const createdVersion = (await writer.getWithMetadata(key)).version;
      await writer.put(key, 'v2');
      const modifiedVersion = (await writer.getWithMetadata(key)).version;
      await writer.remove(key);

      await waitFor('three events', () => record.forKey(key).length >= 3);
      const events = record.forKey(key);
      assert.deepEqual(events.map((event) => event.name), ['create', 'modify', 'remove']);
      // Events are emitted as (key, version, listenerId) and (key, listenerId).
      assert.deepEqual(events[0].rest, [createdVersion, listenerId]);
      assert.deepEqual(events[1].rest, [modifiedVersion, listenerId]);
      assert.deepEqual(events[2].rest, [listenerId]);
      assert.equal(await listening.removeListener(listenerId), true);
    });
  }

  // Proves conditional writes raise events only when they write.
  test('conditional writes raise events only when applied', { timeout: TIMEOUT_MS }, async () => {
    const listening = await clients.connect({ cacheName: 'text' });
    const record = recorder();
    const listenerId = await listenAll(listening, record);
    const key = uniqueKey('listen-cond');
    const marker = uniqueKey('listen-cond-marker');

    assert.equal(await writer.replace(key, 'absent'), false);
    assert.equal(await writer.putIfAbsent(key, 'v1'), true);
    assert.equal(await writer.putIfAbsent(key, 'v2'), false);
    assert.equal(await writer.replace(key, 'v3'), true);
    assert.equal(await writer.remove(uniqueKey('listen-cond-absent')), false);
    await writer.remove(key);
    // Events on one connection arrive in order, so once the marker's event is here every
    // earlier one is too.
    await writer.put(marker, 'm');
    await waitFor('the marker event', () => record.forKey(marker).length >= 1);
    assert.deepEqual(record.forKey(key).map((event) => event.name), ['create', 'modify', 'remove']);
    assert.equal(await listening.removeListener(listenerId), true);
    await writer.remove(marker);
  });

  // Proves an entry that expires raises an expiry event (the read that finds it expired is
  // enough to make the server notice).
  test('expiry events', { timeout: TIMEOUT_MS }, async () => {
    const listening = await clients.connect({ cacheName: 'text' });
    const record = recorder();
    const listenerId = await listenAll(listening, record);
    const key = uniqueKey('listen-expiry');

    await writer.put(key, 'short-lived', { lifespan: '1s' });
    await waitFor('the expiry event', async () => {
      await writer.get(key);
      return record.forKey(key).some((event) => event.name === 'expiry');
    }, { timeoutMs: 10_000, intervalMs: 200 });
    const names = record.forKey(key).map((event) => event.name);
    assert.deepEqual(names, ['create', 'expiry']);
    assert.deepEqual(record.forKey(key)[1].rest, [listenerId]);
    assert.equal(await listening.removeListener(listenerId), true);
  });

  // Proves removeListener stops the events of that listener only, while another listener on
  // the same connection keeps receiving them.
  test('removeListener stops events', { timeout: TIMEOUT_MS }, async () => {
    const listening = await clients.connect({ cacheName: 'text' });
    const removed = recorder();
    const kept = recorder();
    const removedId = await listenAll(listening, removed);
    const keptId = await listenAll(listening, kept);
    assert.notEqual(removedId, keptId);

    const before = uniqueKey('listen-before');
    await writer.put(before, 'v');
    await waitFor('both listeners to see the first write',
      () => removed.forKey(before).length === 1 && kept.forKey(before).length === 1);

    assert.equal(await listening.removeListener(removedId), true);
    const afterKey = uniqueKey('listen-after');
    await writer.put(afterKey, 'v');
    await writer.remove(afterKey);
    await waitFor('the kept listener to see the later writes', () => kept.forKey(afterKey).length === 2);
    await sleep(200);
    assert.deepEqual(removed.forKey(afterKey), [], 'no events after removeListener');

    assert.equal(await listening.removeListener(keptId), true);
    await writer.remove(before);
  });
});
