#!/usr/bin/env python3
"""The data set server of the `datasets download` tests, on a free loopback port.

  download_server.py serve DIR PORT_FILE LOG_FILE MODE
      serves DIR's files (GET /<path>), honouring Range requests; writes its port to
      PORT_FILE once listening and one line per request to LOG_FILE ("<path> <Range or ->").
      MODE: good      every file whole
            truncate  every file's first half, as a whole response (Content-Length says half)
            corrupt   every file whole but for one byte changed
            stop      the first request for each file: headers for the whole file, half its
                      bytes, then the connection closed; later requests as `good`
  download_server.py pack SRC OUT.tar.gz TOP
      packs SRC's files as OUT.tar.gz under the folder TOP (as the CIFAR-10 archive) and
      prints "<size> <sha256>" of the archive.
"""
import hashlib
import http.server
import os
import sys
import tarfile


def serve(root, port_file, log_file, mode):
    stopped = set()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            rel = self.path.lstrip("/")
            with open(log_file, "a") as log:
                log.write(f"{rel} {self.headers.get('Range', '-')}\n")
            path = os.path.join(root, rel)
            if ".." in rel.split("/") or not os.path.isfile(path):
                self.send_error(404)
                return
            data = open(path, "rb").read()
            if mode == "truncate":
                data = data[: len(data) // 2]
            elif mode == "corrupt":
                data = data[:-1] + bytes([data[-1] ^ 0xFF])
            start = 0
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[len("bytes="):-1])
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            body = data[start:]
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            if mode == "stop" and rel not in stopped:
                stopped.add(rel)
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


def pack(src, out, top):
    with tarfile.open(out, "w:gz") as tar:
        for name in sorted(os.listdir(src)):
            tar.add(os.path.join(src, name), arcname=f"{top}/{name}")
    data = open(out, "rb").read()
    print(len(data), hashlib.sha256(data).hexdigest())


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(*sys.argv[2:6])
    elif sys.argv[1] == "pack":
        pack(*sys.argv[2:5])
    else:
        sys.exit(__doc__)
