// The console page: log in with an application's Basic credentials, then watch its requests (/strm/status, polled),
// open and play channels, keep and close them, find and play stored media, and see health and a few metrics.
// Everything goes through the REST API as that application, so the page sees exactly what it may see.
'use strict';
import { Api, ApiError } from './api.js';
import { age, bitrate, bytes, codecs, el, localInput, metricSums, withOffset } from './format.js';
import { Player } from './player.js';
import { setupRecords } from './records.js';
import { Talk } from './talk.js';

const $ = (id) => document.getElementById(id);
const REFRESH_MS = Math.max(1, Number(document.querySelector('meta[name="gw-refresh-sec"]')?.content) || 2) * 1000;

/** @type {Api | null} */
let api = null;
let timer = 0;
/** per reqId: the last bytes seen and when, for bit rates */
const lastBytes = new Map();
/** requests this page opened: kept alive while the page shows them (the user may still close them) */
const ours = new Set();
const HEALTH_EVERY_MS = 10_000;
let lastHealthAt = -Infinity;
/** a token for the play URLs of this page's opens: random, in memory only */
const userToken = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
const player = new Player($('video'), (msg) => {
  $('player-error').textContent = msg;
});
const talk = new Talk((s) => {
  const secs = (n) => `${(n / 8000).toFixed(1)} s`;
  $('talk-state').textContent = `${s.closed ? s.closed : talk.active ? 'talking' : 'stopped'} · sent ${secs(s.sent)} · heard ${secs(s.heard)}`;
  $('talk-button').textContent = talk.active ? 'Stop talking' : 'Talk';
});
/** the intercom request the player panel shows: { reqId, taUrl } */
let talkTarget = null;

$('site').textContent = document.querySelector('meta[name="gw-site"]')?.content ?? '';

function errorText(err) {
  if (err instanceof ApiError) return `${err.message} (errCode ${err.errCode})`;
  return String(err && err.message ? err.message : err);
}

// --- login ---------------------------------------------------------------------------------------------------
$('login-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const user = $('login-user').value;
  const candidate = new Api(user, $('login-password').value);
  $('login-error').textContent = '';
  try {
    await candidate.status();
  } catch (err) {
    $('login-error').textContent = err instanceof ApiError && err.status === 401 ? 'Wrong user or password.' : errorText(err);
    return;
  }
  // the password stays only inside the Api object: the field is cleared
  $('login-password').value = '';
  api = candidate;
  $('who').textContent = user;
  $('login').hidden = true;
  $('app').hidden = false;
  $('logout').hidden = false;
  const now = new Date();
  $('records-from').value = localInput(new Date(now.getTime() - 24 * 3600 * 1000));
  await refresh();
});

$('logout').addEventListener('click', () => {
  api = null;
  clearTimeout(timer);
  player.stop();
  endTalk();
  ours.clear();
  lastBytes.clear();
  lastHealthAt = -Infinity;
  $('app').hidden = true;
  $('logout').hidden = true;
  $('login').hidden = false;
  $('who').textContent = '';
});

// --- requests, refreshed ---------------------------------------------------------------------------------------
async function refresh() {
  clearTimeout(timer);
  if (!api) return;
  try {
    const list = await api.status();
    $('streams-error').textContent = '';
    renderStreams(list);
    await keepOurs(list);
  } catch (err) {
    $('streams-error').textContent = errorText(err);
  }
  // health and metrics change slowly, and a scrape costs the gateway more than a status: every 10 s is plenty
  if (performance.now() - lastHealthAt >= HEALTH_EVERY_MS) {
    lastHealthAt = performance.now();
    await renderHealth().catch(() => undefined);
  }
  if (api) timer = setTimeout(refresh, REFRESH_MS);
}

function rates(r) {
  const now = performance.now();
  const prev = lastBytes.get(r.reqId);
  lastBytes.set(r.reqId, { at: now, bytesIn: r.bytesIn, bytesOut: r.bytesOut });
  if (!prev || now - prev.at < 200) return {};
  const s = (now - prev.at) / 1000;
  return { in: ((r.bytesIn - prev.bytesIn) * 8) / s, out: ((r.bytesOut - prev.bytesOut) * 8) / s };
}

