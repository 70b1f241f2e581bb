// The REST API as the logged-in application: every call carries its Basic credentials. They live only in this
// object's private field, in memory: nothing is written to storage or cookies, and a reload asks again.
'use strict';

export class ApiError extends Error {
  /** @param {number} errCode @param {string} message @param {number} status */
  constructor(errCode, message, status) {
    super(message);
    this.errCode = errCode;
    this.status = status;
  }
}

/** Basic credentials as RFC 7617 with UTF-8 */
function basic(user, password) {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return 'Basic ' + btoa(bin);
}

export class Api {
  #auth;

  /** @param {string} user @param {string} password */
  constructor(user, password) {
    this.user = user;
    this.#auth = basic(user, password);
  }

  /** the header for players that fetch API files themselves (record playback) */
  authHeaders() {
    return { Authorization: this.#auth };
  }

  /** a JSON route: the envelope's data, or an ApiError with its errCode and message */
  async call(method, path, body) {
    const headers = { Authorization: this.#auth };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      credentials: 'omit',
    });
    let json;
    try {
      json = await res.json();
    } catch {
      throw new ApiError(-2, `HTTP ${res.status}`, res.status);
    }
    if (json.errCode !== 0) throw new ApiError(json.errCode, json.message, res.status);
    return json.data;
  }

  status() {
    return this.call('GET', '/strm/status');
  }
  open(body) {
    return this.call('POST', '/strm/open', body).then((d) => d[0]);
  }
  keep(reqIds) {
    return this.call('POST', '/strm/keep', { reqIds });
  }
  close(reqIds) {
    return this.call('POST', '/strm/close', { reqIds });
  }
  records(query) {
    return this.call('GET', '/strm/record?' + new URLSearchParams(query));
  }

  /** /healthz with the credentials: counts when this application may read them */
  async health() {
    const res = await fetch('/healthz', { headers: { Authorization: this.#auth }, cache: 'no-store', credentials: 'omit' });
    return res.json();
  }

  /** /metrics text, or null when this application may not read it */
  async metrics() {
    const res = await fetch('/metrics', { headers: { Authorization: this.#auth }, cache: 'no-store', credentials: 'omit' });
    return res.ok ? res.text() : null;
  }

  /** a signed link to a record's file (`format` mp4 or flv) that a <video> element or a download link can use */
  recordLink(reqId, format) {
    return this.call('GET', '/strm/record/link?' + new URLSearchParams({ reqId, format }));
  }

  /** the first `n` bytes of a record file (a Range request) */
  async fileHead(path, n) {
    const res = await fetch(path, { headers: { Authorization: this.#auth, Range: `bytes=0-${n - 1}` }, cache: 'no-store', credentials: 'omit' });
    if (!res.ok) throw new ApiError(-8, `HTTP ${res.status}`, res.status);
    return new Uint8Array(await res.arrayBuffer());
  }

  /** a record file as a Blob (a plain link could not carry the credentials) */
  async file(path) {
    const res = await fetch(path, { headers: { Authorization: this.#auth }, cache: 'no-store', credentials: 'omit' });
    if (!res.ok) throw new ApiError(-8, `HTTP ${res.status}`, res.status);
    return res.blob();
  }
}
