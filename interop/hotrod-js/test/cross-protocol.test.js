'use strict';
// One entry, three protocols on one port: Hot Rod (this client), RESP (a raw socket, database
// 0 = cache `default`) and REST v2 (global fetch).

const assert = require('node:assert/strict');
const { after, before, describe, test } = require('node:test');

const { Clients, resp, restGet, uniqueKey } = require('../lib/weft');

const TIMEOUT_MS = 15_000;
const clients = new Clients();
let client;

before(async () => {
  client = await clients.connect({ cacheName: 'default' });
});
after(() => clients.closeAll());

/** A RESP bulk-string reply. */
function bulk(text) {
  const bytes = Buffer.from(text, 'utf8');
  return Buffer.concat([Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n')]);
}

/** A RESP null reply: RESP2 `$-1` (no HELLO was sent) or RESP3 `_`. */
function isNull(reply) {
  return ['$-1\r\n', '_\r\n'].includes(reply.toString('latin1'));
}

describe('cross-protocol', () => {
  // Proves a Hot Rod write is read by RESP GET (the connection's first command) and REST GET.
  test('Hot Rod writes, RESP and REST read', { timeout: TIMEOUT_MS }, async () => {
    await client.put('js-x', 'value');
    const [reply] = await resp([['GET', 'js-x']]);
    assert.deepEqual(reply, Buffer.from('$5\r\nvalue\r\n'));
    const rest = await restGet('/rest/v2/caches/default/js-x');
    assert.equal(rest.status, 200);
    assert.deepEqual(rest.body, Buffer.from('value'));

    assert.equal(await client.remove('js-x'), true);
    const [gone] = await resp([['GET', 'js-x']]);
    assert.ok(isNull(gone), `RESP GET after remove: ${JSON.stringify(gone.toString('latin1'))}`);
    assert.equal((await restGet('/rest/v2/caches/default/js-x')).status, 404);
  });

  // Proves UTF-8 keys and values keep their bytes across Hot Rod, RESP and REST.
  test('UTF-8 keys and values', { timeout: TIMEOUT_MS }, async () => {
    const key = uniqueKey('js-ключ');
    const value = 'значение ✓';
    await client.put(key, value);
    const [reply] = await resp([['GET', key]]);
    assert.deepEqual(reply, bulk(value));
    const rest = await restGet(`/rest/v2/caches/default/${encodeURIComponent(key)}`);
    assert.equal(rest.status, 200);
    assert.equal(rest.body.toString('utf8'), value);
    assert.equal(await client.remove(key), true);
  });

  // Proves RESP writes (after SELECT 0) are read by Hot Rod, and a Hot Rod remove is seen by RESP.
  test('RESP writes, Hot Rod reads', { timeout: TIMEOUT_MS }, async () => {
    const key = uniqueKey('resp-x');
    const replies = await resp([['SELECT', '0'], ['SET', key, 'from resp ✓']]);
    assert.deepEqual(replies.map((reply) => reply.toString('latin1')), ['+OK\r\n', '+OK\r\n']);
    assert.equal(await client.get(key), 'from resp ✓');
    assert.equal(await client.containsKey(key), true);

    const [overwritten] = await resp([['SET', key, 'again']]);
    assert.equal(overwritten.toString('latin1'), '+OK\r\n');
    assert.equal(await client.get(key), 'again');

    assert.equal(await client.remove(key), true);
    const [exists] = await resp([['EXISTS', key]]);
    assert.equal(exists.toString('latin1'), ':0\r\n');
  });

  // Proves a RESP expiry is honoured by Hot Rod and visible in Hot Rod metadata.
  test('RESP expiry seen by Hot Rod', { timeout: TIMEOUT_MS }, async () => {
    const key = uniqueKey('resp-ttl');
    const [set] = await resp([['SET', key, 'ttl', 'EX', '100']]);
    assert.equal(set.toString('latin1'), '+OK\r\n');
    const meta = await client.getWithMetadata(key);
    assert.equal(meta.value, 'ttl');
    assert.equal(meta.lifespan, 100);
    assert.equal(await client.remove(key), true);
  });

  // Proves REST addresses a Hot Rod text/plain entry of a ProtoStream cache by the same string
  // key, and converts the stored value to text/plain when asked.
  test('REST reads a ProtoStream entry as text', { timeout: TIMEOUT_MS }, async () => {
    const proto = await clients.connect({ cacheName: 'protostream' });
    const key = uniqueKey('js-proto');
    await proto.put(key, 'in protostream ✓');
    const rest = await restGet(`/rest/v2/caches/protostream/${encodeURIComponent(key)}`,
      { headers: { Accept: 'text/plain' } });
    assert.equal(rest.status, 200);
    assert.equal(rest.body.toString('utf8'), 'in protostream ✓');
    assert.equal(await proto.remove(key), true);
  });
});
