import assert from 'node:assert/strict';
import { MemoryDirectory } from '../../core/directory/memory-directory';
import type { Member, RequestEntry } from '../../core/directory/directory';

const me: Member = { nodeId: 'solo', epoch: 'e1', worker: 0 };

function entry(reqId: string, appId: string, keepDeadline = Date.now() + 60_000): RequestEntry {
  return {
    reqId,
    appId,
    nodeId: me.nodeId,
    epoch: me.epoch,
    worker: me.worker,
    channel: '013800000001_1',
    fmt: 1,
    ctrl: false,
    keepIntv: 30,
    keepDeadline,
    notice: { appId, last: true, payload: { instId: 'i', act: 'closed', reqId, typ: 'live', simNo: '013800000001', chan: 1, mediaTyp: 'av' } },
  };
}

describe('fleet directory in process (memory)', () => {
  let dir: MemoryDirectory;
  beforeEach(async () => {
    dir = new MemoryDirectory(me);
    await dir.start({ apiBase: 'http://solo.test:8080', hosts: ['solo.test'] });
  });
  afterEach(async () => {
    await dir.stop();
  });

  it('is always available, sees itself as the only live node, and its own incarnation as live', async () => {
    assert.equal(dir.kind, 'memory');
    assert.equal(dir.available, true);
    dir.setStreamCount(3);
    assert.deepEqual(dir.liveNodes(), [{ nodeId: 'solo', epoch: 'e1', apiBase: 'http://solo.test:8080', hosts: ['solo.test'], streams: 3 }]);
    assert.equal(await dir.isLive(me), true);
    assert.equal(await dir.isLive({ ...me, epoch: 'e0' }), false);
    assert.equal(await dir.isLive({ ...me, nodeId: 'other' }), false);
    assert.equal(await dir.fleetSecret(), await dir.fleetSecret());
  });

  it('claims: its own node owns what it claims; lookup names owner and SIM holder; unhold releases only a held claim', async () => {
    const ch1 = { sim: '013800000001', chan: 1 };
    const ch2 = { sim: '013800000001', chan: 2 };
    assert.deepEqual(await dir.lookup(ch1), { owner: undefined, simHolder: undefined });
    assert.deepEqual(await dir.claim(ch1), { ok: true });
    assert.deepEqual(await dir.claim(ch1), { ok: true }, 'claiming again is fine');
    // the same node may hold several channels of a SIM
    assert.deepEqual(await dir.claim(ch2), { ok: true });
    assert.deepEqual(await dir.lookup(ch1), { owner: me, simHolder: me });
    assert.deepEqual(await dir.lookup({ sim: '013800000001', chan: 3 }), { owner: undefined, simHolder: me });
    assert.deepEqual(await dir.lookup({ sim: '013800000002', chan: 1 }), { owner: undefined, simHolder: undefined });

    // unhold of a channel not held does nothing
    dir.unhold(ch1);
    assert.deepEqual((await dir.lookup(ch1)).owner, me);
    dir.hold(ch1);
    dir.unhold(ch1);
    assert.equal((await dir.lookup(ch1)).owner, undefined);
    assert.deepEqual((await dir.lookup(ch1)).simHolder, me, 'channel 2 is still claimed');
    // hold alone makes the claim
    dir.hold(ch1);
    assert.deepEqual((await dir.lookup(ch1)).owner, me);
    dir.unhold(ch1);
    dir.unhold(ch1);
    assert.equal((await dir.lookup(ch1)).owner, undefined);
  });

  it('reserve: self / other for an id held, a per-application cap, find, touch and forget', async () => {
    assert.equal(await dir.reserve(entry('r1', 'app1'), 2), 'ok');
    assert.equal(await dir.reserve(entry('r1', 'app1'), 2), 'self');
    assert.equal(await dir.reserve(entry('r1', 'app2'), 2), 'other');
    assert.equal(await dir.reserve(entry('r2', 'app1'), 2), 'ok');
    assert.equal(await dir.reserve(entry('r3', 'app1'), 2), 'cap');
    // the cap is per application
    assert.equal(await dir.reserve(entry('r3', 'app2'), 2), 'ok');
    assert.equal(await dir.reserve(entry('r3', 'app1'), 2), 'other');

    const [e1, e2, none] = await dir.find('app1', ['r1', 'r2', 'r9']);
    assert.equal(e1?.reqId, 'r1');
    assert.equal(e2?.appId, 'app1');
    assert.equal(none, undefined);
    assert.deepEqual(await dir.find('app2', ['r1']), [undefined], 'another application does not see it');

    dir.touch('app1', ['r1'], 12345);
    assert.equal((await dir.find('app1', ['r1']))[0]?.keepDeadline, 12345);
    dir.touch('app2', ['r1'], 999);
    assert.equal((await dir.find('app1', ['r1']))[0]?.keepDeadline, 12345, 'another application cannot touch it');
    // find hands out copies
    (await dir.find('app1', ['r1']))[0]!.keepDeadline = 1;
    assert.equal((await dir.find('app1', ['r1']))[0]?.keepDeadline, 12345);

    // forget by another application does nothing
    dir.forget('app2', 'r1');
    assert.equal(await dir.reserve(entry('r4', 'app1'), 2), 'cap');
    dir.forget('app1', 'r1');
    assert.deepEqual(await dir.find('app1', ['r1']), [undefined]);
    assert.equal(await dir.reserve(entry('r4', 'app1'), 2), 'ok', 'the place came back');
    // the forgotten id is free, for another application even (app2: r3, then r1 = its cap of 2)
    assert.equal(await dir.reserve(entry('r1', 'app2'), 2), 'ok');
    assert.equal(await dir.reserve(entry('r5', 'app2'), 2), 'cap');
  });
});