function renderStreams(list) {
  const body = $('streams').querySelector('tbody');
  body.replaceChildren();
  const seen = new Set();
  for (const r of list) {
    seen.add(r.reqId);
    const rt = rates(r);
    const flags = Object.entries(r.flags || {})
      .map(([k, v]) => `${k}: ${v}`)
      .join(', ');
    body.append(
      el(
        'tr',
        { 'data-reqid': r.reqId },
        // generated ids are long: the start tells them apart, the tooltip has the whole id and the stream
        el('td', { title: `${r.reqId} · ${r.stream}` }, r.reqId.length > 12 ? `${r.reqId.slice(0, 10)}…` : r.reqId),
        el('td', {}, `${r.simNo} / ${r.chanId}`),
        el('td', {}, r.typ),
        el('td', {}, String(r.fmt)),
        el('td', { className: r.ready ? 'yes ready' : 'no ready' }, r.ready ? 'ready' : 'waiting'),
        el('td', {}, codecs(r.codecs)),
        el('td', { title: bytes(r.bytesIn) }, bitrate(rt.in)),
        el('td', { title: bytes(r.bytesOut) }, bitrate(rt.out)),
        el('td', { className: 'players' }, String(r.players)),
        el('td', {}, r.ctrl ? 'yes' : 'no'),
        el('td', {}, age(Date.now() - Date.parse(r.openedAt))),
        el('td', {}, flags),
        el(
          'td',
          {},
          el('button', { type: 'button', className: 'secondary play', onclick: () => playRequest(r) }, 'Play'),
          el('button', { type: 'button', className: 'secondary keep', onclick: () => act('keep', r.reqId) }, 'Keep'),
          el('button', { type: 'button', className: 'danger close', onclick: () => act('close', r.reqId) }, 'Close'),
        ),
      ),
    );
  }
  for (const id of lastBytes.keys()) if (!seen.has(id)) lastBytes.delete(id);
  for (const id of ours) if (!seen.has(id)) ours.delete(id);
  // a request that closed while playing: the player has nothing more to show
  if (talkTarget && !seen.has(talkTarget.reqId)) {
    endTalk();
    $('player-title').textContent = '(closed)';
  }
  if (player.current?.reqId && !seen.has(player.current.reqId)) {
    player.stop();
    $('player-stats').textContent = '';
    $('player-title').textContent = '(closed)';
  }
  $('streams-empty').hidden = list.length > 0;
  $('streams-updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
}

/** this page's own requests are kept while it shows them: a keep when half the interval is gone */
async function keepOurs(list) {
  const due = list.filter((r) => ours.has(r.reqId) && Date.parse(r.keepDeadline) - Date.now() < (r.keepIntv * 1000) / 2).map((r) => r.reqId);
  if (due.length) await api.keep(due);
}

async function act(what, reqId) {
  try {
    const [r] = what === 'keep' ? await api.keep([reqId]) : await api.close([reqId]);
    $('streams-error').textContent = what === 'keep' ? (r.keep ? '' : `${reqId}: not kept`) : r.closed ? '' : `${reqId}: not closed`;
    if (what === 'close') ours.delete(reqId);
  } catch (err) {
    $('streams-error').textContent = errorText(err);
  }
  await refresh();
}

// --- open and play ---------------------------------------------------------------------------------------------
$('open-typ').addEventListener('change', () => {
  // replay's dataTyp values mean other things (decisions.md): 0 a+v, 1 audio, 2 video
  const live = $('open-typ').value === 'live';
  const labels = live ? ['0 audio+video', '1 video', '2 intercom', '3 listen'] : ['0 audio+video', '1 audio', '2 video'];
  $('open-datatyp').replaceChildren(...labels.map((l, i) => el('option', { value: String(i) }, l)));
});

// record: true is accepted with fmt 0 only (the open answers -7 otherwise): the box follows the format
$('open-fmt').addEventListener('change', () => {
  const flv = $('open-fmt').value === '0';
  $('open-record').disabled = !flv;
  if (!flv) $('open-record').checked = false;
});

$('open-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('open-error').textContent = '';
  const body = {
    user: { token: userToken, userId: `console:${api.user}` },
    typ: $('open-typ').value,
    simNo: $('open-sim').value.trim(),
    chanId: Number($('open-chan').value),
    fmt: $('open-fmt').value === 'webrtc' ? 0 : Number($('open-fmt').value),
    dataTyp: Number($('open-datatyp').value),
    record: $('open-record').checked,
  };
  const webrtc = $('open-fmt').value === 'webrtc';
  // the page plays FLV in the browser: a plain ws:// or http:// URL when the site serves no TLS for it
  if (webrtc) body.scheme = 'webrtc';
  else if (body.fmt === 0) body.scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  try {
    const r = await api.open(body);
    ours.add(r.reqId);
    playRequest({ reqId: r.reqId, fmt: body.fmt, webrtc, dataTyp: body.dataTyp, playUrl: r.playUrl, taUrl: r.taUrl, simNo: body.simNo, chanId: body.chanId });
  } catch (err) {
    if (!webrtc && err instanceof ApiError && err.errCode === -7 && /`scheme`/.test(err.message)) {
      // this site's FLV output serves other schemes: let the gateway choose
      delete body.scheme;
      try {
        const r = await api.open(body);
        ours.add(r.reqId);
        playRequest({ reqId: r.reqId, fmt: body.fmt, playUrl: r.playUrl, taUrl: r.taUrl, simNo: body.simNo, chanId: body.chanId });
      } catch (err2) {
        $('open-error').textContent = errorText(err2);
      }
    } else {
      $('open-error').textContent = errorText(err);
    }
  }
  await refresh();
});

