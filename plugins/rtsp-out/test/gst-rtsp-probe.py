# An RTSP client we did not write: GStreamer's rtspsrc (python3-gi), each stream through its depayloader and parser
# into a fakesink counting buffers (no decoder: Debian's GStreamer has none for H.264 4:4:4). Prints {"streams": [{"caps", "buffers"}], "errors": [...]} after N seconds.
# usage: gst-rtsp-probe.py URL tcp|udp SECONDS
import json, sys
import gi
gi.require_version('Gst', '1.0')
from gi.repository import Gst, GLib
Gst.init(None)
url, proto, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
pipe = Gst.Pipeline.new('p')
src = Gst.ElementFactory.make('rtspsrc', 'src')
src.set_property('location', url)
src.set_property('protocols', proto)
src.set_property('latency', 200)
pipe.add(src)
streams = []
errors = []
CHAINS = {
    'H264': ['rtph264depay', 'h264parse'],
    'H265': ['rtph265depay', 'h265parse'],
    'PCMA': ['rtppcmadepay'],
    'PCMU': ['rtppcmudepay'],
    'MPEG4-GENERIC': ['rtpmp4gdepay', 'aacparse'],
}
def on_src_pad(_el, pad):
    name = pad.get_current_caps().get_structure(0).get_string('encoding-name')
    entry = {'encoding': name, 'caps': None, 'buffers': 0}
    streams.append(entry)
    chain = [Gst.ElementFactory.make(n) for n in CHAINS.get(name, [])] + [Gst.ElementFactory.make('fakesink')]
    sink = chain[-1]
    sink.set_property('signal-handoffs', True)
    sink.set_property('sync', False)
    def handoff(_s, buf, p):
        entry['buffers'] += 1
        if entry['caps'] is None:
            entry['caps'] = p.get_current_caps().to_string()
    sink.connect('handoff', handoff)
    for e in chain:
        pipe.add(e)
    for a, b in zip(chain, chain[1:]):
        a.link(b)
    for e in chain:
        e.sync_state_with_parent()
    pad.link(chain[0].get_static_pad('sink'))
src.connect('pad-added', on_src_pad)
loop = GLib.MainLoop()
bus = pipe.get_bus()
bus.add_signal_watch()
def on_msg(_b, m):
    if m.type == Gst.MessageType.ERROR:
        err, dbg = m.parse_error()
        errors.append(err.message)
        loop.quit()
    elif m.type == Gst.MessageType.EOS:
        loop.quit()
bus.connect('message', on_msg)
pipe.set_state(Gst.State.PLAYING)
GLib.timeout_add(int(seconds * 1000), loop.quit)
loop.run()
pipe.set_state(Gst.State.NULL)
print(json.dumps({'streams': streams, 'errors': errors}))
