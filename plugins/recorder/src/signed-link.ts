/**
 * Signed links to record files, for players that cannot send the API's Basic credentials: a `<video>` element
 * (the console plays the MP4 form so, with native controls and seeking), a plain download link. An application asks
 * `GET /strm/record/link?reqId=…` with its credentials and gets a URL under `/strm/record/signed/{path}` that names
 * it, expires after LINK_TTL_SEC and carries an HMAC-SHA256 over (application, path, expiry). The key is random,
 * kept in the site's key-value store (embedded SQLite, or Redis for a fleet), so every worker and node sharing that
 * store accepts the links of the others and a restart keeps the links it gave out valid.
 */
import * as crypto from 'node:crypto';
import type { Logger } from 'pino';
import { ErrCode, GatewayError, type KeyValueStore } from '../../../plugin-sdk';
import { recordFileUrl } from './stored-av';

export const LINK_TTL_SEC = 900;
const KEY_NAME = 'signed-link-key';
/** a link whose key is not ours is looked up again this often at most (another worker may have set a new one) */
const REREAD_MS = 10_000;

export class LinkSigner {
  private key: Buffer;
  private rereadAt = 0;

  private constructor(
    key: Buffer,
    private readonly store: KeyValueStore | undefined,
    private readonly now: () => number,
  ) {
    this.key = key;
  }

  /**
   * The store's key, made if there is none. Two workers starting together may both make one: each reads back what
   * is stored, and verify() reads it again when a link does not match, so they agree from the next link on.
   */
  static async open(store: KeyValueStore, log: Logger, now: () => number): Promise<LinkSigner> {
    try {
      let hex = await store.get<string>(KEY_NAME);
      if (typeof hex !== 'string' || !/^[0-9a-f]{64}$/.test(hex)) {
        await store.set(KEY_NAME, crypto.randomBytes(32).toString('hex'));
        hex = await store.get<string>(KEY_NAME);
      }
      return new LinkSigner(Buffer.from(hex!, 'hex'), store, now);
    } catch (err) {
      // a store that cannot be written (a full disk) costs only links made elsewhere: this process signs its own
      log.warn({ err: (err as Error).message }, 'signed record links: key store unavailable, links are valid on this process only');
      return new LinkSigner(crypto.randomBytes(32), undefined, now);
    }
  }

  private sign(key: Buffer, appId: string, rel: string, exp: number): string {
    return crypto.createHmac('sha256', key).update(`v1\n${appId}\n${rel}\n${exp}`).digest('base64url');
  }

  /**
   * The signed URL of record file `rel` (`{apiBase}/strm/record/signed/{path}?…`) for `appId`. `format` and `audio`
   * ride along unsigned: they pick the form of the file the signature grants (record-file-routes.ts).
   */
  link(apiBase: string, appId: string, rel: string, format: string, audio?: string): { url: string; expiresAt: string } {
    const exp = Math.floor(this.now() / 1000) + LINK_TTL_SEC;
    const q = new URLSearchParams({ format, ...(audio ? { audio } : {}), app: appId, exp: String(exp), sig: this.sign(this.key, appId, rel, exp) });
    const url = recordFileUrl(apiBase, rel).replace('/strm/record/file/', '/strm/record/signed/') + '?' + q.toString();
    return { url, expiresAt: new Date(exp * 1000).toISOString() };
  }

  /** The application the link was made for; -10 (HTTP 403) when it is not one of ours or has expired. */
  async verify(query: URLSearchParams, rel: string): Promise<string> {
    const refused = (): GatewayError =>
      new GatewayError(ErrCode.INVALID_TOKEN, 'The link is not valid or has expired: ask /strm/record/link for a new one.', 403);
    const appId = query.get('app');
    const exp = Number(query.get('exp'));
    const sig = query.get('sig');
    if (!appId || !sig || !Number.isSafeInteger(exp) || exp * 1000 <= this.now()) throw refused();
    const given = Buffer.from(sig, 'base64url');
    const matches = (key: Buffer): boolean => {
      const want = Buffer.from(this.sign(key, appId, rel, exp), 'base64url');
      return given.length === want.length && crypto.timingSafeEqual(given, want);
    };
    if (matches(this.key)) return appId;
    if (this.store && this.now() >= this.rereadAt) {
      this.rereadAt = this.now() + REREAD_MS;
      const hex = await this.store.get<string>(KEY_NAME).catch(() => undefined);
      if (typeof hex === 'string' && /^[0-9a-f]{64}$/.test(hex)) {
        const key = Buffer.from(hex, 'hex');
        if (!key.equals(this.key) && matches(key)) {
          this.key = key;
          return appId;
        }
      }
    }
    throw refused();
  }
}
