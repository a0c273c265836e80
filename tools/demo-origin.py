#!/usr/bin/env python3
"""The demo's origin: a small site on loopback, from Python's standard
library (nothing to compile). Prints "origin URL" once it listens and runs
until its standard input closes."""
import http.server
import sys
import threading

PAGES = {
    "/articles/1": ({"Cache-Control": "max-age=600", "ETag": '"a1"', "Content-Type": "text/html"}, b"<h1>Article one</h1>\n"),
    "/articles/2": ({"Cache-Control": "no-cache", "ETag": '"a2"', "Content-Type": "text/html"}, b"<h1>Article two</h1>\n"),
    "/logo.png": ({"Cache-Control": "public, max-age=86400", "Content-Type": "image/png"}, b"\x89" * 4096),
    "/login": (
        {"Set-Cookie": "session=demo-secret; Path=/; HttpOnly; Max-Age=3600", "Cache-Control": "no-store", "Content-Type": "text/plain"},
        b"welcome\n",
    ),
}


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        page = PAGES.get(self.path)
        if page is None:
            self.answer(404, {"Content-Type": "text/plain"}, b"not found\n")
            return
        headers, body = page
        etag = headers.get("ETag")
        if etag and self.headers.get("If-None-Match") == etag:
            self.answer(304, {"ETag": etag, "Cache-Control": headers["Cache-Control"]}, b"")
        else:
            self.answer(200, headers, body)

    def answer(self, status, headers, body):
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *arguments):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Origin)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"origin http://127.0.0.1:{server.server_address[1]}", flush=True)
sys.stdin.read()
server.shutdown()
