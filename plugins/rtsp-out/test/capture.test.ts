/**
 * Real terminals' streams: a JT/T 1078 capture (shared fixtures) replayed in real time by the ingest's simulator over
 * TCP into jt1078-ingest, played by ffmpeg from rtsp-out's play URL. The player connects first (an early player:
 * DESCRIBE waits for the terminal's first keyframe).
 */
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { startTestGateway, type TestGateway } from '../../../plugin-sdk/testkit';
import { runSimulator } from '../../jt1078-ingest/tools/simulator';
import { fixturePath } from '../../../test/support/paths';
import rtspOut from '../index';
import { recordRtsp } from './helpers';
import { probeFile } from '../../../test/support/ffprobe';

const CAPTURES = [
  { file: 'jt1078/gojt808-d1-h264-g711a-2013.bin', sim: '156987000796', chan: 1, size: '720x576', audio: 'pcm_alaw', transport: 'tcp' },
  { file: 'jt1078/glaciall-cif-h264-2013.bin', sim: '013800138000', chan: 1, size: '352x288', audio: undefined, transport: 'udp' },
] as const;

describe('rtsp-out: JT/T 1078 captures replayed by a terminal, played over RTSP', function () {
  this.timeout(90_000);
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({
      plugins: [
        { name: 'jt1078-ingest', config: { livePort2013: 0, livePort2019: 0, replayPort2013: 0, replayPort2019: 0 } },
        { name: 'rtsp-out', def: rtspOut },
      ],
    });
  });
  after(() => gw.stop());

  for (const cap of CAPTURES) {
    it(`${cap.file.replace('jt1078/', '')} over ${cap.transport.toUpperCase()}: ffmpeg decodes ${cap.size} H.264${cap.audio ? ' and G.711A as PCMA' : ''}`, async () => {
      const open = await gw.openStream({ simNo: cap.sim, chanId: cap.chan, fmt: 4 });
      assert.match(open.playUrl, new RegExp(`^rtsp://127\\.0\\.0\\.1:${gw.ports['rtsp-out.port']}/live/${cap.sim.replace(/^0+/, '')}_${cap.chan}_1\\?reqId=`));
      // the player first: it is held until the terminal's first keyframe
      const recording = recordRtsp(open.playUrl, cap.transport, 4);
      await new Promise((r) => setTimeout(r, 300));
      const abort = new AbortController();
      const terminal = runSimulator({
        file: fixturePath(cap.file),
        port: gw.ports['jt1078-ingest.livePort2013'],
        speed: 1,
        loop: true,
        signal: abort.signal,
      }).catch(() => undefined);
      const rec = await recording;
      abort.abort();
      await terminal;
      assert.equal(rec.code, 0, rec.stderr);
      const p = await probeFile(rec.file);
      fs.rmSync(rec.file, { force: true });
      const v = p.streams.find((s) => s.codec_type === 'video');
      assert.equal(v?.codec_name, 'h264');
      assert.equal(`${v?.width}x${v?.height}`, cap.size);
      assert.ok(Number(v?.nb_read_frames) >= 25, `frames: ${v?.nb_read_frames}`);
      assert.equal(p.streams.find((s) => s.codec_type === 'audio')?.codec_name, cap.audio);
      assert.equal(p.decodeErrors, '');
      await gw.api('POST', '/strm/close', { reqIds: [open.reqId] });
    });
  }
});
