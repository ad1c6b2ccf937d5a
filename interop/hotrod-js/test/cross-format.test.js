'use strict';
// Media-type conversion on the server. The client declares its key and value media types in
// every request header (text/plain by default); the server converts them to the cache's
// storage type and back: `protostream` stores application/x-protostream (ProtoStream
// WrappedMessage), `default` stores application/octet-stream.

const assert = require('node:assert/strict');
const { after, describe, test } = require('node:test');

const { Clients, uniqueKey } = require('../lib/weft');

const TIMEOUT_MS = 15_000;
const clients = new Clients();
after(() => clients.closeAll());

const JSON_FORMAT = { keyType: 'application/json', valueType: 'application/json' };

/**
 * ProtoStream's canonical JSON for a WrappedMessage string. Infinispan converts JSON to
 * ProtoStream with ProtobufUtil.fromCanonicalJSON, which takes a top-level object only: a
 * primitive is written as {"_type": "string", "_value": ...}, and read back the same way.
 */
function jsonString(text) {
  return { _type: 'string', _value: text };
}

describe('cross-format', () => {
  for (const cacheName of ['protostream', 'default']) {
    // Proves text/plain keys and values survive conversion to the cache's storage type and back.
    test(`text/plain client on cache ${cacheName}`, { timeout: TIMEOUT_MS }, async () => {
      const client = await clients.connect({ cacheName });
      const key = uniqueKey(`format-${cacheName}-ключ`);
      const value = `stored in ${cacheName}: значение ✓`;
      await client.put(key, value);
      assert.equal(await client.get(key), value);
      assert.equal(await client.containsKey(key), true);
      const got = await client.getAll([key]);
      assert.deepEqual(got, [{ key, value }]);
      // At protocol 4.x the previous value comes with its metadata.
      assert.equal((await client.put(key, 'second', { previous: true })).value, value);
      assert.equal(await client.get(key), 'second');
      assert.equal(await client.remove(key), true);
      assert.equal(await client.get(key), undefined);
    });
  }

  // Proves a JSON client round-trips a string on a ProtoStream cache, and that it addresses the
  // same entry as a text/plain client using the plain string.
  test('application/json client on cache protostream', { timeout: TIMEOUT_MS }, async () => {
    const json = await clients.connect({ cacheName: 'protostream', dataFormat: JSON_FORMAT });
    const text = await clients.connect({ cacheName: 'protostream' });
    const key = uniqueKey('format-json');

    await json.put(jsonString(key), jsonString('from json ✓'));
    assert.deepEqual(await json.get(jsonString(key)), jsonString('from json ✓'));
    assert.equal(await json.containsKey(jsonString(key)), true);
    assert.equal(await text.get(key), 'from json ✓');

    await text.put(key, 'from text');
    assert.deepEqual(await json.get(jsonString(key)), jsonString('from text'));

    assert.equal(await json.remove(jsonString(key)), true);
    assert.equal(await text.get(key), undefined);
  });
});
