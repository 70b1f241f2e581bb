#!/usr/bin/env bash
# Installs the independent clients and real servers the tests use (Debian packages), or says what is missing.
set -euo pipefail
need=()
command -v ffprobe >/dev/null 2>&1 || need+=(ffmpeg)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# the browser test drives Debian's Chromium (never a browser build downloaded by a test tool)
[ -x /usr/bin/chromium ] || need+=(chromium)
# rtsp-source pulls from GStreamer's RTSP server (an RTSP server we did not write), driven from Debian's python3-gi
/usr/bin/python3 -c "import gi, sys; gi.require_version('Gst','1.0'); gi.require_version('GstRtspServer','1.0'); from gi.repository import Gst, GstRtspServer; Gst.init(None); sys.exit(0 if all(Gst.ElementFactory.find(e) for e in ['x264enc','x265enc','rtph265pay','voaacenc','alawenc']) else 1)" >/dev/null 2>&1 \
  || need+=(python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly gstreamer1.0-plugins-bad)
# VLC (Debian's, built without live555): its own RTSP server is a camera for rtsp-source, its RTP input a player for rtsp-out
{ command -v cvlc && ls /usr/lib/*/vlc/plugins/stream_out/libstream_out_rtp_plugin.so; } >/dev/null 2>&1 || need+=(vlc-bin vlc-plugin-base)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing test tools: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
  echo "the tests need these Debian packages: ${need[*]} (run: sudo apt-get install -y ${need[*]})" >&2
  exit 1
fi
