/**
 * What audio a record file keeps (RecorderConfig.audio) with the audio-aac plugin on the site: by default G.711 as
 * the terminal sent it and G.726 as AAC (FLV cannot hold G.726), 'aac' always AAC, 'as-received' never AAC; and
 * the request's dataTyp picks the tracks.
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { audioUnit, type AccessUnit, type PluginDefinition, type TrackInfo } from '../../../plugin-sdk';
import { createDecoder, createEncoder } from '../../../plugin-sdk/codecs';
import { startTestGateway, stubMediaPlugin, testClip, type TestClip, type TestGateway } from '../../../plugin-sdk/testkit';
import audioAac from '../../audio-aac/index';
import { probeStreams, waitFor } from './helpers';

/** the clip with its G.711A audio re-coded as G.726 at 32 kbit/s (what many terminals send) */
function asG726(clip: TestClip): { units: AccessUnit[]; tracks: TrackInfo[] } {
  const dec = createDecoder(clip.audio!)!;
  const enc = createEncoder({ codec: 'g726', bitsPerSample: 4, packing: 'left' })!;
  const units = clip.units.map((u) =>
    u.kind === 'audio' ? audioUnit({ codec: 'g726', dts: u.dts, timescale: 8000, duration: u.duration, payload: enc.encode(dec.decode(u.payload)) }) : u,
  );
  return { units, tracks: [clip.video, { kind: 'audio', codec: 'g726', sampleRate: 8000, channels: 1, bitsPerSample: 4, packing: 'left' }] };
}

describe('recorder: the audio of record files', function () {
  this.timeout(60_000);
  const clip = testClip({ seconds: 3, audio: true });
  const gateways: TestGateway[] = [];
  after(async () => {
    for (const g of gateways) await g.stop();
  });

  async function gateway(audio?: string): Promise<TestGateway> {
    const stub = stubMediaPlugin();
    const gw = await startTestGateway({
      plugins: [
        { name: stub.name, def: stub.def },
        { name: 'audio-aac', def: audioAac as PluginDefinition<object> },
        { name: 'recorder', config: { timeZone: 'UTC', sizeUpdateSec: 1, ...(audio ? { audio } : {}) } },
      ],
    });
    gateways.push(gw);
    return gw;
  }

  /** records the units on a new channel; the file's streams as ffprobe names them */
  async function record(
    gw: TestGateway,
    chanId: number,
    units: readonly AccessUnit[],
    tracks: readonly TrackInfo[],
    over: Record<string, unknown> = {},
  ): Promise<string[]> {
    const open = await gw.openStream({ simNo: '13800000001', chanId, extra: { record: true, ...over } });
    const pub = gw.bus.get(open.streamName)!.attachPublisher();
    for (const t of tracks) pub.setTrack(t);
    for (const u of units) pub.push(u);
    // the AAC stage answers from its worker: let the last frames come back before the request closes
    await new Promise((r) => setTimeout(r, 500));
    await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    const dir = path.join(gw.dataDir, 'records');
    let file = '';
    await waitFor(() => {
      const found = fs
        .readdirSync(dir, { recursive: true })
        .map(String)
        .find((f) => f.endsWith(`${open.reqId}.flv`));
      if (found) file = path.join(dir, found);
      return !!found;
    }, 'the record file');
    await new Promise((r) => setTimeout(r, 300));
    return probeStreams(file).sort();
  }

  it('auto (default): G.711A kept as sent, G.726 as AAC', async () => {
    const gw = await gateway();
    assert.deepEqual(await record(gw, 1, clip.units, clip.tracks), ['audio:pcm_alaw', 'video:h264']);
    const g726 = asG726(clip);
    assert.deepEqual(await record(gw, 2, g726.units, g726.tracks), ['audio:aac', 'video:h264']);
  });

  it('aac: G.711A as AAC too; as-received: G.726 left out (FLV cannot hold it), video kept', async () => {
    const aac = await gateway('aac');
    assert.deepEqual(await record(aac, 1, clip.units, clip.tracks), ['audio:aac', 'video:h264']);
    const raw = await gateway('as-received');
    const g726 = asG726(clip);
    assert.deepEqual(await record(raw, 1, g726.units, g726.tracks), ['video:h264']);
  });

  it('dataTyp picks the tracks: 1 video only', async () => {
    const gw = await gateway();
    assert.deepEqual(await record(gw, 3, clip.units, clip.tracks, { dataTyp: 1 }), ['video:h264']);
  });
});
