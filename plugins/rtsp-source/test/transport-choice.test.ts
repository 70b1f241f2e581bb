/**
 * The transport choice on its own: the order auto tries, what the memory keeps and forgets, the bound of the
 * memory, the failure messages, and which SETUP answers refuse a transport.
 */
import assert from 'node:assert/strict';
import pino from 'pino';
import { RtspHeaders, type RtspResponse } from '../../../plugin-sdk/rtsp';
import { SourceError } from '../src/errors';
import { setupRefusal, TransportChoice, TransportMemory, type ChoiceOptions } from '../src/transport-choice';

const silent = pino({ level: 'silent' });

function choice(mode: ChoiceOptions['mode'], memory = new TransportMemory(), more: Partial<ChoiceOptions> = {}) {
  const events: string[] = [];
  const c = new TransportChoice({
    mode,
    forcedBy: 'site',
    host: 'cam:554',
    tls: false,
    memory,
    log: silent,
    shown: 'rtsp://cam/s',
    events: { fallback: (from, to, reason) => events.push(`${from}->${to} ${reason}`), used: (t, how) => events.push(`used ${t} ${how}`) },
    ...more,
  });
  return { c, events, memory };
}

const refused = new SourceError('transport', '461 Unsupported Transport to SETUP');
const noRtp = new SourceError('no_rtp', 'no RTP within 3 s of PLAY');

function answer(status: number, reason: string, transport?: string): RtspResponse {
  const headers = new RtspHeaders();
  if (transport !== undefined) headers.append('Transport', transport);
  return { status, reason, version: 'RTSP/1.0', headers, body: Buffer.alloc(0) };
}

describe('rtsp-source: the transport choice', () => {
  it('auto: TCP first; refused, UDP; played, UDP remembered for the host and used first next time', () => {
    const { c, events, memory } = choice('auto');
    assert.equal(c.transport, 'tcp');
    assert.equal(c.probe, false);
    assert.equal(c.failed(refused), undefined);
    assert.equal(c.transport, 'udp');
    assert.equal(c.probe, true, 'UDP in auto must bring RTP');
    c.played();
    assert.equal(memory.get('cam:554'), 'udp');
    assert.equal(c.transport, 'udp', 'the next round starts where it played');
    c.played();
    assert.deepEqual(events, ['tcp->udp refused', 'used udp tried', 'used udp remembered']);
  });

  it('auto: a remembered transport that fails is forgotten, and the other one is tried', () => {
    const memory = new TransportMemory();
    memory.set('cam:554', 'udp');
    const { c, events } = choice('auto', memory);
    assert.equal(c.transport, 'udp');
    assert.equal(c.failed(noRtp), undefined);
    assert.equal(memory.get('cam:554'), undefined);
    assert.equal(c.transport, 'tcp');
    c.played();
    assert.equal(memory.get('cam:554'), 'tcp');
    assert.deepEqual(events, ['udp->tcp no_rtp', 'used tcp tried']);
  });

  it('auto: each transport once a round; both failing names both, and the next round starts at TCP again', () => {
    const { c } = choice('auto');
    c.failed(refused);
    const e = c.failed(noRtp);
    assert.ok(e);
    assert.equal(e.kind, 'no_rtp');
    assert.equal(e.message, 'TCP refused (461 Unsupported Transport to SETUP), then UDP brought no RTP in 3 s');
    assert.equal(c.transport, 'tcp');
  });

  it("auto: a failure that is not the transport's ends the round, with what came before", () => {
    const first = choice('auto').c;
    const e0 = first.failed(new SourceError('auth', '401 to DESCRIBE'));
    assert.equal(e0?.message, '401 to DESCRIBE');
    first.failed(refused);
    const e1 = first.failed(new SourceError('timeout', 'no answer to SETUP within 3 s'));
    assert.equal(e1?.kind, 'timeout', 'the errCode follows the last failure (-5 here)');
    assert.equal(e1?.message, 'TCP refused (461 Unsupported Transport to SETUP), then over UDP: no answer to SETUP within 3 s');
  });

  it('auto over rtsps:// does not fall back to UDP (its RTP would not be encrypted)', () => {
    const { c, events } = choice('auto', new TransportMemory(), { tls: true });
    const e = c.failed(refused);
    assert.match(e?.message ?? '', /^TCP refused \(461 Unsupported Transport to SETUP\); UDP is not tried for rtsps:\/\//);
    assert.deepEqual(events, []);
  });

  it('forced: no fallback, no probe, no memory; the hint names who forced it', () => {
    const memory = new TransportMemory();
    memory.set('cam:554', 'udp');
    const site = choice('tcp', memory).c;
    assert.equal(site.transport, 'tcp', 'a forced transport ignores the memory');
    assert.match(site.failed(refused)?.message ?? '', /; this site forces tcp \(rtsp-source's transport\)/);
    const req = choice('udp', memory, { forcedBy: 'request' }).c;
    assert.equal(req.probe, false);
    assert.match(req.failed(refused)?.message ?? '', /^UDP refused \(461 Unsupported Transport to SETUP\); the open forces udp \(rtspSrc\.transport\)/);
    choice('tcp', memory).c.played();
    assert.equal(memory.get('cam:554'), 'udp', 'a forced tcp that played is not remembered for auto');
  });

  it('the memory keeps at most its bound of hosts, forgetting the one that played longest ago', () => {
    const m = new TransportMemory(3);
    m.set('a:554', 'tcp');
    m.set('b:554', 'udp');
    m.set('c:554', 'tcp');
    m.set('a:554', 'tcp'); // played again: now the newest
    m.set('d:554', 'udp');
    assert.equal(m.size, 3);
    assert.equal(m.get('b:554'), undefined);
    assert.deepEqual(
      ['a:554', 'c:554', 'd:554'].map((h) => m.get(h)),
      ['tcp', 'tcp', 'udp'],
    );
    const big = new TransportMemory();
    for (let i = 0; i < 10_050; i++) big.set(`10.0.${i >> 8}.${i & 255}:554`, 'tcp');
    assert.equal(big.size, 10_000);
    assert.equal(big.get('10.0.0.0:554'), undefined);
    assert.equal(big.get('10.0.39.65:554'), 'tcp');
  });

  it('which SETUP answers refuse the transport asked for', () => {
    assert.equal(setupRefusal('tcp', answer(461, 'Unsupported Transport'), undefined), '461 Unsupported Transport to SETUP');
    assert.equal(setupRefusal('tcp', answer(500, 'Oops pw-9'), 'pw-9'), '500 Oops *** to SETUP');
    assert.equal(
      setupRefusal('tcp', answer(200, 'OK', 'RTP/AVP;unicast;client_port=5000-5001;server_port=6000-6001'), undefined),
      'SETUP answered with Transport RTP/AVP;unicast;client_port=5000-5001;server_port=6000-6001, not interleaved',
    );
    assert.equal(setupRefusal('tcp', answer(200, 'OK', 'RTP/AVP/TCP;unicast;interleaved=2-3'), undefined), undefined);
    assert.equal(setupRefusal('tcp', answer(200, 'OK'), undefined), undefined, 'no Transport header: taken as agreeing');
    assert.equal(setupRefusal('udp', answer(200, 'OK', 'RTP/AVP;unicast;client_port=5000-5001'), undefined), undefined);
    assert.match(setupRefusal('udp', answer(200, 'OK', 'RTP/AVP/TCP;unicast;interleaved=0-1'), undefined) ?? '', /, interleaved$/);
  });
});
