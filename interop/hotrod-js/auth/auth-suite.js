'use strict';
// The official Node.js client authenticating against a server with a users file and TLS
// (run.sh starts it with WEFT_TLS_DIR holding the test CA and WEFT_PASSWORD the user's
// password): SCRAM-SHA-256 and SCRAM-SHA-512 over TLS and in plaintext, PLAIN over TLS; a
// wrong password, and no credentials, get nothing done.

const assert = require('node:assert/strict');
const path = require('node:path');
const { after, describe, test } = require('node:test');

const { Clients, errorText, uniqueKey } = require('../lib/weft');

const TIMEOUT_MS = 20_000;
const USER = 'app';
const clients = new Clients();
after(() => clients.closeAll());

function options(mechanism, password, tls) {
  const chosen = {
    authentication: { enabled: true, saslMechanism: mechanism, userName: USER, password },
  };
  if (tls) {
    chosen.ssl = {
      enabled: true,
      trustCerts: [path.join(process.env.WEFT_TLS_DIR, 'ca.pem')],
      sniHostName: 'localhost',
    };
  }
  return chosen;
}

describe('authentication', () => {
  for (const [mechanism, tls] of [
    ['SCRAM-SHA-256', true], ['SCRAM-SHA-512', true], ['PLAIN', true],
    ['SCRAM-SHA-256', false], ['SCRAM-SHA-512', false],
  ]) {
    // Proves the mechanism authenticates, and the client then works.
    test(`${mechanism} ${tls ? 'over TLS' : 'in plaintext'}`, { timeout: TIMEOUT_MS }, async () => {
      const client = await clients.connect(options(mechanism, process.env.WEFT_PASSWORD, tls));
      const key = uniqueKey(`auth-${mechanism}`);
      await client.put(key, 'value');
      assert.equal(await client.get(key), 'value');
    });
  }

  // Proves a wrong password is refused: the client cannot connect, or its first operation
  // fails.
  test('a wrong password gets nothing done', { timeout: TIMEOUT_MS }, async () => {
    await assert.rejects(async () => {
      const client = await clients.connect(options('SCRAM-SHA-256', 'not-the-password', true),
        { timeoutMs: 5_000 });
      await client.put(uniqueKey('auth-wrong'), 'value');
    }, (error) => errorText(error).length > 0);
  });

  // Proves a client without credentials gets nothing done.
  test('no credentials get nothing done', { timeout: TIMEOUT_MS }, async () => {
    await assert.rejects(async () => {
      const client = await clients.connect({}, { timeoutMs: 5_000 });
      await client.put(uniqueKey('auth-none'), 'value');
    }, (error) => /authentication/i.test(errorText(error)));
  });
});
