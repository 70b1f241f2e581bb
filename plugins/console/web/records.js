// Stored media: search the application's records, play one in the page's <video> with a seek bar (the MP4 form of
// the file), download it as FLV or MP4. A <video> element and a download link cannot send the API's Basic
// credentials, so both use a signed link the recorder gives the logged-in application (GET /strm/record/link): a
// URL for that one file, valid for 15 minutes, that names no password. When a link expires during a long playback
// the element's next range request fails: the page asks for a new link and goes on from where it was.
'use strict';

/**
 * @param {{ $: (id: string) => any, el: Function, api: () => import('./api.js').Api | null, player: import('./player.js').Player,
 *   showCopy: (url: string) => void, errorText: (err: unknown) => string, bytes: (n: number) => string, withOffset: (v: string) => string }} c
 */
export function setupRecords(c) {
  const { $, el } = c;

  /** a same-origin path for the record's signed link (the answer names the public API address) */
  async function signedPath(rec, format) {
    const [link] = await c.api().recordLink(rec.reqId, format);
    const u = new URL(link.url, location.href);
    return u.pathname + u.search;
  }

  $('records-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    $('records-error').textContent = '';
    const q = { startTm: c.withOffset($('records-from').value), __limit: '200' };
    if ($('records-to').value) q.endTm = c.withOffset($('records-to').value);
    if ($('records-sim').value.trim()) q.simNo = $('records-sim').value.trim();
    const body = $('records').querySelector('tbody');
    body.replaceChildren();
    try {
      const list = await c.api().records(q);
      for (const rec of list) {
        body.append(
          el(
            'tr',
            { 'data-reqid': rec.reqId },
            el('td', {}, rec.reqTm),
            el('td', {}, `${rec.simNo} / ${rec.chan}`),
            el('td', {}, rec.reqId),
            el('td', {}, rec.mediaTyp ?? '?'),
            el('td', {}, c.bytes(rec.sz)),
            el(
              'td',
              {},
              el('button', { type: 'button', className: 'secondary play-record', onclick: () => playRecord(rec) }, 'Play'),
              el('button', { type: 'button', className: 'secondary download', title: 'the file as recorded', onclick: () => download(rec, 'flv') }, 'FLV'),
              el(
                'button',
                { type: 'button', className: 'secondary download-mp4', title: 'plays in browsers and phones', onclick: () => download(rec, 'mp4') },
                'MP4',
              ),
            ),
          ),
        );
      }
      $('records-empty').textContent = list.length ? `${list.length} record(s)` : 'No records in this range.';
    } catch (err) {
      $('records-error').textContent = c.errorText(err);
    }
  });

  async function playRecord(rec) {
    $('player-error').textContent = '';
    $('player-title').textContent = `record ${rec.simNo} / ${rec.chan} · ${rec.reqTm}`;
    c.showCopy('');
    let url;
    try {
      url = await signedPath(rec, 'mp4');
    } catch (err) {
      $('player-error').textContent = c.errorText(err);
      return;
    }
    let renewed = false;
    // no reqId: the player's reqId is a live request's, which the page stops when its request goes
    c.player.playFile(url, {
      // once per link: an expired one is renewed and playback goes on at the same time; another error is shown
      onError: async (at) => {
        if (renewed) return false;
        renewed = true;
        try {
          const fresh = await signedPath(rec, 'mp4');
          renewed = false;
          return { url: fresh, at };
        } catch {
          return false;
        }
      },
    });
  }

  async function download(rec, format) {
    try {
      // `download` makes the click save rather than play; the name is the server's (`{reqId}.flv` / `.mp4`)
      const a = el('a', { href: await signedPath(rec, format), download: '' });
      document.body.append(a);
      a.click();
      a.remove();
    } catch (err) {
      $('records-error').textContent = c.errorText(err);
    }
  }
}