function showCopy(url) {
  $('copy-url').hidden = !url;
  $('copy-url-text').value = url || '';
}

$('copy-url-button').addEventListener('click', async () => {
  $('copy-url-text').select();
  try {
    await navigator.clipboard.writeText($('copy-url-text').value);
  } catch {
    /* selected: Ctrl+C works */
  }
});

/** counts play starts: a wait for media gives up when another play started meanwhile */
let playSeq = 0;

async function playRequest(r) {
  const seq = ++playSeq;
  $('player-error').textContent = '';
  $('player-title').textContent = `${r.simNo} / ${r.chanId} · ${r.reqId}`;
  showCopy(r.playUrl);
  player.stop();
  endTalk();
  if (r.webrtc) {
    // WebRTC: intercom talks on the same session (the Talk button starts it with the microphone); a play starts now
    if (r.dataTyp === 2 && r.typ !== 'replay') {
      talkTarget = { reqId: r.reqId, whepUrl: r.playUrl };
      $('talk-box').hidden = false;
      $('talk-state').textContent = 'press Talk to speak over WebRTC (the microphone is asked for then)';
      $('player-title').textContent += ' · intercom over WebRTC';
      return;
    }
    await player.playWebrtc(r.playUrl, { reqId: r.reqId, video: r.dataTyp === 0 || r.dataTyp === 1 || r.dataTyp === undefined });
    return;
  }
  if (r.taUrl) {
    // intercom (live dataTyp 2): both directions go over the taUrl socket, the terminal's voice included, so no
    // player runs beside it (it would play that voice a second time)
    talkTarget = { reqId: r.reqId, taUrl: r.taUrl };
    // the talk socket's URL is what another client (a dispatcher's softphone) would need
    showCopy(r.taUrl);
    $('talk-box').hidden = false;
    $('talk-state').textContent = 'press Talk to speak (the microphone is asked for then)';
    $('player-title').textContent += ' · intercom';
    return;
  }
  // RTSP: no browser plays it; the URL goes to VLC, ffplay or an NVR
  if (r.fmt === 4) return;
  // mpegts.js sets up its MediaSource from what the start of the stream says, and cannot add an audio track
  // later: wait until the stream is ready and its tracks are known, then tell it whether audio comes
  let entry;
  try {
    entry = await waitForTracks(r.reqId, () => seq !== playSeq);
  } catch (err) {
    if (seq === playSeq) $('player-error').textContent = errorText(err);
    return;
  }
  if (!entry || seq !== playSeq) return;
  const hasAudio = entry.mediaTyp !== 'v' && (entry.codecs || []).some((c) => c.kind === 'audio');
  if (r.fmt === 1) player.playHls(r.playUrl, { reqId: r.reqId });
  else player.playFlv(r.playUrl, { live: true, reqId: r.reqId, hasAudio });
}

