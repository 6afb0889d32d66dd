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
    try:
        with _environment({**keys, "AWS_ENDPOINT_URL_S3": endpoint}):
            yield endpoint
    finally:
        server.stop()
        _forget_s3_clients()


def s3_flags(endpoint: str) -> list[str]:
    """The Beam flags a user gives for an S3-compatible store at `endpoint`."""
    return [
        f"--s3_endpoint_url={endpoint}",
        "--s3_access_key_id=testing",
        "--s3_secret_access_key=testing",
        "--s3_region_name=us-east-1",
    ]


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """`values` set in os.environ, and what was there before put back afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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


@contextlib.contextmanager
def gcs_server(bucket: str) -> Iterator[str]:
    """gcp-storage-emulator on a free port with `bucket` made, and the environment that points
    Google's own clients at it: `STORAGE_EMULATOR_HOST` (google-cloud-storage, which Beam's
    GCS filesystem uses, and gcsfs) and application default credentials whose token endpoint
    is a local server. A service account key, so the clients take the path they take for a
    user (only such a key file may name its token endpoint); without credentials, Beam's
    launcher and every worker would spend 25 s retrying to find some. gcsfs must not have
    been imported before (it reads its switches then). Yields the endpoint."""
    import json
    import tempfile

    from gcp_storage_emulator.server import create_server

    storage = create_server("127.0.0.1", 0, in_memory=True, default_bucket=bucket)
    storage.start()
    tokens = ThreadingHTTPServer(("127.0.0.1", 0), _TokenHandler)
    tokens.daemon_threads = True
    threading.Thread(target=tokens.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{storage._api._httpd.server_address[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        credentials = Path(tmp) / "application_default_credentials.json"
        credentials.write_text(
            json.dumps(
                {
                    "type": "service_account",
                    "project_id": "clozeworks-test",
                    "client_email": "tests@clozeworks-test.iam.gserviceaccount.com",
                    "client_id": "1",
                    "private_key_id": "1",
                    "private_key": _private_key(),
                    "token_uri": f"http://127.0.0.1:{tokens.server_address[1]}/token",
                }
            )
        )
        env = {
            "STORAGE_EMULATOR_HOST": endpoint,
            "GOOGLE_APPLICATION_CREDENTIALS": str(credentials),
            "GOOGLE_CLOUD_PROJECT": "clozeworks-test",
            # gcsfs asks the gRPC control plane for a bucket's type first (zonal and
            # hierarchical buckets); the emulator speaks only the JSON API. Read at import.
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        }
        try:
            with _environment(env):
                _forget_gcs_clients()
                yield endpoint
        finally:
            tokens.shutdown()
            tokens.server_close()
            storage.stop()
            _forget_gcs_clients()


def _private_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


class _TokenHandler(BaseHTTPRequestHandler):
    """An OAuth token endpoint that grants every refresh: what the emulator needs of a user."""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b'{"access_token": "testing", "token_type": "Bearer", "expires_in": 3600}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _forget_gcs_clients() -> None:
    """As for S3: gcsfs instances and Beam's cached credentials belong to one server."""
    with contextlib.suppress(ImportError):
        import gcsfs

        gcsfs.GCSFileSystem.clear_instance_cache()
    with contextlib.suppress(ImportError):
        from apache_beam.internal.gcp import auth

        auth._Credentials._credentials_init = False
        auth._Credentials._credentials = None
