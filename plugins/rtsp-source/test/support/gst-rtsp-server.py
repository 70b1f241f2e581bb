#!/usr/bin/python3
"""GStreamer's RTSP server (gst-rtsp-server, Debian's gir1.2-gst-rtsp-server-1.0) as a camera for the tests: a
live test pattern and tone, encoded and packetised by GStreamer (x264enc/x265enc, rtph264pay/rtph265pay,
voaacenc + rtpmp4gpay or alawenc + rtppcmapay), optionally behind its own Digest authentication. Prints
"READY <port>" once it serves; runs until killed."""
import argparse
import sys

import gi

gi.require_version('Gst', '1.0')
gi.require_version('GstRtsp', '1.0')
gi.require_version('GstRtspServer', '1.0')
from gi.repository import GLib, Gst, GstRtsp, GstRtspServer  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument('--video', choices=['h264', 'h265'], default='h264')
p.add_argument('--audio', choices=['aac', 'pcma', 'none'], default='aac')
p.add_argument('--path', default='/cam')
p.add_argument('--user')
p.add_argument('--pwd')
a = p.parse_args()

Gst.init(None)
video = ('videotestsrc is-live=true ! video/x-raw,width=320,height=240,framerate=25/1 ! '
         + ('x264enc tune=zerolatency speed-preset=ultrafast key-int-max=25 bframes=0 ! rtph264pay name=pay0 pt=96 config-interval=-1'
            if a.video == 'h264' else
            'x265enc tune=zerolatency speed-preset=ultrafast key-int-max=25 ! rtph265pay name=pay0 pt=96 config-interval=-1'))
audio = {
    'aac': ' audiotestsrc is-live=true freq=1000 ! audio/x-raw,rate=16000,channels=1 ! voaacenc ! rtpmp4gpay name=pay1 pt=97',
    'pcma': ' audiotestsrc is-live=true freq=1000 ! audio/x-raw,rate=8000,channels=1 ! alawenc ! rtppcmapay name=pay1',
    'none': '',
}[a.audio]

server = GstRtspServer.RTSPServer()
server.set_address('127.0.0.1')
server.set_service('0')
factory = GstRtspServer.RTSPMediaFactory()
factory.set_launch('( ' + video + audio + ' )')
factory.set_shared(True)
if a.user:
    auth = GstRtspServer.RTSPAuth()
    auth.set_supported_methods(GstRtsp.RTSPAuthMethod.DIGEST)
    token = GstRtspServer.RTSPToken()
    token.set_string(GstRtspServer.RTSP_TOKEN_MEDIA_FACTORY_ROLE, 'viewer')
    auth.add_digest(a.user, a.pwd, token)
    server.set_auth(auth)
    perms = GstRtspServer.RTSPPermissions()
    perms.add_permission_for_role('viewer', GstRtspServer.RTSP_PERM_MEDIA_FACTORY_ACCESS, True)
    perms.add_permission_for_role('viewer', GstRtspServer.RTSP_PERM_MEDIA_FACTORY_CONSTRUCT, True)
    factory.set_permissions(perms)
server.get_mount_points().add_factory(a.path, factory)
server.attach(None)
print('READY %d' % server.get_bound_port(), flush=True)
GLib.MainLoop().run()