/** the request's status entry once it is ready (and, for audio it should carry, its audio track is known) */
async function waitForTracks(reqId, superseded) {
  const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
  const deadline = Date.now() + 60_000;
  let readySince = 0;
  $('player-stats').textContent = "waiting for the terminal's media…";
  for (;;) {
    if (superseded() || !api) return undefined;
    const [entry] = await api.call('GET', `/strm/status?reqId=${encodeURIComponent(reqId)}`);
    if (!entry) throw new Error('The request is closed.');
    if (entry.ready) {
      readySince ||= Date.now();
      const audioKnown = entry.mediaTyp === 'v' || (entry.codecs || []).some((c) => c.kind === 'audio');
      // audio may start a moment after the first keyframe; a stream without it plays as video after 2 s
      if (audioKnown || Date.now() - readySince > 2000) return entry;
    }
    if (Date.now() > deadline) throw new Error('No media from the terminal within 60 s.');
    await sleep(300);
  }
}

function endTalk() {
  talk.stop();
  talkTarget = null;
  $('talk-box').hidden = true;
  $('talk-button').textContent = 'Talk';
}

$('talk-button').addEventListener('click', async () => {
  if (talkTarget?.whepUrl && player.current) {
    player.stop();
    $('talk-button').textContent = 'Talk';
    $('talk-state').textContent += ' · ended';
    return;
  }
  if (talk.active) {
    talk.stop();
    $('talk-button').textContent = 'Talk';
    $('talk-state').textContent += ' · ended';
    return;
  }
  if (!talkTarget) return;
  if (!navigator.mediaDevices?.getUserMedia) {
    $('player-error').textContent = 'The microphone needs a secure page: open the console over HTTPS (or on localhost).';
    return;
  }
  $('player-error').textContent = '';
  if (talkTarget.whepUrl) {
    await player.playWebrtc(talkTarget.whepUrl, { reqId: talkTarget.reqId, talk: true, video: false });
    $('talk-state').textContent = player.current ? 'talking over WebRTC' : 'not connected';
    $('talk-button').textContent = player.current ? 'Stop talking' : 'Talk';
    return;
  }
  try {
    await talk.start(talkTarget.taUrl);
    $('talk-button').textContent = 'Stop talking';
    $('talk-state').textContent = 'talking';
  } catch (err) {
    talk.stop();
    $('player-error').textContent = errorText(err);
  }
});

$('player-stop').addEventListener('click', () => {
  playSeq++;
  endTalk();
  player.stop();
  $('player-stats').textContent = '';
  $('player-title').textContent = '';
  showCopy('');
});

setInterval(() => {
  const s = player.stats();
  // nothing playing: leave the line to whoever wrote it (a wait for media, a stop)
  if (!s.playing) return;
  const audio = s.audioBytes === undefined ? '' : ` · audio decoded ${bytes(s.audioBytes)}`;
  $('player-stats').textContent =
    `${s.width}x${s.height} · ${s.time.toFixed(1)} s · ${s.frames} frames (${s.dropped} dropped)${audio} · buffer ${s.buffered.toFixed(1)} s`;
}, 500);

// --- stored media (records.js) ---------------------------------------------------------------------------------
setupRecords({ $, el, api: () => api, player, showCopy, errorText, bytes, withOffset });

// --- health and metrics ----------------------------------------------------------------------------------------
let lastCpu = null;
async function renderHealth() {
  if (!api) return;
  const h = await api.health();
  const rows = [['status', h.status]];
  if (h.requests !== undefined) rows.push(['requests / streams', `${h.requests} / ${h.streams}`]);
  for (const [part, why] of Object.entries(h.degraded || {})) rows.push([`degraded: ${part}`, why]);
  const text = await api.metrics();
  if (text === null) {
    rows.push(['metrics', 'not readable by this application']);
  } else {
    const m = metricSums(text);
    const pick = (suffix) => [...m.entries()].find(([k]) => k.endsWith(suffix))?.[1];
    const cpu = pick('process_cpu_seconds_total');
    if (cpu !== undefined) {
      const now = performance.now();
      if (lastCpu) rows.push(['CPU', `${(((cpu - lastCpu.cpu) / ((now - lastCpu.at) / 1000)) * 100).toFixed(1)} %`]);
      lastCpu = { cpu, at: now };
    }
    const rss = pick('process_resident_memory_bytes');
    if (rss !== undefined) rows.push(['memory (RSS)', bytes(rss)]);
    const ingest = pick('jt1078_ingest_bytes_total');
    if (ingest !== undefined) rows.push(['ingest total', bytes(ingest)]);
    const auth = pick('core_auth_failures_total');
    if (auth !== undefined) rows.push(['failed logins', String(auth)]);
  }
  $('health').replaceChildren(...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
}
