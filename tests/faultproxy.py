"""A fault-injecting HTTP proxy for the object-store emulators: every request is passed to
the emulator unchanged, unless a rule (method, path pattern) still has faults to give; then
the client gets that rule's status and an S3-style error body instead, as a store does
when it fails (500, 503) or an object is gone (404). Rules count what they gave, so a test
can say how often a client asked."""

from __future__ import annotations

import http.client
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# Request headers that describe this hop, not the request.
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
_CODES = {404: "NoSuchKey", 500: "InternalError", 503: "SlowDown", 403: "AccessDenied"}


@dataclass
class FaultRule:
    """Answer `status` to the next `count` requests (None: all) whose method is `method`
    (or any, "*") and whose path and query match `path` (a regex searched for)."""

    method: str
    path: str
    status: int
    count: int | None = None
    given: int = field(default=0)

    def takes(self, method: str, path: str) -> bool:
        if self.count is not None and self.given >= self.count:
            return False
        return self.method in ("*", method) and re.search(self.path, path) is not None


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-answer (a retrying store client gives up on a
    connection) is no failure of the proxy's: not printed over the test's stderr."""

    def handle_error(self, request: object, client_address: object) -> None:
        pass


class FaultProxy:
    """`with FaultProxy(upstream) as proxy:` proxy.url in front of `upstream` (a URL);
    `proxy.rules` is the list of FaultRule tried in order; `proxy.seen` every
    (method, path) asked."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.rules: list[FaultRule] = []
        self.seen: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy._lock:
                    proxy.seen.append((self.command, self.path))
                    rule = next((r for r in proxy.rules if r.takes(self.command, self.path)), None)
                    if rule is not None:
                        rule.given += 1
                if rule is not None:
                    self._fail(rule.status)
                    return
                upstream = http.client.HTTPConnection(proxy.host, proxy.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                self.send_response(answer.status, answer.reason)
                head = self.command == "HEAD"  # its Content-Length is the object's size
                for key, value in answer.getheaders():
                    if key.lower() not in _HOP and (head or key.lower() != "content-length"):
                        self.send_header(key, value)
                if not head:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                upstream.close()

            def _fail(self, status: int) -> None:
                code = _CODES.get(status, "InternalError")
                body = (
                    f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                    f"<Message>injected {status}</Message></Error>"
                ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def fail(self, method: str, path: str, status: int, count: int | None = None) -> FaultRule:
        rule = FaultRule(method, path, status, count)
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
