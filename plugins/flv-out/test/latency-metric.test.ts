import assert from 'node:assert/strict';
import * as net from 'node:net';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestGateway, type TestGateway } from '../../../plugin-sdk/testkit';
import { fixturePath } from '../../../test/support/paths';
import { FlvPlayCounter } from '../../../test/bench/support/flv-play-counter';
import { bucketsOf, parsePrometheus, sumOf } from '../../../test/bench/support/process-probe';
import { SynthTerminal, synthesise } from '../../../test/bench/support/synth-terminals';

describe('flv-out: added-latency metric', () => {
  let gw: TestGateway | undefined;
  const sockets: net.Socket[] = [];
  afterEach(async () => {
    for (const s of sockets) s.destroy();
    sockets.length = 0;
    await gw?.stop();
    gw = undefined;
  });

  it('observes every frame that reaches players, from its arrival to its tags written, in seconds', async () => {
    gw = await startTestGateway({
      plugins: [
        { name: 'jt1078-ingest', config: { udp: false } },
        { name: 'flv-out', config: { schemes: ['http'] } },
      ],
    });
    const open = await gw.api('POST', '/strm/open', { user: { token: 't' }, typ: 'live', simNo: '13900000001', chanId: 1, keepIntv: 60 });
    assert.equal(open.json.errCode, 0, JSON.stringify(open.json));
    const r = open.json.data[0];
    const url = new URL(r.playUrl);

    const player = net.connect(Number(url.port), '127.0.0.1');
    sockets.push(player);
    await once(player, 'connect');
    const counter = new FlvPlayCounter();
    player.on('data', (d: Buffer) => counter.push(d));
    player.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);

    const push = net.connect(r.port, '127.0.0.1');
    sockets.push(push);
    await once(push, 'connect');
    const term = new SynthTerminal('13900000001', push, synthesise(fixturePath('jt1078/glaciall-cif-h264-2013.bin'), 0.2), 1 << 20);
    term.start(0);
    const sent = term.sendDue(2000, 1000); // two seconds of media at once

    const until = Date.now() + 15_000;
    while (counter.videoTags < 20 && counter.error === undefined && Date.now() < until) await sleep(20);
    assert.equal(counter.error, undefined);
    assert.ok(counter.videoTags >= 20, `player got ${counter.videoTags} video tags of ${sent} frames sent`);

    const res = await fetch(`${gw.baseUrl}/metrics`);
    const metrics = parsePrometheus(await res.text());
    const b = bucketsOf(metrics, 'gw_flv_out_added_latency_seconds');
    assert.ok(b, 'the histogram is exposed');
    const count = b.counts[b.counts.length - 1];
    // one observation per frame that produced tags; the player saw a sequence header tag on top of its frames
    assert.ok(count >= counter.videoTags - 1 && count <= sent, `count ${count}, player video tags ${counter.videoTags}, sent ${sent}`);
    const sum = sumOf(metrics, 'gw_flv_out_added_latency_seconds_sum');
    assert.ok(sum > 0 && sum / count < 1, `mean ${sum / count} s`);
    assert.equal(sumOf(metrics, 'gw_flv_out_tags_total', { type: 'video' }) >= counter.videoTags, true);
  });
});
