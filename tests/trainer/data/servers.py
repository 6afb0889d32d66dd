"""Local servers for remote-shard tests: an HTTP server with byte ranges that can drop
connections mid-file, and moto's S3-compatible server."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class FileServer:
    """Serves `root` over HTTP/1.1 with Range requests. `drops[name] = n` makes the next n
    GETs of a file whose path ends with `name` stop halfway through the body and close the
    connection, as a flaky network does. `gets` counts GETs per path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.gets: Counter[str] = Counter()
        self.drops: dict[str, int] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_GET(self) -> None:
                self._serve(body=True)

            def _serve(self, body: bool) -> None:
                path = server.root / self.path.lstrip("/")
                if not path.is_file():
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = path.read_bytes()
                start, stop, status = 0, len(data), 200
                found = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
                if found:
                    start = int(found.group(1))
                    stop = min(len(data), int(found.group(2)) + 1 if found.group(2) else len(data))
                    status = 206
                part = data[start:stop]
                self.send_response(status)
                self.send_header("Content-Length", str(len(part)))
                self.send_header("Accept-Ranges", "bytes")
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{len(data)}")
                self.end_headers()
                if not body:
                    return
                with server._lock:
                    server.gets[self.path] += 1
                    name = next((n for n in server.drops if self.path.endswith(n)), None)
                    drop = name is not None and server.drops[name] > 0 and len(part) > 1
                    if drop:
                        server.drops[name] -= 1  # type: ignore[index]
                if drop:
                    self.wfile.write(part[: len(part) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(2)
                    return
                self.wfile.write(part)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def shard_gets(self) -> int:
        return sum(n for p, n in self.gets.items() if p.endswith(".tar"))

    def __enter__(self) -> FileServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextlib.contextmanager
def s3_server() -> Iterator[str]:
    """moto's S3 server on a free port; the environment points s3fs (botocore) at it.
    Yields the endpoint URL."""
    from moto.server import ThreadedMotoServer

    keys = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _forget_s3_clients()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = {k: os.environ.get(k) for k in [*keys, "AWS_ENDPOINT_URL_S3"]}
    os.environ.update(keys, AWS_ENDPOINT_URL_S3=endpoint)
    try:
        yield endpoint
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()
        _forget_s3_clients()


def _forget_s3_clients() -> None:
    """fsspec keeps one S3 filesystem per set of arguments, with the endpoint it was made
    with: a later server (another port) must not be asked through an earlier one's."""
    with contextlib.suppress(ImportError):
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()


def upload(directory: Path, bucket_url: str) -> None:
    """Copy a shard directory to `s3://bucket/prefix` through s3fs."""
    import fsspec

    fs, _, (path,) = fsspec.get_fs_token_paths(bucket_url)
    fs.invalidate_cache()
    bucket = path.split("/")[0]
    if not fs.exists(bucket):
        fs.mkdir(bucket)
    for f in directory.rglob("*"):
        if f.is_file():
            fs.pipe(f"{path}/{f.relative_to(directory)}", f.read_bytes())
