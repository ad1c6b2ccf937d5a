'use strict';
// Connecting: the client's automatic version negotiation, each pinned protocol version the
// client offers with media types (2.9 and later), and the error for a cache that does not exist.

const assert = require('node:assert/strict');
const { after, describe, test } = require('node:test');

const { Clients, errorText, uniqueKey } = require('../lib/weft');

const TIMEOUT_MS = 15_000;
const clients = new Clients();
after(() => clients.closeAll());

/** put, get, remove and get again of one fresh key, through `client`. */
async function putGetRemove(client, label) {
  const key = uniqueKey(`connect-${label}`);
  const value = `value for ${label} ✓`;
  assert.equal(await client.put(key, value), undefined);
  assert.equal(await client.get(key), value);
  assert.equal(await client.remove(key), true);
  assert.equal(await client.get(key), undefined);
}

describe('connect', () => {
  // Proves the default client (version 'auto') negotiates by PING and then works. The client
  // PINGs 4.1 first and keeps the first version that does not fail; Infinispan 15 parses any
  // version byte leniently and answers, so the client settles on 4.1.
  test('default options negotiate the protocol version', { timeout: TIMEOUT_MS }, async () => {
    const client = await clients.connect({ cacheName: 'text' });
    assert.equal(client.getProtocolVersion(), '4.1');
    await putGetRemove(client, 'auto');
  });

  for (const version of ['2.9', '3.0', '3.1', '4.0']) {
    // Proves the request and response framing of this exact protocol version.
    test(`pinned version ${version}`, { timeout: TIMEOUT_MS }, async () => {
      const client = await clients.connect({ version, cacheName: 'text' });
      assert.equal(client.getProtocolVersion(), version);
      await putGetRemove(client, `v${version}`);
    });
  }

  // Proves an entry written at the oldest version is read at the newest and the other way round:
  // the version changes the framing, never the stored entry.
  test('versions share entries', { timeout: TIMEOUT_MS }, async () => {
    const old = await clients.connect({ version: '2.9', cacheName: 'text' });
    const current = await clients.connect({ cacheName: 'text' });
    const key = uniqueKey('connect-shared');
    await old.put(key, 'written at 2.9');
    assert.equal(await current.get(key), 'written at 2.9');
    await current.put(key, 'written at 4.1');
    assert.equal(await old.get(key), 'written at 4.1');
    assert.equal(await old.remove(key), true);
  });

  for (const version of ['auto', '2.9', '4.0']) {
    // Proves a missing cache fails the connection with the server's CacheNotFoundException
    // message, which is what the client searches for (under 'auto' any other error makes it
    // try the next older version instead).
    test(`unknown cache is refused (version ${version})`, { timeout: TIMEOUT_MS }, async () => {
      await assert.rejects(
        clients.connect({ version, cacheName: 'no-such-cache' }),
        (error) => {
          const text = errorText(error);
          assert.match(text, /CacheNotFoundException/);
          assert.match(text, /no-such-cache/);
          return true;
        });
    });
  }
});
