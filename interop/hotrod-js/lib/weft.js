'use strict';
// Shared helpers for the suite: where the server is, connecting the official `infinispan`
// client, raw RESP and REST access to the same port, and bounded polling.
//
// Every test file runs in its own process, so the names here are per process; keys carry the
// process id so that two files never touch each other's entries.

const net = require('node:net');
const infinispan = require('infinispan');

const HOST = '127.0.0.1';
/** How long a connection handshake (TCP connect and PINGs) may take. */
const CONNECT_TIMEOUT_MS = 5_000;

/** The server's port, from WEFT_PORT (set by interop/with_weft.py). */
function port() {
  const value = Number.parseInt(process.env.WEFT_PORT ?? '', 10);
  if (!Number.isInteger(value) || value <= 0 || value > 65535) {
    throw new Error(`WEFT_PORT must be the port of a running server, got ${process.env.WEFT_PORT}`);
  }
  return value;
}

/**
 * The clients a test file opened, so that its `after` hook can close them all.
 * `connect` registers each client here as soon as it is connected.
 */
class Clients {
  constructor() {
    this.open = [];
  }

  /**
   * Connects the official client with `options` (merged over the client's defaults).
   * Rejects after `timeoutMs` if the handshake never completes: the client waits forever
   * when the server closes the connection or does not answer its PING.
   */
  async connect(options = {}, { timeoutMs = CONNECT_TIMEOUT_MS } = {}) {
    const address = { port: port(), host: HOST };
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(
        `connect(${JSON.stringify(options)}) did not complete within ${timeoutMs} ms: ` +
        'the server closed the connection or never answered the PING handshake')), timeoutMs);
    });
    const connecting = infinispan.client(address, options);
    // A client that connects after the timeout fired must still be closed.
    connecting.then((client) => this.open.push(client), () => {});
    try {
      return await Promise.race([connecting, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Disconnects every client opened so far; never throws. */
  async closeAll() {
    const clients = this.open.splice(0);
    await Promise.allSettled(clients.map((client) => client.disconnect()));
  }
}

let keyCounter = 0;

/** A key no other test or test file uses. */
function uniqueKey(prefix) {
  keyCounter += 1;
  return `${prefix}-${process.pid}-${keyCounter}`;
}

/**
 * The text of a rejection: the client rejects with plain strings (the server's error message)
 * as well as with Error objects.
 */
function errorText(error) {
  if (typeof error === 'string') return error;
  if (error instanceof Error) return error.message;
  return String(error);
}

/** Resolves after `ms` milliseconds. */
function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `probe` until it returns a truthy value and returns that value, or throws after
 * `timeoutMs` with `what` in the message.
 */
async function waitFor(what, probe, { timeoutMs = 5000, intervalMs = 50 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await probe();
    if (result) return result;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** Encodes a RESP array of bulk strings. */
function respCommand(...args) {
  const parts = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = Buffer.isBuffer(arg) ? arg : Buffer.from(String(arg), 'utf8');
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

/**
 * The length in bytes of the first complete RESP reply in `buffer`, or 0 if it is not complete
 * yet. Knows the reply types the suite expects (simple string, error, integer, bulk string,
 * RESP2 and RESP3 nulls).
 */
function completeReplyLength(buffer) {
  const lineEnd = buffer.indexOf('\r\n');
  if (lineEnd < 0) return 0;
  const type = String.fromCharCode(buffer[0]);
  if ('+-:_'.includes(type)) return lineEnd + 2;
  if (type === '$') {
    const length = Number.parseInt(buffer.subarray(1, lineEnd).toString('latin1'), 10);
    if (length < 0) return lineEnd + 2;
    const total = lineEnd + 2 + length + 2;
    return buffer.length >= total ? total : 0;
  }
  throw new Error(`unexpected RESP reply: ${JSON.stringify(buffer.toString('latin1'))}`);
}

/**
 * Sends each command (an array of arguments) over one new TCP connection to the server's port,
 * in order, and returns the raw reply of each as a Buffer. The connection's first bytes are
 * the first command itself, with no HELLO before it.
 */
function resp(commands, { timeoutMs = 5000 } = {}) {
  return new Promise((resolve, reject) => {
    const replies = [];
    let pending = Buffer.alloc(0);
    let settled = false;
    const socket = net.createConnection({ host: HOST, port: port() });
    const finish = (error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(replies);
    };
    const timer = setTimeout(
      () => finish(new Error(`RESP: no complete reply within ${timeoutMs} ms; got ${replies.length} replies ` +
        `and ${JSON.stringify(pending.toString('latin1'))}`)),
      timeoutMs);
    socket.on('connect', () => socket.write(Buffer.concat(commands.map((args) => respCommand(...args)))));
    socket.on('data', (data) => {
      pending = Buffer.concat([pending, data]);
      try {
        for (let length = completeReplyLength(pending); length > 0; length = completeReplyLength(pending)) {
          replies.push(pending.subarray(0, length));
          pending = pending.subarray(length);
          if (replies.length === commands.length) return finish();
        }
      } catch (error) {
        finish(error);
      }
    });
    socket.on('error', finish);
    socket.on('close', () => finish(new Error(`RESP: connection closed after ${replies.length} replies`)));
  });
}

/** GET on the REST API of the same port; returns {status, body} with the body as a Buffer. */
async function restGet(path, { headers = {}, timeoutMs = 5000 } = {}) {
  const response = await fetch(`http://${HOST}:${port()}${path}`, { headers, signal: AbortSignal.timeout(timeoutMs) });
  return { status: response.status, body: Buffer.from(await response.arrayBuffer()) };
}

module.exports = {
  Clients,
  completeReplyLength,
  errorText,
  port,
  resp,
  respCommand,
  restGet,
  sleep,
  uniqueKey,
  waitFor,
};
