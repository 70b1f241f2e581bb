/**
 * Formats shared between the plugins of one gateway by a key that names their bytes (MediaBus.shareFormat): the
 * recorder gets flv-out's FLV format when it asks for the same options, so one encoder per stream serves both.
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import { CoreMediaBus } from '../../core/bus/media-bus';
import { defineFormat } from '../../plugin-sdk/bus';

const quiet = pino({ level: 'silent' });
const newBus = (): CoreMediaBus =>
  new CoreMediaBus({ maxGopBytes: 512 * 1024, maxQueueBytes: 200 * 1024, maxStreamBytes: 1024 * 1024, readerDropAfterMs: 30_000 }, quiet, () => 0);

describe('media bus: formats shared by key', () => {
  it('a format shared under a key is the one other plugins get for it, until its plugin stops', () => {
    const bus = newBus();
    const out = bus.viewFor('out', quiet);
    const rec = bus.viewFor('rec', quiet);
    const theirs = defineFormat('theirs', () => ({ encode: () => 1 }));
    out.shareFormat('k', theirs);
    let made = 0;
    const make = () => {
      made++;
      return defineFormat('mine', () => ({ encode: () => 2 }));
    };
    assert.equal(rec.sharedFormat('k', make), theirs);
    assert.equal(made, 0, 'nothing made while one is shared');
    const other = rec.sharedFormat('other', make);
    assert.equal(rec.sharedFormat('other', make), other, 'made once, then shared');
    assert.equal(made, 1);
    assert.notEqual(newBus().sharedFormat('k', make), theirs, "another gateway's bus shares its own");
    out.release();
    assert.notEqual(rec.sharedFormat('k', make), theirs, 'withdrawn with its plugin');
  });

  it('a plugin that stops leaves a key another plugin took since', () => {
    const bus = newBus();
    const a = bus.viewFor('a', quiet);
    const b = bus.viewFor('b', quiet);
    const fa = defineFormat('a', () => ({ encode: () => 1 }));
    const fb = defineFormat('b', () => ({ encode: () => 2 }));
    a.shareFormat('k', fa);
    b.shareFormat('k', fb);
    a.release();
    assert.equal(
      bus.sharedFormat('k', () => fa),
      fb,
    );
  });
});
